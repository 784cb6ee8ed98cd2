"""The contract suite: the flow through the HTML pages, the JSON API and ``eid_reconcile``,
with each of the broker's APIs, against the sandbox speaking that API (``broker``).

A test that asks for ``broker_api`` runs for ``"v1"``, ``"v2"``, ``"eid-hub"`` and OpenID
Connect with each preset (``"oidc-idura"`` ...): what differs is only the settings; the
views and the flow core use the broker-API interface alone. A test of what only the REST
APIs do is marked ``@pytest.mark.apis(*REST_APIS, reason=...)``. The last tests follow one
person from one API to another, or what one API alone does to the flow, and run once.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from io import StringIO
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
from django.contrib.auth.models import AbstractBaseUser
from django.core.management import call_command
from django.test import Client

from django_eid import flow
from django_eid.models import Identification
from django_eid.sandbox.fake import EidBroker
from tests.fixtures_broker import (
    API_SETTINGS,
    NO_BROKER_IDS,
    NO_SESSION_TO_ASK,
    REST_APIS,
    SAMPLE,
    ScriptedBroker,
    expected,
)
from tests.fixtures_client import SettingsWrapper
from tests.fixtures_views import Started, logged_in, start_session

pytestmark = pytest.mark.django_db

Status = Identification.Status
UA = "Mozilla/5.0 (X11; Linux x86_64) Firefox/140.0"
#: Where each API carries the session id back.
SESSION_ID_PARAM = {"v1": "requestId", "v2": "sessionId", "eid-hub": "sessionId"}


def path_of(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.path}?{parts.query}"


def test_a_success_is_stored_the_same_way(
    broker_api: str,
    broker: ScriptedBroker,
    alice_client: Client,
    start: Callable[..., Started],
    eid: Callable[..., None],
) -> None:
    eid(GET_SOCIAL_SECURITY_NUMBER=True)
    started = start()
    url = broker.complete()
    # v1's URLs carry no broker id (django-eid's own ids bind them); the successors append
    # it; OpenID Connect's carries the code and the state (the row's external id).
    query = urlsplit(url).query
    if broker_api in REST_APIS:
        assert (SESSION_ID_PARAM[broker_api] in query) is (broker_api != "v1")
    else:
        assert set(parse_qs(query)) == {"code", "state", "iss"}
    response = alice_client.get(path_of(url))
    assert response.status_code in (200, 302)
    if response.status_code == 200:  # the interstitial of a cross-site return
        response = alice_client.get(response.context["retry_url"])
    row = started.row
    assert row.status == Status.SUCCESS
    assert (row.first_name, row.last_name) == (expected().first_name, SAMPLE.last_name)
    assert row.social_security_number == SAMPLE.national_identity_number
    assert (row.national_id_country, row.age is not None) == ("NO", True)
    assert SAMPLE.national_identity_number not in json.dumps(row.raw)
    assert bool(row.level_of_assurance) is (broker_api not in ("v1", "v2"))


@pytest.mark.apis(*REST_APIS, reason=NO_BROKER_IDS)
def test_an_abort_and_a_forged_session_id(
    broker_api: str, broker: ScriptedBroker, alice_client: Client, start: Callable[..., Started]
) -> None:
    started = start()
    url = broker.abort()
    param = SESSION_ID_PARAM[broker_api]
    forged = path_of(url).replace(f"{param}=", f"{param}=x")
    if broker_api == "v1":  # the URL names no session: a forged one is added
        forged = f"{path_of(url)}&{param}=x"
    assert alice_client.get(forged).status_code == 400
    assert started.row.status == Status.PENDING
    alice_client.get(path_of(url))
    assert started.row.status == Status.ABORTED


def test_a_failure_is_confirmed_by_the_record(
    broker_api: str, broker: ScriptedBroker, alice_client: Client, start: Callable[..., Started]
) -> None:
    started = start()
    alice_client.get(path_of(broker.fail("PKI_BLOCKED")))
    row = started.row
    assert row.status == Status.ERROR
    assert row.error_status


@pytest.mark.apis(*REST_APIS, reason=NO_SESSION_TO_ASK)
def test_a_closed_tab_is_reconciled(
    broker_api: str, broker: ScriptedBroker, alice: AbstractBaseUser, start: Callable[..., Started]
) -> None:
    """No status call in v2 and the eID Hub: the record decides, under the same-device rule."""
    started = start(logged_in(alice, HTTP_USER_AGENT=UA, REMOTE_ADDR="203.0.113.7"))
    broker.complete(user_agent=UA, ip_address="203.0.113.7")
    out = StringIO()
    call_command("eid_reconcile", "--older-than", "0", stdout=out)
    assert started.row.status == Status.SUCCESS, out.getvalue()


@pytest.mark.apis(*REST_APIS, reason=NO_SESSION_TO_ASK)
def test_the_json_api_cancels_at_the_broker(
    broker_api: str, broker: ScriptedBroker, alice_client: Client
) -> None:
    # The test client skips CSRF checks, as for tests/api's session-authenticated browser.
    started = alice_client.post(
        "/eid/api/identifications/", {"display": "redirect"}, content_type="application/json"
    )
    assert started.status_code == 201, started.content
    reference = started.json()["reference"]
    cancelled = alice_client.post(
        f"/eid/api/identifications/{reference}/cancel/", content_type="application/json"
    )
    assert cancelled.status_code == 200, cancelled.content
    assert len(broker.invalidate_requests) == 1
    assert Identification.objects.get().status == Status.ABORTED


def test_the_broker_down_at_the_start_is_an_error_page_and_no_pending_row(
    broker_api: str, broker: ScriptedBroker, alice_client: Client
) -> None:
    broker.fail_next("par" if broker.oidc else "create", 503)  # OIDC: the pushed request
    response = alice_client.post("/eid/start/", {"display": "redirect"})
    assert response.status_code in (502, 503)
    row = Identification.objects.get()
    assert (row.status, row.request_id) == (Status.ERROR, None)


def test_the_broker_down_at_the_return_loses_nothing(
    broker_api: str, broker: ScriptedBroker, alice_client: Client, start: Callable[..., Started]
) -> None:
    started = start()
    url = path_of(broker.complete())
    # Retried calls fail too: an outage (OIDC: the code's exchange, never retried).
    broker.fail_next("token" if broker.oidc else "retrieve", 503, times=None)
    assert alice_client.get(url).status_code == 503
    assert started.row.status == Status.PENDING
    # The same return URL, once the broker is back.
    broker.heal()
    alice_client.get(url)
    assert started.row.status == Status.SUCCESS


@pytest.mark.apis(*REST_APIS, reason=NO_BROKER_IDS)
@pytest.mark.parametrize("kind", ["abort", "error"])
def test_a_return_without_the_session_id_is_bound_by_the_external_id(
    broker_api: str,
    broker: ScriptedBroker,
    alice_client: Client,
    start: Callable[..., Started],
    kind: str,
) -> None:
    """Whether the successors append ``sessionId`` to the Abort and Error URLs is not
    confirmed: django-eid's external id binds the return without it, and a forged external
    id is still refused."""
    started = start()
    url = broker.abort() if kind == "abort" else broker.fail("PKI_BLOCKED")
    parts = urlsplit(url)
    bare = [p for p in parts.query.split("&") if not p.startswith(SESSION_ID_PARAM[broker_api])]
    assert alice_client.get(f"{parts.path}?externalId={'0' * 32}").status_code == 400
    assert started.row.status == Status.PENDING
    alice_client.get(f"{parts.path}?{'&'.join(bare)}")
    row = started.row
    assert row.status == (Status.ABORTED if kind == "abort" else Status.ERROR)
    if kind == "error":  # the record's status where the URL carries none
        statuses = {"v1": "PKI_BLOCKED", "v2": "failed", "eid-hub": "ERROR"}
        assert row.error_status == statuses[broker_api]


@pytest.mark.parametrize("ending", ["complete", "abort"])
def test_the_iframe_display_comes_back_with_each_api(
    broker_api: str,
    broker: ScriptedBroker,
    alice_client: Client,
    start: Callable[..., Started],
    ending: str,
) -> None:
    """The eID Hub's embedded flow has one ``returnUrl`` for every outcome: django-eid sends
    the Success URL, and the session's record says how it ended."""
    started = start(display="iframe")
    if broker_api == "eid-hub":
        sent = broker.create_requests[-1]
        assert sent["returnUrl"] == sent["callbackUrls"]["success"]
    url = broker.complete() if ending == "complete" else broker.abort()
    response = alice_client.get(path_of(url))
    assert response.status_code in (200, 302)
    assert started.row.status == (Status.SUCCESS if ending == "complete" else Status.ABORTED)


def test_only_v1_s_frame_page_loads_the_web_messaging_script(
    broker_api: str,
    broker: ScriptedBroker,
    alice_client: Client,
    start: Callable[..., Started],
    eid: Callable[..., None],
) -> None:
    script = "https://id.broker.test/messaging.js"
    eid(IFRAME_WEB_MESSAGING=True, IFRAME_WEB_MESSAGING_SCRIPT=script)
    started = start(display="iframe")
    page = alice_client.get(f"/eid/frame/{started.reference}/")
    assert (script in page.content.decode()) is (broker_api == "v1")


@pytest.mark.apis(*REST_APIS, reason=NO_SESSION_TO_ASK)
def test_without_a_status_call_the_record_is_asked_half_as_often(
    broker_api: str,
    broker: ScriptedBroker,
    start: Callable[..., Started],
    monkeypatch: pytest.MonkeyPatch,
    settings: SettingsWrapper,
    eid: Callable[..., None],
) -> None:
    """v1 asks a status call without personal data; v2 and the eID Hub have none, so a
    poll (the frame page, a return in another browser) asks the whole record, less often."""
    # A cache whose clock the test moves: the production tier's Redis keeps its own.
    settings.CACHES = {
        **settings.CACHES,
        "clocked": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"},
    }
    eid(TOKEN_CACHE="clocked")
    row = start().row
    clock = [time.time()]
    monkeypatch.setattr(time, "time", lambda: clock[0])  # the cache's clock
    assert flow.settle_if_due(row) is not None
    clock[0] += flow.SETTLE_INTERVAL + 1
    assert (flow.settle_if_due(row) is None) is (broker_api != "v1")
    clock[0] += flow.SETTLE_INTERVAL
    assert flow.settle_if_due(row) is not None


@pytest.mark.apis(*REST_APIS, reason=NO_SESSION_TO_ASK)
def test_an_unknown_status_is_logged_as_such_and_leaves_the_row_pending(
    broker_api: str,
    broker: ScriptedBroker,
    alice_client: Client,
    start: Callable[..., Started],
    caplog: pytest.LogCaptureFixture,
) -> None:
    started = start()
    url = broker.complete()
    status = {"v1": "QUEUED", "v2": "queued", "eid-hub": "QUEUED"}[broker_api]
    body: dict[str, Any] = {"id": started.request_id, "status": status}
    if broker_api == "v1":
        body = {"RequestId": started.request_id, "Status": status}
    broker.inject("retrieve", body=body)
    with caplog.at_level(logging.WARNING, logger="django_eid"):
        response = alice_client.get(path_of(url))
    row = started.row
    if broker_api == "v1":  # its statuses are all published: any other one is a failure
        assert row.status == Status.ERROR
        return
    assert (response.status_code, row.status) == (409, Status.PENDING)
    assert f"has the status {status!r}, unknown to django-eid" in caplog.text


# -- across APIs, and one API's own ----------------------------------------------------------
def test_one_account_per_person_holds_across_a_move_to_another_api(
    alice: AbstractBaseUser, bob: AbstractBaseUser, eid: Callable[..., None]
) -> None:
    """A person verified on one account under v1 is the same person to the eID Hub: the
    provider's unique id is keyed by its eID scheme (NO BankID), not by the API's name for
    it; without the number (``GET_SOCIAL_SECURITY_NUMBER`` off) it is the only key."""
    for user, api in ((alice, "v1"), (bob, "eid-hub")):
        eid(**API_SETTINGS[api], ONE_ACCOUNT_PER_PERSON=True)
        with ScriptedBroker() as served:
            client = logged_in(user)
            start_session(served, client)
            client.get(path_of(served.complete()))
    first, second = Identification.objects.order_by("pk")
    assert (first.identity_provider, first.status) == ("NO_BANKID_WEB", Status.SUCCESS)
    assert (second.identity_provider, second.status) == ("nbid", Status.REJECTED)
    assert second.error_code == "ONE_ACCOUNT_PER_PERSON"
    assert second.identity_provider_unique_id == first.identity_provider_unique_id
    assert first.social_security_number is None


def test_a_v2_success_returned_after_the_identity_was_dropped_is_no_identification(
    alice: AbstractBaseUser, eid: Callable[..., None]
) -> None:
    """v2 keeps the identity for an hour; a return after that finds "success" without a
    person, which must not verify the account (nor pass ONE_ACCOUNT_PER_PERSON)."""
    eid(**API_SETTINGS["v2"], ONE_ACCOUNT_PER_PERSON=True)
    now = [1_000_000.0]
    with EidBroker.from_settings(clock=lambda: now[0]) as served:
        client = logged_in(alice)
        response = client.post("/eid/start/", {"display": "redirect"})
        assert response.status_code == 302, response.content
        assert len(served.create_requests) == 1
        url = served.complete()
        now[0] += 3601
        response = client.get(path_of(url))
        if response.status_code == 200 and "retry_url" in (response.context or {}):
            client.get(response.context["retry_url"])
    row = Identification.objects.get()
    assert row.status == Status.ERROR
    assert Identification.objects.verified_for(alice) is None
