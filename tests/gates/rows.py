"""Verified identifications made directly, for the tests of ``verified_for()`` and
``Requirements`` (the flow that makes them has its own suites), and the moment the clock is
frozen at (the ``now`` fixture, tests/gates/conftest.py)."""

from __future__ import annotations

import datetime
import itertools
from typing import Any

from django.contrib.auth.models import AbstractBaseUser
from django.utils import timezone

from django_eid.models import Identification

Status = Identification.Status
UTC = datetime.UTC
#: Noon in Oslo (the suite's TIME_ZONE) on an ordinary day.
NOW = datetime.datetime(2026, 6, 15, 10, 0, tzinfo=UTC)
ADULT = datetime.date(1985, 3, 14)  # 41 on NOW
SSN = "14038512345"  # never parsed here: only stored, encrypted and read back
_request_ids = itertools.count(1)


def verified(
    user: AbstractBaseUser,
    *,
    completed: datetime.datetime | None = None,
    provider: str = "NO_BANKID_WEB",
    unique_id: str = "uid-kari",
    born: datetime.date | None = ADULT,
    status: str = Status.SUCCESS,
    **fields: Any,
) -> Identification:
    """A finished identification of ``user`` (``SUCCESS`` unless said), completed ``completed``."""
    values: dict[str, Any] = {
        "request_id": f"request-{next(_request_ids)}",
        "status": status,
        "identity_provider": provider,
        "identity_provider_unique_id": unique_id,
        "name": "Nordmann, Kari",
        "first_name": "Kari",
        "last_name": "Nordmann",
        "date_of_birth": born,
        "completed_at": completed or timezone.now() - datetime.timedelta(seconds=10),
    }
    return Identification.objects.create(user=user, **{**values, **fields})


def ago(seconds: float, *, micro: int = 0) -> datetime.datetime:
    """``seconds`` (and ``micro`` microseconds) before :data:`NOW`."""
    return NOW - datetime.timedelta(seconds=seconds, microseconds=micro)
