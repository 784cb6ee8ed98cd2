"""The identifications' metrics: :func:`django_eid.telemetry.record_event` (the audit trail
calls it once an event's transaction committed) and :func:`~django_eid.telemetry.refused`."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from django.test import Client

from django_eid import audit, telemetry
from django_eid.models import Identification
from tests.door.conftest import LOGIN
from tests.fixtures_broker import ScriptedBroker
from tests.fixtures_views import Started
from tests.telemetry.conftest import Recorded

START = "/eid/start/"
EVENT: dict[str, Any] = {
    "status": "SUCCESS",
    "outcome": "",
    "purpose": "verify",
    "broker_api": "v2",
    "provider": "NO_BANKID",
    "display": "redirect",
    "duration_ms": None,
}
WHO = {
    "eid.broker.api": "v2",
    "eid.provider": "NO_BANKID",
    "eid.purpose": "verify",
    "eid.display": "redirect",
}


def event(kind: str, **values: Any) -> None:
    telemetry.record_event(kind=kind, finishing=kind in audit.FINISHING, **{**EVENT, **values})


# -- record_event ------------------------------------------------------------------------
def test_a_start_counts_by_its_status(otel: Recorded) -> None:
    event("started", status="PENDING", provider="")
    event("started", status="ERROR", provider="")
    assert sorted(
        (p.attributes["eid.status"], p.value) for p in otel.points("eid.identifications.started")
    ) == [("ERROR", 1), ("PENDING", 1)]
    # No provider chosen yet: the attribute is left out, not empty.
    assert all("eid.provider" not in p.attributes for p in otel.points())


@pytest.mark.parametrize("kind", sorted(audit.FINISHING))
def test_each_way_out_of_pending_counts_as_finished_with_its_duration(
    otel: Recorded, kind: str
) -> None:
    event(kind, status="ABORTED", outcome="cancelled", duration_ms=61_500)
    ended = {**WHO, "eid.status": "ABORTED", "eid.outcome": "cancelled"}
    (finished,) = otel.points("eid.identifications.finished")
    assert (finished.attributes, finished.value) == (ended, 1)
    (duration,) = otel.points("eid.identification.duration")
    assert (duration.attributes, duration.value, duration.sum) == (ended, 1, 61.5)


def test_a_finish_without_a_duration_records_none(otel: Recorded) -> None:
    event("finished", duration_ms=None)
    assert otel.total("eid.identifications.finished", eid_status="SUCCESS") == 1
    assert otel.points("eid.identification.duration") == []


def test_a_rejection_after_success_is_counted_apart_not_as_a_second_finish(
    otel: Recorded,
) -> None:
    event("finished", duration_ms=1000)
    event("rejected", status="REJECTED", outcome="underage")
    assert otel.total("eid.identifications.finished") == 1
    (rejected,) = otel.points("eid.identifications.rejected")
    assert rejected.attributes == {**WHO, "eid.outcome": "underage"}


def test_a_failed_broker_call_counts_as_a_broker_error(otel: Recorded) -> None:
    event("broker_error", status="PENDING", outcome="EidUnavailable")
    (error,) = otel.points("eid.broker.errors")
    assert error.attributes == {**WHO, "eid.outcome": "EidUnavailable"}


@pytest.mark.parametrize("kind", ["purged", "anonymized", "linked", "bound", "unknown"])
def test_the_other_events_are_no_metric(otel: Recorded, kind: str) -> None:
    event(kind)
    assert otel.points() == []


def test_refused_counts_the_code(otel: Recorded) -> None:
    telemetry.refused("too_many_pending")
    (point,) = otel.points("eid.refusals")
    assert (point.attributes, point.value) == ({"eid.outcome": "too_many_pending"}, 1)


# -- through the flow ----------------------------------------------------------------------
@pytest.fixture
def committed(django_capture_on_commit_callbacks: Any) -> Callable[[], Any]:
    """``with committed():`` runs the block's on_commit callbacks at its end: the audit
    trail's calls of ``record_event`` (the test's own transaction never commits)."""
    return lambda: django_capture_on_commit_callbacks(execute=True)


@pytest.mark.django_db
def test_a_success_through_the_flow_is_started_finished_and_timed(
    otel: Recorded, committed: Callable[[], Any], verify: Callable[..., Identification]
) -> None:
    with committed():
        row = verify()
    (started,) = otel.points("eid.identifications.started")
    assert started.attributes == {
        "eid.broker.api": "v1",
        "eid.purpose": "verify",
        "eid.display": "redirect",
        "eid.status": "PENDING",
    }
    (finished,) = otel.points("eid.identifications.finished")
    assert finished.attributes == {
        "eid.broker.api": "v1",
        "eid.provider": row.identity_provider,
        "eid.purpose": "verify",
        "eid.display": "redirect",
        "eid.status": "SUCCESS",
    }
    (duration,) = otel.points("eid.identification.duration")
    assert duration.value == 1


@pytest.mark.django_db
def test_an_abort_through_the_flow_finishes_aborted(
    otel: Recorded,
    committed: Callable[[], Any],
    start: Callable[..., Started],
    alice_client: Client,
) -> None:
    with committed():
        started = start(ends="abort")
        alice_client.get(started.abort_url())
    assert started.refresh().status == "ABORTED"
    (finished,) = otel.points("eid.identifications.finished")
    assert finished.attributes["eid.status"] == "ABORTED"
    assert otel.total("eid.identifications.started", eid_status="PENDING") == 1


@pytest.mark.django_db
def test_a_broker_outage_at_the_start_is_a_start_in_error_and_a_broker_error(
    otel: Recorded, committed: Callable[[], Any], broker: ScriptedBroker, alice_client: Client
) -> None:
    broker.will_fail_create(500)
    with committed():
        alice_client.post(START)
    assert Identification.objects.get().status == "ERROR"
    assert otel.total("eid.identifications.started") == 1
    errors = otel.points("eid.broker.errors")
    assert [p.attributes["eid.outcome"] for p in errors] == ["EidUnavailable"]


@pytest.mark.django_db
def test_a_start_past_the_pending_limit_is_a_refusal(
    otel: Recorded,
    start: Callable[..., Started],
    alice_client: Client,
    eid: Callable[..., None],
) -> None:
    eid(MAX_PENDING_PER_USER=1)
    start()
    assert alice_client.post(START).status_code == 429
    (point,) = otel.points("eid.refusals")
    assert (point.attributes, point.value) == ({"eid.outcome": "too_many_pending"}, 1)


@pytest.mark.django_db
def test_a_start_past_the_door_caps_is_a_refusal(
    otel: Recorded, broker: ScriptedBroker, eid: Callable[..., None]
) -> None:
    eid(LOGIN_MAX_PENDING_PER_SESSION=None, LOGIN_RATE="1/h")
    statuses = [Client().post(LOGIN, {"purpose": "login"}).status_code for _ in range(3)]
    assert statuses == [302, 429, 429]
    (point,) = otel.points("eid.refusals")
    assert (point.attributes, point.value) == ({"eid.outcome": "too_many_starts"}, 2)


def test_outcomes_a_browser_can_choose_do_not_grow_the_series(
    otel: Recorded, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An Error URL's status is the browser's to choose: past MAX_OUTCOMES codes, ``other``."""
    monkeypatch.setattr(telemetry, "_outcomes_seen", set())
    monkeypatch.setattr(telemetry, "MAX_OUTCOMES", 2)
    for outcome in ("a1", "a2", "a3", "a4", "a1"):
        event("returned", status="ERROR", outcome=outcome)
    seen = {
        (p.attributes["eid.outcome"], p.value) for p in otel.points("eid.identifications.finished")
    }
    assert seen == {("a1", 2), ("a2", 1), ("other", 2)}
