"""System checks: misconfiguration is found at deploy time, not at a user's first click.

The problems themselves, with their stable ids, come from :mod:`django_eid.validation`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.core import checks

from django_eid.validation import problems


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
