"""The Abort and Error returns.

The Error URL is bound to its session like the others, and ends the row only as the broker's
record says: a broker that cannot confirm leaves the row pending (a reload finishes it), and
the failure's status from the URL is stored as a short printable code.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any
from urllib.parse import urlencode

import pytest
from django.contrib.auth.models import AbstractBaseUser
from django.contrib.messages import get_messages
from django.test import Client

from django_eid.models import Identification
from tests.fixtures_broker import (
    NO_BROKER_IDS,
    REST_APIS,
    RETURN_IS_THE_ANSWER,
    Scripted,
    ScriptedBroker,
    record,
    reply,
)
from tests.fixtures_views import Signals, Started, changed, snapshot
from tests.flow.faults import BROKER_FAULTS
from tests.flow.returns import assert_genuine_completes, pending_refs

pytestmark = pytest.mark.django_db

Status = Identification.Status
ERROR = {"NativeErrorCode": "C307", "ErrorCode": "PKI_BLOCKED", "ErrorMessage": "SIM blocked."}


# -- abort -------------------------------------------------------------------------
def test_abort_marks_the_row_and_returns_to_the_start_page_with_a_message(
    start: Callable[..., Started],
    broker: ScriptedBroker,
    alice_client: Client,
    alice: Any,
    signals: Signals,
    broker_api: str,
) -> None:
    started = start()
    response = alice_client.get(started.abort_url())
    assert response.status_code == 302
    assert response["Location"] == "/eid/start/"
    row = started.refresh()
    assert row.status == Status.ABORTED
    assert row.completed_at is not None
    assert len(broker.get_calls) == 0
    assert signals.names == ["identification_started", "identification_aborted"]
    kwargs = signals.of("identification_aborted")[0]
    assert (kwargs["identification"].pk, kwargs["user"], kwargs["status"]) == (
        row.pk,
        alice,
        Status.ABORTED,
    )
    page = alice_client.get(response["Location"])
    assert [str(m) for m in get_messages(page.wsgi_request)] == [
        "You cancelled the identification."
    ]
    assert "You cancelled the identification." in page.content.decode()
    # Shown once.
    assert "You cancelled" not in alice_client.get(response["Location"]).content.decode()


def test_abort_keeps_next_for_the_next_attempt(
    start: Callable[..., Started], alice_client: Client
) -> None:
    started = start(next="/shop/?a=1&b=2")
    response = alice_client.get(started.abort_url())
    assert response.status_code == 302
    assert response["Location"] == "/eid/start/?next=%2Fshop%2F%3Fa%3D1%26b%3D2"
    page = alice_client.get(response["Location"])
    assert page.context["form"].initial["next"] == "/shop/?a=1&b=2"


def test_abort_url_setting(
    start: Callable[..., Started], alice_client: Client, eid: Callable[..., None]
) -> None:
    eid(ABORT_URL="/cancelled/")
    started = start()
    response = alice_client.get(started.abort_url())
    assert response.status_code == 302
    assert response["Location"] == "/cancelled/"
    assert started.refresh().status == Status.ABORTED


# -- error -------------------------------------------------------------------------
def test_error_marks_the_row_keeps_the_details_and_renders_the_error_page(
    start: Callable[..., Started],
    broker: ScriptedBroker,
    alice_client: Client,
    signals: Signals,
) -> None:
    """v1's Error URL carries the code ([0])."""
    started = start()
    broker.will_return(started.request_id, "ERROR", Error=ERROR)
    response = alice_client.get(started.error_url("TIMEOUT"))
    assert response.status_code == 200
    assert response.templates[0].name == "django_eid/error.html"
    html = response.content.decode()
    assert "Identification failed" in html
    assert 'href="/eid/start/"' in html  # a way to try again
    assert "PKI_BLOCKED" in html
    row = started.refresh()
    assert row.status == Status.ERROR
    assert row.error_status == "TIMEOUT"
    assert (row.error_code, row.error_message) == ("PKI_BLOCKED", "SIM blocked.")
    assert row.completed_at is not None
    assert len(broker.get_calls) == 1
    assert broker.get_calls[0].request.params == {"requestId": started.request_id}
    assert signals.names == ["identification_started", "identification_failed"]
    assert signals.of("identification_failed")[0]["status"] == Status.ERROR
    assert started.row.reference not in pending_refs(alice_client)


def test_error_url_setting(
    start: Callable[..., Started],
    broker: ScriptedBroker,
    alice_client: Client,
    eid: Callable[..., None],
) -> None:
    eid(ERROR_URL="/oops/")
    started = start()
    broker.will_return(started.request_id, "ERROR", Error=ERROR)
    response = alice_client.get(started.error_url("LOGIN"))
    assert response.status_code == 302
    assert response["Location"] == "/oops/"
    assert started.refresh().error_status == "LOGIN"


# -- [0] of the Error URL: an opaque short code, whatever arrives -------------------
BIG = "A" * 10_240
# No usable code in the URL: the record's status (ERROR) is stored.
ERROR_STATUS_QUERIES = {
    "missing": ("", "ERROR"),
    "empty": ("status=", "ERROR"),
    "unsubstituted": ("status=[0]", "ERROR"),
    "percent-encoded placeholder": ("status=%5B0%5D", "ERROR"),
    "duplicated": ("status=TIMEOUT&status=LOGIN", "ERROR"),
    "10 kB": (f"status={BIG}", "A" * 64),
    "unicode": ("status=TIME%C3%98OUT", "TIMEOUT"),
    "NUL": ("status=TIME%00OUT", "TIMEOUT"),
    "only control characters": ("status=%00%01%7F", "UNKNOWN"),
    "CRLF injection": ("status=LOGIN%0D%0ASet-Cookie:%20x=1", "LOGINSet-Cookie:x=1"),
    "markup": ("status=%3Cscript%3Ealert(1)%3C/script%3E", "<script>alert(1)</script>"),
    "normal": ("status=LOGIN", "LOGIN"),
    # Forged ids beside a good status: refused (test_tampered_returns.py).
}


@pytest.mark.parametrize("query", list(ERROR_STATUS_QUERIES), ids=str)
def test_error_status_is_stored_as_a_short_printable_code(
    start: Callable[..., Started],
    alice_client: Client,
    alice: AbstractBaseUser,
    broker: ScriptedBroker,
    signals: Signals,
    query: str,
) -> None:
    """v1's Error URL carries the code ([0])."""
    started = start(ends="error")  # the broker's record says ERROR (ErrorCode TIMEOUT)
    signals.clear()
    qs, stored = ERROR_STATUS_QUERIES[query]
    ids = urlencode({"requestId": started.request_id, "externalId": started.external_id})
    before = snapshot()
    response = alice_client.get(f"{started.path('error')}?{'&'.join(filter(None, [qs, ids]))}")
    assert response.status_code == 200
    assert changed(before, snapshot()) == {started.pk}
    row = started.row
    # [0] from the URL, cleaned; the details from the broker's record.
    assert (row.status, row.error_status, row.error_code) == (Status.ERROR, stored, "TIMEOUT")
    assert signals.calls == [("identification_failed", started.pk, Status.ERROR, alice.pk)]
    assert broker.counts["retrieve"] == 1  # the record, which confirms the failure
    assert b"<script>" not in response.content


@pytest.mark.parametrize(
    "ids",
    [
        {},
        pytest.param(
            {"p1": "another-request"}, marks=pytest.mark.apis(*REST_APIS, reason=NO_BROKER_IDS)
        ),
        {"p2": "0" * 32},
    ],
    ids=["without-ids", "another-request-id", "another-external-id"],
)
def test_an_error_return_is_bound_to_the_session(
    start: Callable[..., Started],
    broker: ScriptedBroker,
    alice_client: Client,
    signals: Signals,
    broker_api: str,
    ids: dict[str, str],
) -> None:
    """A browser alone cannot end a pending row: the Error URL names its session."""
    started = start()
    broker.will_return(started.request_id, "ERROR")
    url = (
        f"{started.path('error')}?status=TIMEOUT"
        if not ids
        else started.error_url("TIMEOUT", **ids)
    )
    # OIDC: the state names the row; a return naming none is a link to nothing.
    assert alice_client.get(url).status_code == (404 if started.is_oidc else 400)
    assert started.refresh().status == Status.PENDING
    assert broker.get_calls == []
    assert signals.names == ["identification_started"]


# -- the Error URL ends the row only as the broker's record says ------------------------
def _error_record(request_id: str, status: str) -> dict[str, Any]:
    error = {"ErrorCode": "E1", "ErrorMessage": "Sorry."} if status != "SUCCESS" else None
    return record(request_id, status, Error=error if error else ...)


#: What the broker answers on retrieval that is no record of the session, and the page.
NO_RECORD: dict[str, tuple[Scripted, int]] = {
    **{name: (fault, 502 if "HTML" in name else 503) for name, fault in BROKER_FAULTS.items()},
    "the session unknown": (reply(404, raw=b""), 502),
    # The record of another session, as v1 and the successors name it.
    "another session's record": (reply(body={**record("other", "ERROR"), "id": "other"}), 502),
    "not a record": (reply(200, ["ERROR"]), 502),
}


@pytest.mark.parametrize(
    ("answer", "code", "outcome"),
    [
        ("ERROR", 200, (Status.ERROR, "identification_failed")),
        # The user cancelled, says the record, whichever URL they came back to.
        ("USERABORTED", 302, (Status.ABORTED, "identification_aborted")),
        ("TIMEOUT", 200, (Status.ERROR, "identification_failed")),
        ("SUCCESS", 302, (Status.SUCCESS, "identification_succeeded")),
        ("CREATED", 409, None),
        ("USERINITIATED", 409, None),
        *((name, code, None) for name, (_, code) in NO_RECORD.items()),
    ],
)
def test_an_error_return_ends_the_row_only_as_the_brokers_record_says(
    start: Callable[..., Started],
    alice_client: Client,
    alice: AbstractBaseUser,
    broker: ScriptedBroker,
    signals: Signals,
    answer: str,
    code: int,
    outcome: tuple[str, str] | None,
) -> None:
    """A genuine-looking Error URL cannot fail a session the broker says succeeded, nor one
    still in progress; a broker that cannot confirm leaves the row pending, consumes
    nothing, and the same URL finishes it once the broker is back. (v1's records and its
    Error URL's [0]; each API's: test_each_apis_record_decides_an_error_return.)"""
    started = start()
    rid = started.request_id
    if answer in NO_RECORD:
        broker.answer_record(rid, NO_RECORD[answer][0])
    else:
        broker.answer_record(rid, _error_record(rid, answer))
    signals.clear()
    before = snapshot()
    url = started.error_url("LOGIN", p1=rid)  # filled by hand: the broker's record is scripted
    response = alice_client.get(url)
    assert response.status_code == code
    assert broker.counts["retrieve"] >= 1
    if outcome is None:  # pending: nothing changed, nothing consumed
        assert (snapshot(), signals.names) == (before, [])
        assert started.reference in pending_refs(alice_client)
        broker.heal()
        broker.fail("TIMEOUT", request_id=rid)
        assert_genuine_completes(alice_client, started, "error", signals, alice)
        return
    status, signal = outcome
    assert changed(before, snapshot()) == {started.pk}
    row = started.row
    assert row.status == status
    assert signals.calls == [(signal, started.pk, status, alice.pk)]
    if status == Status.ERROR:
        assert (row.error_status, row.error_code) == ("LOGIN", "E1")
    elif status == Status.ABORTED:  # back to the start page, which says so
        assert response["Location"] == "/eid/start/"
        assert row.last_name == ""
    else:
        assert response["Location"] == "/"
        assert (row.error_status, row.last_name) == ("", "Nordmann")


@pytest.mark.apis(*REST_APIS, reason=RETURN_IS_THE_ANSWER)
@pytest.mark.parametrize(
    ("answer", "page", "status", "signal"),
    [
        ({"status": "SUCCESS"}, 302, Status.SUCCESS, "identification_succeeded"),
        # The user cancelled, says the record, whichever URL they came back to.
        ({"status": "USERABORTED"}, 302, Status.ABORTED, "identification_aborted"),
        ({"status": "CREATED"}, 409, Status.PENDING, None),
        ({"status": "USERINITIATED"}, 409, Status.PENDING, None),
        ({"answer": {"status": 500}}, 503, Status.PENDING, None),
        ({"answer": {"status": 404, "body": ""}}, 502, Status.PENDING, None),
        # The record of another session, as v1 and the successors name it.
        (
            {"answer": {"json": {"RequestId": "other", "id": "other", "Error": ERROR}}},
            502,
            Status.PENDING,
            None,
        ),
    ],
    ids=[
        "success",
        "user aborted",
        "created",
        "user initiated",
        "broker down",
        "session unknown",
        "another session's",
    ],
)
def test_each_apis_record_decides_an_error_return(
    start: Callable[..., Started],
    broker: ScriptedBroker,
    alice_client: Client,
    signals: Signals,
    broker_api: str,
    answer: dict[str, Any],
    page: int,
    status: str,
    signal: str | None,
) -> None:
    """An Error URL whose session the broker records as a success stores the success; one
    the broker cannot confirm, or records in progress, leaves the row pending."""
    started = start()
    if "status" in answer:
        broker.will_return(started.request_id, answer["status"])
    else:
        broker.will_answer(started.request_id, times=3, **answer["answer"])
    response = alice_client.get(started.error_url("TIMEOUT", p1=started.request_id))
    assert response.status_code == page
    assert started.refresh().status == status
    assert signals.names == ["identification_started", *([signal] if signal else [])]
    assert (started.reference in pending_refs(alice_client)) is (signal is None)
