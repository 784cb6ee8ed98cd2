"""System checks: misconfiguration is found at deploy time, not at a user's first click.

The problems themselves, with their stable ids, come from :mod:`django_eid.validation`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from django.conf import settings
from django.core import checks
from django.shortcuts import resolve_url
from django.urls import NoReverseMatch
from django.utils.module_loading import import_string

from django_eid.conf import eid_settings
from django_eid.validation import problems

#: The middleware the views rely on: the one-time callback state lives in the
#: session, and every view acts for ``request.user``.
REQUIRED_MIDDLEWARE = (
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
)


@checks.register(checks.Tags.security, "django_eid")
def check_settings(
    app_configs: Sequence[Any] | None = None, **kwargs: Any
) -> list[checks.CheckMessage]:
    """Every configuration problem as a system check error or warning."""
    out: list[checks.CheckMessage] = []
    for problem in problems():
        cls = checks.Error if problem.level == "error" else checks.Warning
        out.append(cls(problem.message, hint=problem.hint, id=problem.id))
    return out


@checks.register(checks.Tags.urls, "django_eid")
def check_destinations(
    app_configs: Sequence[Any] | None = None, **kwargs: Any
) -> list[checks.CheckMessage]:
    """E018: a destination that does not resolve would fail only after the user identified."""
    if not isinstance(getattr(settings, "DJANGO_EID", None), Mapping):
        return []  # E000 says so already
    out: list[checks.CheckMessage] = []
    for key in ("SUCCESS_URL", "ABORT_URL", "ERROR_URL"):
        value = getattr(eid_settings, key)
        if not value:
            continue
        try:
            resolve_url(value)
        except NoReverseMatch:
            out.append(
                checks.Error(
                    f"DJANGO_EID[{key!r}] = {value!r} is neither a URL nor a URL name "
                    "that reverses without arguments.",
                    hint="Use a path such as '/account/' or the name of a URL pattern.",
                    id="django_eid.E018",
                )
            )
    return out


def _has_middleware(path: str) -> bool:
    wanted = import_string(path)
    for entry in settings.MIDDLEWARE or ():
        try:
            cls = import_string(entry)
        except ImportError:
            continue  # Django reports a broken MIDDLEWARE entry itself
        if isinstance(cls, type) and issubclass(cls, wanted):
            return True
    return False


@checks.register("django_eid")
def check_middleware(
    app_configs: Sequence[Any] | None = None, **kwargs: Any
) -> list[checks.CheckMessage]:
    """E019: without these, a start would create a billed session it cannot finish."""
    return [
        checks.Error(
            f"{path} is not in MIDDLEWARE; django-eid keeps its callback state in the "
            "session and acts for request.user.",
            hint=f"Add {path!r} to MIDDLEWARE (Django's default project template has it).",
            id="django_eid.E019",
        )
        for path in REQUIRED_MIDDLEWARE
        if not _has_middleware(path)
    ]
