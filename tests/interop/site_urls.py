"""The suite's URLs and the page the site sends the person to after a success."""

from django.http import HttpRequest, HttpResponse
from django.urls import path

from tests.urls import urlpatterns as suite_urlpatterns


def done(request: HttpRequest) -> HttpResponse:
    return HttpResponse(
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>Back at the site'
        "</title></head><body><h1>Back at the site</h1></body></html>"
    )


urlpatterns = [*suite_urlpatterns, path("done/", done, name="interop-done")]
