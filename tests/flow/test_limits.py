"""Limits: session expiry, pending sessions per user and per browser, one account per person."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from django.test import Client

from django_eid import state
from django_eid.models import Identification
from tests.fixtures_broker import NO_SESSION_TO_ASK, REST_APIS, RETURN_IS_THE_ANSWER
from tests.flow.conftest import Broker, SignalLog, Started

pytestmark = pytest.mark.django_db

Status = Identification.Status


def pending_refs(client: Client) -> set[str]:
    return set(client.session.get("django_eid_pending", {}))


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
    broker: Broker,
    alice_client: Client,
    signal_log: SignalLog,
    eid: Callable[..., None],
    callback: str,
) -> None:
    """A late return of a session the person never finished at the broker expires."""
    eid(SESSION_MAX_AGE=60)
    started = start()  # still at the broker
    old = started.row.created_at - timedelta(seconds=61)
    Identification.objects.filter(pk=started.row.pk).update(created_at=old)
    url = getattr(started, f"{callback}_url")
    response = alice_client.get(url(p0="TIMEOUT") if callback == "error" else url())
    assert response.status_code == 410
    assert "expired" in response.content.decode()
    row = started.refresh()
    assert row.status == Status.EXPIRED
    assert row.completed_at is not None
    # The broker was asked (a record still in progress), except for an Abort return.
    assert len(broker.get_calls) == (0 if callback == "abort" else 1)
    assert signal_log.names == ["identification_started"]
    # The genuine success URL does not revive it.
    broker.will_return(started.request_id)
    assert alice_client.get(started.success_url()).status_code == 410
    assert started.refresh().status == Status.EXPIRED


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
    broker: Broker,
    alice_client: Client,
    signal_log: SignalLog,
    eid: Callable[..., None],
    callback: str,
) -> None:
    """SESSION_MAX_AGE does not throw away an identification the broker says succeeded."""
    eid(SESSION_MAX_AGE=60)
    started = start()
    broker.will_return(started.request_id)
    old = started.row.created_at - timedelta(seconds=3600)
    Identification.objects.filter(pk=started.row.pk).update(created_at=old)
    url = getattr(started, f"{callback}_url")
    response = alice_client.get(url(p0="LOGIN") if callback == "error" else url())
    assert (response.status_code, response["Location"]) == (302, "/")
    assert started.refresh().status == Status.SUCCESS
    assert signal_log.names == ["identification_started", "identification_succeeded"]


def test_a_session_younger_than_the_max_age_completes(
    start: Callable[..., Started], broker: Broker, alice_client: Client, eid: Callable[..., None]
) -> None:
    eid(SESSION_MAX_AGE=60)
    started = start()
    broker.will_return(started.request_id)
    young = started.row.created_at - timedelta(seconds=55)
    Identification.objects.filter(pk=started.row.pk).update(created_at=young)
    assert alice_client.get(started.success_url()).status_code == 302
    assert started.refresh().status == Status.SUCCESS


# -- one account per person --------------------------------------------------------------------


def test_one_account_per_person(
    start: Callable[..., Started],
    broker: Broker,
    alice_client: Client,
    bob_client: Client,
    signal_log: SignalLog,
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
    assert signal_log.names[-1] == "identification_failed"
    assert "identification_succeeded" not in signal_log.names[3:]


# -- MAX_PENDING_PER_USER -------------------------------------------------------


def test_too_many_pending_sessions_get_a_429_and_nothing_is_sent(
    start: Callable[..., Started],
    broker: Broker,
    alice_client: Client,
    bob_client: Client,
    eid: Callable[..., None],
) -> None:
    eid(MAX_PENDING_PER_USER=2)
    start(), start()
    response = alice_client.post("/eid/start/", {})
    assert response.status_code == 429
    assert "Too many identifications in progress" in response.content.decode()
    assert len(broker.create_calls) == 2
    assert Identification.objects.count() == 2
    # Another user is not counted against alice's limit.
    start(client=bob_client)
    assert len(broker.create_calls) == 3


def test_finished_and_old_sessions_do_not_count_against_the_limit(
    start: Callable[..., Started], eid: Callable[..., None]
) -> None:
    eid(MAX_PENDING_PER_USER=1, SESSION_MAX_AGE=60)
    first = start()
    Identification.objects.filter(pk=first.row.pk).update(status=Identification.Status.ABORTED)
    second = start()
    Identification.objects.filter(pk=second.row.pk).update(
        created_at=second.row.created_at - timedelta(seconds=61)
    )
    start()
    assert Identification.objects.count() == 3


def test_failed_starts_count_against_the_limit(
    broker: Broker, alice_client: Client, eid: Callable[..., None]
) -> None:
    """Rows of starts the broker refused cannot pile up without bound either."""
    eid(MAX_PENDING_PER_USER=2)
    broker.fail_next("create", 500, times=None)
    for _ in range(2):
        assert alice_client.post("/eid/start/", {}).status_code == 503
    assert alice_client.post("/eid/start/", {}).status_code == 429
    failed = Identification.objects.filter(status=Identification.Status.ERROR)
    assert failed.count() == 2
    assert set(failed.values_list("request_id", flat=True)) == {None}
    assert len(broker.create_calls) == 2


def test_the_pending_row_is_reserved_before_the_broker_is_called(
    start: Callable[..., Started], broker: Broker, eid: Callable[..., None]
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


@pytest.mark.apis("v1", reason="provider names are v1's")
@pytest.mark.parametrize(
    ("settings_", "posted", "used"),
    [
        ({}, "NO_BANKID_WEB", "NO_BUYPASS"),
        ({"ALLOWED_PROVIDERS": ["NO_BANKID_WEB"]}, "", "SWE_BANKID"),
    ],
)
def test_a_record_from_a_provider_not_asked_for_is_rejected(
    start: Callable[..., Started],
    broker: Broker,
    alice_client: Client,
    eid: Callable[..., None],
    signal_log: SignalLog,
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
    assert signal_log.names[-1] == "identification_failed"
    assert "identification_succeeded" not in signal_log.names


@pytest.mark.apis("v1", reason="provider names are v1's")
def test_a_record_without_a_provider_keeps_the_one_asked_for(
    start: Callable[..., Started], broker: Broker, alice_client: Client
) -> None:
    started = start(provider="NO_BANKID_WEB")
    broker.will_return(started.request_id, IdentityProvider=None)
    assert alice_client.get(started.success_url()).status_code == 302
    row = started.refresh()
    assert (row.status, row.identity_provider) == (Status.SUCCESS, "NO_BANKID_WEB")
