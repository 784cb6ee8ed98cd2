"""The JSON API at the door: a visitor's browser (the site's session, CSRF token sent) starts
with ``purpose: "login"`` or ``"signup"``; the return logs it in (the HTML return URL, or
``api-return`` for a return forwarded to the front end) and says who is logged in now."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

import pytest
from django.contrib.auth import SESSION_KEY
from django.contrib.auth.models import AbstractBaseUser
from django.test import Client

from django_eid.models import Identification
from tests.api.conftest import OTHER_DEVICE, UA, Api, api_start, front_end, identified, problem
from tests.api.test_return import forwarded
from tests.fixtures_broker import ScriptedBroker
from tests.fixtures_views import Started

pytestmark = pytest.mark.django_db

Status = Identification.Status


def browser_api() -> Api:
    """A visitor's single-page app: CSRF enforced, its token read from the cookie."""
    client = Client(enforce_csrf_checks=True, HTTP_USER_AGENT=UA)
    client.get("/eid/login/")  # sets the csrftoken cookie
    return Api(client, headers={"X-CSRFToken": client.cookies["csrftoken"].value})


@pytest.fixture
def linked(verify: Callable[..., Identification], alice: AbstractBaseUser) -> AbstractBaseUser:
    assert verify().status == Status.SUCCESS
    return alice


def test_a_visitor_starts_at_the_door_and_the_return_logs_the_browser_in(
    broker: ScriptedBroker, linked: AbstractBaseUser, frontend: dict[str, str]
) -> None:
    spa = browser_api()
    started = api_start(spa, broker, {"purpose": "login"})
    row = started.row
    assert (row.purpose, row.user_id, row.channel) == ("login", None, "api")
    broker.will_return(started.request_id)
    response = spa.client.get(started.success_url())
    assert response.status_code == 302
    assert response["Location"] == front_end("success", started)
    assert spa.client.session[SESSION_KEY] == str(linked.pk)
    me = spa.get("/me/")
    assert me.status_code == 200
    assert me.json()["links"][0]["provider"] == started.refresh().identity_provider


def test_a_forwarded_return_logs_in_the_front_end_that_started(
    broker_api: str, broker: ScriptedBroker, linked: AbstractBaseUser, frontend: dict[str, str]
) -> None:
    """Every API: the person identified in the app, the return opened another browser and
    was forwarded to the front end, which sends it with its secret (``api-return``): its own
    browser is logged in, and the answer says as whom."""
    spa = browser_api()
    started = api_start(spa, broker, {"purpose": "login"})
    url = forwarded(identified(broker, started, OTHER_DEVICE))
    response = spa.finish(started.reference, urlsplit(url).query)
    assert response.status_code == 200, response.content
    body = response.json()
    assert (body["status"], body["purpose"], body["door"]) == ("SUCCESS", "login", "logged_in")
    assert body["user"] == {"id": str(linked.pk), "username": linked.get_username()}
    assert spa.client.session[SESSION_KEY] == str(linked.pk)


def test_a_forwarded_return_without_an_account_signs_up_as_signup_says(
    broker: ScriptedBroker, eid: Callable[..., None], frontend: dict[str, str]
) -> None:
    eid(SIGNUP="form")
    spa = browser_api()
    started = api_start(spa, broker, {"purpose": "signup"})
    url = forwarded(identified(broker, started, OTHER_DEVICE))
    body = spa.finish(started.reference, urlsplit(url).query).json()
    assert (body["door"], body["user"]) == ("signup_form", None)
    assert spa.client.get("/eid/signup/").status_code == 200


def test_another_browser_cannot_send_the_return(
    broker: ScriptedBroker, linked: AbstractBaseUser, frontend: dict[str, str]
) -> None:
    spa = browser_api()
    started = api_start(spa, broker, {"purpose": "login"})
    url = forwarded(identified(broker, started, OTHER_DEVICE))
    thief = browser_api()
    problem(thief.finish(started.reference, urlsplit(url).query), 403, "not_this_browser")
    assert SESSION_KEY not in thief.client.session
    assert (started.refresh().status, started.refresh().user_id) == (Status.PENDING, None)


def test_a_visitor_only_starts_at_the_door(broker: ScriptedBroker) -> None:
    spa = browser_api()
    problem(spa.start(), 401, "login_required")
    problem(spa.start({"purpose": "verify"}), 401, "login_required")
    body = problem(spa.start({"purpose": "enter"}), 400, "purpose_invalid")
    assert body["errors"][0]["field"] == "purpose"
    assert broker.create_requests == []


def test_a_start_at_the_door_needs_the_csrf_token(broker: ScriptedBroker) -> None:
    """Login CSRF: another site's page cannot start a login in the visitor's browser."""
    spa = browser_api()
    problem(spa.start({"purpose": "login"}, headers={"X-CSRFToken": ""}), 403, "csrf_failed")
    assert broker.create_requests == []


def test_a_logged_in_caller_at_the_door_verifies(
    broker: ScriptedBroker, alice: AbstractBaseUser
) -> None:
    from tests.fixtures_views import logged_in

    api = Api(logged_in(alice))
    started = api_start(api, broker, {"purpose": "login"})
    assert (started.row.purpose, started.row.user_id) == ("verify", alice.pk)


def test_a_refused_token_is_not_a_visitor(broker: ScriptedBroker, token_auth: None) -> None:
    """Credentials sent and refused stay a 401: never a start at the door."""
    app = Api(Client(), headers={"Authorization": "Token nope"})
    problem(app.start({"purpose": "login"}), 401, "login_required")
    assert broker.create_requests == []


def test_a_visitor_s_return_of_a_verification_is_401(
    broker: ScriptedBroker, alice: AbstractBaseUser
) -> None:
    from tests.fixtures_views import logged_in

    started: Started = api_start(Api(logged_in(alice)), broker)
    problem(browser_api().finish(started.reference, "eid_return=success"), 401, "login_required")


def test_the_secret_again_logs_nobody_in(
    broker: ScriptedBroker, linked: AbstractBaseUser, frontend: dict[str, str]
) -> None:
    """A replay of a login's api-return (a restored tab after a logout, the secret left in
    the page's storage) is refused: only the request that finished it, or the browser that
    still holds its state, logs in."""
    spa = browser_api()
    started = api_start(spa, broker, {"purpose": "login"})
    query = urlsplit(forwarded(identified(broker, started, OTHER_DEVICE))).query
    assert spa.finish(started.reference, query).status_code == 200
    spa.client.logout()
    spa.client.get("/eid/login/")  # a new CSRF cookie, as the page after a logout sets
    spa = Api(spa.client, headers={"X-CSRFToken": spa.client.cookies["csrftoken"].value})
    spa.secrets = {started.reference: browser_secret(started)}
    problem(spa.finish(started.reference, query), 403, "not_this_browser")
    assert SESSION_KEY not in spa.client.session
    other = browser_api()
    other.secrets = {started.reference: browser_secret(started)}
    problem(other.finish(started.reference, "eid_return=success"), 403, "not_this_browser")
    assert SESSION_KEY not in other.client.session


def browser_secret(started: Started) -> str:
    secret: str = started.response.json()["secret"]
    return secret


def test_a_browser_logged_in_by_session_is_no_visitor_where_the_api_takes_tokens(
    broker: ScriptedBroker, bob: AbstractBaseUser, token_auth: None
) -> None:
    """No account switching through the door: Bob's browser, logged in by the site's
    session, is refused as the token API refuses it, never started as a visitor's login."""
    from tests.fixtures_views import logged_in

    client = logged_in(bob)
    problem(Api(client).start({"purpose": "login"}), 401, "login_required")
    assert broker.create_requests == []


def test_the_api_s_door_is_closed_until_the_backend_is_installed(
    broker: ScriptedBroker, settings: Any
) -> None:
    spa = browser_api()  # its CSRF cookie from the login page, while the door was open
    settings.AUTHENTICATION_BACKENDS = ["django.contrib.auth.backends.ModelBackend"]
    problem(spa.start({"purpose": "login"}), 503, "not_available")
    assert broker.create_requests == []


def test_a_start_at_the_door_with_the_broker_down(broker: ScriptedBroker) -> None:
    """Answered as every start that fails at the broker; the row written once, as ERROR."""
    broker.will_fail_create(500)
    problem(browser_api().start({"purpose": "login"}), 503, "broker_unreachable")
    (row,) = Identification.objects.all()
    assert (row.status, row.user_id, row.purpose) == (Status.ERROR, None, "login")
