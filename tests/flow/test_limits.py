"""Limits: session expiry (the broker's record decides a late return), pending sessions per
user (failed and cancelled starts included, for a while) and per browser, one account per
person, the provider asked for."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth.models import AbstractBaseUser
from django.test import Client
from django.utils import timezone

from django_eid import flow, state
from django_eid.models import Identification
from tests.fixtures_broker import (
    NO_SESSION_TO_ASK,
    REST_APIS,
    RETURN_IS_THE_ANSWER,
    ScriptedBroker,
    reply,
)
from tests.fixtures_views import Signals, Started, changed, logged_in, snapshot
from tests.flow.returns import START, aged, assert_untouched, pending_refs

pytestmark = pytest.mark.django_db

Status = Identification.Status


# -- expiry ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "callback",
    [
        # OIDC: the provider sends no code for a session the person never finished, and
        # its error return is a final answer (stored as such, late or not).
        pytest.param("success", marks=pytest.mark.apis(*REST_APIS, reason=NO_SESSION_TO_ASK)),
        "abort",
        pytest.param("error", marks=pytest.mark.apis(*REST_APIS, reason=RETURN_IS_THE_ANSWER)),
    ],
)
def test_an_expired_session_becomes_expired(
    start: Callable[..., Started],
    broker: ScriptedBroker,
    alice_client: Client,
    signals: Signals,
    eid: Callable[..., None],
    broker_api: str,
    callback: str,
) -> None:
    """A late return of a session the person never finished at the broker expires; it
    sends nothing, and a replay (of any return) changes nothing, asks the broker nothing."""
    eid(SESSION_MAX_AGE=60)
    started = start()  # still at the broker
    aged(started, 61)
    url = getattr(started, f"{callback}_url")
    url = url(p0="TIMEOUT") if callback == "error" else url()
    before = snapshot()
    response = alice_client.get(url)
    assert changed(before, snapshot()) == {started.pk}
    assert response.status_code == 410
    assert "expired" in response.content.decode()
    row = started.refresh()
    assert row.status == Status.EXPIRED
    assert row.completed_at is not None
    # The broker was asked (a record still in progress), except for an Abort return.
    assert len(broker.get_calls) == (0 if callback == "abort" else 1)
    assert signals.names == ["identification_started"]
    # The genuine success URL does not revive it.
    signals.clear()
    broker.counts.clear()
    again = snapshot()
    broker.will_return(started.request_id)
    for replay in (url, started.success_url()):
        assert_untouched(alice_client.get(replay), 410, again, signals, broker)


@pytest.mark.parametrize(
    "callback",
    # OIDC: the provider's error return is its answer (RETURN_IS_THE_ANSWER).
    [
        "success",
        pytest.param("error", marks=pytest.mark.apis(*REST_APIS, reason=RETURN_IS_THE_ANSWER)),
    ],
)
def test_a_late_callback_of_a_success_succeeds(
    start: Callable[..., Started],
    broker: ScriptedBroker,
    alice_client: Client,
    signals: Signals,
    eid: Callable[..., None],
    broker_api: str,
    callback: str,
) -> None:
    """SESSION_MAX_AGE does not throw away an identification the broker says succeeded."""
    eid(SESSION_MAX_AGE=60)
    started = start()
    broker.will_return(started.request_id)
    aged(started, 3600)
    url = getattr(started, f"{callback}_url")
    response = alice_client.get(url(p0="LOGIN") if callback == "error" else url())
    assert (response.status_code, response["Location"]) == (302, "/")
    row = started.refresh()
    assert (row.status, row.last_name) == (Status.SUCCESS, "Nordmann")
    assert signals.names == ["identification_started", "identification_succeeded"]
    assert signals.calls[-1] == (
        "identification_succeeded",
        started.pk,
        Status.SUCCESS,
        started.row.user_id,
    )


def test_a_session_younger_than_the_max_age_completes(
    start: Callable[..., Started],
    broker: ScriptedBroker,
    alice_client: Client,
    eid: Callable[..., None],
) -> None:
    eid(SESSION_MAX_AGE=60)
    started = start()
    broker.will_return(started.request_id)
    aged(started, 55)
    assert alice_client.get(started.success_url()).status_code == 302
    assert started.refresh().status == Status.SUCCESS


# -- one account per person --------------------------------------------------------------------


def test_one_account_per_person(
    start: Callable[..., Started],
    broker: ScriptedBroker,
    alice_client: Client,
    bob_client: Client,
    signals: Signals,
    eid: Callable[..., None],
) -> None:
    eid(ONE_ACCOUNT_PER_PERSON=True, GET_SOCIAL_SECURITY_NUMBER=True)
    bobs = start(client=bob_client)
    broker.will_return(bobs.request_id)
    assert bob_client.get(bobs.success_url()).status_code == 302
    alices = start()
    broker.will_return(alices.request_id, IdentityProviderUniqueId="another-id")
    response = alice_client.get(alices.success_url())
    assert response.status_code == 200
    assert "already verified on another account" in response.content.decode()
    row = alices.refresh()
    assert (row.status, row.error_code) == (Status.REJECTED, "ONE_ACCOUNT_PER_PERSON")
    assert signals.names[-1] == "identification_failed"
    assert "identification_succeeded" not in signals.names[3:]


# -- MAX_PENDING_PER_USER -------------------------------------------------------


@pytest.mark.parametrize("limit", [1, 2, 5])
def test_starts_beyond_max_pending_per_user_are_a_429_and_nothing_is_sent(
    start: Callable[..., Started],
    alice_client: Client,
    broker: ScriptedBroker,
    signals: Signals,
    eid: Callable[..., None],
    limit: int,
) -> None:
    eid(MAX_PENDING_PER_USER=limit)
    for _ in range(limit):
        start()
    signals.clear()
    broker.counts.clear()
    before = snapshot()
    response = alice_client.post(START)
    assert response.status_code == 429
    assert response["X-Frame-Options"] == "DENY"
    assert b"Too many identifications in progress" in response.content
    assert (snapshot(), dict(broker.counts), signals.names) == (before, {}, [])


@pytest.mark.parametrize(
    "freed_by", ["finishing one", "aborting one", "one expiring", "another user"]
)
def test_the_pending_limit_counts_only_this_users_live_sessions(
    start: Callable[..., Started],
    alice_client: Client,
    bob: AbstractBaseUser,
    broker: ScriptedBroker,
    eid: Callable[..., None],
    freed_by: str,
) -> None:
    eid(MAX_PENDING_PER_USER=2)
    first, _second = start(ends="success"), start(ends="success")
    assert alice_client.post(START).status_code == 429
    if freed_by == "finishing one":
        alice_client.get(first.success_url())
    elif freed_by == "aborting one":
        # A cancelled start counts like a failed one for a minute, so a start/cancel loop
        # cannot create broker sessions faster than the limit allows.
        alice_client.get(first.abort_url())
        assert alice_client.post(START).status_code == 429
        done = timezone.now() - timedelta(seconds=flow.FAILED_START_WINDOW + 1)
        Identification.objects.filter(pk=first.pk).update(completed_at=done)
    elif freed_by == "one expiring":
        aged(first, 1801)
    else:
        bob_client = logged_in(bob)
        assert start(client=bob_client).row.user_id == bob.pk
        assert alice_client.post(START).status_code == 429
        return
    assert start().row.status == Status.PENDING


@pytest.mark.parametrize("limit", [1, 2])
def test_failed_starts_count_against_the_pending_limit(
    alice_client: Client,
    broker: ScriptedBroker,
    signals: Signals,
    eid: Callable[..., None],
    limit: int,
) -> None:
    """A broker that refuses every start cannot be used to pile up rows (or billed calls):
    each failed start keeps its reserved row, as ERROR without a request id, and counts for
    a minute (flow.FAILED_START_WINDOW), not for SESSION_MAX_AGE."""
    eid(MAX_PENDING_PER_USER=limit)
    broker.fault("create", reply(500, {"message": "down"}))
    for _ in range(limit):
        assert alice_client.post(START).status_code == 503
    assert broker.counts["create"] == limit  # a create is not retried: it may have been made
    rows = list(Identification.objects.all())
    assert [(r.status, r.request_id) for r in rows] == [(Status.ERROR, None)] * limit
    assert signals.names == []
    broker.heal()
    broker.counts.clear()
    before = snapshot()
    response = alice_client.post(START)
    assert response.status_code == 429
    assert (snapshot(), dict(broker.counts), signals.names) == (before, {}, [])
    # A minute later they count no more: the user is not locked out once the broker is back.
    old = rows[0].created_at - timedelta(seconds=flow.FAILED_START_WINDOW + 1)
    Identification.objects.update(created_at=old)
    response = alice_client.post(START)
    assert (response.status_code, broker.counts["create"]) == (302, 1)
    assert Identification.objects.filter(status=Status.PENDING).count() == 1


def test_the_pending_row_is_reserved_before_the_broker_is_called(
    start: Callable[..., Started], broker: ScriptedBroker, eid: Callable[..., None]
) -> None:
    """What makes the limit a guarantee: the count sees a start whose broker call is running."""
    eid(MAX_PENDING_PER_USER=1)
    seen: list[list[str]] = []
    original = broker.serve

    def serve(endpoint: Any, request: Any) -> Any:
        if endpoint == broker.endpoint("create"):  # OIDC: the pushed request
            seen.append(list(Identification.objects.values_list("status", flat=True)))
        return original(endpoint, request)

    broker.serve = serve  # type: ignore[method-assign]
    start()
    assert seen == [[Identification.Status.PENDING]]


# -- this browser's pending references --------------------------------------------------------


def test_the_oldest_pending_reference_leaves_a_full_session(
    start: Callable[..., Started], alice_client: Client, eid: Callable[..., None]
) -> None:
    eid(MAX_PENDING_PER_USER=state.MAX_ENTRIES)
    oldest = start()
    others = [start() for _ in range(state.MAX_ENTRIES - 1)]
    # Finished elsewhere (e.g. eid_purge): their references linger in this browser's session.
    Identification.objects.filter(pk__in=[s.row.pk for s in others]).update(
        status=Identification.Status.EXPIRED
    )
    newest = start()
    assert pending_refs(alice_client) == {s.row.reference for s in [*others, newest]}
    # The oldest is no longer this browser's: its return is treated as another browser's.
    response = alice_client.get(oldest.abort_url())
    assert "Go back to where you started" in response.content.decode()
    assert alice_client.get(newest.abort_url()).status_code == 302


def test_the_session_keeps_a_reference_for_every_session_a_user_may_start(
    start: Callable[..., Started], alice_client: Client, eid: Callable[..., None]
) -> None:
    eid(MAX_PENDING_PER_USER=state.MAX_ENTRIES + 3)
    sessions = [start() for _ in range(state.MAX_ENTRIES + 3)]
    assert pending_refs(alice_client) == {s.row.reference for s in sessions}
    assert alice_client.get(sessions[0].abort_url()).status_code == 302


# -- the provider actually used -------------------------------------------------


@pytest.mark.parametrize(
    ("settings_", "posted", "used"),
    [
        ({}, "NO_BANKID_WEB", "NO_BUYPASS"),
        ({"ALLOWED_PROVIDERS": ["NO_BANKID_WEB"]}, "", "SWE_BANKID"),
    ],
)
def test_a_record_from_a_provider_not_asked_for_is_rejected(
    start: Callable[..., Started],
    broker: ScriptedBroker,
    alice_client: Client,
    eid: Callable[..., None],
    signals: Signals,
    settings_: dict[str, Any],
    posted: str,
    used: str,
) -> None:
    eid(**settings_)
    started = start(provider=posted)
    broker.will_return(started.request_id, IdentityProvider=used)
    response = alice_client.get(started.success_url())
    assert response.status_code == 200
    assert "not accepted here" in response.content.decode()
    row = started.refresh()
    assert (row.status, row.error_code) == (Status.REJECTED, "PROVIDER_NOT_ALLOWED")
    assert signals.names[-1] == "identification_failed"
    assert "identification_succeeded" not in signals.names


def test_a_record_without_a_provider_keeps_the_one_asked_for(
    start: Callable[..., Started], broker: ScriptedBroker, alice_client: Client
) -> None:
    started = start(provider="NO_BANKID_WEB")
    broker.will_return(started.request_id, IdentityProvider=None)
    assert alice_client.get(started.success_url()).status_code == 302
    row = started.refresh()
    assert (row.status, row.identity_provider) == (Status.SUCCESS, "NO_BANKID_WEB")
