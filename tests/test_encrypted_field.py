"""The encrypted national identity number: what can be queried, and SECRET_KEY rotation.

An ``exact`` lookup on ciphertext under a random IV can never match, and pattern lookups
would send digits of the number to the database in clear: both are refused with a
``FieldError`` that names the right way. A ``SECRET_KEY`` rotated the Django way (the old
key in ``SECRET_KEY_FALLBACKS``) keeps every stored number readable and findable until
``eid_reencrypt`` has moved it.
"""

from __future__ import annotations

from io import StringIO
from typing import Any

import pytest
from django.core.exceptions import FieldError
from django.core.management import call_command
from django.db import connection
from django.test.utils import CaptureQueriesContext

from django_eid import crypto
from django_eid.models import Identification

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


def reencrypt(*args: str) -> str:
    out = StringIO()
    call_command("eid_reencrypt", *args, stdout=out)
    return out.getvalue()


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
    assert reencrypt("--dry-run").startswith("1 ")
    assert reencrypt() == "Re-encrypted 1 identification(s) under the first key.\n"

    settings.SECRET_KEY_FALLBACKS = []  # the old key is gone: the row moved in time
    assert Identification.objects.get(pk=pk).social_security_number == NUMBER
    assert Identification.objects.with_social_security_number(NUMBER).get().pk == pk


def test_without_the_fallback_an_old_number_does_not_read(
    settings: Any, row_under_old_secret: int
) -> None:
    # The counter-proof of the test above: the fallback is what keeps the row readable.
    # (What still works without it: tests/test_lost_key.py.)
    settings.SECRET_KEY = NEW_SECRET
    assert Identification.objects.get(pk=row_under_old_secret).has_unreadable_number
