"""Who is asking: the site's session (CSRF enforced on ``POST``) or REST framework's
authentication classes; ``401`` as JSON, never a redirect to the login page; ``405``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import django
import pytest
from django.contrib.auth.models import AbstractBaseUser
from django.test import Client

from django_eid.models import Identification
from tests.api.conftest import (
    TOKEN_AUTH,
    UA,
    Api,
    api_start,
    assert_documented,
    problem,
    token_client,
    with_login_required,
)
from tests.fixtures_broker import ScriptedBroker
from tests.fixtures_views import Signals

pytestmark = pytest.mark.django_db

REFERENCE = "A" * 32
#: Every endpoint that needs a user, with its method.
PROTECTED = [
    ("POST", "/identifications/"),
    ("GET", f"/identifications/{REFERENCE}/"),
    ("POST", f"/identifications/{REFERENCE}/cancel/"),
    ("POST", f"/identifications/{REFERENCE}/return/"),
    ("GET", "/me/"),
]
SESSION_AUTH = ["rest_framework.authentication.SessionAuthentication"]


def call(api: Api, method: str, path: str, **kwargs: Any) -> Any:
    if method == "GET":
        return api.get(path, **kwargs)
    return api.post(path, {}, **kwargs)


# -- nobody --------------------------------------------------------------------------------------
@pytest.mark.parametrize(("method", "path"), PROTECTED)
def test_nobody_logged_in_is_401_json_not_a_redirect(
    broker: ScriptedBroker, method: str, path: str
) -> None:
    response = call(Api(Client()), method, path)
    refused = problem(response, 401, "login_required")
    assert refused["message"] == "Please log in to verify your identity."
    assert "Location" not in response
    assert "no-store" in response["Cache-Control"]
    assert broker.create_requests == []


@pytest.mark.parametrize(("method", "path"), PROTECTED)
def test_a_bad_token_is_401_with_the_challenge(
    broker: ScriptedBroker, token_auth: None, method: str, path: str
) -> None:
    for headers in ({}, {"Authorization": "Token nope"}, {"Authorization": "Token"}):
        response = call(Api(Client(), headers=headers), method, path)
        problem(response, 401, "login_required")
        assert response["WWW-Authenticate"] == "Token"


def test_with_token_authentication_the_session_is_not_accepted(
    api: Api, broker: ScriptedBroker, token_auth: None
) -> None:
    problem(api.start(), 401, "login_required")
    problem(api.me(), 401, "login_required")
    assert broker.create_requests == []


def test_an_inactive_user_s_token_is_refused(
    alice: AbstractBaseUser, broker: ScriptedBroker, token_auth: None
) -> None:
    app = token_client(alice)
    alice.is_active = False
    alice.save()
    problem(app.me(), 401, "login_required")


def test_the_schema_needs_nobody(token_auth: None) -> None:
    response = Client().get("/eid/api/schema/")
    assert response.status_code == 200
    assert response.json()["openapi"].startswith("3.1")


# -- the session and CSRF --------------------------------------------------------------------------
def csrf_browser(user: AbstractBaseUser) -> tuple[Api, str]:
    """A browser enforcing CSRF as a real one would, and the token a page gave it."""
    client = Client(enforce_csrf_checks=True, HTTP_USER_AGENT=UA)
    client.force_login(user)
    assert client.get("/eid/start/").status_code == 200  # a page with a form sets the cookie
    return Api(client), client.cookies["csrftoken"].value


def test_a_session_post_without_the_csrf_token_is_refused(
    alice: AbstractBaseUser, broker: ScriptedBroker
) -> None:
    browser, token = csrf_browser(alice)
    refused = problem(browser.start(), 403, "csrf_failed")
    assert "CSRF" in refused["message"]
    problem(browser.start(headers={"X-CSRFToken": "x" * 32}), 403, "csrf_failed")
    assert broker.create_requests == []
    started = api_start(browser, broker, headers={"X-CSRFToken": token})
    problem(browser.cancel(started.reference), 403, "csrf_failed")
    problem(browser.finish(started.reference, ""), 403, "csrf_failed")
    assert started.refresh().status == Identification.Status.PENDING
    assert browser.cancel(started.reference, headers={"X-CSRFToken": token}).status_code == 200


def test_a_session_get_needs_no_csrf_token(alice: AbstractBaseUser) -> None:
    browser, _token = csrf_browser(alice)
    assert browser.me().status_code == 200


def test_a_csrf_token_from_django_s_get_token(
    alice: AbstractBaseUser, broker: ScriptedBroker, rf: Any
) -> None:
    from django.middleware.csrf import get_token

    client = Client(enforce_csrf_checks=True)
    client.force_login(alice)
    request = rf.get("/")
    token = get_token(request)
    client.cookies["csrftoken"] = request.META["CSRF_COOKIE"]
    response = client.post(
        "/eid/api/identifications/", content_type="application/json", headers={"X-CSRFToken": token}
    )
    assert response.status_code == 201


def test_a_multipart_form_with_the_session_is_not_json(
    alice: AbstractBaseUser, broker: ScriptedBroker
) -> None:
    """Django's CSRF check reads a multipart form's stream (``request.POST``), after which
    the view cannot read the body: a JSON refusal, not a 500."""
    browser, token = csrf_browser(alice)
    response = browser.client.post(
        "/eid/api/identifications/", {"display": "iframe"}, headers={"X-CSRFToken": token}
    )
    refused = problem(response, 400, "invalid_body")
    assert refused["message"] == "Send the body as application/json."
    assert_documented(response, "/identifications/", "post")
    assert broker.create_requests == []


def test_a_post_from_another_origin_is_refused(
    alice: AbstractBaseUser, broker: ScriptedBroker
) -> None:
    browser, token = csrf_browser(alice)
    refused = browser.start(headers={"X-CSRFToken": token, "Origin": "https://evil.example"})
    problem(refused, 403, "csrf_failed")
    assert broker.create_requests == []


def test_rest_framework_s_session_authentication_enforces_csrf_too(
    alice: AbstractBaseUser, broker: ScriptedBroker, eid: Callable[..., None]
) -> None:
    eid(API_AUTHENTICATION_CLASSES=[*TOKEN_AUTH, *SESSION_AUTH])
    browser, token = csrf_browser(alice)
    problem(browser.start(), 403, "csrf_failed")
    assert broker.create_requests == []
    started = api_start(browser, broker, headers={"X-CSRFToken": token})
    # Authenticated by the session: the browser's one-time state applies, as without DRF.
    assert started.reference in browser.client.session["django_eid_pending"]
    assert browser.me().status_code == 200


def test_the_session_s_refusals_are_logged(
    alice: AbstractBaseUser, caplog: pytest.LogCaptureFixture
) -> None:
    browser, _token = csrf_browser(alice)
    browser.start()
    assert "CSRF check failed" in caplog.text


# -- tokens ----------------------------------------------------------------------------------------
def test_a_token_needs_no_csrf_token(app: Api, broker: ScriptedBroker) -> None:
    app.client = Client(enforce_csrf_checks=True, HTTP_USER_AGENT=UA)
    api_start(app, broker)


def test_the_signals_see_the_token_s_user(
    app: Api, broker: ScriptedBroker, signals: Signals, alice: AbstractBaseUser
) -> None:
    started = api_start(app, broker)
    app.cancel(started.reference)
    for name in ("identification_started", "identification_aborted"):
        (sent,) = signals.of(name)
        assert sent["request"].user == alice
        assert sent["user"] == alice


def test_a_token_sees_only_its_user_s_identifications(
    app: Api, bob_app: Api, broker: ScriptedBroker
) -> None:
    started = api_start(app, broker)
    problem(bob_app.identification(started.reference), 404, "invalid_link")
    assert app.identification(started.reference).status_code == 200


# -- methods --------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("method", "path", "allow"),
    [
        ("GET", "/identifications/", "POST"),
        ("PUT", "/identifications/", "POST"),
        ("DELETE", f"/identifications/{REFERENCE}/", "GET"),
        ("POST", f"/identifications/{REFERENCE}/", "GET"),
        ("GET", f"/identifications/{REFERENCE}/cancel/", "POST"),
        ("PATCH", f"/identifications/{REFERENCE}/return/", "POST"),
        ("POST", "/me/", "GET"),
        ("POST", "/schema/", "GET"),
    ],
)
def test_a_method_not_allowed(
    api: Api, broker: ScriptedBroker, method: str, path: str, allow: str
) -> None:
    response = api.request(method, path)
    problem(response, 405, "method_not_allowed")
    assert response["Allow"] == allow
    assert broker.create_requests == []


def test_a_method_not_allowed_is_405_even_for_nobody() -> None:
    response = Api(Client()).request("DELETE", "/me/")
    problem(response, 405, "method_not_allowed")


def test_rest_framework_s_session_authentication_reads_a_json_body(
    alice: AbstractBaseUser, broker: ScriptedBroker, eid: Callable[..., None]
) -> None:
    """Its CSRF check reads the request's data: a JSON body must parse there, not fail as
    an unsupported form (which once answered a logged-in user ``401``)."""
    eid(API_AUTHENTICATION_CLASSES=[*TOKEN_AUTH, *SESSION_AUTH])
    browser, token = csrf_browser(alice)
    started = api_start(browser, broker, {"display": "iframe"}, headers={"X-CSRFToken": token})
    assert started.row.display == Identification.Display.IFRAME
    refused = browser.start({"display": "iframe"}, headers={"X-CSRFToken": "x" * 64})
    problem(refused, 403, "csrf_failed")
    garbled = browser.start(raw="{not json", headers={"X-CSRFToken": token})
    problem(garbled, 400, "invalid_body")


def test_an_unimportable_authentication_class_is_a_documented_503(
    api: Api, eid: Callable[..., None]
) -> None:
    eid(API_AUTHENTICATION_CLASSES=["nowhere.Nothing"])
    problem(api.me(), 503, "not_available")
    problem(api.start(), 503, "not_available")


@pytest.mark.skipif(django.VERSION < (5, 1), reason="LoginRequiredMiddleware is Django 5.1+")
@pytest.mark.parametrize(("method", "path"), PROTECTED)
def test_login_required_middleware_leaves_the_api_to_answer(
    broker: ScriptedBroker, settings: Any, method: str, path: str
) -> None:
    """A site with Django's ``LoginRequiredMiddleware`` still gets ``401`` JSON (the API's
    views are exempt and authenticate themselves), and a token app reaches the API."""
    with_login_required(settings)
    problem(call(Api(Client()), method, path), 401, "login_required")
    assert Client().get("/eid/api/schema/").status_code == 200


@pytest.mark.skipif(django.VERSION < (5, 1), reason="LoginRequiredMiddleware is Django 5.1+")
def test_login_required_middleware_lets_a_token_app_in(
    app: Api, broker: ScriptedBroker, settings: Any
) -> None:
    with_login_required(settings)
    assert app.me().status_code == 200
    api_start(app, broker)
