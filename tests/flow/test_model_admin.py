"""The model (verified_for, age, the encrypted number) and the read-only admin."""

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
from django.test import Client
from django.utils import timezone

from django_eid import crypto
from django_eid.models import Identification
from tests.flow.conftest import SSN

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


def test_verified_for_returns_the_latest_success(alice: Any, bob: Any) -> None:
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


def test_verified_for_an_anonymous_user_is_none(alice: Any) -> None:
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


# -- the encrypted field ----------------------------------------------------------------------


def test_the_number_is_encrypted_with_a_key_derived_from_secret_key(alice: Any) -> None:
    row = make(alice, social_security_number=SSN)
    raw = stored_number(row)
    assert SSN not in raw
    key = crypto.derived_key("test-secret-key-not-for-production-0123456789abcdef")
    assert Fernet(key.encode()).decrypt(raw.encode()).decode() == SSN
    assert row.social_security_number_hash == crypto.lookup_hash(SSN)
    assert Identification.objects.get(pk=row.pk).social_security_number == SSN


def test_equal_numbers_encrypt_differently(alice: Any) -> None:
    first, second = make(alice, social_security_number=SSN), make(alice, social_security_number=SSN)
    assert stored_number(first) != stored_number(second)
    assert first.social_security_number_hash == second.social_security_number_hash


def test_key_rotation(alice: Any, eid: Callable[..., None]) -> None:
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


def test_the_hash_follows_the_number(alice: Any) -> None:
    row = make(alice, social_security_number=SSN)
    row.social_security_number = None
    row.save(update_fields=["social_security_number"])
    fresh = Identification.objects.get(pk=row.pk)
    assert (fresh.social_security_number, fresh.social_security_number_hash) == (None, None)
    assert stored_number(row) is None


# -- the admin -----------------------------------------------------------------------------------

CHANGELIST = "/admin/django_eid/identification/"


@pytest.fixture
def superuser_client(django_user_model: Any) -> Client:
    user = django_user_model.objects.create_superuser("root", "root@example.com", "pw-root")
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def rows(alice: Any, bob: Any) -> list[Identification]:
    return [
        make(
            alice,
            name="Nordmann, Kari Marie",
            first_name="Kari",
            last_name="Nordmann",
            identity_provider="NO_BANKID_WEB",
            social_security_number=SSN,
            national_id_country="NO",
            date_of_birth=datetime.date(1971, 12, 31),
            request_id="req-1",
            raw={"RequestId": "req-1", "Status": "SUCCESS"},
        ),
        make(
            bob,
            Status.ERROR,
            name="Svensson, Sven",
            identity_provider="SWE_BANKID",
            error_status="TIMEOUT",
            request_id="req-2",
        ),
    ]


def listed(response: Any) -> set[int]:
    return {obj.pk for obj in response.context["cl"].result_list}


def test_the_changelist_lists_filters_and_searches(
    superuser_client: Client, rows: list[Identification]
) -> None:
    kari, sven = rows
    response = superuser_client.get(CHANGELIST)
    assert response.status_code == 200
    assert listed(response) == {kari.pk, sven.pk}
    html = response.content.decode()
    assert "Nordmann, Kari Marie" in html
    assert SSN not in html
    assert listed(superuser_client.get(CHANGELIST, {"status__exact": "ERROR"})) == {sven.pk}
    assert listed(superuser_client.get(CHANGELIST, {"identity_provider": "NO_BANKID_WEB"})) == {
        kari.pk
    }
    assert listed(superuser_client.get(CHANGELIST, {"q": "Nordmann"})) == {kari.pk}
    assert listed(superuser_client.get(CHANGELIST, {"q": "bob"})) == {sven.pk}
    assert listed(superuser_client.get(CHANGELIST, {"q": SSN})) == set()


def test_the_change_page_is_read_only_and_masks_the_number(
    superuser_client: Client, rows: list[Identification]
) -> None:
    kari = rows[0]
    url = f"{CHANGELIST}{kari.pk}/change/"
    response = superuser_client.get(url)
    assert response.status_code == 200
    html = response.content.decode()
    assert SSN not in html
    assert SSN[:6] + "\u2022" * 5 in html
    assert "Nordmann, Kari Marie" in html
    assert "req-1" in html
    form = response.context["adminform"].form
    assert list(form.fields) == []  # every field is read-only
    assert 'name="_save"' not in html
    assert "<textarea" not in html
    before = Identification.objects.filter(pk=kari.pk).values().get()
    assert superuser_client.post(url, {"status": "PENDING", "name": "X"}).status_code == 403
    assert Identification.objects.filter(pk=kari.pk).values().get() == before
    assert superuser_client.get(f"{CHANGELIST}add/").status_code == 403


def test_a_staff_user_without_permission_sees_nothing(
    django_user_model: Any, rows: list[Identification]
) -> None:
    staff = django_user_model.objects.create_user("staff", password="pw", is_staff=True)
    client = Client()
    client.force_login(staff)
    assert client.get(CHANGELIST).status_code == 403


def test_the_migrations_match_the_model() -> None:
    out = StringIO()
    call_command("makemigrations", "django_eid", "--check", "--dry-run", stdout=out)
    assert "No changes detected" in out.getvalue()
