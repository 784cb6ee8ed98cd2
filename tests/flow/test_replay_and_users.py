"""Replays and strangers: a finished session's returns, two returns at once, other users,
other browsers with forged ids, the result page.

A replay shows where the session went and does nothing else; another user's return is a
link to nothing; a browser that did not start the session gets nothing with forged ids.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from django.contrib.auth.models import AbstractBaseUser
from django.test import Client, RequestFactory

from django_eid import flow
from django_eid.exceptions import IdentificationRejected
from django_eid.models import Identification
from django_eid.signals import identification_succeeded
from tests.fixtures_broker import ScriptedBroker
from tests.fixtures_views import Signals, Started, logged_in, snapshot
from tests.flow.returns import START, Ended, assert_untouched, url_of

pytestmark = pytest.mark.django_db

Status = Identification.Status


# -- replays -------------------------------------------------------------------------------
FINISHED_DESTINATION = {
    Status.SUCCESS: (302, "/"),
    Status.ABORTED: (302, START),
    Status.ERROR: (200, None),
    Status.REJECTED: (200, None),
}
FINISHED_BY = {
    "success": Status.SUCCESS,
    "abort": Status.ABORTED,
    "error": Status.ERROR,
    "rejection": Status.REJECTED,
}


def _reject(**kwargs: Any) -> None:
    raise IdentificationRejected("Under age.")


@pytest.mark.parametrize("kind", ["success", "abort", "error"])
@pytest.mark.parametrize("finished_by", ["success", "abort", "error", "rejection"])
def test_a_finished_session_replays_its_destination_and_nothing_else(
    start: Callable[..., Started],
    alice_client: Client,
    broker: ScriptedBroker,
    signals: Signals,
    kind: str,
    finished_by: str,
) -> None:
    """A reload, the back button, a double click, another return of the same session: the
    same destination (or page), nothing fetched, stored or sent again."""
    finishing = "success" if finished_by == "rejection" else finished_by
    started = start(ends=finishing)
    if finished_by == "rejection":
        identification_succeeded.connect(_reject, dispatch_uid="replay-reject")
    try:
        first = alice_client.get(started.url(finishing))
    finally:
        identification_succeeded.disconnect(dispatch_uid="replay-reject")
    status = started.row.status
    assert status == FINISHED_BY[finished_by]
    signals.clear()
    broker.counts.clear()
    before = snapshot()
    # An Error return naming another failure ([0]) than the one stored changes nothing.
    url = started.error_url("LOGIN") if kind == "error" else started.url(kind)
    for _ in range(2):
        response = alice_client.get(url)
        code, location = FINISHED_DESTINATION[status]
        assert_untouched(response, code, before, signals, broker)
        if location:
            assert response["Location"] == location
        elif kind == finishing:  # the page of the return that finished it, once more
            assert response.content == first.content


def test_one_transition_when_two_callbacks_race(
    start: Callable[..., Started], signals: Signals
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
    assert signals.names == ["identification_started", "identification_aborted"]


def test_a_failure_keeps_a_short_status_whoever_calls_it(start: Callable[..., Started]) -> None:
    started = start()
    flow.fail(started.row, RequestFactory().get("/"), "E" * 500)
    assert started.refresh().error_status == "E" * 64


# -- other users -----------------------------------------------------------------------
@pytest.mark.parametrize("callback", ["success", "abort", "error"])
def test_another_user_cannot_finish_the_session(
    start: Callable[..., Started],
    broker: ScriptedBroker,
    alice_client: Client,
    bob_client: Client,
    signals: Signals,
    broker_api: str,
    callback: str,
) -> None:
    started = start()
    before = snapshot()
    broker.will_return(started.request_id)
    url = getattr(started, f"{callback}_url")()
    response = bob_client.get(url)
    assert response.status_code == 404
    assert snapshot() == before
    assert len(broker.get_calls) == 0
    assert signals.names == ["identification_started"]
    # Alice still can.
    assert alice_client.get(started.success_url()).status_code == 302
    assert started.refresh().status == Status.SUCCESS


@pytest.mark.parametrize("kind", ["success", "abort", "error"])
@pytest.mark.parametrize("ids", ["alice's", "bob's"])
def test_another_users_session_cannot_be_touched(
    start: Callable[..., Started],
    ended_at_the_broker: Callable[..., Ended],
    bob_client: Client,
    kind: str,
    ids: str,
) -> None:
    """Bob fills alice's return URL (v1's placeholders) with her ids or his own."""
    bobs = start(client=bob_client, ends=kind)
    ended = ended_at_the_broker(kind)
    alices = ended.started
    source = alices if ids == "alice's" else bobs
    template = alices.template(kind.capitalize())
    url = template.replace("[0]", "TIMEOUT").replace("[1]", source.request_id)
    url = url.replace("[2]", source.external_id)
    response = bob_client.get(url)
    ended.assert_untouched(response, 404)
    assert b"not valid" in response.content
    assert response["X-Frame-Options"] == "SAMEORIGIN"
    ended.assert_genuine_completes()
    assert bobs.row.status == Status.PENDING


# -- other browsers, forged ids ----------------------------------------------------------
@pytest.mark.parametrize("kind", ["success", "abort", "error"])
def test_the_same_user_in_another_browser_with_forged_ids_is_refused(
    ended_at_the_broker: Callable[..., Ended], alice: AbstractBaseUser, kind: str
) -> None:
    """Not this browser's, and not the broker's return either: refused as before."""
    ended = ended_at_the_broker(kind)
    forged = {"p2": "0" * len(ended.started.external_id)}
    url = url_of(ended.started, kind, **forged)
    response = logged_in(alice).get(url)
    ended.assert_untouched(response, 403)
    assert b"not started in this browser" in response.content
    ended.assert_genuine_completes()


@pytest.mark.parametrize("kind", ["success", "abort", "error"])
@pytest.mark.parametrize("interstitial", [True, False])
def test_a_callback_without_any_session_and_forged_ids_changes_nothing(
    ended_at_the_broker: Callable[..., Ended],
    eid: Callable[..., None],
    kind: str,
    interstitial: bool,
) -> None:
    eid(CALLBACK_INTERSTITIAL=interstitial)
    ended = ended_at_the_broker(kind)
    started = ended.started
    forged = {"p1": started.request_id[:-1] + "X"}
    url = url_of(started, kind, **forged)
    response = Client().get(url)
    if interstitial:  # the same URL once more, marked, from our own page
        ended.assert_untouched(response, 200)
        retry = response.context["retry_url"]
        assert retry.startswith(started.path(kind))
        assert "eid_retry=1" in retry
        response = Client().get(retry)
    ended.assert_untouched(response, 403)
    assert b"Session expired" in response.content
    ended.assert_genuine_completes()


# -- the result page -----------------------------------------------------------------
def test_the_result_page_of_a_success_sends_the_user_on(
    start: Callable[..., Started], broker: ScriptedBroker, alice_client: Client
) -> None:
    started = start(next="/account/")
    broker.will_return(started.request_id)
    alice_client.get(started.success_url())
    response = alice_client.get(f"/eid/result/{started.row.reference}/")
    assert response.status_code == 302
    assert response["Location"] == "/account/"


def test_another_user_cannot_see_the_result_page(
    start: Callable[..., Started], broker: ScriptedBroker, alice_client: Client, bob_client: Client
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
