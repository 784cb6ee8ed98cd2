"""The broker of the view-level suites (flow, hostile): the sandbox, scripted.

One model of the broker serves every suite: :class:`ScriptedBroker` is the
public ``eid_broker`` double (:class:`~django_eid.sandbox.fake.EidBroker`, the
sandbox's :class:`~django_eid.sandbox.broker.SandboxBroker` behind
``responses``) with what these suites add on top: the request ids and the
token known in advance, the login page at a fixed URL, a count of calls, and
the short names the tests script it with. Records are the sandbox's record of
:data:`SAMPLE`, a built-in person, changed field by field where a test needs it.
"""

from __future__ import annotations

import itertools
import json
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import requests

from django_eid.sandbox.broker import record_of
from django_eid.sandbox.fake import EidBroker
from django_eid.sandbox.faults import Answer, Endpoint, Raised
from django_eid.sandbox.persons import builtin_persons
from tests.fixtures_client import CLIENT_ID, SECRET, SESSION_URL, TOKEN_URL

#: The person of every record the suites are sent; its fields are the expected values.
SAMPLE = builtin_persons().NORWEGIAN
SSN = SAMPLE.national_identity_number
UNIQUE_ID = SAMPLE.identity_provider_unique_id or ""
#: Where the broker sends the user (the ``Url`` of every create response).
BROKER_PAGE = "https://id.broker.test/NoBankIDWeb/Start?sessionid=Qm9nZXQ&language=NO"
#: The one access token the broker issues, known in advance so tests can look for leaks.
ACCESS_TOKEN = "eyJhbGciOiJSUzI1NiJ9.eyJzY29wZSI6WyJpZGVudGlmeSJdfQ.c2lnbmF0dXJlLXNlY3JldA"
#: base64("test-client:test-secret-s3cr3t-value"): the Basic credentials.
BASIC_CREDENTIALS = "dGVzdC1jbGllbnQ6dGVzdC1zZWNyZXQtczNjcjN0LXZhbHVl"

_ids = itertools.count(1)


def new_request_id() -> str:
    """A request id in the shape of the public sample (200 characters, unique)."""
    head = "3391840571230098455xkQJrTgWL4Aq7RsIemzU8umZSsYNWcEFH1PbCVkdfHZjb6tfny"
    return (head * 3)[:188] + f"{next(_ids):012d}"


def record(request_id: str, status: str = "SUCCESS", **overrides: Any) -> dict[str, Any]:
    """The sandbox's record of :data:`SAMPLE`; an override of ``...`` removes the property."""
    body = record_of(SAMPLE, request_id, status)
    for key, value in overrides.items():
        if value is ...:
            body.pop(key, None)
        else:
            body[key] = value
    return body


@dataclass(frozen=True)
class Scripted:
    """An answer a test scripts for one endpoint: a status with a body, or a raised error."""

    status: int = 200
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)
    exception: Raised | None = None


def reply(
    status: int = 200,
    body: Any = None,
    *,
    raw: bytes | str | None = None,
    headers: dict[str, str] | None = None,
) -> Scripted:
    """An HTTP answer: ``body`` is sent as JSON (nothing when ``None``), ``raw`` as is, as HTML."""
    if raw is not None:
        content = raw.encode() if isinstance(raw, str) else raw
        return Scripted(status, content, {"Content-Type": "text/html", **(headers or {})})
    content = b"" if body is None else json.dumps(body).encode()
    return Scripted(status, content, {"Content-Type": "application/json", **(headers or {})})


def raises(factory: Callable[[], BaseException]) -> Scripted:
    """A transport failure: the client sees ``factory()`` raised by ``requests``."""
    return Scripted(exception=factory)


class ScriptedBroker(EidBroker):
    """The sandbox broker at the test settings' URLs, scripted by the test."""

    def __init__(self) -> None:
        self.next_request_ids: list[str] = []
        super().__init__(
            token_url=TOKEN_URL,
            session_url=SESSION_URL,
            client_id=CLIENT_ID,
            client_secret=SECRET,
            login_url=lambda request_id: BROKER_PAGE,
            request_ids=self._request_id,
            tokens=lambda: ACCESS_TOKEN,
        )
        #: Calls per endpoint (``counts.clear()`` to count from here).
        self.counts: Counter[str] = Counter()

    def _request_id(self) -> str:
        return self.next_request_ids.pop(0) if self.next_request_ids else new_request_id()

    def serve(self, endpoint: Endpoint, request: requests.PreparedRequest) -> Answer:
        self.counts[endpoint] += 1
        return super().serve(endpoint, request)

    # -- scripting ------------------------------------------------------------------
    def script(
        self,
        endpoint: Endpoint,
        answer: Scripted,
        *,
        times: int | None = None,
        request_id: str | None = None,
    ) -> None:
        """Answer ``endpoint`` with ``answer`` (see :meth:`EidBroker.inject`)."""
        self.inject(
            endpoint,
            answer.status,
            body=answer.body,
            headers=answer.headers,
            exception=answer.exception,
            times=times,
            request_id=request_id,
        )

    def fault(self, kind: Endpoint, answer: Scripted, *, once: bool = False) -> None:
        """Answer ``kind`` calls with ``answer``: the next one (``once``) or all of them."""
        self.script(kind, answer, times=1 if once else None)

    def answer_record(self, request_id: str, answer: dict[str, Any] | Scripted) -> None:
        """Retrieving ``request_id`` answers ``answer`` (a record) until healed."""
        scripted = answer if isinstance(answer, Scripted) else reply(body=answer)
        self.script("retrieve", scripted, request_id=request_id)

    def will_create(self, request_id: str | None = None) -> str:
        """The next session created gets ``request_id`` (a fresh one by default)."""
        request_id = request_id or new_request_id()
        self.next_request_ids.append(request_id)
        return request_id

    def will_fail_token(self, status: int, **answer: Any) -> None:
        """Every token request answers ``status`` (``json``/``body`` as in ``responses.add``)."""
        self.script("token", _scripted(status, **answer))

    def will_fail_create(self, status: int = 500, **answer: Any) -> None:
        """The next create answers ``status`` (``json``/``body`` as in ``responses.add``)."""
        self.script("create", _scripted(status, **answer), times=1)

    def will_return(self, request_id: str, status: str = "SUCCESS", **overrides: Any) -> None:
        """The next retrieval of ``request_id`` answers a record (see :func:`record`)."""
        self.will_answer(request_id, json=record(request_id, status, **overrides))

    def will_answer(self, request_id: str, times: int = 1, **answer: Any) -> None:
        """The next ``times`` retrievals of ``request_id`` answer ``answer``."""
        self.script("retrieve", _scripted(**answer), times=times, request_id=request_id)

    # -- what was sent ----------------------------------------------------------------
    def calls(self, kind: Endpoint) -> list[Any]:
        """The ``responses`` calls of ``kind``, oldest first."""
        url = TOKEN_URL if kind == "token" else SESSION_URL
        method = "GET" if kind == "retrieve" else "POST"
        return [
            c
            for c in self.mock.calls
            if c.request.method == method and (c.request.url or "").split("?")[0] == url
        ]

    @property
    def create_calls(self) -> list[Any]:
        return self.calls("create")

    @property
    def get_calls(self) -> list[Any]:
        return self.calls("retrieve")

    def sent(self, index: int = -1) -> dict[str, Any]:
        """The JSON body of a create request."""
        body: dict[str, Any] = self.create_requests[index]
        return body


def _scripted(
    status: int = 200, *, json: Any = None, body: Any = None, headers: dict[str, str] | None = None
) -> Scripted:
    # The flow suite's answers are written as responses.add arguments: json=, body=.
    if isinstance(body, BaseException):
        return Scripted(exception=body)
    if json is not None:
        return reply(status, json, headers=headers)
    return reply(status, raw=body or b"", headers=headers)
