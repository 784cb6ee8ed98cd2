"""The identification model (``django_eid/models.py``): ``verified_for``, the age, the masked
and the encrypted national identity number, and the migrations matching the model."""

from __future__ import annotations

import datetime
from collections.abc import Callable
from io import StringIO
from typing import Any

import pytest
from cryptography.fernet import Fernet
from django.contrib.auth.models import AnonymousUser
from django.core.management import call_command
from django.db import connection
from django.utils import timezone

from django_eid import crypto
from django_eid.models import Identification
from tests.fixtures_broker import SSN

pytestmark = pytest.mark.django_db

Status = Identification.Status


def make(user: Any, status: str = Status.SUCCESS, **fields: Any) -> Identification:
    fields.setdefault("completed_at", timezone.now())
    row: Identification = Identification.objects.create(user=user, status=status, **fields)
    return row


def stored_number(row: Identification) -> str:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT social_security_number FROM django_eid_identification WHERE id = %s", [row.pk]
        )
        value: str = cursor.fetchone()[0]
    return value


# -- verified_for ---------------------------------------------------------------------------


def test_verified_for_returns_the_latest_success(broker_api: str, alice: Any, bob: Any) -> None:
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


def test_verified_for_an_anonymous_user_is_none(broker_api: str, alice: Any) -> None:
    make(alice)
    assert Identification.objects.verified_for(AnonymousUser()) is None


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
    broker_api: str, monkeypatch: pytest.MonkeyPatch, born: datetime.date | None, age: int | None
) -> None:
    monkeypatch.setattr(timezone, "localdate", lambda *a, **k: datetime.date(2025, 6, 15))
    assert Identification(date_of_birth=born).age == age


def test_masked_number_shows_only_the_date_of_birth_digits(broker_api: str) -> None:
    row = Identification(social_security_number=SSN, national_id_country="NO")
    assert row.masked_social_security_number == SSN[:6] + "\u2022" * 5
    # Without a known country nothing tells which digits are the date of birth.
    assert Identification(social_security_number=SSN).masked_social_security_number == (
        "\u2022" * 11
    )
    assert Identification().masked_social_security_number == ""


# -- the encrypted field ----------------------------------------------------------------------


def test_the_number_is_encrypted_with_a_key_derived_from_secret_key(
    broker_api: str, alice: Any
) -> None:
    row = make(alice, social_security_number=SSN)
    raw = stored_number(row)
    assert SSN not in raw
    key = crypto.derived_key("test-secret-key-not-for-production-0123456789abcdef")
    assert Fernet(key.encode()).decrypt(raw.encode()).decode() == SSN
    assert row.social_security_number_hash == crypto.lookup_hash(SSN)
    assert Identification.objects.get(pk=row.pk).social_security_number == SSN


def test_equal_numbers_encrypt_differently(broker_api: str, alice: Any) -> None:
    first, second = make(alice, social_security_number=SSN), make(alice, social_security_number=SSN)
    assert stored_number(first) != stored_number(second)
    assert first.social_security_number_hash == second.social_security_number_hash


def test_key_rotation(broker_api: str, alice: Any, eid: Callable[..., None]) -> None:
    key_a, key_b = Fernet.generate_key().decode(), Fernet.generate_key().decode()
    eid(ENCRYPTION_KEYS=[key_a])
    row = make(alice, social_security_number=SSN)
    under_a = stored_number(row)
    assert Fernet(key_a.encode()).decrypt(under_a.encode()).decode() == SSN

    eid(ENCRYPTION_KEYS=[key_b, key_a])
    assert Identification.objects.get(pk=row.pk).social_security_number == SSN
    assert not crypto.is_current(under_a)
    assert list(Identification.objects.with_social_security_number(SSN)) == [row]
    row.save()  # re-encrypts under the first key
    under_b = stored_number(row)
    assert crypto.is_current(under_b)
    assert Fernet(key_b.encode()).decrypt(under_b.encode()).decode() == SSN

    eid(ENCRYPTION_KEYS=[key_b])
    assert Identification.objects.get(pk=row.pk).social_security_number == SSN

    eid(ENCRYPTION_KEYS=[key_a])
    assert isinstance(
        Identification.objects.get(pk=row.pk).social_security_number, crypto.Unreadable
    )


def test_the_hash_follows_the_number(broker_api: str, alice: Any) -> None:
    row = make(alice, social_security_number=SSN)
    row.social_security_number = None
    row.save(update_fields=["social_security_number"])
    fresh = Identification.objects.get(pk=row.pk)
    assert (fresh.social_security_number, fresh.social_security_number_hash) == (None, None)
    assert stored_number(row) is None


def test_the_migrations_match_the_model(broker_api: str) -> None:
    out = StringIO()
    call_command("makemigrations", "django_eid", "--check", "--dry-run", stdout=out)
    assert "No changes detected" in out.getvalue()
