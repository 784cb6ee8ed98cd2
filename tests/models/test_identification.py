"""The identification model (``django_eid/models.py``): which success ``verified_for`` takes
(its conditions: ``tests/gates/test_verified_for.py``), the age and the masked national
identity number. The encrypted number: ``test_encrypted_number.py``."""

from __future__ import annotations

import datetime
from typing import Any

import pytest
from django.utils import timezone

from django_eid.models import Identification
from tests.fixtures_broker import SSN

pytestmark = pytest.mark.django_db

Status = Identification.Status


def make(user: Any, status: str = Status.SUCCESS, **fields: Any) -> Identification:
    fields.setdefault("completed_at", timezone.now())
    row: Identification = Identification.objects.create(user=user, status=status, **fields)
    return row


# -- verified_for ---------------------------------------------------------------------------


def test_verified_for_returns_the_latest_success(alice: Any, bob: Any) -> None:
    # Later rows that are not successes do not hide it; without it, the one before counts.
    now = timezone.now()
    assert Identification.objects.verified_for(alice) is None
    older = make(alice, completed_at=now - datetime.timedelta(days=2))
    latest = make(alice, completed_at=now - datetime.timedelta(days=1))
    make(alice, Status.REJECTED, completed_at=now)
    make(alice, Status.ERROR, completed_at=now)
    make(alice, Status.PENDING, completed_at=None)
    make(bob, completed_at=now)
    assert Identification.objects.verified_for(alice) == latest
    Identification.objects.filter(pk=latest.pk).delete()
    assert Identification.objects.verified_for(alice) == older


# -- age --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("born", "age"),
    [
        (datetime.date(1971, 12, 31), 53),
        (datetime.date(1971, 6, 15), 54),  # birthday today
        (datetime.date(1971, 6, 16), 53),  # birthday tomorrow
        (datetime.date(1971, 6, 14), 54),
        (datetime.date(2024, 6, 15), 1),
        (datetime.date(2024, 6, 16), 0),
        (None, None),
    ],
)
def test_age_in_whole_years_today(
    monkeypatch: pytest.MonkeyPatch, born: datetime.date | None, age: int | None
) -> None:
    monkeypatch.setattr(timezone, "localdate", lambda *a, **k: datetime.date(2025, 6, 15))
    assert Identification(date_of_birth=born).age == age


def test_masked_number_shows_only_the_date_of_birth_digits() -> None:
    row = Identification(social_security_number=SSN, national_id_country="NO")
    assert row.masked_social_security_number == SSN[:6] + "\u2022" * 5
    # Without a known country nothing tells which digits are the date of birth.
    assert Identification(social_security_number=SSN).masked_social_security_number == (
        "\u2022" * 11
    )
    assert Identification().masked_social_security_number == ""
