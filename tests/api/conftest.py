"""Fixtures of the JSON API suite: front ends calling ``/eid/api/``, and the broker.

A test runs once per broker API when it asks for ``broker_api`` (what the broker's API
changes: the start's request, the returns and how they are read, settling, cancelling at
the broker, its errors), else once, against the default sandbox (v1). The vocabulary is the
suite's (``tests/conftest.py``): ``alice`` and ``bob``, ``broker`` (the sandbox behind
``responses``, :class:`tests.fixtures_broker.ScriptedBroker`), ``signals``, and the ``eid``
settings fixture. A front end is an :class:`Api`: one test client (a browser with the
site's session, or a mobile app sending a token) and the calls of the API. Every answer is
checked against the shipped OpenAPI document by the test middleware
(:mod:`tests.openapi_check`).

The person at the broker identifies with :func:`identified`, on the device that started
(:data:`SAME_DEVICE`: the test client's address and user agent) or on another one
(:data:`OTHER_DEVICE`), so that completion without the callback applies, or does not.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any
from urllib.parse import urlencode, urlsplit

import jsonschema
import pytest
from django.contrib.auth.models import AbstractBaseUser
from django.test import Client

from django_eid.api import openapi_document
from django_eid.conf import eid_settings
from django_eid.flows import settle
from django_eid.models import Identification
from django_eid.sandbox.persons import Person
from tests.fixtures_broker import SAMPLE, ScriptedBroker
from tests.fixtures_views import Started, logged_in

__all__ = [
    "API",
    "FRONTEND",
    "FRONTEND_HOST",
    "OPENAPI_CHECK",
    "OTHER_DEVICE",
    "SAME_DEVICE",
    "TOKEN_AUTH",
    "UA",
    "Api",
    "_settle_interval_never_runs_out",
    "aborted",
    "api",
    "api_start",
    "app",
    "bob_api",
    "bob_app",
    "front_end",
    "frontend",
    "identified",
    "made_late",
    "token_auth",
    "with_login_required",
]

#: Where the tests' URLconf mounts the API.
API = "/eid/api"
#: The browser (or app) that starts: the test client's address, and this user agent.
UA = "Mozilla/5.0 (iPhone; CPU iPhone OS 18_0) Mobile/15E148"
SAME_DEVICE: dict[str, str] = {"ip_address": "127.0.0.1", "user_agent": UA}
OTHER_DEVICE: dict[str, str] = {"ip_address": "198.51.100.23", "user_agent": UA}
#: The single-page app / mobile app front end.
FRONTEND_HOST = "app.example.com"
FRONTEND: dict[str, str] = {
    "success": f"https://{FRONTEND_HOST}/verified/{{reference}}",
    "abort": f"https://{FRONTEND_HOST}/cancelled/{{reference}}",
    "error": f"https://{FRONTEND_HOST}/failed/{{reference}}",
}
TOKEN_AUTH = ["rest_framework.authentication.TokenAuthentication"]
#: The test middleware that checks every answer of the API against the OpenAPI document.
OPENAPI_CHECK = "tests.openapi_check.OpenAPIResponseCheck"


class Api:
    """A front end calling the JSON API through ``client`` (its cookies and ``headers``)."""

    def __init__(self, client: Client, headers: Mapping[str, str] | None = None) -> None:
        self.client = client
        self.headers = dict(headers or {})
        #: The ``secret`` of each identification this front end started, as it keeps them.
        self.secrets: dict[str, str] = {}

    def _headers(self, headers: Mapping[str, str] | None) -> dict[str, str]:
        return {**self.headers, **(headers or {})}

    def post(
        self,
        path: str,
        body: Any = None,
        *,
        raw: bytes | str | None = None,
        content_type: str = "application/json",
        headers: Mapping[str, str] | None = None,
    ) -> Any:
        """POST ``body`` as JSON (nothing when ``None``), or ``raw`` as it is."""
        data: bytes | str = raw if raw is not None else b"" if body is None else json.dumps(body)
        return self.client.generic(
            "POST", f"{API}{path}", data, content_type=content_type, headers=self._headers(headers)
        )

    def get(
        self,
        path: str,
        query: Mapping[str, Any] | None = None,
        *,
        headers: Mapping[str, str] | None = None,
    ) -> Any:
        url = f"{API}{path}"
        if query:
            url += "?" + urlencode(query, doseq=True)
        return self.client.get(url, headers=self._headers(headers))

    def request(self, method: str, path: str) -> Any:
        return self.client.generic(method, f"{API}{path}", headers=self.headers)

    # -- the endpoints -------------------------------------------------------------------
    def start(self, body: Any = None, **kwargs: Any) -> Any:
        response = self.post("/identifications/", body, **kwargs)
        if response.status_code == 201:
            started = response.json()
            self.secrets[started["reference"]] = started["secret"]
        return response

    def identification(self, reference: str, **kwargs: Any) -> Any:
        return self.get(f"/identifications/{reference}/", **kwargs)

    def cancel(self, reference: str, **kwargs: Any) -> Any:
        return self.post(f"/identifications/{reference}/cancel/", **kwargs)

    def finish(
        self, reference: str, query: str, *, secret: str | None = None, **kwargs: Any
    ) -> Any:
        """``api-return`` with the query string the front end was forwarded, and the secret
        of the start this front end kept (``secret=""``: none; else that one)."""
        body = {"query": query}
        kept = self.secrets.get(reference) if secret is None else secret
        if kept:
            body["secret"] = kept
        return self.post(f"/identifications/{reference}/return/", body, **kwargs)

    def me(self, query: Mapping[str, Any] | None = None, **kwargs: Any) -> Any:
        return self.get("/me/", query, **kwargs)


def api_start(api: Api, broker: ScriptedBroker, body: Any = None, **kwargs: Any) -> Started:
    """Start through ``api-start`` (``201``); the row and its return URLs as the broker has them."""
    before = len(broker.create_requests)
    response = api.start(body, **kwargs)
    assert response.status_code == 201, response.content
    assert len(broker.create_requests) == before + 1
    sent = broker.sent()
    reference = response.json()["reference"]
    row = Identification.objects.get(reference=reference)
    assert row.request_id is not None
    started = Started(
        response,
        sent,
        row.pk,
        reference,
        row.request_id,
        row.external_id,
        broker,
        eid_settings.BROKER_API,
    )
    if started.is_oidc:  # the one callback URL: the OP's state is the row's external id
        assert started.session.wire["state"] == row.external_id
    else:
        assert urlsplit(started.return_urls["Success"]).path.split("/")[3] == reference
    return started


def settled_by_its_return(api: Api, started: Started, url: str) -> None:
    """OpenID Connect: no poll settles a row (no session to ask); the front end forwards
    the return (``url``) the person came back with instead. Nothing for the REST APIs."""
    if started.is_oidc:
        response = api.finish(started.reference, f"eid_return=success&{query_of(url)}")
        assert response.status_code == 200, response.content


def identified(
    broker: ScriptedBroker, started: Started, device: Mapping[str, str], person: Person = SAMPLE
) -> str:
    """The person identified at the broker on ``device``; the Success URL the broker sends
    them to (path and query, for the test client)."""
    session_id = broker.session_id(started.request_id)
    broker.broker.open(session_id)
    broker.broker.identify(session_id, person, **device)
    return started.success_url()


def aborted(broker: ScriptedBroker, started: Started) -> str:
    """The person cancelled at the broker; the Abort URL the broker sends them to."""
    broker.broker.open(started.request_id)
    broker.broker.abort(started.request_id)
    return started.abort_url()


def made_late(eid: Callable[..., None], started: Started) -> None:
    """``started`` is past ``SESSION_MAX_AGE`` (one second, and it started in 2000)."""
    eid(SESSION_MAX_AGE=1)
    created_at = started.row.created_at.replace(year=2000)
    Identification.objects.filter(pk=started.pk).update(created_at=created_at)


def front_end(kind: str, started: Started) -> str:
    """The front end's URL of ``kind`` (:data:`FRONTEND`) for ``started``."""
    return FRONTEND[kind].replace("{reference}", started.reference)


def with_login_required(settings: Any) -> None:
    """Django's ``LoginRequiredMiddleware`` added to the site's middleware (Django 5.1+)."""
    settings.MIDDLEWARE = [
        *settings.MIDDLEWARE,
        "django.contrib.auth.middleware.LoginRequiredMiddleware",
    ]


@pytest.fixture(autouse=True)
def _settle_interval_never_runs_out(monkeypatch: pytest.MonkeyPatch) -> None:
    """A poll is due again only when a test says so (``cache.clear()``), however slowly the
    test runs: no test depends on the clock."""
    monkeypatch.setattr(settle, "SETTLE_INTERVAL", 24 * 3600)


# -- front ends ------------------------------------------------------------------------------
@pytest.fixture
def api(alice: AbstractBaseUser) -> Api:
    """Alice's browser, authenticated by the site's session (the default)."""
    return Api(logged_in(alice, HTTP_USER_AGENT=UA))


@pytest.fixture
def bob_api(bob: AbstractBaseUser) -> Api:
    return Api(logged_in(bob, HTTP_USER_AGENT=UA))


@pytest.fixture
def frontend(eid: Callable[..., None]) -> dict[str, str]:
    """``FRONTEND_URLS`` set, on the front end's host."""
    eid(FRONTEND_URLS=FRONTEND, FRONTEND_ALLOWED_HOSTS=[FRONTEND_HOST])
    return FRONTEND


@pytest.fixture
def token_auth(eid: Callable[..., None], frontend: dict[str, str]) -> None:
    """The API authenticates with REST framework's ``TokenAuthentication`` (a mobile app)."""
    eid(API_AUTHENTICATION_CLASSES=TOKEN_AUTH)


def token_client(user: AbstractBaseUser) -> Api:
    """An app sending ``Authorization: Token ...`` for ``user``, and no session cookie."""
    from rest_framework.authtoken.models import Token

    token = Token.objects.create(user=user)
    return Api(Client(HTTP_USER_AGENT=UA), headers={"Authorization": f"Token {token.key}"})


@pytest.fixture
def app(alice: AbstractBaseUser, token_auth: None) -> Api:
    """Alice's mobile app, authenticated by her token."""
    return token_client(alice)


@pytest.fixture
def bob_app(bob: AbstractBaseUser, token_auth: None) -> Api:
    return token_client(bob)


def query_of(url: str) -> str:
    return urlsplit(url).query


def problem(response: Any, status: int, code: str) -> dict[str, Any]:
    """Assert ``response`` is the JSON refusal ``code`` with ``status``; its body."""
    assert response.status_code == status, (response.status_code, response.content)
    assert response["Content-Type"] == "application/json"
    body: dict[str, Any] = response.json()
    assert body["code"] == code, body
    assert body["message"]
    return body


def fields_of(body: Mapping[str, Any]) -> Sequence[tuple[str, str]]:
    """``(field, code)`` of each error of a refusal, in order."""
    return [(error["field"], error["code"]) for error in body.get("errors", [])]


def assert_documented(response: Any, path: str, method: str) -> None:
    """Validate a JSON answer against the document's schema for ``path``, ``method`` and its
    status: for the few requests whose body the OpenAPI check middleware cannot read."""
    document = openapi_document()
    described = document["paths"][path][method]["responses"][str(response.status_code)]
    schema = described["content"]["application/json"]["schema"]
    jsonschema.Draft202012Validator({"components": document["components"], **schema}).validate(
        response.json()
    )
