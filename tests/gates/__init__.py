"""Tests of the verified-identity gates: ``eid_required``, ``EidRequiredMixin``, ``EidVerified``,
``Requirements`` and ``Identification.objects.verified_for()``, and the form kept over the
verification (the resume page). The gated views are tests/gates/views.py, under ``/gated/``."""
