"""``Identification.objects.verified_for()``: the user's latest verification when it meets
``max_age``, ``min_age``, ``min_loa`` and ``providers``, else none; which rows count at all.

The rows are made directly (tests/gates/rows.py); the clock is frozen where a boundary is
tested, so "just inside" and "just outside" are a microsecond apart. Expected ages and dates
are worked out by hand from the birth dates written here.
"""

from __future__ import annotations

import datetime
from collections.abc import Callable, Iterator
from io import StringIO
from typing import Any

import pytest
from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.core.management import call_command
from django.db import connection
from django.utils import timezone

from django_eid.models import Identification, born_by
from django_eid.requirements import Requirements, Verdict
from tests.gates.rows import SSN, UTC, ago, verified

pytestmark = pytest.mark.django_db

Status = Identification.Status


# -- max_age ---------------------------------------------------------------------------------------
MAX_AGES = [
    pytest.param(300, 300, id="int"),
    pytest.param(300.5, 300.5, id="float"),
    pytest.param(datetime.timedelta(minutes=5), 300, id="timedelta"),
]


@pytest.mark.parametrize(("max_age", "seconds"), MAX_AGES)
def test_max_age_just_inside_qualifies(
    alice: AbstractBaseUser, now: datetime.datetime, max_age: Any, seconds: float
) -> None:
    row = verified(alice, completed=ago(seconds))
    assert Identification.objects.verified_for(alice, max_age=max_age) == row


@pytest.mark.parametrize(("max_age", "seconds"), MAX_AGES)
def test_max_age_just_outside_does_not(
    alice: AbstractBaseUser, now: datetime.datetime, max_age: Any, seconds: float
) -> None:
    verified(alice, completed=ago(seconds, micro=1))
    assert Identification.objects.verified_for(alice, max_age=max_age) is None
    assert Identification.objects.verified_for(alice) is not None  # only the age failed


def test_a_fractional_max_age_is_not_rounded(alice: AbstractBaseUser, now: Any) -> None:
    verified(alice, completed=ago(0.75))
    assert Identification.objects.verified_for(alice, max_age=0.5) is None
    assert Identification.objects.verified_for(alice, max_age=1) is not None


def test_max_age_counts_from_completion_not_creation(alice: AbstractBaseUser, now: Any) -> None:
    row = verified(alice, completed=ago(60))
    Identification.objects.filter(pk=row.pk).update(created_at=ago(86400))
    assert Identification.objects.verified_for(alice, max_age=300) == row


# -- min_age ---------------------------------------------------------------------------------------
def test_exactly_eighteen_today_qualifies(alice: AbstractBaseUser, now: Any) -> None:
    # NOW is 15 June 2026 in Oslo: born 15 June 2008 is 18 today.
    row = verified(alice, born=datetime.date(2008, 6, 15))
    assert row.age == 18
    assert Identification.objects.verified_for(alice, min_age=18) == row


def test_one_day_short_of_eighteen_does_not(alice: AbstractBaseUser, now: Any) -> None:
    row = verified(alice, born=datetime.date(2008, 6, 16))
    assert row.age == 17
    assert Identification.objects.verified_for(alice, min_age=18) is None
    assert Identification.objects.verified_for(alice, min_age=17) == row


def test_the_age_is_counted_in_the_sites_time_zone(alice: AbstractBaseUser, freeze: Any) -> None:
    # 22:30 UTC on 14 June is already 15 June in Oslo (UTC+2 in summer): the birthday.
    freeze(datetime.datetime(2026, 6, 14, 22, 30, tzinfo=UTC))
    row = verified(alice, born=datetime.date(2008, 6, 15))
    assert row.age == 18
    assert Identification.objects.verified_for(alice, min_age=18) == row


@pytest.mark.parametrize(
    ("today", "born_by_18", "age"),
    [
        # 2026 has no 29 February: a leapling comes of age on 1 March, not on 28 February.
        (datetime.date(2026, 2, 28), datetime.date(2008, 2, 28), 17),
        (datetime.date(2026, 3, 1), datetime.date(2008, 3, 1), 18),
    ],
)
def test_a_person_born_on_29_february(
    alice: AbstractBaseUser,
    freeze: Any,
    today: datetime.date,
    born_by_18: datetime.date,
    age: int,
) -> None:
    leapling = datetime.date(2008, 2, 29)
    assert born_by(18, today=today) == born_by_18
    freeze(datetime.datetime(today.year, today.month, today.day, 10, 0, tzinfo=UTC))
    row = verified(alice, born=leapling)
    assert row.age == age
    found = Identification.objects.verified_for(alice, min_age=18)
    assert found == (row if age >= 18 else None)
    # born_by, age and verified_for agree.
    assert (leapling <= born_by(18, today=today)) == (age >= 18)


@pytest.mark.parametrize(
    ("age", "today", "expected"),
    [
        (18, datetime.date(2026, 6, 15), datetime.date(2008, 6, 15)),
        (0, datetime.date(2026, 6, 15), datetime.date(2026, 6, 15)),
        # On 29 February, N years back may have no 29 February: the day before counts.
        (18, datetime.date(2028, 2, 29), datetime.date(2010, 2, 28)),
        (4, datetime.date(2028, 2, 29), datetime.date(2024, 2, 29)),
    ],
)
def test_born_by(age: int, today: datetime.date, expected: datetime.date) -> None:
    assert born_by(age, today=today) == expected


def test_born_by_defaults_to_the_sites_today(now: Any) -> None:
    assert born_by(18) == datetime.date(2008, 6, 15)


@pytest.mark.parametrize("min_age", [0, 18])
def test_an_unknown_age_never_qualifies(alice: AbstractBaseUser, now: Any, min_age: int) -> None:
    row = verified(alice, born=None)
    assert row.age is None
    assert Identification.objects.verified_for(alice, min_age=min_age) is None
    assert Identification.objects.verified_for(alice) == row


# -- min_loa ---------------------------------------------------------------------------------------
#: (the row's level, the gate's min_loa, whether it qualifies): a level at or above passes;
#: one below, none stated, or one django-eid does not know does not.
LEVEL_CASES = [
    ("high", "high", True),
    ("high", "substantial", True),
    ("high", "low", True),
    ("substantial", "substantial", True),
    ("substantial", "low", True),
    ("low", "low", True),
    ("substantial", "high", False),
    ("low", "substantial", False),
    ("low", "high", False),
    ("", "low", False),
    ("", "high", False),
    ("very-high", "low", False),
    ("HIGH", "low", False),
]


@pytest.mark.parametrize(("level", "min_loa", "qualifies"), LEVEL_CASES)
def test_min_loa_in_verified_for_and_check(
    alice: AbstractBaseUser, level: str, min_loa: str, qualifies: bool
) -> None:
    row = verified(alice, level_of_assurance=level)
    found = Identification.objects.verified_for(alice, min_loa=min_loa)
    verdict = Requirements.of(min_loa=min_loa).check(alice)
    if qualifies:
        assert found == row
        assert verdict == Verdict(row)
    else:
        assert found is None
        assert verdict == Verdict(None, ("loa_too_low",))
    assert Identification.objects.verified_for(alice) == row  # only the level decided


def test_min_loa_judges_the_latest_verification_only(alice: AbstractBaseUser) -> None:
    """A high-level verification does not lift a gate for the lower one made since."""
    verified(alice, level_of_assurance="high", completed=timezone.now() - datetime.timedelta(1))
    verified(alice, level_of_assurance="substantial")
    assert Identification.objects.verified_for(alice, min_loa="high") is None
    assert Requirements.of(min_loa="high").check(alice).reasons == ("loa_too_low",)


@pytest.mark.parametrize("min_loa", ["HIGH", "medium", "", " high", 3, ["high"]])
def test_verified_for_refuses_a_level_it_does_not_know(
    alice: AbstractBaseUser, min_loa: Any
) -> None:
    """A misspelt level must not let everyone through (every rank is above "unknown")."""
    with pytest.raises(ValueError, match="min_loa"):
        Identification.objects.verified_for(alice, min_loa=min_loa)  # nothing to judge yet
    row = verified(alice, level_of_assurance="high")
    with pytest.raises(ValueError, match="min_loa"):
        Identification.objects.verified_for(alice, min_loa=min_loa)
    with pytest.raises(ValueError, match="min_loa"):
        row.unmet(min_loa=min_loa)


# -- providers -------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "providers",
    [
        pytest.param(lambda: ["SWE_BANKID", "NO_BANKID_WEB"], id="list"),
        pytest.param(lambda: ("NO_BANKID_WEB",), id="tuple"),
        pytest.param(lambda: (p for p in ("DA_NEMID", "NO_BANKID_WEB")), id="generator"),
    ],
)
def test_providers_as_any_iterable(
    alice: AbstractBaseUser, providers: Callable[[], Iterator[str]]
) -> None:
    row = verified(alice, provider="NO_BANKID_WEB")
    assert Identification.objects.verified_for(alice, providers=providers()) == row


@pytest.mark.parametrize(
    "providers",
    [
        pytest.param(lambda: ["SWE_BANKID"], id="list"),
        pytest.param(lambda: ("NO_BUYPASS", "DA_NEMID"), id="tuple"),
        pytest.param(lambda: (p for p in ("SWE_BANKID",)), id="generator"),
        pytest.param(lambda: [], id="none-accepted"),
    ],
)
def test_another_provider_does_not_qualify(
    alice: AbstractBaseUser, providers: Callable[[], Iterator[str]]
) -> None:
    verified(alice, provider="NO_BANKID_WEB")
    assert Identification.objects.verified_for(alice, providers=providers()) is None


def test_a_single_provider_may_be_a_string(alice: AbstractBaseUser) -> None:
    row = verified(alice, provider="NO_BANKID_WEB")
    assert Identification.objects.verified_for(alice, providers="NO_BANKID_WEB") == row
    assert Identification.objects.verified_for(alice, providers="NO_BUYPASS") is None


def test_every_option_at_once(alice: AbstractBaseUser, now: Any) -> None:
    options: dict[str, Any] = {"max_age": 300, "min_age": 18, "providers": ["NO_BANKID_WEB"]}
    good = verified(alice, completed=ago(100), born=datetime.date(2008, 6, 15))
    assert Identification.objects.verified_for(alice, **options) == good
    for latest in (
        {"completed": ago(30), "provider": "NO_BUYPASS"},  # wrong provider
        {"completed": ago(20), "born": datetime.date(2010, 1, 1)},  # 16
    ):
        row = verified(alice, **latest)
        assert Identification.objects.verified_for(alice, **options) is None
        row.delete()
    assert Identification.objects.verified_for(alice, **options) == good


# -- which row ----------------------------------------------------------------------------------
def test_the_latest_verification_is_returned(alice: AbstractBaseUser, now: Any) -> None:
    # Made in the other order: the completion decides, not the primary key or creation.
    newer = verified(alice, completed=ago(10), provider="SWE_BANKID")
    older = verified(alice, completed=ago(600), provider="NO_BANKID_WEB")
    assert newer.pk < older.pk
    assert Identification.objects.verified_for(alice) == newer
    # Only the latest counts (it is who the user is now): an older match does not.
    assert Identification.objects.verified_for(alice, providers=["NO_BANKID_WEB"]) is None
    assert Identification.objects.verified_for(alice, providers=["SWE_BANKID"]) == newer
    assert older.unmet(providers=["NO_BANKID_WEB"]) == ()


def test_an_anonymous_user_has_none(alice: AbstractBaseUser) -> None:
    verified(alice)
    assert Identification.objects.verified_for(AnonymousUser()) is None
    assert Identification.objects.verified_for(None) is None


def test_another_users_rows_never_count(alice: AbstractBaseUser, bob: AbstractBaseUser) -> None:
    bobs = verified(bob)
    assert Identification.objects.verified_for(alice) is None
    mine = verified(alice, completed=timezone.now() - datetime.timedelta(days=1))
    assert Identification.objects.verified_for(alice) == mine
    assert Identification.objects.verified_for(bob) == bobs


@pytest.mark.parametrize(
    "status", [s for s in Status.values if s != Status.SUCCESS], ids=lambda s: s.lower()
)
def test_unsuccessful_identifications_never_count(alice: AbstractBaseUser, status: str) -> None:
    verified(alice, status=status)
    assert Identification.objects.verified_for(alice) is None
    assert Identification.objects.verified_for(alice, min_age=18, max_age=3600) is None
    assert Requirements().check(alice).reasons == ("not_verified",)


def test_an_anonymized_row_never_counts(alice: AbstractBaseUser) -> None:
    row = verified(alice)
    assert row.is_verified
    row.anonymized_at = timezone.now()
    row.save()
    assert not row.is_verified
    assert Identification.objects.verified_for(alice) is None
    assert Requirements.of(min_age=18).check(alice).reasons == ("not_verified",)


def test_a_row_anonymized_by_eid_purge_never_counts(alice: AbstractBaseUser) -> None:
    row = verified(alice, social_security_number=SSN)
    call_command("eid_purge", "--older-than", "0", "--anonymize", "--force", stdout=StringIO())
    row.refresh_from_db()
    assert (row.status, row.date_of_birth, row.social_security_number) == (
        Status.SUCCESS,
        None,
        None,
    )
    assert row.anonymized_at is not None
    assert Identification.objects.verified_for(alice) is None


def test_the_number_is_deferred_and_still_reads(alice: AbstractBaseUser) -> None:
    row = verified(alice, social_security_number=SSN, national_id_country="NO")
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT social_security_number FROM django_eid_identification WHERE id = %s", [row.pk]
        )
        (stored,) = cursor.fetchone()
    assert stored
    assert SSN not in stored

    found = Identification.objects.verified_for(alice)
    assert found is not None
    assert "social_security_number" in found.get_deferred_fields()
    assert found.social_security_number == SSN  # loaded and decrypted on first read
    assert found.masked_social_security_number == "140385" + "\u2022" * 5
