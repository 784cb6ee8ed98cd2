"""A success callback whose retrieved record is not the user's identification.

A record naming another ``RequestId`` or failing to parse leaves the row PENDING (the same URL
completes once the broker answers properly); a ``Status`` other than ``SUCCESS`` stores an
ERROR and fires ``identification_failed`` once; an in-progress record changes nothing.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from django.contrib.auth.models import AbstractBaseUser
from django.test import Client

from tests.hostile.conftest import (
    FakeBroker,
    Fired,
    Started,
    Status,
    assert_genuine_completes,
    changed,
    record,
    reply,
    snapshot,
)

pytestmark = pytest.mark.django_db


# -- what the broker says on retrieval ------------------------------------------------
@pytest.mark.parametrize(
    "whose", ["another of alice's", "bob's", "a stranger's", "the same, in lower case", "empty"]
)
def test_a_record_of_another_session_is_not_stored(
    start: Callable[..., Started],
    alice_client: Client,
    bob_client: Client,
    alice: AbstractBaseUser,
    broker: FakeBroker,
    fired: Fired,
    whose: str,
) -> None:
    started, other, bobs = start(), start(), start(client=bob_client)
    fired.clear()
    named = {
        "another of alice's": other.request_id,
        "bob's": bobs.request_id,
        "a stranger's": "0" * 200,
        "the same, in lower case": started.request_id.lower(),
        "empty": "",
    }[whose]
    broker.answer_record(started.request_id, record(started.request_id, RequestId=named))
    before = snapshot()
    response = alice_client.get(started.success_url())
    assert response.status_code == 502
    assert snapshot() == before
    assert fired.names == []
    broker.heal(request_id=started.request_id)  # the broker recovers: the same URL completes
    assert_genuine_completes(alice_client, started, "success", fired, alice)


@pytest.mark.parametrize("absent", [..., None])
def test_a_record_that_names_no_session_is_the_one_asked_for(
    start: Callable[..., Started],
    alice_client: Client,
    alice: AbstractBaseUser,
    broker: FakeBroker,
    fired: Fired,
    absent: Any,
) -> None:
    # The published schema requires no field: the id was in the request.
    started = start()
    fired.clear()
    broker.answer_record(started.request_id, record(started.request_id, RequestId=absent))
    response = alice_client.get(started.success_url())
    assert response.status_code == 302
    assert started.row.status == Status.SUCCESS
    assert fired.calls == [("succeeded", started.pk, Status.SUCCESS, alice.pk)]


# (USERABORTED is the user's cancel, whichever URL: tests/flow/test_abort_error.py.)
REFUSED_STATUSES = [
    "ERROR",
    "INVALIDATED",
    "TIMEOUT",
    "UNKNOWN",
    "success",
    "SUCCESS ",
    "SUCCESSFUL",
    "NEW_FUTURE_STATUS",
]


@pytest.mark.parametrize("status", REFUSED_STATUSES)
def test_a_record_that_is_not_success_stores_an_error(
    start: Callable[..., Started],
    alice_client: Client,
    alice: AbstractBaseUser,
    broker: FakeBroker,
    fired: Fired,
    status: str,
) -> None:
    started = start()
    fired.clear()
    error = {"NativeErrorCode": "C307", "ErrorCode": "PKI_BLOCKED", "ErrorMessage": "Blocked."}
    broker.answer_record(started.request_id, record(started.request_id, status, Error=error))
    before = snapshot()
    response = alice_client.get(started.success_url())
    assert response.status_code == 200
    assert changed(before, snapshot()) == {started.pk}
    row = started.row
    assert (row.status, row.error_status, row.error_code) == (Status.ERROR, status, "PKI_BLOCKED")
    assert fired.calls == [("failed", started.pk, Status.ERROR, alice.pk)]
    assert alice_client.get(started.success_url()).status_code == 200
    assert (len(fired.calls), broker.counts["retrieve"]) == (1, 1)


@pytest.mark.parametrize("status", ["CREATED", "USERINITIATED"])
def test_a_record_still_in_progress_leaves_the_session_pending(
    start: Callable[..., Started],
    alice_client: Client,
    alice: AbstractBaseUser,
    broker: FakeBroker,
    fired: Fired,
    status: str,
) -> None:
    started = start()
    fired.clear()
    broker.answer_record(started.request_id, record(started.request_id, status))
    before = snapshot()
    assert alice_client.get(started.success_url()).status_code == 409
    assert (snapshot(), fired.names) == (before, [])
    broker.heal(request_id=started.request_id)
    assert_genuine_completes(alice_client, started, "success", fired, alice)


@pytest.mark.parametrize("kind", ["success", "error"])
@pytest.mark.parametrize("status", ["", None, ...], ids=["empty", "null", "absent"])
def test_a_record_without_a_status_leaves_the_session_pending(
    start: Callable[..., Started],
    alice_client: Client,
    alice: AbstractBaseUser,
    broker: FakeBroker,
    fired: Fired,
    caplog: pytest.LogCaptureFixture,
    status: Any,
    kind: str,
) -> None:
    """A record that cannot say how the session ended decides nothing: not an ERROR for good
    (the broker may answer properly later), a 409 that the user may reload, and a log line."""
    started = start()
    fired.clear()
    rid = started.request_id
    broker.answer_record(rid, record(rid, Status=status))
    before = snapshot()
    url = started.success_url() if kind == "success" else started.error_url(p1=rid)
    assert alice_client.get(url).status_code == 409
    assert (snapshot(), fired.names) == (before, [])
    assert any("has no status" in r.getMessage() for r in caplog.records)
    broker.heal(request_id=rid)
    assert_genuine_completes(alice_client, started, "success", fired, alice)


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
    start: Callable[..., Started],
    alice_client: Client,
    alice: AbstractBaseUser,
    broker: FakeBroker,
    fired: Fired,
    body: dict[str, Any],
) -> None:
    started = start()
    fired.clear()
    broker.fault("retrieve", reply(body=record(started.request_id, **body)))
    before = snapshot()
    assert alice_client.get(started.success_url()).status_code == 502
    assert (snapshot(), fired.names) == (before, [])
    broker.heal()
    assert_genuine_completes(alice_client, started, "success", fired, alice)


@pytest.mark.parametrize("meta", [{"k": 1, "ok": "v"}, ["x"]], ids=["a number", "a list"])
def test_metadata_of_another_type_does_not_stop_the_identification(
    start: Callable[..., Started],
    alice_client: Client,
    alice: AbstractBaseUser,
    broker: FakeBroker,
    fired: Fired,
    meta: Any,
) -> None:
    # Add-on data the identity does not depend on: kept as text, or left out.
    started = start()
    fired.clear()
    broker.answer_record(started.request_id, record(started.request_id, MetaData=meta))
    assert alice_client.get(started.success_url()).status_code == 302
    row = started.row
    assert row.status == Status.SUCCESS
    assert row.metadata == ({"k": "1", "ok": "v"} if isinstance(meta, dict) else {})
    assert row.raw["MetaData"] == meta
    assert fired.calls == [("succeeded", started.pk, Status.SUCCESS, alice.pk)]
