"""System checks: misconfiguration is found at deploy time, not at a user's first click.

Ids are stable (``django_eid.E001`` ...); the reference lists them all.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.core import checks

from django_eid.conf import eid_settings


@checks.register(checks.Tags.security, "django_eid")
def check_settings(
    app_configs: Sequence[Any] | None = None, **kwargs: Any
) -> list[checks.CheckMessage]:
    out: list[checks.CheckMessage] = []
    for problem in eid_settings.problems():
        cls = checks.Error if problem.level == "error" else checks.Warning
        out.append(cls(problem.message, hint=problem.hint, id=problem.id))
    return out
