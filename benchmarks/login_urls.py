"""URLs of benchmark 8: the test project's, plus the bare password-login reference view."""

from benchmarks.login_cost import urlpatterns as _patterns

urlpatterns = _patterns()
