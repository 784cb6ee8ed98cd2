"""Refusals and replays: other users, other browsers, tampered URLs, expiry, double callbacks."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any
from urllib.parse import quote

import pytest
from django.test import Client, RequestFactory

from django_eid import flow
from django_eid.models import Identification
from tests.fixtures_broker import NO_BROKER_IDS, REST_APIS
from tests.flow.conftest import Broker, SignalLog, Started

pytestmark = pytest.mark.django_db

Status = Identification.Status


def snapshot(row: Identification) -> dict[str, Any]:
    return dict(Identification.objects.filter(pk=row.pk).values().get())


def pending_refs(client: Client) -> set[str]:
    return set(client.session.get("django_eid_pending", {}))


# -- replay -------------------------------------------------------------------------


def test_a_second_success_hit_fetches_nothing_and_sends_nothing(
    start: Callable[..., Started], broker: Broker, alice_client: Client, signal_log: SignalLog
) -> None:
    started = start(next="/account/")
    broker.will_return(started.request_id)
    broker.will_return(started.request_id)
    first = alice_client.get(started.success_url())
    second = alice_client.get(started.success_url())
    assert (first.status_code, second.status_code) == (302, 302)
    assert first["Location"] == second["Location"] == "/account/"
    assert len(broker.get_calls) == 1
    assert signal_log.names == ["identification_started", "identification_succeeded"]


def test_a_second_abort_hit_is_idempotent(
    start: Callable[..., Started], alice_client: Client, signal_log: SignalLog
) -> None:
    started = start()
    first = alice_client.get(started.abort_url())
    second = alice_client.get(started.abort_url())
    assert first["Location"] == second["Location"] == "/eid/start/"
    assert signal_log.names == ["identification_started", "identification_aborted"]


@pytest.mark.apis("v1", reason="v1's Error URL carries the code ([0])")
def test_a_second_error_hit_is_idempotent(
    start: Callable[..., Started], broker: Broker, alice_client: Client, signal_log: SignalLog
) -> None:
    started = start()
    broker.will_return(started.request_id, "ERROR")
    broker.will_return(started.request_id, "ERROR")
    first = alice_client.get(started.error_url("TIMEOUT"))
    second = alice_client.get(started.error_url("LOGIN"))
    assert (first.status_code, second.status_code) == (200, 200)
    assert first.content == second.content
    assert len(broker.get_calls) == 1
    assert started.refresh().error_status == "TIMEOUT"
    assert signal_log.names == ["identification_started", "identification_failed"]


def test_a_finished_session_does_not_change_through_another_callback(
    start: Callable[..., Started], broker: Broker, alice_client: Client, signal_log: SignalLog
) -> None:
    started = start()
    broker.will_return(started.request_id)
    alice_client.get(started.success_url())
    response = alice_client.get(started.abort_url())
    assert response.status_code == 302
    assert response["Location"] == "/"  # where the success sent the user
    assert started.refresh().status == Status.SUCCESS
    assert signal_log.names == ["identification_started", "identification_succeeded"]


def test_one_transition_when_two_callbacks_race(
    start: Callable[..., Started], signal_log: SignalLog
) -> None:
    """Two requests each loaded the row while it was pending; only the first acts."""
    started = start()
    first = Identification.objects.get(pk=started.row.pk)
    second = Identification.objects.get(pk=started.row.pk)
    request = RequestFactory().get("/")
    flow.abort(first, request)
    flow.fail(second, request, "TIMEOUT")
    assert second.status == Status.ABORTED  # refreshed, not overwritten
    assert started.refresh().status == Status.ABORTED
    assert started.row.error_status == ""
    assert signal_log.names == ["identification_started", "identification_aborted"]


def test_a_failure_keeps_a_short_status_whoever_calls_it(start: Callable[..., Started]) -> None:
    started = start()
    flow.fail(started.row, RequestFactory().get("/"), "E" * 500)
    assert started.refresh().error_status == "E" * 64


# -- other users ----------------------------------------------------------------------


@pytest.mark.parametrize("callback", ["success", "abort", "error"])
def test_another_user_cannot_finish_the_session(
    start: Callable[..., Started],
    broker: Broker,
    alice_client: Client,
    bob_client: Client,
    signal_log: SignalLog,
    callback: str,
) -> None:
    started = start()
    before = snapshot(started.row)
    broker.will_return(started.request_id)
    url = getattr(started, f"{callback}_url")()
    response = bob_client.get(url)
    assert response.status_code == 404
    assert snapshot(started.row) == before
    assert len(broker.get_calls) == 0
    assert signal_log.names == ["identification_started"]
    # Alice still can.
    assert alice_client.get(started.success_url()).status_code == 302
    assert started.refresh().status == Status.SUCCESS


def test_another_user_cannot_see_the_result_page(
    start: Callable[..., Started], broker: Broker, alice_client: Client, bob_client: Client
) -> None:
    started = start()
    broker.will_return(started.request_id, "ERROR")
    alice_client.get(started.error_url())
    result = f"/eid/result/{started.row.reference}/"
    assert alice_client.get(result).status_code == 200
    response = bob_client.get(result)
    assert response.status_code == 404
    assert started.row.external_id not in response.content.decode()


def test_the_result_page_of_a_pending_or_unknown_session_is_404(
    start: Callable[..., Started], alice_client: Client, client: Client
) -> None:
    started = start()
    assert alice_client.get(f"/eid/result/{started.row.reference}/").status_code == 404
    assert alice_client.get("/eid/result/" + "A" * 32 + "/").status_code == 404
    assert client.get(f"/eid/result/{started.row.reference}/").status_code == 302  # login


@pytest.mark.parametrize("reference", ["A" * 32, "short", "A" * 65, "bad.reference.value"])
def test_an_unknown_reference_is_404(
    start: Callable[..., Started], alice_client: Client, reference: str
) -> None:
    started = start()
    url = started.success_url().replace(started.row.reference, reference)
    if started.is_oidc:  # the one callback URL: its state names the identification
        url = started.success_url(p2=reference)
    assert alice_client.get(url).status_code == 404
    assert started.refresh().status == Status.PENDING


# -- missing and tampered placeholders ---------------------------------------------------


def _query(started: Started, callback: str, query: str) -> str:
    path = getattr(started, f"{callback}_url")().split("?")[0]
    return f"{path}?{query}"


def _flip(value: str) -> str:
    """``value`` with its last character changed."""
    return value[:-1] + ("1" if value[-1] == "0" else "0")


#: case -> (query from the quoted request id and the external id, the reason logged)
TAMPERED: dict[str, tuple[Callable[[str, str], str], str]] = {
    # (Without a request id, or an empty one, a return is django-eid's own URL: accepted.)
    "externalId missing": (lambda rid, ext: f"requestId={rid}", "externalId missing"),
    "nothing": (lambda rid, ext: "", "externalId missing"),
    "requestId changed": (
        lambda rid, ext: f"requestId={_flip(rid)}&externalId={ext}",
        "requestId does not match",
    ),
    "externalId changed": (
        lambda rid, ext: f"requestId={rid}&externalId={_flip(ext)}",
        "externalId does not match",
    ),
    "externalId of the request": (
        lambda rid, ext: f"requestId={rid}&externalId={rid}",
        "externalId does not match",
    ),
    "requestId twice": (
        lambda rid, ext: f"requestId={rid}&requestId={rid}&externalId={ext}",
        "requestId given 2 times",
    ),
    "externalId twice": (
        lambda rid, ext: f"requestId={rid}&externalId={ext}&externalId=x",
        "externalId given 2 times",
    ),
    "[2] left": (lambda rid, ext: f"requestId={rid}&externalId=[2]", "externalId missing"),
    "both left": (lambda rid, ext: "requestId=[1]&externalId=[2]", "externalId missing"),
    "requestId too long": (
        lambda rid, ext: f"requestId={rid * 3}&externalId={ext}",
        "requestId too long",
    ),
}


@pytest.mark.apis(
    "v1", reason="v1's placeholders (the successors' ids: tests/brokers/test_flow_per_api.py)"
)
@pytest.mark.parametrize(
    ("callback", "outcome"), [("success", Status.SUCCESS), ("abort", Status.ABORTED)]
)
@pytest.mark.parametrize("case", sorted(TAMPERED))
def test_missing_or_tampered_placeholders_are_refused_and_consume_nothing(
    start: Callable[..., Started],
    broker: Broker,
    alice_client: Client,
    signal_log: SignalLog,
    caplog: pytest.LogCaptureFixture,
    callback: str,
    outcome: str,
    case: str,
) -> None:
    started = start()
    before = snapshot(started.row)
    broker.will_return(started.request_id)
    make_query, reason = TAMPERED[case]
    rid, ext = quote(started.request_id, safe=""), started.row.external_id
    response = alice_client.get(_query(started, callback, make_query(rid, ext)))
    assert response.status_code == 400
    assert "did not match" in response.content.decode()
    assert snapshot(started.row) == before
    assert len(broker.get_calls) == 0
    assert signal_log.names == ["identification_started"]
    assert started.row.reference in pending_refs(alice_client)
    refusals = [r.getMessage() for r in caplog.records if "Refused a callback" in r.getMessage()]
    assert refusals == [f"Refused a callback of identification {started.row.pk}: {reason}"]
    # The genuine callback still works.
    genuine = getattr(started, f"{callback}_url")()
    assert alice_client.get(genuine).status_code == 302
    assert started.refresh().status == outcome


@pytest.mark.apis(*REST_APIS, reason=NO_BROKER_IDS)
def test_another_sessions_placeholders_are_refused(
    start: Callable[..., Started], broker: Broker, alice_client: Client
) -> None:
    mine, other = start(), start()
    broker.will_return(mine.request_id)
    broker.will_return(other.request_id)
    swapped = mine.success_url(p1=other.request_id, p2=other.row.external_id)
    assert alice_client.get(swapped).status_code == 400
    assert (mine.refresh().status, other.refresh().status) == (Status.PENDING, Status.PENDING)
    assert len(broker.get_calls) == 0


# -- this browser's session -----------------------------------------------------------------


def test_a_reference_not_in_this_browsers_session_is_not_finished_there(
    start: Callable[..., Started],
    broker: Broker,
    alice: Any,
    alice_client: Client,
    signal_log: SignalLog,
) -> None:
    """Another browser of the same user (an app switch): told to go back, and the row is
    finished only by the same-device rule, which a record from another device fails."""
    started = start()
    before = snapshot(started.row)
    broker.will_return(started.request_id)  # identified on the sample person's device
    other_browser = Client()
    other_browser.force_login(alice)
    for url in (started.success_url(), started.abort_url()):
        response = other_browser.get(url)
        assert response.status_code == 200
        assert "Go back to where you started" in response.content.decode()
    assert snapshot(started.row) == before
    assert signal_log.names == ["identification_started"]
    assert alice_client.get(started.success_url()).status_code == 302
    assert started.refresh().status == Status.SUCCESS


def test_the_result_page_of_a_success_sends_the_user_on(
    start: Callable[..., Started], broker: Broker, alice_client: Client
) -> None:
    started = start(next="/account/")
    broker.will_return(started.request_id)
    alice_client.get(started.success_url())
    response = alice_client.get(f"/eid/result/{started.row.reference}/")
    assert response.status_code == 302
    assert response["Location"] == "/account/"


@pytest.mark.parametrize("method", ["post", "put", "delete", "head"])
def test_callbacks_answer_get_only(
    start: Callable[..., Started], broker: Broker, alice_client: Client, method: str
) -> None:
    started = start()
    broker.will_return(started.request_id)
    for url in (started.success_url(), started.abort_url(), started.error_url()):
        assert getattr(alice_client, method)(url).status_code == 405
    assert started.refresh().status == Status.PENDING
    assert len(broker.get_calls) == 0


@pytest.mark.apis("v1", reason="v1's placeholders, filled by the broker")
def test_a_request_id_substituted_without_percent_encoding_still_matches(
    start: Callable[..., Started], broker: Broker, alice_client: Client
) -> None:
    # "+" reaches the query string raw and Django reads it as a space.
    started = start(request_id="abc+def/ghi=" + "x" * 40)
    broker.will_return(started.request_id)
    url = started.return_urls["Success"].replace("[1]", started.request_id)
    url = url.replace("[2]", started.row.external_id).replace("http://testserver", "")
    assert alice_client.get(url).status_code == 302
    assert started.refresh().status == Identification.Status.SUCCESS


@pytest.mark.apis("v1", reason="v1's placeholders, filled by the broker")
def test_a_space_is_not_a_wildcard(
    start: Callable[..., Started], broker: Broker, alice_client: Client
) -> None:
    started = start(request_id="abc+def")
    broker.will_return(started.request_id)
    url = started.success_url(p1="abc def ")
    assert alice_client.get(url).status_code == 400
    assert started.refresh().status == Identification.Status.PENDING
