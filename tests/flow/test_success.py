"""The Success return: the record is fetched once and stored; other statuses and failures.

A record naming another ``RequestId`` or failing to parse leaves the row PENDING (the same URL
completes once the broker answers properly); a ``Status`` other than ``SUCCESS`` stores an
ERROR and sends ``identification_failed`` once; an in-progress record changes nothing.
"""

from __future__ import annotations

import datetime
import json
from collections.abc import Callable
from typing import Any

import pytest
import requests
from django.contrib.auth.models import AbstractBaseUser
from django.db import connection
from django.test import Client

from django_eid import crypto
from django_eid.models import Identification
from tests.fixtures_broker import (
    CODE_IS_SPENT,
    NO_SESSION_TO_ASK,
    REST_APIS,
    SAMPLE,
    SSN,
    ScriptedBroker,
    record,
    reply,
)
from tests.fixtures_views import Signals, Started, changed, snapshot
from tests.flow.returns import Ended, assert_pending_then_completes, pending_refs

pytestmark = pytest.mark.django_db

Status = Identification.Status


def test_success_stores_the_identity_and_redirects(
    start: Callable[..., Started],
    broker: ScriptedBroker,
    alice_client: Client,
    alice: Any,
    signals: Signals,
    eid: Callable[..., None],
) -> None:
    """v1's record (the other APIs': tests/brokers)."""
    eid(GET_SOCIAL_SECURITY_NUMBER=True)
    started = start(next="/account/")
    broker.will_return(started.request_id)
    response = alice_client.get(started.success_url())
    assert response.status_code == 302
    assert response["Location"] == "/account/"
    assert len(broker.get_calls) == 1
    row = started.refresh()
    assert row.status == Status.SUCCESS
    assert row.user == alice
    # The sample person's fields, as the record carried them.
    assert row.identity_provider == "NO_BANKID_WEB"
    assert row.identity_provider_unique_id == "9578-6000-4-112233"
    assert (row.name, row.first_name, row.middle_name, row.last_name) == (
        "Nordmann, Kari Marie",
        "Kari",
        "Marie",
        "Nordmann",
    )
    assert row.date_of_birth == datetime.date(1985, 3, 14) == SAMPLE.birth_date
    assert row.social_security_number == SSN
    assert row.user_agent == SAMPLE.user_agent
    assert row.ip_address == SAMPLE.ip_address
    assert row.completed_at is not None
    assert row.completed_at >= row.created_at
    assert (row.error_status, row.error_code, row.error_message) == ("", "", "")
    assert signals.names == ["identification_started", "identification_succeeded"]
    assert signals.of("identification_succeeded")[0]["status"] == Status.SUCCESS
    # One-time: the reference left the session.
    assert started.row.reference not in pending_refs(alice_client)


def test_the_success_url_setting_is_the_default_destination(
    start: Callable[..., Started],
    broker: ScriptedBroker,
    alice_client: Client,
    eid: Callable[..., None],
) -> None:
    started = start()
    broker.will_return(started.request_id)
    assert alice_client.get(started.success_url())["Location"] == "/"
    eid(SUCCESS_URL="/welcome/")
    again = start()
    broker.will_return(again.request_id)
    assert alice_client.get(again.success_url())["Location"] == "/welcome/"


def test_the_national_identity_number_is_not_in_raw(
    start: Callable[..., Started], broker: ScriptedBroker, alice_client: Client
) -> None:
    started = start()
    broker.will_return(started.request_id, MetaData={"k": "v"}, Extra="kept")
    alice_client.get(started.success_url())
    row = started.refresh()
    assert SSN not in json.dumps(row.raw)
    assert not any(k.lower() == "socialsecuritynumber" for k in row.raw)
    assert row.raw["RequestId"] == started.request_id
    assert row.raw["Extra"] == "kept"
    assert row.raw["FirstName"] == "Kari"
    assert row.metadata == {"k": "v"}


def test_the_national_identity_number_is_encrypted_in_the_database(
    start: Callable[..., Started],
    broker: ScriptedBroker,
    alice_client: Client,
    eid: Callable[..., None],
    broker_api: str,
) -> None:
    """Each API asks for the number (GET_SOCIAL_SECURITY_NUMBER: v1's flag, the eID Hub's
    attribute, OpenID Connect's scope) and delivers it; stored, it is encrypted."""
    eid(GET_SOCIAL_SECURITY_NUMBER=True)
    started = start()
    broker.will_return(started.request_id)
    alice_client.get(started.success_url())
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT social_security_number, social_security_number_hash "
            "FROM django_eid_identification WHERE id = %s",
            [started.row.pk],
        )
        stored, stored_hash = cursor.fetchone()
        cursor.execute("SELECT * FROM django_eid_identification WHERE id = %s", [started.row.pk])
        whole_row = cursor.fetchone()
    assert SSN not in stored
    assert stored.startswith("gAAAAA")  # a Fernet token
    assert crypto.decrypt(stored) == SSN
    assert all(SSN not in str(value) for value in whole_row)
    assert stored_hash == crypto.lookup_hash(SSN)
    # Readable in Python, and found through the keyed hash.
    assert started.refresh().social_security_number == SSN
    assert list(Identification.objects.with_social_security_number(SSN)) == [started.row]
    assert not Identification.objects.with_social_security_number("01010112345").exists()


def test_a_record_without_optional_fields_still_identifies(
    start: Callable[..., Started], broker: ScriptedBroker, alice_client: Client
) -> None:
    started = start()
    broker.will_answer(
        started.request_id,
        json={"RequestId": started.request_id, "Status": "SUCCESS", "MiddleName": None},
    )
    response = alice_client.get(started.success_url())
    assert response.status_code == 302
    row = started.refresh()
    assert row.status == Status.SUCCESS
    assert row.social_security_number is None
    assert row.social_security_number_hash is None
    assert row.date_of_birth is None
    assert row.age is None
    assert row.middle_name == ""


# -- a record still in progress -------------------------------------------------


@pytest.mark.apis(*REST_APIS, reason=NO_SESSION_TO_ASK)
@pytest.mark.parametrize("record_status", ["CREATED", "USERINITIATED"])
def test_a_record_in_progress_leaves_the_row_pending(
    start: Callable[..., Started],
    broker: ScriptedBroker,
    alice_client: Client,
    signals: Signals,
    broker_api: str,
    record_status: str,
) -> None:
    started = start()
    broker.will_answer(
        started.request_id, json={"RequestId": started.request_id, "Status": record_status}
    )
    broker.will_return(started.request_id)
    before = snapshot()
    response = alice_client.get(started.success_url())
    assert snapshot() == before
    assert response.status_code == 409
    assert "not finished yet" in response.content.decode()
    # Nothing kept of it; the same URL completes once the user has finished at the broker.
    assert_pending_then_completes(alice_client, started, signals)
    assert len(broker.get_calls) == 2


# -- a refused record status -----------------------------------------------------
# (USERABORTED is the user's cancel, whichever URL: test_abort_error.py.)
REFUSED_STATUSES = [
    "ERROR",
    "INVALIDATED",
    "TIMEOUT",
    "UNKNOWN",
    "NEW",
    "success",
    "SUCCESS ",
    "SUCCESSFUL",
    "NEW_FUTURE_STATUS",
]


@pytest.mark.parametrize("record_status", REFUSED_STATUSES)
def test_a_record_that_is_not_success_stores_an_error(
    ended_at_the_broker: Callable[..., Ended],
    alice_client: Client,
    alice: AbstractBaseUser,
    broker: ScriptedBroker,
    signals: Signals,
    record_status: str,
) -> None:
    """v1's statuses and Error object (the other APIs': tests/brokers)."""
    ended = ended_at_the_broker("success")
    started = ended.started
    error = {"NativeErrorCode": "C307", "ErrorCode": "PKI_BLOCKED", "ErrorMessage": "SIM blocked."}
    ended.record_says(record_status, Error=error)
    response = alice_client.get(started.success_url())
    assert response.status_code == 200
    assert "Identification failed" in response.content.decode()
    assert "PKI_BLOCKED" in response.content.decode()
    assert changed(ended.before, snapshot()) == {started.pk}
    row = started.row
    assert (row.status, row.error_status) == (Status.ERROR, record_status)
    assert (row.error_code, row.error_message) == ("PKI_BLOCKED", "SIM blocked.")
    assert row.completed_at is not None
    assert signals.calls == [("identification_failed", started.pk, Status.ERROR, alice.pk)]
    # A reload shows the same, asks the broker nothing, sends nothing.
    assert alice_client.get(started.success_url()).status_code == 200
    assert (len(signals.calls), broker.counts["retrieve"]) == (1, 1)


def test_the_native_error_code_is_kept_without_an_error_code(
    start: Callable[..., Started], broker: ScriptedBroker, alice_client: Client
) -> None:
    started = start()
    broker.will_return(started.request_id, "ERROR", Error={"NativeErrorCode": "C161"})
    alice_client.get(started.success_url())
    row = started.refresh()
    assert (row.status, row.error_code, row.error_message) == (Status.ERROR, "C161", "")


@pytest.mark.parametrize("status", ["", None, ...], ids=["empty", "null", "absent"])
@pytest.mark.parametrize("kind", ["success", "error"])
def test_a_record_without_a_status_leaves_the_session_pending(
    ended_at_the_broker: Callable[..., Ended],
    alice_client: Client,
    broker: ScriptedBroker,
    signals: Signals,
    caplog: pytest.LogCaptureFixture,
    status: Any,
    kind: str,
) -> None:
    """A record that cannot say how the session ended decides nothing: not an ERROR for good
    (the broker may answer properly later), a 409 that the user may reload, and a log line."""
    ended = ended_at_the_broker("success")
    ended.record_says(Status=status)
    rid = ended.started.request_id
    url = ended.started.success_url() if kind == "success" else ended.started.error_url(p1=rid)
    assert alice_client.get(url).status_code == 409
    assert (snapshot(), signals.names) == (ended.before, [])
    assert any("has no status" in r.getMessage() for r in caplog.records)
    broker.heal(request_id=rid)
    ended.assert_genuine_completes()


# -- a record that is not this session's, or not a record ------------------------------
@pytest.mark.parametrize(
    "whose", ["another of alice's", "bob's", "a stranger's", "the same, in lower case", "empty"]
)
def test_a_record_of_another_session_is_not_stored(
    start: Callable[..., Started],
    ended_at_the_broker: Callable[..., Ended],
    alice_client: Client,
    bob_client: Client,
    broker: ScriptedBroker,
    signals: Signals,
    whose: str,
) -> None:
    """v1's RequestId (the successors' id check: tests/brokers)."""
    other, bobs = start(ends="success"), start(client=bob_client, ends="success")
    ended = ended_at_the_broker("success")
    started = ended.started
    named = {
        "another of alice's": other.request_id,
        "bob's": bobs.request_id,
        "a stranger's": "0" * 200,
        "the same, in lower case": started.request_id.lower(),
        "empty": "",
    }[whose]
    ended.record_says(RequestId=named)
    response = alice_client.get(started.success_url())
    assert response.status_code == 502
    assert snapshot() == ended.before
    assert signals.names == []
    assert started.reference in pending_refs(alice_client)
    broker.heal(request_id=started.request_id)  # the broker recovers: the same URL completes
    ended.assert_genuine_completes()


@pytest.mark.parametrize("absent", [..., None])
def test_a_record_that_names_no_session_is_the_one_asked_for(
    ended_at_the_broker: Callable[..., Ended], absent: Any
) -> None:
    # The published schema requires no field: the id was in the request.
    ended = ended_at_the_broker("success")
    ended.record_says(RequestId=absent)
    ended.assert_genuine_completes()


@pytest.mark.parametrize(
    "body",
    [
        {"Status": 123},
        {"EnvironmentInfo": "x"},
        {"Error": ["x"]},
        {"SocialSecurityNumber": 31127112345},
        {"RequestId": 42},
    ],
    ids=["status number", "env string", "error list", "ssn number", "id number"],
)
def test_a_record_that_fails_to_parse_leaves_the_session_pending(
    ended_at_the_broker: Callable[..., Ended],
    alice_client: Client,
    broker: ScriptedBroker,
    signals: Signals,
    body: dict[str, Any],
) -> None:
    ended = ended_at_the_broker("success")
    broker.fault("retrieve", reply(body=record(ended.started.request_id, **body)))
    assert alice_client.get(ended.started.success_url()).status_code == 502
    assert (snapshot(), signals.names) == (ended.before, [])
    broker.heal()
    ended.assert_genuine_completes()


@pytest.mark.parametrize("meta", [{"k": 1, "ok": "v"}, ["x"]], ids=["a number", "a list"])
def test_metadata_of_another_type_does_not_stop_the_identification(
    ended_at_the_broker: Callable[..., Ended], meta: Any
) -> None:
    # Add-on data the identity does not depend on: kept as text, or left out.
    ended = ended_at_the_broker("success")
    ended.record_says(MetaData=meta)
    ended.assert_genuine_completes()
    row = ended.started.row
    assert row.metadata == ({"k": "1", "ok": "v"} if isinstance(meta, dict) else {})
    assert row.raw["MetaData"] == meta


# -- the broker fails at retrieval ----------------------------------------------------


@pytest.mark.parametrize(
    ("answer", "times", "page_status"),
    [
        ({"status": 503}, 3, 503),  # retried, then unavailable
        ({"body": requests.ConnectionError("refused")}, 3, 503),
        *(
            pytest.param(*case, marks=pytest.mark.apis(*REST_APIS, reason=CODE_IS_SPENT))
            for case in (
                ({"status": 400, "json": {"message": "bad requestId"}}, 1, 502),
                ({"status": 404, "body": ""}, 1, 502),
                ({"status": 200, "body": "<html>maintenance</html>"}, 1, 502),
            )
        ),
    ],
)
def test_a_broker_failure_at_retrieval_keeps_the_row_pending(
    start: Callable[..., Started],
    broker: ScriptedBroker,
    alice_client: Client,
    signals: Signals,
    broker_api: str,
    answer: dict[str, Any],
    times: int,
    page_status: int,
) -> None:
    started = start()
    # OIDC: the single-use code's exchange is tried once (the provider never saw it).
    times = 1 if started.is_oidc else times
    broker.will_answer(started.request_id, times=times, **answer)
    broker.will_return(started.request_id)
    response = alice_client.get(started.success_url())
    assert response.status_code == page_status
    assert "Reload this page to try again" in response.content.decode()
    assert len(broker.get_calls) == times
    # Nothing kept of it; the same URL completes later.
    assert_pending_then_completes(alice_client, started, signals)


def test_a_request_id_with_reserved_characters(
    start: Callable[..., Started], broker: ScriptedBroker, alice_client: Client
) -> None:
    """The broker URL-encodes what it substitutes; the app compares the decoded value (v1's
    request ids: the successors' session ids are checked for shape)."""
    request_id = "3391840571230098455xkQJ+rTgWL4Aq7/RsIemzU8umZ=SsYNWcEFH1PbCVkdfHZjb6tfny%20"
    started = start(request_id=request_id)
    broker.will_return(request_id)
    response = alice_client.get(started.success_url())
    assert response.status_code == 302
    assert started.refresh().status == Status.SUCCESS
    assert broker.get_calls[0].request.params == {"requestId": request_id}
