"""``api-me``: the caller's verified identity when it meets the conditions, else ``null``;
the conditions are exactly those of ``Identification.objects.verified_for``."""

from __future__ import annotations

import datetime
from typing import Any

import pytest
from django.contrib.auth.models import AbstractBaseUser
from django.utils import timezone

from django_eid.models import Identification, born_by
from tests.api.conftest import (
    SAME_DEVICE,
    Api,
    api_start,
    fields_of,
    identified,
    problem,
    settled_by_its_return,
)
from tests.fixtures_broker import SAMPLE, ScriptedBroker

pytestmark = pytest.mark.django_db

Status = Identification.Status
#: A hundred years of 365.25 days: the longest max_age (that of a gate).
MAX_AGE_SECONDS = 36525 * 24 * 3600


def verification(
    user: AbstractBaseUser,
    *,
    age: int | None = 30,
    provider: str = "NO_BANKID_WEB",
    ago: datetime.timedelta = datetime.timedelta(minutes=10),
    **fields: Any,
) -> Identification:
    """A verified identification of ``user``, ``ago`` old, of a person ``age`` years old."""
    now = timezone.now()
    fields.setdefault("status", Status.SUCCESS)
    number = Identification.objects.count()
    return Identification.objects.create(
        user=user,
        reference=f"ref{number:029d}",
        external_id=f"{number:032x}",
        identity_provider=provider,
        name="Nordmann, Kari",
        first_name="Kari",
        last_name="Nordmann",
        date_of_birth=None if age is None else born_by(age),
        created_at=now - ago,
        completed_at=now - ago,
        **fields,
    )


def test_never_verified_is_null(api: Api) -> None:
    response = api.me()
    assert response.status_code == 200
    assert response.content == b"null"
    assert "no-store" in response["Cache-Control"]


def test_the_latest_verified_identity(api: Api, broker: ScriptedBroker) -> None:
    started = api_start(api, broker)
    settled_by_its_return(api, started, identified(broker, started, SAME_DEVICE))
    identification = api.identification(started.reference).json()
    me = api.me().json()
    me.pop("links")  # the account's (tests/api/test_links.py)
    assert me == identification["identity"]
    assert api.me().json()["first_name"] == SAMPLE.first_name


def test_only_the_caller_s_identity(api: Api, bob: AbstractBaseUser) -> None:
    verification(bob)
    assert api.me().json() is None


def test_an_unfinished_or_failed_identification_is_no_identity(
    api: Api, alice: AbstractBaseUser
) -> None:
    for status in (Status.PENDING, Status.ERROR, Status.REJECTED, Status.ABORTED):
        verification(alice, status=status)
    assert api.me().json() is None


def test_only_the_latest_verification_counts(api: Api, alice: AbstractBaseUser) -> None:
    verification(alice, age=40, ago=datetime.timedelta(days=2))
    verification(alice, age=15, ago=datetime.timedelta(days=1))
    assert api.me({"min_age": 18}).json() is None
    assert api.me().json()["age"] == 15


SOON = datetime.timedelta(seconds=30)
ALL = {"max_age": 3600, "min_age": 18, "min_loa": "high", "provider": ["NO_BANKID_WEB"]}
#: ``(person, conditions, met)``: each condition at, and beside, its boundary, and all of
#: them together with each one unmet in turn. The person (:func:`verification`) is 30 years
#: old, verified with NO_BANKID_WEB ten minutes ago, at no known level of assurance, but
#: where ``person`` says otherwise.
CASES: list[tuple[dict[str, Any], dict[str, Any], bool]] = [
    ({}, {}, True),
    ({"age": None, "level_of_assurance": ""}, {}, True),
    ({}, {"max_age": 3600}, True),
    ({}, {"max_age": MAX_AGE_SECONDS}, True),
    ({}, {"max_age": 60}, False),
    ({"ago": SOON}, {"max_age": 60}, True),
    ({"ago": SOON}, {"max_age": 1}, False),
    ({"age": 17}, {"min_age": 0}, True),
    ({"age": None}, {"min_age": 0}, False),
    ({"age": 17}, {"min_age": 17}, True),
    ({"age": 17}, {"min_age": 18}, False),
    ({"age": 18}, {"min_age": 18}, True),
    ({"age": 18}, {"min_age": 19}, False),
    ({}, {"min_age": 149}, False),
    ({}, {"provider": ["NO_BANKID_WEB"]}, True),
    ({}, {"provider": ["SWE_BANKID"]}, False),
    ({}, {"provider": ["SWE_BANKID", "NO_BANKID_WEB"]}, True),
    ({"provider": "SWE_BANKID"}, {"provider": ["SWE_BANKID"]}, True),
    ({"provider": "SWE_BANKID"}, {"provider": ["NO_BANKID_WEB"]}, False),
    ({"level_of_assurance": ""}, {"min_loa": "low"}, False),
    ({"level_of_assurance": "substantial"}, {"min_loa": "low"}, True),
    ({"level_of_assurance": "substantial"}, {"min_loa": "substantial"}, True),
    ({"level_of_assurance": "substantial"}, {"min_loa": "high"}, False),
    ({"level_of_assurance": "high"}, {"min_loa": "substantial"}, True),
    ({"level_of_assurance": "high"}, {"min_loa": "high"}, True),
    ({"level_of_assurance": "high"}, ALL, True),
    ({"level_of_assurance": "high"}, {**ALL, "max_age": 60}, False),
    ({"level_of_assurance": "high", "age": 17}, ALL, False),
    ({"level_of_assurance": "substantial"}, ALL, False),
    ({"level_of_assurance": "high", "provider": "SWE_BANKID"}, ALL, False),
]


def case_id(person: dict[str, Any], conditions: dict[str, Any], met: bool) -> str:
    def shown(value: Any) -> str:
        if isinstance(value, list):
            return "+".join(value)
        if isinstance(value, datetime.timedelta):
            return f"{value.total_seconds():.0f}s"
        return "unknown" if value in ("", None) else str(value)

    def words(values: dict[str, Any]) -> str:
        return ",".join(f"{k}={shown(v)}" for k, v in values.items()) or "none"

    return f"{words(person)}-{words(conditions)}-{'met' if met else 'unmet'}"


@pytest.mark.parametrize(
    ("person", "conditions", "met"), [pytest.param(*case, id=case_id(*case)) for case in CASES]
)
def test_the_conditions_are_those_of_verified_for(
    api: Api,
    alice: AbstractBaseUser,
    person: dict[str, Any],
    conditions: dict[str, Any],
    met: bool,
) -> None:
    row = verification(alice, **person)
    expected = Identification.objects.verified_for(
        alice,
        max_age=conditions.get("max_age"),
        min_age=conditions.get("min_age"),
        min_loa=conditions.get("min_loa"),
        providers=conditions.get("provider"),
    )
    answer = api.me(conditions).json()
    assert (expected is not None) is met
    if expected is None:
        assert answer is None
    else:
        assert expected.pk == row.pk
        assert answer is not None
        assert (answer["provider"], answer["age"]) == (row.identity_provider, row.age)


def test_an_anonymized_identity_is_none(api: Api, alice: AbstractBaseUser) -> None:
    verification(alice, anonymized_at=timezone.now())
    assert api.me().json() is None


# -- refused ---------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("query", "field", "code"),
    [
        ({"max_age": "0"}, "max_age", "max_age_invalid"),
        ({"max_age": "-5"}, "max_age", "max_age_invalid"),
        ({"max_age": "+5"}, "max_age", "max_age_invalid"),
        ({"max_age": "1.5"}, "max_age", "max_age_invalid"),
        ({"max_age": "1e3"}, "max_age", "max_age_invalid"),
        ({"max_age": ""}, "max_age", "max_age_invalid"),
        ({"max_age": " 60"}, "max_age", "max_age_invalid"),
        ({"max_age": "\u0660"}, "max_age", "max_age_invalid"),  # an Arabic-Indic zero
        ({"max_age": "\uff16\uff10"}, "max_age", "max_age_invalid"),  # fullwidth 60
        ({"max_age": str(MAX_AGE_SECONDS + 1)}, "max_age", "max_age_invalid"),
        ({"max_age": "9" * 5000}, "max_age", "max_age_invalid"),
        ({"max_age": ["60", "60"]}, "max_age", "max_age_invalid"),
        ({"min_age": "150"}, "min_age", "min_age_invalid"),
        ({"min_age": "-1"}, "min_age", "min_age_invalid"),
        ({"min_age": "eighteen"}, "min_age", "min_age_invalid"),
        ({"min_age": "1" * 5000}, "min_age", "min_age_invalid"),
        ({"min_loa": "HIGH"}, "min_loa", "min_loa_invalid"),
        ({"min_loa": "medium"}, "min_loa", "min_loa_invalid"),
        ({"min_loa": ""}, "min_loa", "min_loa_invalid"),
        ({"min_loa": " high"}, "min_loa", "min_loa_invalid"),
        ({"min_loa": ["high", "high"]}, "min_loa", "min_loa_invalid"),
        ({"provider": "bank id"}, "provider", "provider_malformed"),
        ({"provider": "NO_BANKID_WEB;x"}, "provider", "provider_malformed"),
        ({"provider": ""}, "provider", "provider_malformed"),
        # Any broker API's syntax is a name (rows keep the name of the API they came
        # through): NO_BANKID_WEB, no_bankid_mobile, nbid, otp-sms.
        ({"provider": ["NO_BANKID_WEB", "swe bankid"]}, "provider", "provider_malformed"),
    ],
)
def test_a_condition_that_is_not_valid(
    api: Api, alice: AbstractBaseUser, query: dict[str, Any], field: str, code: str
) -> None:
    verification(alice)
    refused = problem(api.me(query), 400, code)
    assert fields_of(refused) == [(field, code)]
    assert refused["errors"][0]["message"] == refused["message"]


def test_a_malformed_provider_is_quoted(api: Api) -> None:
    refused = problem(api.me({"provider": "bank id"}), 400, "provider_malformed")
    assert refused["message"] == ("“bank id” is not a provider name.")


def test_several_conditions_that_are_not_valid(api: Api) -> None:
    refused = problem(
        api.me({"max_age": "x", "min_age": "200", "min_loa": "top", "provider": "x y"}),
        400,
        "invalid_request",
    )
    assert fields_of(refused) == [
        ("max_age", "max_age_invalid"),
        ("min_age", "min_age_invalid"),
        ("min_loa", "min_loa_invalid"),
        ("provider", "provider_malformed"),
    ]


def test_unknown_parameters_are_ignored(api: Api, alice: AbstractBaseUser) -> None:
    verification(alice)
    assert api.me({"format": "json", "_": "1712345678"}).json() is not None


def test_too_many_query_parameters_are_a_json_400(api: Api, settings: Any) -> None:
    settings.DATA_UPLOAD_MAX_NUMBER_FIELDS = 10
    query = {f"p{i}": "1" for i in range(20)}
    problem(api.me(query), 400, "invalid_request")
