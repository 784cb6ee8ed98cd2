"""The Success callback: the record is fetched once and stored; other statuses and failures."""

from __future__ import annotations

import datetime
import json
from collections.abc import Callable
from typing import Any

import pytest
import requests
from django.db import connection
from django.test import Client

from django_eid import crypto
from django_eid.models import Identification
from tests.fixtures_broker import CODE_IS_SPENT, NO_SESSION_TO_ASK, REST_APIS, SAMPLE
from tests.flow.conftest import SSN, Broker, SignalLog, Started, make_record, new_request_id

pytestmark = pytest.mark.django_db

Status = Identification.Status


def pending_refs(client: Client) -> set[str]:
    return set(client.session.get("django_eid_pending", {}))


@pytest.mark.apis("v1", reason="v1's provider names and Name")
def test_success_stores_the_identity_and_redirects(
    start: Callable[..., Started],
    broker: Broker,
    alice_client: Client,
    alice: Any,
    signal_log: SignalLog,
    eid: Callable[..., None],
) -> None:
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
    assert signal_log.names == ["identification_started", "identification_succeeded"]
    assert signal_log.of("identification_succeeded")[0]["status"] == Status.SUCCESS
    # One-time: the reference left the session.
    assert started.row.reference not in pending_refs(alice_client)


def test_the_success_url_setting_is_the_default_destination(
    start: Callable[..., Started], broker: Broker, alice_client: Client, eid: Callable[..., None]
) -> None:
    started = start()
    broker.will_return(started.request_id)
    assert alice_client.get(started.success_url())["Location"] == "/"
    eid(SUCCESS_URL="/welcome/")
    again = start()
    broker.will_return(again.request_id)
    assert alice_client.get(again.success_url())["Location"] == "/welcome/"


@pytest.mark.apis("v1", reason="v1's raw record")
def test_the_national_identity_number_is_not_in_raw(
    start: Callable[..., Started], broker: Broker, alice_client: Client
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
    start: Callable[..., Started], broker: Broker, alice_client: Client, eid: Callable[..., None]
) -> None:
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


@pytest.mark.apis("v1", reason="a v1 record")
def test_a_record_without_optional_fields_still_identifies(
    start: Callable[..., Started], broker: Broker, alice_client: Client
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
    broker: Broker,
    alice_client: Client,
    signal_log: SignalLog,
    record_status: str,
) -> None:
    started = start()
    broker.will_answer(
        started.request_id, json={"RequestId": started.request_id, "Status": record_status}
    )
    broker.will_return(started.request_id)
    response = alice_client.get(started.success_url())
    assert response.status_code == 409
    assert "not finished yet" in response.content.decode()
    assert started.refresh().status == Status.PENDING
    assert signal_log.names == ["identification_started"]
    assert started.row.reference in pending_refs(alice_client)
    # The same URL, once the user has finished at the broker.
    response = alice_client.get(started.success_url())
    assert response.status_code == 302
    assert started.refresh().status == Status.SUCCESS
    assert len(broker.get_calls) == 2
    assert signal_log.names == ["identification_started", "identification_succeeded"]


# -- a refused record status -----------------------------------------------------


@pytest.mark.apis("v1", reason="v1's statuses and error")
# (USERABORTED is the user's cancel, whichever URL: test_abort_error.py.)
@pytest.mark.parametrize("record_status", ["ERROR", "TIMEOUT", "INVALIDATED", "NEW"])
def test_a_refused_record_status_fails_the_row(
    start: Callable[..., Started],
    broker: Broker,
    alice_client: Client,
    signal_log: SignalLog,
    record_status: str,
) -> None:
    started = start()
    error = {"NativeErrorCode": "C307", "ErrorCode": "PKI_BLOCKED", "ErrorMessage": "SIM blocked."}
    broker.will_return(started.request_id, record_status, Error=error)
    response = alice_client.get(started.success_url())
    assert response.status_code == 200
    assert "Identification failed" in response.content.decode()
    assert "PKI_BLOCKED" in response.content.decode()
    row = started.refresh()
    assert row.status == Status.ERROR
    assert row.error_status == record_status
    assert row.error_code == "PKI_BLOCKED"
    assert row.error_message == "SIM blocked."
    assert row.completed_at is not None
    assert signal_log.names == ["identification_started", "identification_failed"]
    assert signal_log.of("identification_failed")[0]["status"] == Status.ERROR


@pytest.mark.apis("v1", reason="v1's Error object")
def test_the_native_error_code_is_kept_without_an_error_code(
    start: Callable[..., Started], broker: Broker, alice_client: Client
) -> None:
    started = start()
    broker.will_return(started.request_id, "ERROR", Error={"NativeErrorCode": "C161"})
    alice_client.get(started.success_url())
    row = started.refresh()
    assert (row.status, row.error_code, row.error_message) == (Status.ERROR, "C161", "")


# -- a record of another session ------------------------------------------------------


@pytest.mark.apis("v1", reason="v1's RequestId (the successors' id check: tests/brokers)")
def test_a_record_with_another_request_id_is_not_stored(
    start: Callable[..., Started],
    broker: Broker,
    alice_client: Client,
    signal_log: SignalLog,
) -> None:
    started = start()
    broker.will_answer(started.request_id, json=make_record(new_request_id()))
    broker.will_return(started.request_id)
    response = alice_client.get(started.success_url())
    assert response.status_code == 502
    row = started.refresh()
    assert row.status == Status.PENDING
    assert row.first_name == ""
    assert row.social_security_number is None
    assert signal_log.names == ["identification_started"]
    # Not consumed: once the broker answers the right record, the same URL completes.
    assert alice_client.get(started.success_url()).status_code == 302
    assert started.refresh().status == Status.SUCCESS


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
    broker: Broker,
    alice_client: Client,
    signal_log: SignalLog,
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
    assert started.refresh().status == Status.PENDING
    assert signal_log.names == ["identification_started"]
    assert started.row.reference in pending_refs(alice_client)
    # The same URL later completes.
    response = alice_client.get(started.success_url())
    assert response.status_code == 302
    assert started.refresh().status == Status.SUCCESS
    assert signal_log.names == ["identification_started", "identification_succeeded"]


@pytest.mark.apis(
    "v1", reason="v1's request ids (the successors' session ids are checked for shape)"
)
def test_a_request_id_with_reserved_characters(
    start: Callable[..., Started], broker: Broker, alice_client: Client
) -> None:
    """The broker URL-encodes what it substitutes; the app compares the decoded value."""
    request_id = "3391840571230098455xkQJ+rTgWL4Aq7/RsIemzU8umZ=SsYNWcEFH1PbCVkdfHZjb6tfny%20"
    started = start(request_id=request_id)
    broker.will_return(request_id)
    response = alice_client.get(started.success_url())
    assert response.status_code == 302
    assert started.refresh().status == Status.SUCCESS
    assert broker.get_calls[0].request.params == {"requestId": request_id}
