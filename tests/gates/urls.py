"""The suite's URLs, and two gated routes only some tests of the gates need
(``@pytest.mark.urls(URLCONF)``): a gate whose ``message`` is HTML, and a catch-all gated
page (a CMS-style route that also answers a path beginning with ``//``)."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.urls import path, re_path

from django_eid.decorators import eid_required
from tests.urls import urlpatterns as suite_urlpatterns

#: An HTML gate message: the start page must show it as text.
EVIL_HTML = (
    "\"><svg onload=alert(1)></script><script>alert(2)</script>'<img src=x onerror=alert(3)>"
)


@eid_required(message=EVIL_HTML)
def html_message(request: HttpRequest) -> HttpResponse:
    return HttpResponse("html message")


@eid_required(max_age=300)
def catch_all(request: HttpRequest, rest: str) -> HttpResponse:
    """A CMS-style page answering every path, including one that begins with ``//``."""
    return HttpResponse(f"page {request.method}")


urlpatterns = [
    *suite_urlpatterns,
    path("hostile/message/", html_message),
    re_path(r"^(?P<rest>.*)$", catch_all),
]
