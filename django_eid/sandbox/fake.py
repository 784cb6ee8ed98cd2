"""The sandbox broker served through ``responses``, for tests: the ``eid_broker`` fixture.

:class:`EidBroker` registers callbacks at the configured token and session URLs,
so django-eid's real client talks to the real sandbox behaviour without a
network, and a test plays the person at the broker with :meth:`~EidBroker.complete`,
:meth:`~EidBroker.abort` and :meth:`~EidBroker.fail`.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal, TypeAlias
from urllib.parse import parse_qsl, urlsplit

import requests
import responses
from django.conf import settings
from django.core.cache import caches

from django_eid import client
from django_eid.conf import eid_settings
from django_eid.records import IN_PROGRESS
from django_eid.sandbox.broker import SandboxBroker
from django_eid.sandbox.persons import Person, Persons, builtin_persons
from django_eid.sandbox.store import MemoryStore, now
from django_eid.sandbox.wire import Reply, Session
from django_eid.tokens import cache_key

Endpoint: TypeAlias = Literal["token", "create", "retrieve"]
_Answer: TypeAlias = "tuple[int, dict[str, str], bytes] | Exception"


@dataclass
class _Failure:
    status: int
    body: Any
    exception: Exception | None
    times: int


class EidBroker:
    """The identification broker of one test. Use the ``eid_broker`` fixture to get one.

    Attributes a test reads:

    - ``persons``: the built-in test persons (``persons.NORWEGIAN``, ``persons.MINOR`` ...);
    - ``create_requests``: the JSON bodies of the create-session calls, in order;
    - ``token_requests``: how many token requests were made;
    - ``retrieve_requests``: the request ids asked for with ``GET ?requestId=``;
    - ``broker``: the underlying :class:`~django_eid.sandbox.broker.SandboxBroker`;
    - ``mock``: the active ``responses.RequestsMock`` (add your own URLs to it).
    """

    def __init__(
        self,
        *,
        token_url: str,
        session_url: str,
        client_id: str,
        client_secret: str,
        token_lifetime: int = 3600,
        clock: Callable[[], float] = now,
    ) -> None:
        self.token_url = token_url
        self.session_url = session_url
        self.store = MemoryStore(clock)
        login_base = session_url.rsplit("/identification/session", 1)[0]
        self.broker = SandboxBroker(
            self.store,
            client_id=client_id,
            client_secret=client_secret,
            login_url=lambda request_id: f"{login_base}/login/{request_id}/",
            token_lifetime=token_lifetime,
            clock=clock,
        )
        self.persons: Persons = builtin_persons()
        self.create_requests: list[Any] = []
        self.token_requests = 0
        self.retrieve_requests: list[str] = []
        self._request_ids: list[str] = []
        self._failures: dict[Endpoint, _Failure] = {}
        self.mock = responses.RequestsMock(assert_all_requests_are_fired=False)
        self.mock.add_callback(responses.POST, token_url, callback=self._on_token)
        self.mock.add_callback(responses.POST, session_url, callback=self._on_create)
        self.mock.add_callback(responses.GET, session_url, callback=self._on_retrieve)

    @classmethod
    def from_settings(cls) -> EidBroker:
        """A broker at the URLs and with the client of ``settings.DJANGO_EID``."""
        s = eid_settings
        return cls(
            token_url=s.TOKEN_URL,
            session_url=f"{s.BASE_URL}/identification/session",
            client_id=s.CLIENT_ID,
            client_secret=s.CLIENT_SECRET,
            token_lifetime=s.SANDBOX_TOKEN_LIFETIME,
        )

    def start(self) -> None:
        """Serve the broker (patch ``requests``), after dropping django-eid's cached token."""
        forget_tokens()
        self.mock.start()

    def stop(self) -> None:
        """Stop serving; the token issued by this broker is dropped too."""
        self.mock.stop()
        self.mock.reset()
        forget_tokens()

    def __enter__(self) -> EidBroker:
        self.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    # -- what the app did ------------------------------------------------------
    @property
    def sessions(self) -> list[Session]:
        """Every session created in this test, oldest first, in its current state."""
        found = (self.broker.session(request_id) for request_id in self._request_ids)
        return [s for s in found if s is not None]

    def pending(self, request_id: str | None = None) -> Session:
        """The session ``request_id``, or the latest one still waiting for the person."""
        for session in reversed(self.sessions):
            if request_id is None and session.status in IN_PROGRESS:
                return session
            if session.request_id == request_id:
                return session
        created = len(self._request_ids)
        raise LookupError(
            f"No pending sandbox session ({created} created in this test). "
            "Did the app start an identification (POST to django_eid:start)?"
        )

    # -- the person at the broker ---------------------------------------------
    def complete(
        self,
        person: Person | None = None,
        *,
        request_id: str | None = None,
        provider: str | None = None,
        **overrides: Any,
    ) -> str:
        """Identify as ``person`` (default ``persons.NORWEGIAN``); returns the Success URL.

        ``overrides`` replace fields of the person, e.g. ``first_name="Ola"`` or
        ``identity_provider_unique_id=None``. ``provider`` is used when the
        session left the choice of provider to the person.
        """
        chosen = person or self.persons.NORWEGIAN
        if overrides:
            chosen = dataclasses.replace(chosen, **overrides)
        session = self.pending(request_id)
        self.broker.open(session.request_id)
        return self.broker.identify(session.request_id, chosen, provider=provider)

    def abort(self, *, request_id: str | None = None) -> str:
        """Cancel at the broker; returns the Abort URL."""
        session = self.pending(request_id)
        self.broker.open(session.request_id)
        return self.broker.abort(session.request_id)

    def fail(
        self, status: str = "TIMEOUT", *, request_id: str | None = None, message: str | None = None
    ) -> str:
        """End the session with an error ``status`` (``[0]``); returns the Error URL."""
        session = self.pending(request_id)
        self.broker.open(session.request_id)
        return self.broker.fail(session.request_id, status, message=message)

    # -- breaking things on purpose ------------------------------------------------
    def fail_next(
        self,
        endpoint: Endpoint,
        status: int = 503,
        *,
        body: Any = None,
        exception: Exception | None = None,
        times: int = 1,
    ) -> None:
        """Make the next ``times`` calls of ``endpoint`` answer ``status`` (or raise ``exception``).

        ``endpoint`` is ``"token"``, ``"create"`` or ``"retrieve"``. ``body``: a dict
        or list is sent as JSON, ``str``/``bytes`` as they are; ``None`` sends a
        ``{"message", "code"}`` body. ``exception``, e.g. ``requests.ConnectTimeout()``,
        simulates a network failure instead.
        """
        if endpoint not in ("token", "create", "retrieve"):
            raise ValueError(f"unknown endpoint {endpoint!r}")
        self._failures[endpoint] = _Failure(status, body, exception, times)

    def revoke_tokens(self) -> None:
        """Forget every token issued so far; the next API call gets 401."""
        for key in self.store.keys("token:"):
            self.store.delete(key)

    # -- the responses callbacks ----------------------------------------------------
    def _injected(self, endpoint: Endpoint) -> _Answer | None:
        failure = self._failures.get(endpoint)
        if failure is None:
            return None
        failure.times -= 1
        if failure.times <= 0:
            del self._failures[endpoint]
        if failure.exception is not None:
            return failure.exception
        body = failure.body
        if body is None:
            body = {"message": "Injected failure (eid_broker.fail_next).", "code": "SANDBOX"}
        if isinstance(body, str):
            return failure.status, {"Content-Type": "text/html"}, body.encode()
        if isinstance(body, bytes):
            return failure.status, {}, body
        return failure.status, {"Content-Type": "application/json"}, json.dumps(body).encode()

    @staticmethod
    def _answer(reply: Reply) -> _Answer:
        return reply.status, {"Content-Type": "application/json", **reply.headers}, reply.content

    def _on_token(self, request: requests.PreparedRequest) -> _Answer:
        self.token_requests += 1
        injected = self._injected("token")
        if injected is not None:
            return injected
        reply = self.broker.token(
            authorization=request.headers.get("Authorization"),
            content_type=request.headers.get("Content-Type"),
            body=_body(request),
        )
        return self._answer(reply)

    def _on_create(self, request: requests.PreparedRequest) -> _Answer:
        body = _body(request)
        try:
            self.create_requests.append(json.loads(body))
        except ValueError:
            self.create_requests.append(body)
        injected = self._injected("create")
        if injected is not None:
            return injected
        reply = self.broker.create_session(
            authorization=request.headers.get("Authorization"), body=body
        )
        if reply.status == 200:
            self._request_ids.append(reply.body["RequestId"])
        return self._answer(reply)

    def _on_retrieve(self, request: requests.PreparedRequest) -> _Answer:
        query = urlsplit(request.url or "").query
        self.retrieve_requests.extend(v for k, v in parse_qsl(query) if k.lower() == "requestid")
        injected = self._injected("retrieve")
        if injected is not None:
            return injected
        reply = self.broker.get_session(
            authorization=request.headers.get("Authorization"), query=query
        )
        return self._answer(reply)


def forget_tokens() -> None:
    """Drop django-eid's cached access token and the process's shared client.

    A token issued by a previous test's broker would otherwise be sent to this
    test's broker, which never issued it (a 401, then a second token request).
    """
    s = eid_settings
    if s.TOKEN_CACHE in settings.CACHES:
        # The key of django_eid.client.EidClient's TokenStore (and its lock).
        key = cache_key(
            s.AUTH_URL, s.BASE_URL, s.CLIENT_ID, " ".join(s.SCOPES), s.TOKEN_AUTH_METHOD
        )
        caches[s.TOKEN_CACHE].delete_many([key, key + ":lock"])
    client.reset_client()


def _body(request: requests.PreparedRequest) -> bytes:
    body = request.body
    if body is None:
        return b""
    return body.encode() if isinstance(body, str) else bytes(body)
