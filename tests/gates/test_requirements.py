"""``Requirements``: a gate's options checked when it is defined (``Requirements.of``), and
``Requirements.check``: whether the user's latest verification passes, and every reason why
not, ``same_person`` included (who the account's person is).

The rows are made directly (tests/gates/rows.py), the clock frozen where it matters.
"""

from __future__ import annotations

import datetime
from collections.abc import Iterator
from typing import Any

import pytest
from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.utils import timezone

from django_eid.brokers.oidc_presets import LEVELS
from django_eid.models import Identification
from django_eid.requirements import Requirements, Verdict
from tests.gates.rows import SSN, ago, verified

pytestmark = pytest.mark.django_db


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
        ({"min_age": 17.5}, ValueError),
        ({"min_age": "18"}, ValueError),
        ({"min_age": True}, ValueError),
        ({"min_loa": "HIGH"}, ValueError),
        ({"min_loa": "medium"}, ValueError),
        ({"min_loa": "substantial+"}, ValueError),
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
