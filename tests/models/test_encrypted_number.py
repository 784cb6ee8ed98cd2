"""The encrypted national identity number: encryption at rest, what can be queried, and
key rotation (``ENCRYPTION_KEYS``, ``SECRET_KEY``).

The number is stored under a random IV with the first key (one derived from ``SECRET_KEY``
unless ``ENCRYPTION_KEYS`` names them), beside a keyed lookup hash that follows it.
An ``exact`` lookup on ciphertext under a random IV can never match, and pattern lookups
would send digits of the number to the database in clear: both are refused with a
``FieldError`` that names the right way. A ``SECRET_KEY`` rotated the Django way (the old
key in ``SECRET_KEY_FALLBACKS``) keeps every stored number readable and findable until
``eid_reencrypt`` has moved it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from cryptography.fernet import Fernet
from django.core.exceptions import FieldError
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from django_eid import crypto
from django_eid.models import Identification
from tests.commands.helpers import run
from tests.fixtures_broker import SSN
from tests.models.stored import ciphertexts

pytestmark = pytest.mark.django_db

NUMBER = "31127112345"
Status = Identification.Status


@pytest.fixture
def row(django_user_model: Any) -> Identification:
    user = django_user_model.objects.create_user("kari")
    return Identification.objects.create(
        user=user,
        status=Status.SUCCESS,
        social_security_number=NUMBER,
        social_security_number_hash=crypto.lookup_hash(NUMBER),
    )


def make(user: Any, **fields: Any) -> Identification:
    row: Identification = Identification.objects.create(
        user=user, status=Status.SUCCESS, completed_at=timezone.now(), **fields
    )
    return row


# -- encryption at rest ----------------------------------------------------------------------


def test_the_number_is_encrypted_with_a_key_derived_from_secret_key(alice: Any) -> None:
    row = make(alice, social_security_number=SSN)
    raw = ciphertexts()[row.pk]
    assert SSN not in raw
    key = crypto.derived_key("test-secret-key-not-for-production-0123456789abcdef")
    assert Fernet(key.encode()).decrypt(raw.encode()).decode() == SSN
    assert row.social_security_number_hash == crypto.lookup_hash(SSN)
    assert Identification.objects.get(pk=row.pk).social_security_number == SSN


def test_equal_numbers_encrypt_differently(alice: Any) -> None:
    first, second = make(alice, social_security_number=SSN), make(alice, social_security_number=SSN)
    assert ciphertexts()[first.pk] != ciphertexts()[second.pk]
    assert first.social_security_number_hash == second.social_security_number_hash


def test_key_rotation(alice: Any, eid: Callable[..., None]) -> None:
    key_a, key_b = Fernet.generate_key().decode(), Fernet.generate_key().decode()
    eid(ENCRYPTION_KEYS=[key_a])
    row = make(alice, social_security_number=SSN)
    under_a = ciphertexts()[row.pk]
    assert Fernet(key_a.encode()).decrypt(under_a.encode()).decode() == SSN

    eid(ENCRYPTION_KEYS=[key_b, key_a])
    assert Identification.objects.get(pk=row.pk).social_security_number == SSN
    assert not crypto.is_current(under_a)
    assert list(Identification.objects.with_social_security_number(SSN)) == [row]
    row.save()  # re-encrypts under the first key
    under_b = ciphertexts()[row.pk]
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
    assert ciphertexts()[row.pk] is None


# -- lookups --------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "lookup",
    [
        {"social_security_number": NUMBER},
        {"social_security_number__exact": NUMBER},
        {"social_security_number__iexact": NUMBER},
        {"social_security_number__startswith": NUMBER[:6]},
        {"social_security_number__contains": NUMBER[2:8]},
        {"social_security_number__icontains": NUMBER[2:8]},
        {"social_security_number__in": [NUMBER]},
        {"social_security_number__gt": "0"},
        {"social_security_number__regex": r"^3112"},
        {"social_security_number__lower": NUMBER},
    ],
    ids=lambda lookup: next(iter(lookup)),
)
def test_lookups_on_the_number_are_refused_before_any_sql(
    row: Identification, lookup: dict[str, Any]
) -> None:
    with (
        CaptureQueriesContext(connection) as queries,
        pytest.raises(FieldError, match="with_social_security_number"),
    ):
        list(Identification.objects.filter(**lookup))
    assert not queries.captured_queries  # nothing, and no digit of the number, reached SQL


def test_null_tests_still_work(row: Identification, django_user_model: Any) -> None:
    empty = Identification.objects.create(user=row.user)
    assert list(Identification.objects.filter(social_security_number__isnull=False)) == [row]
    assert list(Identification.objects.filter(social_security_number__isnull=True)) == [empty]
    assert list(Identification.objects.filter(social_security_number=None)) == [empty]
    assert list(Identification.objects.exclude(social_security_number=None)) == [row]


def test_the_hash_lookup_is_the_way_to_search(row: Identification) -> None:
    assert list(Identification.objects.with_social_security_number(NUMBER)) == [row]
    assert not Identification.objects.with_social_security_number(NUMBER[:-1] + "6").exists()


OLD_SECRET, NEW_SECRET = "the-old-secret-key-" + "o" * 40, "the-new-secret-key-" + "n" * 40


@pytest.fixture
def row_under_old_secret(settings: Any, django_user_model: Any) -> int:
    """A stored number encrypted under the key derived from ``OLD_SECRET``; its pk."""
    settings.DJANGO_EID = {**settings.DJANGO_EID, "ENCRYPTION_KEYS": None}
    settings.SECRET_KEY, settings.SECRET_KEY_FALLBACKS = OLD_SECRET, []
    user = django_user_model.objects.create_user("kari")
    row = Identification.objects.create(
        user=user,
        status=Status.SUCCESS,
        social_security_number=NUMBER,
        social_security_number_hash=crypto.lookup_hash(NUMBER),
    )
    return row.pk


def test_secret_key_rotation_with_fallbacks_keeps_numbers_readable(
    settings: Any, row_under_old_secret: int
) -> None:
    pk = row_under_old_secret
    # The Django way: a new SECRET_KEY, the old one moved to the fallbacks.
    settings.SECRET_KEY, settings.SECRET_KEY_FALLBACKS = NEW_SECRET, [OLD_SECRET]
    assert Identification.objects.get(pk=pk).social_security_number == NUMBER
    assert Identification.objects.with_social_security_number(NUMBER).get().pk == pk
    assert run("eid_reencrypt", "--dry-run").startswith("1 ")
    assert run("eid_reencrypt") == "Re-encrypted 1 identification(s) under the first key.\n"

    settings.SECRET_KEY_FALLBACKS = []  # the old key is gone: the row moved in time
    assert Identification.objects.get(pk=pk).social_security_number == NUMBER
    assert Identification.objects.with_social_security_number(NUMBER).get().pk == pk


def test_without_the_fallback_an_old_number_does_not_read(
    settings: Any, row_under_old_secret: int
) -> None:
    # The counter-proof of the test above: the fallback is what keeps the row readable.
    # (What still works without it: test_lost_key.py.)
    settings.SECRET_KEY = NEW_SECRET
    assert Identification.objects.get(pk=row_under_old_secret).has_unreadable_number
