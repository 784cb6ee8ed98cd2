"""``api-identification``: the caller's identification, settled while it is polled; the
identity once verified, never the national identity number in full.

Polling settles through v1's status call (the successors have none: they ask for the
record); whether a success on another device is settled depends on the broker's API
(``broker_api``), and so does how the national identity number is asked for and stored.
The identity, outcomes and what is answered of the number are the row's, once.
"""

from __future__ import annotations

import datetime
import io
import json
from collections.abc import Callable
from typing import Any

import pytest
from django.core.cache import cache
from django.core.management import call_command
from django.test import Client
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from django_eid.models import Identification
from tests.api.conftest import (
    OTHER_DEVICE,
    SAME_DEVICE,
    Api,
    api_start,
    identified,
    problem,
    settled_by_its_return,
)
from tests.fixtures_broker import NO_SESSION_TO_ASK, REST_APIS, SAMPLE, SSN, ScriptedBroker
from tests.fixtures_views import Signals, Started

pytestmark = pytest.mark.django_db

Status = Identification.Status
IDENTITY_FIELDS = {
    "name",
    "first_name",
    "middle_name",
    "last_name",
    "date_of_birth",
    "age",
    "provider",
    "verified_at",
}


def verified(api: Api, broker: ScriptedBroker, **body: Any) -> Started:
    """Started through the API, identified on the starting device, and settled by a poll."""
    started = api_start(api, broker, body or None)
    settled_by_its_return(api, started, identified(broker, started, SAME_DEVICE))
    assert api.identification(started.reference).json()["status"] == "SUCCESS"
    return started


def age_of(born: datetime.date) -> int:
    today = timezone.localdate()
    return today.year - born.year - ((today.month, today.day) < (born.month, born.day))


# -- whose -----------------------------------------------------------------------------------
def test_another_user_s_identification_is_not_found_as_one_that_does_not_exist(
    api: Api, bob_api: Api, broker: ScriptedBroker
) -> None:
    started = api_start(api, broker)
    others = bob_api.identification(started.reference)
    missing = bob_api.identification("A" * 32)
    assert problem(others, 404, "invalid_link") == problem(missing, 404, "invalid_link")
    assert others.content == missing.content
    assert broker.status_requests == []


@pytest.mark.parametrize("reference", ["short", "A" * 65, "A" * 31 + "!", "A" * 31 + "."])
def test_a_malformed_reference_is_not_found(
    api: Api, broker: ScriptedBroker, reference: str
) -> None:
    problem(api.identification(reference), 404, "invalid_link")


# -- pending, and polled --------------------------------------------------------------------------
def test_a_pending_identification(api: Api, broker: ScriptedBroker) -> None:
    started = api_start(api, broker, {"display": "iframe"})
    response = api.identification(started.reference)
    assert response.status_code == 200
    assert "no-store" in response["Cache-Control"]
    body = response.json()
    assert body == {
        "reference": started.reference,
        "status": "PENDING",
        "display": "iframe",
        "outcome": {"code": "pending", "message": "The identification is not finished yet."},
        "created_at": body["created_at"],
        "completed_at": None,
    }
    created_at = parse_datetime(body["created_at"])
    assert created_at is not None
    assert abs(created_at - started.row.created_at) < datetime.timedelta(milliseconds=1)


def test_polling_asks_the_broker_at_most_once_per_settle_interval(
    api: Api, broker: ScriptedBroker
) -> None:
    started = api_start(api, broker)
    for _ in range(10):
        assert api.identification(started.reference).json()["status"] == "PENDING"
    assert broker.status_requests == [started.request_id]
    assert broker.retrieve_requests == []  # no personal data while the user is at the broker
    cache.clear()  # the interval is over
    api.identification(started.reference)
    assert broker.status_requests == [started.request_id] * 2


def test_polling_from_several_clients_shares_the_interval(
    api: Api, broker: ScriptedBroker, alice: Any
) -> None:
    started = api_start(api, broker)
    other = Api(Client())
    other.client.force_login(alice)
    api.identification(started.reference)
    other.identification(started.reference)
    assert broker.status_requests == [started.request_id]


def test_a_success_on_the_starting_device_is_settled_by_a_poll(
    api: Api, broker: ScriptedBroker, signals: Signals, alice: Any
) -> None:
    started = api_start(api, broker)
    identified(broker, started, SAME_DEVICE)
    response = api.identification(started.reference)
    body = response.json()
    assert body["status"] == "SUCCESS"
    assert body["outcome"] == {"code": "succeeded", "message": "Your identity is verified."}
    row = started.refresh()
    assert row.status == Status.SUCCESS
    identity = body["identity"]
    assert set(identity) == IDENTITY_FIELDS
    assert identity["name"] == SAMPLE.name
    assert (identity["first_name"], identity["middle_name"], identity["last_name"]) == (
        SAMPLE.first_name,
        SAMPLE.middle_name,
        SAMPLE.last_name,
    )
    assert identity["date_of_birth"] == SAMPLE.birth_date.isoformat()
    assert identity["age"] == age_of(SAMPLE.birth_date)
    assert identity["provider"] == SAMPLE.identity_provider
    verified_at = parse_datetime(identity["verified_at"])
    assert row.completed_at is not None
    assert verified_at is not None
    assert abs(verified_at - row.completed_at) < datetime.timedelta(milliseconds=1)
    assert body["completed_at"] == identity["verified_at"]
    succeeded = signals.of("identification_succeeded")
    assert len(succeeded) == 1
    assert succeeded[0]["request"].user == alice
    # The browser's one-time state is used up: a replayed return changes nothing.
    assert started.reference not in api.client.session["django_eid_pending"]
    api.client.get(started.success_url())
    assert len(signals.of("identification_succeeded")) == 1


@pytest.mark.apis(*REST_APIS, reason=NO_SESSION_TO_ASK)
def test_a_success_on_another_device_stays_pending(
    broker_api: str, api: Api, broker: ScriptedBroker, signals: Signals
) -> None:
    started = api_start(api, broker)
    identified(broker, started, OTHER_DEVICE)
    for _ in range(2):
        body = api.identification(started.reference).json()
        assert (body["status"], body["outcome"]["code"]) == ("PENDING", "pending")
        assert "identity" not in body
        cache.delete(f"django_eid:settle:{started.pk}")
    assert SAMPLE.last_name not in json.dumps(body)
    row = started.refresh()
    assert (row.status, row.name) == (Status.PENDING, "")
    assert broker.retrieve_requests == [started.request_id]  # fetched once, not again
    assert signals.names == ["identification_started"]


@pytest.mark.parametrize(
    ("fail", "status", "code"),
    [
        ("abort", "ABORTED", "aborted"),
        ("fail", "ERROR", "failed"),
    ],
)
def test_an_unsuccessful_session_is_settled_as_it_ended(
    api: Api, broker: ScriptedBroker, fail: str, status: str, code: str
) -> None:
    started = api_start(api, broker)
    broker.broker.open(started.request_id)
    getattr(broker.broker, fail)(started.request_id)
    body = api.identification(started.reference).json()
    assert (body["status"], body["outcome"]["code"]) == (status, code)
    assert "identity" not in body
    assert "reason" not in body["outcome"]


def test_an_expired_identification(
    api: Api, broker: ScriptedBroker, eid: Callable[..., None]
) -> None:
    started = api_start(api, broker)
    eid(SESSION_MAX_AGE=60)
    Identification.objects.filter(pk=started.pk).update(
        created_at=timezone.now() - datetime.timedelta(seconds=61)
    )
    body = api.identification(started.reference).json()
    # The broker said the user never finished: late, it expired.
    assert (body["status"], body["outcome"]["code"]) == ("EXPIRED", "expired")
    assert broker.status_requests == [started.request_id]
    assert started.refresh().status == Status.EXPIRED


# -- rejected --------------------------------------------------------------------------------
def test_a_rejection_says_why(api: Api, broker: ScriptedBroker, eid: Callable[..., None]) -> None:
    eid(MIN_AGE=18)
    started = api_start(api, broker)
    url = identified(broker, started, SAME_DEVICE, person=broker.persons.MINOR)
    settled_by_its_return(api, started, url)
    body = api.identification(started.reference).json()
    assert body["status"] == "REJECTED"
    assert body["outcome"] == {
        "code": "rejected",
        "message": "You must be at least 18 years old to use this service.",
        "reason": "MIN_AGE",
    }
    assert "identity" not in body
    assert broker.persons.MINOR.last_name not in json.dumps(body)


def test_one_account_per_person_says_why(
    api: Api, bob_api: Api, broker: ScriptedBroker, eid: Callable[..., None]
) -> None:
    eid(ONE_ACCOUNT_PER_PERSON=True)
    verified(bob_api, broker)
    started = api_start(api, broker)
    settled_by_its_return(api, started, identified(broker, started, SAME_DEVICE))
    body = api.identification(started.reference).json()
    assert body["status"] == "REJECTED"
    assert body["outcome"] == {
        "code": "rejected",
        "message": "This person is already verified on another account.",
        "reason": "ONE_ACCOUNT_PER_PERSON",
    }
    assert api.me().json() is None


def test_a_rejection_by_the_site_s_receiver_has_its_own_reason(
    api: Api, broker: ScriptedBroker
) -> None:
    started = api_start(api, broker)
    Identification.objects.filter(pk=started.pk).update(
        status=Status.REJECTED, error_code="REJECTED", error_message="Not on the guest list."
    )
    body = api.identification(started.reference).json()
    assert body["outcome"] == {
        "code": "rejected",
        "message": "Not on the guest list.",
        "reason": "REJECTED",
    }


def test_a_rule_that_failed_is_no_reason_to_tell(api: Api, broker: ScriptedBroker) -> None:
    started = api_start(api, broker)
    Identification.objects.filter(pk=started.pk).update(
        status=Status.ERROR, error_code="RULES_FAILED"
    )
    outcome = api.identification(started.reference).json()["outcome"]
    assert outcome == {
        "code": "failed",
        "message": "The identification did not succeed. Please try again.",
    }


# -- the national identity number ------------------------------------------------------------
def raw_bodies(api: Api, reference: str) -> list[bytes]:
    return [api.identification(reference).content, api.me().content]


def test_the_national_identity_number_is_never_answered(
    broker_api: str, api: Api, broker: ScriptedBroker, eid: Callable[..., None]
) -> None:
    eid(GET_SOCIAL_SECURITY_NUMBER=True)
    started = verified(api, broker)
    # Asked for and stored from each broker API's record, but not answered.
    assert started.refresh().social_security_number == SSN
    for raw in raw_bodies(api, started.reference):
        assert SSN.encode() not in raw
        assert SSN[:6].encode() not in raw  # nor the birth date part
        assert SSN[-5:].encode() not in raw  # nor the personal number
        assert b"social_security_number" not in raw


def test_the_number_is_answered_masked_when_the_site_says_so(
    api: Api, broker: ScriptedBroker, eid: Callable[..., None]
) -> None:
    eid(GET_SOCIAL_SECURITY_NUMBER=True, API_EXPOSE_SOCIAL_SECURITY_NUMBER=True)
    started = verified(api, broker)
    # Only the digits of the date of birth, which the identity tells anyway: with it, the
    # check digits alone would leave a handful of candidates for the whole number.
    masked = SSN[:6] + "\u2022" * (len(SSN) - 6)
    for raw in raw_bodies(api, started.reference):
        assert SSN.encode() not in raw
        assert SSN[6:].encode() not in raw
    assert api.identification(started.reference).json()["identity"]["social_security_number"] == (
        masked
    )
    assert api.me().json()["social_security_number"] == masked


def test_an_unknown_number_is_null_when_exposed(
    api: Api, broker: ScriptedBroker, eid: Callable[..., None]
) -> None:
    eid(API_EXPOSE_SOCIAL_SECURITY_NUMBER=True)  # but the number is not asked for
    started = verified(api, broker)
    assert started.refresh().social_security_number is None
    assert (
        api.identification(started.reference).json()["identity"]["social_security_number"] is None
    )


def test_a_number_under_a_removed_key_is_null_when_exposed(
    api: Api, broker: ScriptedBroker, eid: Callable[..., None]
) -> None:
    old = "o" * 43 + "="
    eid(GET_SOCIAL_SECURITY_NUMBER=True, ENCRYPTION_KEYS=[old])
    started = verified(api, broker)
    eid(API_EXPOSE_SOCIAL_SECURITY_NUMBER=True, ENCRYPTION_KEYS=["n" * 43 + "="])
    identity = api.identification(started.reference).json()["identity"]
    assert identity["social_security_number"] is None
    assert identity["name"] == SAMPLE.name
    me = api.me().json()
    me.pop("links")  # the account's (tests/api/test_links.py)
    assert me == identity


# -- anonymized ----------------------------------------------------------------------------------
def test_an_anonymized_identification_has_no_identity(
    api: Api, broker: ScriptedBroker, eid: Callable[..., None]
) -> None:
    eid(GET_SOCIAL_SECURITY_NUMBER=True, API_EXPOSE_SOCIAL_SECURITY_NUMBER=True)
    started = verified(api, broker)
    Identification.objects.filter(pk=started.pk).update(
        created_at=timezone.now() - datetime.timedelta(days=400)
    )
    call_command("eid_purge", "--anonymize", "--older-than", "365d", stdout=io.StringIO())
    row = started.refresh()
    assert row.anonymized_at is not None
    body = api.identification(started.reference).json()
    assert body["status"] == "SUCCESS"
    assert "identity" not in body
    assert SAMPLE.last_name.encode() not in api.identification(started.reference).content
    assert api.me().json() is None


def test_an_identification_marked_anonymized_shows_nothing_of_what_it_still_holds(
    api: Api, broker: ScriptedBroker
) -> None:
    started = verified(api, broker)
    Identification.objects.filter(pk=started.pk).update(anonymized_at=timezone.now())
    raw = api.identification(started.reference).content
    assert "identity" not in json.loads(raw)
    assert SAMPLE.last_name.encode() not in raw


def test_a_birth_date_in_the_future_is_no_birth_date(api: Api, broker: ScriptedBroker) -> None:
    started = api_start(api, broker)
    url = identified(broker, started, SAME_DEVICE)
    device = {"IPAddress": SAME_DEVICE["ip_address"], "UserAgent": SAME_DEVICE["user_agent"]}
    broker.will_return(
        started.request_id,
        DateOfBirth="2999-01-01",
        SocialSecurityNumber=...,
        EnvironmentInfo=device,
    )
    settled_by_its_return(api, started, url)
    identity = api.identification(started.reference).json()["identity"]
    assert (identity["date_of_birth"], identity["age"]) == (None, None)
