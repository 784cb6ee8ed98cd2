"""A site that mounts django-eid elsewhere than the test suite's ``eid/`` (test_openapi.py)."""

from django.urls import include, path

urlpatterns = [path("accounts/verify/", include("django_eid.urls"))]
