"""django-eid benchmarks: ``python -m benchmarks`` (see docs/benchmarks.md)."""
