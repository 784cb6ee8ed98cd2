"""``Identification.objects.verified_for()`` and ``Requirements``: who passes a gate, and why not.

The rows are made directly (the flow has its own suites); the clock is frozen where a
boundary is tested, so "just inside" and "just outside" are a microsecond apart. Expected
ages and dates are worked out by hand from the birth dates written here.
"""

from __future__ import annotations

import datetime
import itertools
from collections.abc import Callable, Iterator
from io import StringIO
from typing import Any

import pytest
from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.core.management import call_command
from django.db import connection
from django.utils import timezone

from django_eid.brokers.oidc_presets import LEVELS
from django_eid.models import Identification, born_by
from django_eid.requirements import Requirements, Verdict

pytestmark = pytest.mark.django_db

Status = Identification.Status
UTC = datetime.UTC
#: Noon in Oslo (the suite's TIME_ZONE) on an ordinary day.
NOW = datetime.datetime(2026, 6, 15, 10, 0, tzinfo=UTC)
ADULT = datetime.date(1985, 3, 14)  # 41 on NOW
SSN = "14038512345"  # never parsed here: only stored, encrypted and read back
_request_ids = itertools.count(1)


@pytest.fixture
def freeze(monkeypatch: pytest.MonkeyPatch) -> Callable[[datetime.datetime], datetime.datetime]:
    """``freeze(moment)``: ``timezone.now()`` (and so ``localdate()``) answers ``moment``."""

    def set_now(moment: datetime.datetime) -> datetime.datetime:
        monkeypatch.setattr(timezone, "now", lambda: moment)
        return moment

    return set_now


@pytest.fixture
def now(freeze: Callable[[datetime.datetime], datetime.datetime]) -> datetime.datetime:
    return freeze(NOW)


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
    return NOW - datetime.timedelta(seconds=seconds, microseconds=micro)


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


# -- Requirements.of ----------------------------------------------------------------------------
def _option_id(options: dict[str, Any]) -> str:
    """The same test id in every process (pytest-xdist's workers compare them): an iterator's
    ``repr`` names its memory address, so it goes by its type."""
    return ",".join(
        f"{key}={type(value).__name__ if isinstance(value, Iterator) else repr(value)}"
        for key, value in options.items()
    )


@pytest.mark.parametrize(
    ("options", "error"),
    [
        ({"max_age": 0}, ValueError),
        ({"max_age": -1}, ValueError),
        ({"max_age": -0.5}, ValueError),
        ({"max_age": 0.0}, ValueError),
        ({"max_age": datetime.timedelta(0)}, ValueError),
        ({"max_age": datetime.timedelta(seconds=-1)}, ValueError),
        ({"max_age": "300"}, TypeError),
        ({"max_age": True}, TypeError),
        ({"max_age": [300]}, TypeError),
        ({"min_age": -1}, ValueError),
        ({"min_age": 18.0}, ValueError),
        ({"min_age": "18"}, ValueError),
        ({"min_age": True}, ValueError),
        ({"min_loa": "HIGH"}, ValueError),
        ({"min_loa": "medium"}, ValueError),
        ({"min_loa": ""}, ValueError),
        ({"min_loa": 2}, ValueError),
        ({"min_loa": True}, ValueError),
        ({"min_loa": ("high",)}, ValueError),
        ({"providers": []}, ValueError),
        ({"providers": ()}, ValueError),
        ({"providers": iter(())}, ValueError),
    ],
    ids=lambda v: _option_id(v) if isinstance(v, dict) else v.__name__,
)
def test_requirements_of_refuses_bad_options(options: dict[str, Any], error: type) -> None:
    with pytest.raises(error) as info:
        Requirements.of(**options)
    assert type(info.value) is error


def test_requirements_of_normalises_its_options() -> None:
    assert Requirements.of() == Requirements(None, None, None, False, None)
    assert Requirements.of(max_age=300).max_age == datetime.timedelta(minutes=5)
    assert Requirements.of(max_age=1.5).max_age == datetime.timedelta(milliseconds=1500)
    hour = datetime.timedelta(hours=1)
    assert Requirements.of(max_age=hour).max_age == hour
    assert Requirements.of(min_age=0).min_age == 0
    assert [Requirements.of(min_loa=level).min_loa for level in LEVELS] == list(LEVELS)
    assert Requirements.of(providers="SWE_BANKID").providers == ("SWE_BANKID",)
    assert Requirements.of(providers=["A_B", "C_D"]).providers == ("A_B", "C_D")
    generated = Requirements.of(providers=(p for p in ("A_B", "C_D")))
    assert generated.providers == ("A_B", "C_D")
    assert Requirements.of(same_person=1).same_person is True  # type: ignore[arg-type]
    assert Requirements.of(message="Adults only.").message == "Adults only."


@pytest.mark.parametrize(
    "options",
    [
        pytest.param({"max_age": datetime.timedelta.max}, id="max_age=timedelta.max"),
        pytest.param({"max_age": 10**11}, id="max_age=10**11s"),
        pytest.param({"max_age": float("inf")}, id="max_age=inf"),
        pytest.param({"min_age": 10_000}, id="min_age=10000"),
    ],
)
def test_requirements_of_refuses_limits_check_cannot_use(options: dict[str, Any]) -> None:
    """Refused when the gate is defined, not with a 500 on every request."""
    with pytest.raises(ValueError, match=r"max_age|min_age"):
        Requirements.of(**options)


# -- Requirements.check -------------------------------------------------------------------------
def test_verdict_passed() -> None:
    assert Verdict(None).passed
    assert not Verdict(None, ("too_old",)).passed


def test_a_user_without_a_verification_is_not_verified(alice: AbstractBaseUser) -> None:
    verdict = Requirements.of(max_age=300).check(alice)
    assert verdict == Verdict(None, ("not_verified",))
    assert not verdict.passed


def test_an_anonymous_user_is_not_verified() -> None:
    assert Requirements().check(AnonymousUser()).reasons == ("not_verified",)


def test_a_verified_user_passes(alice: AbstractBaseUser, now: Any) -> None:
    row = verified(alice, completed=ago(299), born=datetime.date(2008, 6, 15))
    verdict = Requirements.of(max_age=300, min_age=18, providers=["NO_BANKID_WEB"]).check(alice)
    assert verdict.passed
    assert verdict.identification == row
    assert verdict.reasons == ()


@pytest.mark.parametrize(
    ("options", "row", "reasons"),
    [
        ({"max_age": 300}, {"completed": ago(301)}, ("too_old",)),
        ({"providers": ["SWE_BANKID"]}, {}, ("wrong_provider",)),
        (
            {"max_age": 300, "providers": ["SWE_BANKID"]},
            {"completed": ago(301)},
            ("too_old", "wrong_provider"),
        ),
        ({"min_age": 18}, {"born": datetime.date(2008, 6, 16)}, ("too_young",)),
        ({"min_loa": "high"}, {"level_of_assurance": "substantial"}, ("loa_too_low",)),
        ({"min_loa": "low"}, {"level_of_assurance": ""}, ("loa_too_low",)),
        (
            {"max_age": 60, "providers": ("DA_NEMID",), "min_loa": "high", "min_age": 50},
            {"completed": ago(61)},  # born 1985: 41; no level stated
            ("too_old", "wrong_provider", "loa_too_low", "too_young"),
        ),
        ({"min_age": 18}, {"born": None}, ("age_not_known",)),
        ({"min_age": 0}, {"born": None}, ("age_not_known",)),
        (
            {"max_age": 60, "providers": ("DA_NEMID",), "min_age": 50},
            {"completed": ago(61)},  # born 1985: 41
            ("too_old", "wrong_provider", "too_young"),
        ),
        (
            {"max_age": 60, "min_age": 18},
            {"completed": ago(61), "born": None},
            ("too_old", "age_not_known"),
        ),
    ],
    ids=[
        "too_old",
        "wrong_provider",
        "too_old+wrong_provider",
        "too_young",
        "loa_too_low",
        "loa_not_stated",
        "too_old+wrong_provider+loa_too_low+too_young",
        "age_not_known",
        "age_not_known-min_age-0",
        "too_old+wrong_provider+too_young",
        "too_old+age_not_known",
    ],
)
def test_each_failed_condition_is_a_reason(
    alice: AbstractBaseUser,
    now: Any,
    options: dict[str, Any],
    row: dict[str, Any],
    reasons: tuple[str, ...],
) -> None:
    verified(alice, **row)
    verdict = Requirements.of(**options).check(alice)
    assert verdict == Verdict(None, reasons)
    assert not verdict.passed


def test_the_reasons_are_those_of_the_latest_verification(
    alice: AbstractBaseUser, now: Any
) -> None:
    verified(alice, completed=ago(50), born=datetime.date(2010, 1, 1))  # 16, recent
    verified(alice, completed=ago(5000))  # adult, old
    assert Requirements.of(max_age=300, min_age=18).check(alice).reasons == ("too_young",)


def test_an_older_verification_meeting_everything_does_not_pass(alice: AbstractBaseUser) -> None:
    """An adult's old verification must not open an 18+ gate for a child verified since."""
    verified(alice, completed=timezone.now() - datetime.timedelta(minutes=2))
    verified(alice, born=datetime.date.today().replace(year=datetime.date.today().year - 10))
    verdict = Requirements.of(min_age=18).check(alice)
    assert verdict == Verdict(None, ("too_young",))


# -- same_person -------------------------------------------------------------------------------
def test_the_accounts_first_verification_passes_same_person(alice: AbstractBaseUser) -> None:
    first = verified(alice, unique_id="uid-kari")
    assert Requirements.of(same_person=True).check(alice) == Verdict(first)


def test_someone_else_verified_last_is_another_person(alice: AbstractBaseUser, now: Any) -> None:
    verified(alice, completed=ago(600), unique_id="uid-kari")
    verified(alice, completed=ago(60), unique_id="uid-ola", first_name="Ola")
    verdict = Requirements.of(same_person=True).check(alice)
    assert verdict == Verdict(None, ("other_person",))
    assert not verdict.passed
    # Without same_person the other person's verification is a verification.
    assert Requirements.of(max_age=300).check(alice).passed


def test_the_accounts_person_verified_again_passes(alice: AbstractBaseUser, now: Any) -> None:
    verified(alice, completed=ago(900), unique_id="uid-kari")
    verified(alice, completed=ago(600), unique_id="uid-ola")
    again = verified(alice, completed=ago(60), unique_id="uid-kari")
    assert Requirements.of(max_age=300, same_person=True).check(alice) == Verdict(again)


def test_the_same_person_by_number_across_providers(alice: AbstractBaseUser, now: Any) -> None:
    verified(alice, completed=ago(900), unique_id="uid-kari", social_security_number=SSN)
    again = verified(
        alice,
        completed=ago(60),
        provider="NO_BUYPASS",
        unique_id="buypass-kari",
        social_security_number=SSN,
    )
    assert Requirements.of(same_person=True).check(alice) == Verdict(again)


def test_the_accounts_person_is_its_first_verification_still_stored(
    alice: AbstractBaseUser, now: Any
) -> None:
    first = verified(alice, completed=ago(900), unique_id="uid-kari")
    verified(alice, completed=ago(60), unique_id="uid-ola")
    assert Requirements.of(same_person=True).check(alice).reasons == ("other_person",)
    Identification.objects.filter(pk=first.pk).update(anonymized_at=timezone.now())
    # Ola's is now the account's first (and latest) verification still stored.
    assert Requirements.of(same_person=True).check(alice).passed


def test_a_single_provider_may_be_a_string(alice: AbstractBaseUser) -> None:
    row = verified(alice, provider="NO_BANKID_WEB")
    assert Identification.objects.verified_for(alice, providers="NO_BANKID_WEB") == row
    assert Identification.objects.verified_for(alice, providers="NO_BUYPASS") is None
