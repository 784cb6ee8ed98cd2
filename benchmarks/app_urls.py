"""URLs of benchmark 3: the test project's, plus the bare reference views."""

from benchmarks.app_cost import urlpatterns as _patterns

urlpatterns = _patterns()
