"""``api-return``: a mobile app (token authentication) finishes the identification from the
return the broker sent to a browser without its session, forwarded to the front end.

The return, the ids it carries and how they are read, and the broker's answers while it is
finished are each broker API's (``broker_api``); the body's rules, who may finish, and
forwarding run once, against v1 (whose Error URL carries the broker's code).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

import django
import pytest
import requests
from django.test import Client

from django_eid.brokers import api_class
from django_eid.models import Identification
from tests.api.conftest import (
    FRONTEND,
    OTHER_DEVICE,
    SAME_DEVICE,
    TOKEN_AUTH,
    UA,
    Api,
    aborted,
    api_start,
    fields_of,
    front_end,
    identified,
    problem,
    query_of,
    token_client,
    with_login_required,
)
from tests.fixtures_broker import (
    CODE_IS_SPENT,
    NO_BROKER_IDS,
    NO_SESSION_TO_ASK,
    REST_APIS,
    SAMPLE,
    SSN,
    ScriptedBroker,
    expected,
)
from tests.fixtures_views import Signals, Started, logged_in

pytestmark = pytest.mark.django_db

Status = Identification.Status


def forwarded(url: str, display: str = "redirect") -> str:
    """The return at ``url`` reaching a browser without any session (the phone's system
    browser): the interstitial, then where it sends that browser."""
    browser = Client(HTTP_USER_AGENT="Mozilla/5.0 (iPhone) Safari")
    interstitial = browser.get(url)
    assert interstitial.status_code == 200
    response = browser.get(interstitial.context["retry_url"])
    if display == "iframe":
        assert response.status_code == 200
        assert "django_eid/frame_exit.html" in [t.name for t in response.templates]
        destination: str = response.context["destination"]
        return destination
    assert response.status_code == 302, response.content
    location: str = response["Location"]
    return location


def ids_query(started: Started, kind: str = "success", **changes: str) -> str:
    """The query string the front end is forwarded with, as it would be: the broker's ids
    of the return (``requestId`` in ``changes`` is the API's session id parameter)."""
    if started.is_oidc:  # the provider's return: its code or error, and the state
        assert "requestId" not in changes, "no session id in an OIDC return"
        state = changes.pop("externalId", started.external_id)
        genuine = parse_qs(query_of(started.url(kind)))
        params = {"eid_return": kind, **{k: v[0] for k, v in genuine.items()}, "state": state}
        return urlencode({**params, **changes})
    api = api_class(started.api)
    params = {"eid_return": kind, "externalId": started.external_id}
    if started.api != "v1":  # appended by the successors' broker
        params[api.request_id_param] = started.request_id
    if "requestId" in changes:
        params[api.request_id_param] = changes.pop("requestId")
    params.update(changes)
    return urlencode(params)


def returned_ids(started: Started) -> dict[str, list[str]]:
    """The broker's ids a forwarded return carries: django-eid's external id, and the
    session id the successor APIs append."""
    if started.is_oidc:  # the code and the state
        return parse_qs(query_of(started.success_url()))
    ids = {"externalId": [started.external_id]}
    if started.api != "v1":
        ids[api_class(started.api).request_id_param] = [started.request_id]
    return ids


# -- the whole way -----------------------------------------------------------------------------
def test_the_app_finishes_an_identification_made_on_another_device(
    broker_api: str, app: Api, broker: ScriptedBroker, signals: Signals, alice: Any
) -> None:
    started = api_start(app, broker)
    row = started.row
    assert row.channel == "api"
    # The person identified in the BankID app; the return opened in the system browser.
    url = forwarded(identified(broker, started, OTHER_DEVICE))
    parts = urlsplit(url)
    success = urlsplit(front_end("success", started))
    assert (parts.scheme, parts.netloc, parts.path) == (
        success.scheme,
        success.netloc,
        success.path,
    )
    # The broker's ids that the return carried: django-eid's external id (no request id).
    assert parse_qs(parts.query) == {"eid_return": ["success"], **returned_ids(started)}
    # The same-device rule did not finish it there: nothing of the identity reached that browser.
    assert started.refresh().status == Status.PENDING
    response = app.finish(started.reference, parts.query)
    assert response.status_code == 200
    body = response.json()
    assert (body["status"], body["outcome"]["code"]) == ("SUCCESS", "succeeded")
    assert body["identity"]["first_name"] == expected().first_name
    assert SSN.encode() not in response.content
    assert "no-store" in response["Cache-Control"]
    assert started.refresh().status == Status.SUCCESS
    succeeded = signals.of("identification_succeeded")
    assert len(succeeded) == 1
    assert succeeded[0]["request"].user == alice
    # Asked again (a retry of the app): the same answer, nothing fetched or sent again.
    retrieved = len(broker.retrieve_requests)
    again = app.finish(started.reference, "?" + parts.query)
    assert again.json() == body
    assert len(broker.retrieve_requests) == retrieved
    assert len(signals.of("identification_succeeded")) == 1
    assert app.identification(started.reference).json() == body


def test_a_start_with_a_token_keeps_no_session(
    app: Api, broker: ScriptedBroker, settings: Any
) -> None:
    api_start(app, broker)
    assert settings.SESSION_COOKIE_NAME not in app.client.cookies


def test_a_return_in_the_iframe_leaves_the_frame(app: Api, broker: ScriptedBroker) -> None:
    started = api_start(app, broker, {"display": "iframe"})
    url = forwarded(identified(broker, started, OTHER_DEVICE), display="iframe")
    query = urlsplit(url).query
    assert parse_qs(query)["eid_return"] == ["success"]
    assert app.finish(started.reference, query).json()["status"] == "SUCCESS"


@pytest.mark.apis(*REST_APIS, reason=NO_SESSION_TO_ASK)
def test_an_abort_forwarded_to_the_front_end_is_finished_there(
    broker_api: str, app: Api, broker: ScriptedBroker
) -> None:
    started = api_start(app, broker)
    url = forwarded(aborted(broker, started))
    # The broker's status already said it ended: settled there, the front end's abort URL.
    assert url == front_end("abort", started)
    assert started.refresh().status == Status.ABORTED
    body = app.finish(started.reference, ids_query(started, "abort")).json()
    assert body["status"] == "ABORTED"


def test_an_abort_return_finishes_a_pending_identification(
    broker_api: str, app: Api, broker: ScriptedBroker, signals: Signals
) -> None:
    started = api_start(app, broker)
    body = app.finish(started.reference, ids_query(started, "abort")).json()
    assert body["status"] == "ABORTED"
    assert signals.names == ["identification_started", "identification_aborted"]


def test_an_error_return_is_confirmed_by_the_broker_s_record(
    app: Api, broker: ScriptedBroker
) -> None:
    started = api_start(app, broker)
    broker.broker.open(started.request_id)
    broker.broker.fail(started.request_id, "TIMEOUT")
    query = ids_query(started, "error", status="TIMEOUT")
    body = app.finish(started.reference, query).json()
    assert (body["status"], body["outcome"]["code"]) == ("ERROR", "failed")
    assert started.refresh().error_status == "TIMEOUT"


# -- refused -------------------------------------------------------------------------------------
def test_a_wrong_external_id_is_refused(broker_api: str, app: Api, broker: ScriptedBroker) -> None:
    started = api_start(app, broker)
    identified(broker, started, OTHER_DEVICE)
    refused = problem(
        app.finish(started.reference, ids_query(started, externalId="0" * 32)),
        400,
        "answer_mismatch",
    )
    assert "errors" not in refused
    assert started.refresh().status == Status.PENDING
    assert broker.retrieve_requests == []


@pytest.mark.apis(*REST_APIS, reason=NO_BROKER_IDS)
def test_a_wrong_request_id_is_refused(broker_api: str, app: Api, broker: ScriptedBroker) -> None:
    started = api_start(app, broker)
    problem(
        app.finish(started.reference, ids_query(started, requestId="X" * 200)),
        400,
        "answer_mismatch",
    )
    assert started.refresh().status == Status.PENDING


@pytest.mark.parametrize(
    "query",
    [
        "",
        "requestId=x&externalId=y",
        "eid_return=finish",
        "eid_return=success&eid_return=success",
        "eid_return=SUCCESS",
        "&".join(f"f{i}=1" for i in range(1200)) + "&eid_return=success",
    ],
)
def test_a_query_without_one_return_kind_is_a_malformed_link(
    app: Api, broker: ScriptedBroker, query: str
) -> None:
    started = api_start(app, broker)
    problem(app.finish(started.reference, query), 400, "malformed_link")
    assert started.refresh().status == Status.PENDING


@pytest.mark.parametrize(
    ("body", "code", "fields"),
    [
        ({}, "malformed_link", []),
        ({"query": 5}, "not_a_string", [("query", "not_a_string")]),
        ({"query": "", "extra": 1}, "unknown_field", [("extra", "unknown_field")]),
        ({"query": None}, "malformed_link", []),
    ],
)
def test_the_body_of_a_return(
    app: Api, broker: ScriptedBroker, body: dict[str, Any], code: str, fields: list[Any]
) -> None:
    started = api_start(app, broker)
    path = f"/identifications/{started.reference}/return/"
    assert fields_of(problem(app.post(path, body), 400, code)) == fields
    problem(app.post(path, raw=b"[1]"), 400, "invalid_body")


@pytest.mark.apis(*REST_APIS, reason=NO_SESSION_TO_ASK)
def test_the_user_still_at_the_broker(broker_api: str, app: Api, broker: ScriptedBroker) -> None:
    started = api_start(app, broker)
    refused = problem(app.finish(started.reference, ids_query(started)), 409, "in_progress")
    assert refused["message"].startswith("Your identification is not finished yet.")
    assert started.refresh().status == Status.PENDING


@pytest.mark.parametrize(
    ("fault", "status", "code"),
    [
        ({"exception": requests.ConnectionError("down")}, 503, "retrieve_unreachable"),
        ({"status": 503}, 503, "retrieve_unreachable"),
        *(
            pytest.param(*case, marks=pytest.mark.apis(*REST_APIS, reason=CODE_IS_SPENT))
            for case in (
                (
                    {"status": 400, "body": {"message": "no", "code": "BAD"}},
                    502,
                    "retrieve_refused",
                ),
                # A status that is no string, in each API's casing.
                ({"status": 200, "body": {"Status": 5, "status": 5}}, 502, "retrieve_unexpected"),
            )
        ),
    ],
)
def test_the_broker_failing_on_retrieval_leaves_it_pending(
    broker_api: str,
    app: Api,
    broker: ScriptedBroker,
    signals: Signals,
    fault: dict[str, Any],
    status: int,
    code: str,
) -> None:
    started = api_start(app, broker)
    identified(broker, started, OTHER_DEVICE)
    broker.inject("retrieve", times=None, **fault)
    problem(app.finish(started.reference, ids_query(started)), status, code)
    assert started.refresh().status == Status.PENDING
    broker.heal()
    assert app.finish(started.reference, ids_query(started)).json()["status"] == "SUCCESS"
    assert signals.names == ["identification_started", "identification_succeeded"]


def test_not_configured_any_more(
    app: Api, broker: ScriptedBroker, eid: Callable[..., None]
) -> None:
    started = api_start(app, broker)
    eid(CLIENT_SECRET=None)
    problem(app.finish(started.reference, ids_query(started)), 503, "not_available")
    assert started.refresh().status == Status.PENDING


def test_another_user_s_token_finds_nothing(app: Api, bob_app: Api, broker: ScriptedBroker) -> None:
    started = api_start(app, broker)
    identified(broker, started, OTHER_DEVICE)
    problem(bob_app.finish(started.reference, ids_query(started)), 404, "invalid_link")
    assert started.refresh().status == Status.PENDING
    assert broker.retrieve_requests == []


# -- with the site's session -------------------------------------------------------------------
def test_with_the_session_only_the_browser_that_started_may_finish(
    api: Api, broker: ScriptedBroker, alice: Any, frontend: dict[str, str]
) -> None:
    started = api_start(api, broker)
    identified(broker, started, OTHER_DEVICE)
    other = Api(Client(HTTP_USER_AGENT=UA))
    other.client.force_login(alice)
    refused = problem(other.finish(started.reference, ids_query(started)), 403, "not_this_browser")
    assert "errors" not in refused
    assert started.refresh().status == Status.PENDING
    body = api.finish(started.reference, ids_query(started)).json()
    assert body["status"] == "SUCCESS"
    assert started.reference not in api.client.session["django_eid_pending"]


def test_with_the_session_a_return_in_the_starting_browser_needs_no_forwarding(
    api: Api, broker: ScriptedBroker, frontend: dict[str, str]
) -> None:
    started = api_start(api, broker)
    response = api.client.get(identified(broker, started, OTHER_DEVICE))
    assert response["Location"] == front_end("success", started)
    assert started.refresh().status == Status.SUCCESS


def test_a_return_for_another_identification_of_the_same_user_is_refused(
    app: Api, broker: ScriptedBroker
) -> None:
    first = api_start(app, broker)
    second = api_start(app, broker)
    identified(broker, first, OTHER_DEVICE)
    problem(app.finish(second.reference, ids_query(first)), 400, "answer_mismatch")
    assert second.refresh().status == Status.PENDING


def test_the_refusals_hold_no_personal_data(app: Api, broker: ScriptedBroker) -> None:
    started = api_start(app, broker)
    identified(broker, started, OTHER_DEVICE)
    response = app.finish(started.reference, ids_query(started, externalId="x"))
    text = json.dumps(response.json())
    assert SAMPLE.last_name not in text
    assert started.request_id not in text


@pytest.mark.apis(*REST_APIS, reason=NO_SESSION_TO_ASK)
def test_a_same_device_identification_is_already_finished_when_the_app_asks(
    broker_api: str, app: Api, broker: ScriptedBroker, signals: Signals
) -> None:
    started = api_start(app, broker)
    url = forwarded(identified(broker, started, SAME_DEVICE))
    assert url == front_end("success", started)
    assert started.refresh().status == Status.SUCCESS
    body = app.finish(started.reference, ids_query(started)).json()
    assert body["status"] == "SUCCESS"
    assert len(signals.of("identification_succeeded")) == 1


# -- forwarding ---------------------------------------------------------------------------------
def test_the_forward_keeps_the_front_end_url_s_own_query_and_fragment(
    app: Api, broker: ScriptedBroker, eid: Callable[..., None]
) -> None:
    eid(
        FRONTEND_URLS={**FRONTEND, "success": "https://app.example.com/v?lang=nb#/done/{reference}"}
    )
    started = api_start(app, broker)
    url = forwarded(identified(broker, started, OTHER_DEVICE))
    parts = urlsplit(url)
    assert (parts.path, parts.fragment) == ("/v", f"/done/{started.reference}")
    assert parse_qs(parts.query) == {
        "lang": ["nb"],
        "eid_return": ["success"],
        **returned_ids(started),
    }
    assert app.finish(started.reference, parts.query).json()["status"] == "SUCCESS"


def test_a_failure_returned_to_another_browser_goes_to_the_front_end_s_error_url(
    app: Api, broker: ScriptedBroker
) -> None:
    started = api_start(app, broker)
    url = forwarded(started.error_url("TIMEOUT"))
    assert url == front_end("error", started)
    assert started.refresh().status == Status.ERROR
    assert app.identification(started.reference).json()["outcome"]["code"] == "failed"


def test_the_broker_down_during_the_return_still_forwards_it(
    broker_api: str, app: Api, broker: ScriptedBroker
) -> None:
    started = api_start(app, broker)
    success_url = identified(broker, started, SAME_DEVICE)
    # v1 asks its status call; the successors, which have none, the record.
    broker.fail_next("status" if started.api == "v1" else "retrieve", 503, times=None)
    url = forwarded(success_url)
    assert parse_qs(urlsplit(url).query)["eid_return"] == ["success"]
    assert started.refresh().status == Status.PENDING
    broker.heal()
    assert app.finish(started.reference, urlsplit(url).query).json()["status"] == "SUCCESS"


def test_a_forged_return_in_another_browser_is_not_forwarded(
    broker_api: str, app: Api, broker: ScriptedBroker
) -> None:
    started = api_start(app, broker)
    identified(broker, started, OTHER_DEVICE)
    browser = Client()
    response = browser.get(f"{started.success_url(p2='0' * 32)}&eid_retry=1")
    # OIDC: the one callback URL, whose state names no identification: a link to nothing.
    assert response.status_code == (404 if started.is_oidc else 403)
    assert "Location" not in response
    assert broker.status_requests == []


def test_without_the_interstitial_the_return_is_forwarded_at_once(
    app: Api, broker: ScriptedBroker, eid: Callable[..., None]
) -> None:
    eid(CALLBACK_INTERSTITIAL=False)
    started = api_start(app, broker)
    response = Client().get(identified(broker, started, OTHER_DEVICE))
    assert response.status_code == 302
    assert parse_qs(urlsplit(response["Location"]).query)["eid_return"] == ["success"]


def test_a_return_of_a_row_under_a_removed_key(
    app: Api, broker: ScriptedBroker, eid: Callable[..., None]
) -> None:
    eid(GET_SOCIAL_SECURITY_NUMBER=True, ENCRYPTION_KEYS=["o" * 43 + "="])
    started = api_start(app, broker)
    identified(broker, started, OTHER_DEVICE)
    assert app.finish(started.reference, ids_query(started)).json()["status"] == "SUCCESS"
    eid(API_EXPOSE_SOCIAL_SECURITY_NUMBER=True, ENCRYPTION_KEYS=["n" * 43 + "="])
    assert app.identification(started.reference).status_code == 200
    response = app.finish(started.reference, ids_query(started))
    assert response.status_code == 200
    assert response.json()["identity"]["social_security_number"] is None


# -- the start's secret: the front end that started, not only the account -----------------------
def almost(secret: str) -> str:
    """``secret`` with its last character changed (always: never to itself)."""
    return secret[:-1] + ("B" if secret.endswith("A") else "A")


def test_the_owner_s_token_without_the_start_s_secret_cannot_finish(
    app: Api, broker: ScriptedBroker, eid: Callable[..., None], signals: Signals
) -> None:
    """The relay: the owner starts in his app and gets somebody else to identify at the
    broker's ``url`` on her phone; her browser is forwarded with the ids. Holding that URL
    and the owner's token is not enough: the secret stayed in the front end that started."""
    eid(COMPLETE_WITHOUT_CALLBACK="never")
    started = api_start(app, broker)
    query = query_of(forwarded(identified(broker, started, OTHER_DEVICE)))
    stranger = Api(app.client, headers=app.headers)  # the same token, not the start's memory
    for secret in ("", "x" * 43, almost(app.secrets[started.reference])):
        refused = problem(
            stranger.finish(started.reference, query, secret=secret), 403, "not_this_browser"
        )
        assert "identity" not in refused
    assert started.refresh().status == Status.PENDING
    assert broker.retrieve_requests == []
    assert signals.of("identification_succeeded") == []
    # The front end that started still finishes it.
    assert app.finish(started.reference, query).json()["status"] == "SUCCESS"


def test_the_secret_is_kept_only_as_a_hash(app: Api, broker: ScriptedBroker) -> None:
    started = api_start(app, broker)
    secret = started.response.json()["secret"]
    assert len(secret) >= 43
    row = started.row
    assert row.return_key == hashlib.sha256(secret.encode()).hexdigest()
    stored = Identification.objects.filter(pk=row.pk).values().get()
    assert secret not in json.dumps(stored, default=str)


def test_an_identification_started_from_the_html_pages_is_not_finished_here(
    alice: Any, broker: ScriptedBroker, eid: Callable[..., None]
) -> None:
    """Its return URL is bound to its browser; a token holding its ids does not replace it."""
    browser = logged_in(alice, HTTP_USER_AGENT=UA)
    assert browser.post("/eid/start/", {"display": "redirect"}).status_code == 302
    row = Identification.objects.get()
    assert row.channel == Identification.Channel.HTML
    broker.broker.open(row.request_id)
    broker.broker.identify(row.request_id, SAMPLE, **OTHER_DEVICE)
    eid(API_AUTHENTICATION_CLASSES=TOKEN_AUTH)
    app = token_client(alice)
    query = f"eid_return=success&requestId={row.request_id}&externalId={row.external_id}"
    problem(app.finish(row.reference, query, secret="x" * 43), 403, "not_this_browser")
    row.refresh_from_db()
    assert row.status == Status.PENDING


@pytest.mark.skipif(django.VERSION < (5, 1), reason="LoginRequiredMiddleware is Django 5.1+")
def test_login_required_middleware_does_not_stop_the_return_in_another_browser(
    app: Api, broker: ScriptedBroker, settings: Any
) -> None:
    """The phone's browser has no session: the return URL must still reach the front end."""
    with_login_required(settings)
    started = api_start(app, broker)
    url = forwarded(identified(broker, started, OTHER_DEVICE))
    assert urlsplit(url).netloc == urlsplit(FRONTEND["success"]).netloc
    assert app.finish(started.reference, query_of(url)).json()["status"] == "SUCCESS"


@pytest.mark.parametrize(
    "raw",
    [
        rb'{"query": "eid_return=success", "secret": "\ud800"}',
        rb'{"query": "eid_return=success&requestId=\udc00"}',
    ],
    ids=["secret", "query"],
)
def test_a_lone_surrogate_in_a_return_is_a_400_and_the_row_stays_pending(
    api: Api, broker: ScriptedBroker, raw: bytes
) -> None:
    started = api_start(api, broker)
    response = api.post(f"/identifications/{started.reference}/return/", raw=raw)
    problem(response, 400, "invalid_body")
    assert started.refresh().status == Status.PENDING
