"""System checks of the sandbox: it is a development tool and says so.

Tagged ``django_eid_sandbox`` (not ``django_eid``) so that a site's own checks
of its broker settings stay independent of whether the sandbox is installed.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.conf import settings
from django.core import checks

from django_eid.conf import eid_settings


def sandbox_enabled() -> bool:
    """The sandbox serves only with ``DEBUG``, or when explicitly allowed without it."""
    return bool(settings.DEBUG) or eid_settings.SANDBOX_ALLOW_WITHOUT_DEBUG


@checks.register(checks.Tags.security, "django_eid_sandbox")
def check_sandbox(
    app_configs: Sequence[Any] | None = None, **kwargs: Any
) -> list[checks.CheckMessage]:
    out: list[checks.CheckMessage] = []
    if not settings.DEBUG:
        if eid_settings.SANDBOX_ALLOW_WITHOUT_DEBUG:
            out.append(
                checks.Warning(
                    "The django-eid sandbox broker is installed and serving with DEBUG False.",
                    hint="It identifies anyone as anyone: it must never be used in production. "
                    "Remove 'django_eid.sandbox' from INSTALLED_APPS outside development.",
                    id="django_eid.W100",
                )
            )
        else:
            out.append(
                checks.Error(
                    "The django-eid sandbox broker is installed while DEBUG is False; "
                    "its pages answer 404.",
                    hint="Remove 'django_eid.sandbox' from INSTALLED_APPS, or (tests, demos "
                    "only) set DJANGO_EID['SANDBOX_ALLOW_WITHOUT_DEBUG'] = True.",
                    id="django_eid.E100",
                )
            )
    if eid_settings.SANDBOX_CACHE not in settings.CACHES:
        out.append(
            checks.Error(
                f"DJANGO_EID['SANDBOX_CACHE'] names cache {eid_settings.SANDBOX_CACHE!r}, "
                "which is not in settings.CACHES.",
                id="django_eid.E101",
            )
        )
    return out
