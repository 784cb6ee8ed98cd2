"""The sandbox broker served through ``responses``, for tests: the ``eid_broker`` fixture.

:class:`EidBroker` registers callbacks at the configured token and session URLs,
so django-eid's real client talks to the real sandbox behaviour without a
network, and a test plays the person at the broker with :meth:`~EidBroker.complete`,
:meth:`~EidBroker.abort` and :meth:`~EidBroker.fail`. It serves the three APIs at once,
each at its paths under the same ``AUTH_URL`` and ``BASE_URL``: v1, Express
identification v2 and the eID Hub Authentication REST API. With ``BROKER_API = "oidc"``
it serves the sandbox's OpenID provider (:mod:`~django_eid.sandbox.wire_oidc`) at
``OIDC_ISSUER`` too.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Callable
from typing import Any, TypeVar
from urllib.parse import parse_qs, parse_qsl, unquote, urlencode, urlsplit

import requests
import responses
from django.conf import settings
from django.core.cache import caches

from django_eid import client
from django_eid.brokers import BrokerConfig
from django_eid.conf import eid_settings
from django_eid.sandbox import wire_eidhub, wire_oidc, wire_v2
from django_eid.sandbox.apis import (
    HUB_SESSIONS_PATH,
    HUB_TOKEN_PATH,
    V2_SESSIONS_PATH,
    EidHubSandbox,
    V2Sandbox,
)
from django_eid.sandbox.broker import SandboxBroker
from django_eid.sandbox.faults import Answer, Endpoint, Fault, Faults, Raised, encode
from django_eid.sandbox.persons import Person, Persons, builtin_persons
from django_eid.sandbox.store import MemoryStore, now
from django_eid.sandbox.wire import Reply, Session
from django_eid.sandbox.wire_oidc import OpenIdProvider, Tamper
from django_eid.tokens import entry_keys
from django_eid.vocabulary import (
    IN_PROGRESS,
    INVALIDATE_PATH,
    INVALIDATE_REQUEST_ID,
    SESSION_PATH,
    STATUS_PATH,
    TOKEN_PATH,
)

_Self = TypeVar("_Self", bound="EidBroker")  # typing.Self is Python 3.11+
#: Where the REST APIs are served when the settings name no URL for them (OIDC sites).
_UNCONFIGURED = "https://rest-api.broker.invalid"


class EidBroker:
    """The identification broker of one test. Use the ``eid_broker`` fixture to get one.

    Attributes a test reads:

    - ``persons``: the built-in test persons (``persons.NORWEGIAN``, ``persons.MINOR`` ...);
    - ``create_requests``: the JSON bodies of the create-session calls, in order;
    - ``token_requests``: how many token requests were made;
    - ``retrieve_requests``: the request ids asked for with ``GET ?requestId=``;
    - ``status_requests``: the request ids asked for with the status call (``Done``);
    - ``invalidate_requests``: the request ids of the invalidate calls;

    The v2 and eID Hub calls are recorded in the same lists, under the same endpoint
    names (which :meth:`inject` takes too): their token calls count in
    ``token_requests``, their create bodies (camelCase) go to ``create_requests``, the
    session id of a ``GET .../sessions/{id}`` to ``retrieve_requests``, and that of a v2
    ``invalidate`` or an eID Hub ``cancel`` to ``invalidate_requests``.

    - ``issued_tokens``: the access tokens the broker issued, oldest first;
    - ``broker``: the underlying :class:`~django_eid.sandbox.broker.SandboxBroker`;
    - ``mock``: the active ``responses.RequestsMock`` (add your own URLs to it).

    With ``BROKER_API = "oidc"`` it is also the OpenID provider at ``OIDC_ISSUER``
    (``oidc``, a :class:`~django_eid.sandbox.wire_oidc.OpenIdProvider` of ``OIDC_PRESET``):
    discovery, ``jwks``, ``par``, ``token`` and ``userinfo`` are served through
    ``responses`` under the endpoint names ``"discovery"``, ``"jwks"``, ``"par"``,
    ``"token"`` and ``"userinfo"`` (for :meth:`inject` and :meth:`fail_next`); the token
    calls count in ``token_requests`` and their access tokens go to ``issued_tokens``.
    A pushed authorization request (PAR) creates its session at once, as the browser's
    visit of the authorization endpoint would; without PAR, pass the start's redirect
    ``Location`` to :meth:`authorize`. Then :meth:`complete`, :meth:`abort` and
    :meth:`fail` return the callback URL (``?code=&state=`` or ``?error=&state=``).

    - ``authorization_requests``: the parameters of each authorization request (the PAR
      body without the client's credentials, or the authorize URL's query), as dicts;
    - :meth:`rotate_keys`: sign with new keys, the previous ones still in the JWKS;
    - :meth:`tamper_next_token`: a hostile next id_token (claims, header, signing).
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
        login_url: Callable[[str], str] | None = None,
        request_ids: Callable[[], str] | None = None,
        tokens: Callable[[], str] | None = None,
        auth_url: str | None = None,
        base_url: str | None = None,
        account_id: str | None = None,
        oidc_issuer: str | None = None,
        oidc_preset: str | None = None,
        client_key: str | None = None,
        client_key_id: str | None = None,
    ) -> None:
        self.token_url = token_url
        self.session_url = session_url
        # The successors' URLs hang off the same two bases (given, or read off v1's URLs).
        self.auth_url = auth_url if auth_url is not None else token_url.removesuffix(TOKEN_PATH)
        self.base_url = base_url if base_url is not None else session_url.rsplit(SESSION_PATH)[0]
        self.v2_sessions_url = f"{self.base_url}{V2_SESSIONS_PATH}"
        self.hub_token_url = f"{self.auth_url}{HUB_TOKEN_PATH}"
        self.hub_sessions_url = f"{self.base_url}{HUB_SESSIONS_PATH}"
        self.store = MemoryStore(clock)
        login_base = session_url.rsplit(SESSION_PATH, 1)[0]
        self.broker = SandboxBroker(
            self.store,
            client_id=client_id,
            client_secret=client_secret,
            login_url=login_url or (lambda request_id: f"{login_base}/login/{request_id}/"),
            token_lifetime=token_lifetime,
            clock=clock,
            request_ids=request_ids,
            tokens=tokens,
            account_id=account_id,
        )
        self.persons: Persons = builtin_persons()
        self.create_requests: list[Any] = []
        self.token_requests = 0
        self.retrieve_requests: list[str] = []
        self.status_requests: list[str] = []
        self.invalidate_requests: list[str] = []
        self.issued_tokens: list[str] = []
        self._request_ids: list[str] = []
        self.authorization_requests: list[dict[str, str]] = []
        # The sessions PAR created, by request_uri (authorize() of their URL finds them).
        self._pushed: dict[str, str] = {}
        self.faults = Faults()
        self.v2 = V2Sandbox(self.broker)
        self.hub = EidHubSandbox(self.broker)
        self.mock = responses.RequestsMock(assert_all_requests_are_fired=False)
        routes: list[tuple[str, str | re.Pattern[str], Endpoint]] = [
            (responses.POST, token_url, "token"),
            (responses.POST, session_url, "create"),
            (responses.GET, session_url, "retrieve"),
            (responses.GET, session_url + STATUS_PATH.removeprefix(SESSION_PATH), "status"),
            (responses.PUT, session_url + INVALIDATE_PATH.removeprefix(SESSION_PATH), "invalidate"),
            (responses.POST, self.v2_sessions_url, "create"),
            (responses.GET, self.v2_sessions_url, "retrieve"),  # the list
            (responses.GET, _one_session(self.v2_sessions_url), "retrieve"),
            (responses.POST, _one_session(self.v2_sessions_url, "/invalidate"), "invalidate"),
            (responses.POST, self.hub_token_url, "token"),
            (responses.POST, self.hub_sessions_url, "create"),
            (responses.GET, _one_session(self.hub_sessions_url), "retrieve"),
            (responses.POST, _one_session(self.hub_sessions_url, "/cancel"), "invalidate"),
        ]
        self.oidc: OpenIdProvider | None = None
        if oidc_issuer:
            self.oidc = OpenIdProvider(
                self.broker,
                preset=oidc_preset or wire_oidc.GENERIC,
                issuer=oidc_issuer,
                # Behind responses, reached by no browser: the test's site's host is unknown.
                redirect_uris=None,
                client_key=client_key,
                client_key_id=client_key_id,
            )
            routes += [
                # OpenID Connect Discovery 4: under the issuer without its trailing slash.
                (
                    responses.GET,
                    f"{oidc_issuer.rstrip('/')}/.well-known/openid-configuration",
                    "discovery",
                ),
                (responses.GET, self.oidc.endpoint("jwks"), "jwks"),
                (responses.POST, self.oidc.endpoint("par"), "par"),
                (responses.POST, self.oidc.endpoint("token"), "token"),
                (responses.GET, self.oidc.endpoint("userinfo"), "userinfo"),
                (responses.POST, self.oidc.endpoint("userinfo"), "userinfo"),
            ]
        for method, url, endpoint in routes:
            self.mock.add_callback(method, url, callback=self._callback(endpoint))  # type: ignore[arg-type]

    @classmethod
    def from_settings(cls, **options: Any) -> EidBroker:
        """A broker at the URLs and with the client of ``settings.DJANGO_EID``.

        ``options`` are the other arguments of the class (``login_url``, ``request_ids`` ...).
        """
        s = eid_settings
        oidc: dict[str, Any] = {}
        if s.BROKER_API == wire_oidc.API:
            oidc = {
                "oidc_issuer": s.OIDC_ISSUER,
                "oidc_preset": s.OIDC_PRESET,
                "client_key": s.OIDC_PRIVATE_KEY or None,
                "client_key_id": s.OIDC_PRIVATE_KEY_ID or None,
            }
        # An OIDC site may set neither URL: the REST APIs are then served at a host
        # nobody calls.
        config = BrokerConfig.of(s)
        auth_url = config.auth_url or _UNCONFIGURED
        base_url = config.base_url or _UNCONFIGURED
        return cls(
            # v1's token path, whichever API the settings choose; each API has its own.
            token_url=f"{auth_url}{TOKEN_PATH}",
            session_url=f"{base_url}{SESSION_PATH}",
            auth_url=auth_url,
            base_url=base_url,
            client_id=s.CLIENT_ID,
            client_secret=s.CLIENT_SECRET,
            **{
                "token_lifetime": s.SANDBOX_TOKEN_LIFETIME,
                "account_id": s.ACCOUNT_ID or None,
                **oidc,
                **options,
            },
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

    def __enter__(self: _Self) -> _Self:
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
        self,
        status: str = "TIMEOUT",
        *,
        request_id: str | None = None,
        message: str | None = None,
        record_status: str = "ERROR",
    ) -> str:
        """End the session with an error ``status`` (``[0]``); returns the Error URL.

        ``record_status`` is the record's ``Status`` then: ``ERROR``, ``TIMEOUT`` (the
        user's time ran out) or, with v1, ``UNKNOWN``.
        """
        session = self.pending(request_id)
        self.broker.open(session.request_id)
        return self.broker.fail(
            session.request_id, status, message=message, record_status=record_status
        )

    def invalidate(self, *, request_id: str | None = None) -> None:
        """Invalidate the latest session (or ``request_id``) at the broker, as its client's
        invalidate call does: it reads ``INVALIDATED`` (the eID Hub's ``CANCELLED``) and
        serves no identity. For a session used elsewhere before the app retrieves it."""
        sessions = self.sessions
        session = next((s for s in reversed(sessions) if request_id in (None, s.request_id)), None)
        if session is None:
            raise LookupError(f"No sandbox session to invalidate ({len(sessions)} in this test).")
        self.broker.end_by_client(session.request_id, session.client_id)

    # -- breaking things on purpose ------------------------------------------------
    def inject(
        self,
        endpoint: Endpoint,
        status: int = 200,
        *,
        body: Any = None,
        headers: dict[str, str] | None = None,
        exception: Raised | None = None,
        times: int | None = None,
        request_id: str | None = None,
    ) -> None:
        """Answer calls of ``endpoint`` with this instead of the broker's own answer.

        ``body``: a dict, list or ``None`` is sent as JSON, ``str`` as HTML and
        ``bytes`` as they are; ``headers`` are added (and win). ``exception`` (an
        instance, or a class or factory for a fresh one each call), e.g.
        ``requests.ConnectTimeout``, simulates a network failure instead.
        ``times``: how many calls; ``None`` (the default) answers every call
        until :meth:`heal`. ``request_id`` limits a ``"retrieve"`` answer to that
        session, e.g. to answer a hostile record for it.
        """
        if request_id is not None and endpoint not in ("retrieve", "status"):
            raise ValueError("request_id goes with the retrieve and status endpoints")
        content_headers, content = encode(body)
        self.faults.add(
            Fault(
                endpoint,
                status,
                {**content_headers, **(headers or {})},
                content,
                exception,
                times,
                request_id,
            )
        )

    def fail_next(
        self,
        endpoint: Endpoint,
        status: int = 503,
        *,
        body: Any = None,
        headers: dict[str, str] | None = None,
        exception: Raised | None = None,
        times: int | None = 1,
    ) -> None:
        """Make the next ``times`` calls of ``endpoint`` answer ``status`` (or raise ``exception``).

        ``endpoint`` is ``"token"``, ``"create"`` or ``"retrieve"``. ``body``: a dict
        or list is sent as JSON, ``str`` as HTML, ``bytes`` as they are; ``None``
        sends a ``{"message", "code"}`` body. ``exception``, e.g.
        ``requests.ConnectTimeout()``, simulates a network failure instead.
        ``times=None`` keeps failing until :meth:`heal` (a broker outage).
        """
        if body is None:
            body = {"message": "Injected failure (eid_broker.fail_next).", "code": "SANDBOX"}
        self.inject(endpoint, status, body=body, headers=headers, exception=exception, times=times)

    def heal(self, endpoint: Endpoint | None = None, *, request_id: str | None = None) -> None:
        """Drop injected answers: all, those of ``endpoint``, or those of one session."""
        self.faults.heal(endpoint, request_id=request_id)

    # -- the OpenID provider -------------------------------------------------------------
    def _op(self) -> OpenIdProvider:
        if self.oidc is None:
            raise RuntimeError("The eid_broker serves an OpenID provider with BROKER_API 'oidc'.")
        return self.oidc

    def authorize(self, url: str) -> str:
        """The browser visits the authorization endpoint at ``url`` (the start's redirect
        ``Location``); returns where the OP sends it: the picker page of the new session
        (then :meth:`complete` etc.), or the redirect_uri with an ``error``. Raises
        ``ValueError`` where the OP would show its 400 page (unknown client, bad
        redirect_uri, a used or expired request_uri)."""
        op = self._op()
        parts = urlsplit(url)
        if f"{parts.scheme}://{parts.netloc}{parts.path}" != op.endpoint("authorize"):
            raise ValueError(f"not this OP's authorization endpoint: {op.endpoint('authorize')}")
        params = {name: values[0] for name, values in parse_qs(parts.query).items()}
        pushed = self._pushed.pop(params.get("request_uri", ""), None)
        if pushed is not None and params.get("client_id") == op.broker.client_id:
            return self.broker.login_url(pushed)
        if "request_uri" not in params:
            self.authorization_requests.append(params)
        outcome = op.authorize(parts.query)
        if outcome.location is None:
            raise ValueError(f"The OP refused the authorization request: {outcome.error}")
        if outcome.session is not None:
            self._request_ids.append(outcome.session.request_id)
        return outcome.location

    def rotate_keys(self) -> None:
        """The OP signs with new RSA and EC keys; the previous ones stay in the JWKS."""
        self._op().rotate_keys()

    def tamper_next_token(
        self,
        *,
        claims: dict[str, Any] | None = None,
        header: dict[str, Any] | None = None,
        signing: str | None = None,
    ) -> None:
        """Make the next id_token the token endpoint issues hostile.

        ``claims`` and ``header`` replace fields (a value ``None`` removes the field), e.g.
        ``claims={"iss": "https://evil.test", "nonce": None}``. ``signing``: ``None``
        (the OP's current key), ``"unknown-key"`` (a key the JWKS does not have),
        ``"none"`` (``alg: none``, no signature), ``"hs256"`` (HMAC keyed with the client
        secret) or ``"bad-signature"`` (the right key, the signature altered).
        """
        if signing is not None and signing not in wire_oidc.SIGNINGS:
            raise ValueError(f"signing is None or one of {', '.join(wire_oidc.SIGNINGS)}")
        self._op().tamper = Tamper(dict(claims or {}), dict(header or {}), signing)

    def revoke_tokens(self) -> None:
        """Forget every token issued so far; the next API call gets 401."""
        for key in self.store.keys("token:"):
            self.store.delete(key)

    # -- serving a call ---------------------------------------------------------------
    def _callback(self, endpoint: Endpoint) -> Callable[[requests.PreparedRequest], Answer]:
        return lambda request: self.serve(endpoint, request)

    def serve(self, endpoint: Endpoint, request: requests.PreparedRequest) -> Answer:
        """Record the call, then answer it: an injected answer, else the sandbox's.

        Every call goes through here; a test double that counts or delays calls
        overrides it and calls ``super().serve``.
        """
        body = _body(request)
        url = request.url or ""
        if self.oidc is not None and url.startswith(self.oidc.issuer.rstrip("/") + "/"):
            return self._serve_oidc(self.oidc, endpoint, request, body)
        query = urlsplit(url).query
        api, session_id = self._route(url)
        request_id = None
        if endpoint == "token":
            self.token_requests += 1
        elif endpoint == "create":
            try:
                self.create_requests.append(json.loads(body))
            except ValueError:
                self.create_requests.append(body)
        elif session_id is not None:
            # The successors name the session in the path.
            (self.retrieve_requests if endpoint == "retrieve" else self.invalidate_requests).append(
                session_id
            )
            request_id = session_id
        elif endpoint == "invalidate":
            ids = [v for k, v in parse_qsl(query) if k.lower() == "requestid"]
            try:
                named = json.loads(body) if body.strip() else {}
            except ValueError:
                named = {}
            if isinstance(named, dict) and isinstance(named.get(INVALIDATE_REQUEST_ID), str):
                ids.append(named[INVALIDATE_REQUEST_ID])
            self.invalidate_requests.extend(ids)
            request_id = ids[0] if len(ids) == 1 else None
        else:
            ids = [v for k, v in parse_qsl(query) if k.lower() == "requestid"]
            (self.retrieve_requests if endpoint == "retrieve" else self.status_requests).extend(ids)
            request_id = ids[0] if len(ids) == 1 else None
        fault = self.faults.take(endpoint, request_id)
        if fault is not None:
            return fault.answer()
        authorization = request.headers.get("Authorization")
        if api == wire_v2.API:
            reply = self._serve_v2(endpoint, authorization, query, body, session_id or "")
        elif api == wire_eidhub.API:
            reply = self._serve_hub(endpoint, request, query, body, session_id or "")
        elif endpoint == "token":
            content_type = request.headers.get("Content-Type")
            reply = self.broker.token(
                authorization=authorization, content_type=content_type, body=body
            )
            if reply.status == 200:
                self.issued_tokens.append(reply.body["access_token"])
        elif endpoint == "create":
            reply = self.broker.create_session(authorization=authorization, body=body)
            if reply.status == 200:
                self._request_ids.append(reply.body["RequestId"])
        elif endpoint == "status":
            reply = self.broker.session_status(authorization=authorization, query=query)
        elif endpoint == "invalidate":
            reply = self.broker.invalidate(authorization=authorization, query=query, body=body)
        else:
            reply = self.broker.get_session(authorization=authorization, query=query)
        return self._answer(reply)

    def _serve_oidc(
        self,
        op: OpenIdProvider,
        endpoint: Endpoint,
        request: requests.PreparedRequest,
        body: bytes,
    ) -> Answer:
        authorization = request.headers.get("Authorization")
        content_type = request.headers.get("Content-Type")
        if endpoint == "token":
            self.token_requests += 1
        elif endpoint == "par":
            form = parse_qs(body.decode(errors="replace"), keep_blank_values=True)
            params = {name: values[0] for name, values in form.items()}
            self.authorization_requests.append(wire_oidc.without_credentials(params))
        fault = self.faults.take(endpoint)
        if fault is not None:
            return fault.answer()
        if endpoint == "discovery":
            reply = op.discovery()
        elif endpoint == "jwks":
            reply = op.jwks()
        elif endpoint == "userinfo":
            reply = op.userinfo(authorization=authorization)
        elif endpoint == "token":
            reply = op.token(authorization=authorization, content_type=content_type, body=body)
            if reply.status == 200:
                self.issued_tokens.append(reply.body["access_token"])
        else:
            reply = op.par(authorization=authorization, content_type=content_type, body=body)
            if reply.status == 201:
                # No browser here: the session starts now, as the authorize visit would.
                request_uri = reply.body["request_uri"]
                query = urlencode({"client_id": op.broker.client_id, "request_uri": request_uri})
                outcome = op.authorize(query)
                if outcome.session is not None:
                    self._request_ids.append(outcome.session.request_id)
                    self._pushed[request_uri] = outcome.session.request_id
        return self._answer(reply)

    def _route(self, url: str) -> tuple[str, str | None]:
        """Which API a call is for, and the session id its path names (successors only)."""
        address = url.split("?", 1)[0]
        for api, prefix in (
            (wire_v2.API, self.v2_sessions_url),
            (wire_eidhub.API, self.hub_sessions_url),
        ):
            if address == prefix:
                return api, None
            if address.startswith(prefix + "/"):
                return api, unquote(address[len(prefix) + 1 :].split("/", 1)[0])
        if address == self.hub_token_url:
            return wire_eidhub.API, None
        return "v1", None

    def _serve_v2(
        self,
        endpoint: Endpoint,
        authorization: str | None,
        query: str,
        body: bytes,
        session_id: str,
    ) -> Reply:
        if endpoint == "create":
            reply = self.v2.create_session(authorization=authorization, body=body)
            if reply.status == 201:
                self._request_ids.append(reply.body["id"])
            return reply
        if endpoint == "invalidate":
            return self.v2.invalidate(authorization=authorization, session_id=session_id)
        if not session_id:
            return self.v2.list_sessions(authorization=authorization, query=query)
        return self.v2.get_session(authorization=authorization, session_id=session_id)

    def _serve_hub(
        self,
        endpoint: Endpoint,
        request: requests.PreparedRequest,
        query: str,
        body: bytes,
        session_id: str,
    ) -> Reply:
        authorization = request.headers.get("Authorization")
        if endpoint == "token":
            content_type = request.headers.get("Content-Type")
            reply = self.hub.token(
                authorization=authorization, content_type=content_type, body=body
            )
            if reply.status == 200:
                self.issued_tokens.append(reply.body["access_token"])
            return reply
        if endpoint == "create":
            reply = self.hub.create_session(authorization=authorization, query=query, body=body)
            if reply.status == 200:
                self._request_ids.append(reply.body["id"])
            return reply
        if endpoint == "invalidate":
            return self.hub.cancel(authorization=authorization, query=query, session_id=session_id)
        return self.hub.get_session(authorization=authorization, query=query, session_id=session_id)

    @staticmethod
    def _answer(reply: Reply) -> Answer:
        headers = {"Content-Type": "application/json", **reply.headers}
        if reply.body is None:  # a 204
            headers.pop("Content-Type")
        return reply.status, headers, reply.content


def _one_session(sessions_url: str, suffix: str = "") -> re.Pattern[str]:
    """``{sessions_url}/{id}{suffix}``, with any query."""
    return re.compile(re.escape(sessions_url) + r"/[^/?#]+" + re.escape(suffix) + r"(?:\?.*)?\Z")


def forget_tokens() -> None:
    """Drop django-eid's cached access token and the process's shared client.

    A token issued by a previous test's broker would otherwise be sent to this
    test's broker, which never issued it (a 401, then a second token request).
    """
    s = eid_settings
    if s.TOKEN_CACHE in settings.CACHES:
        caches[s.TOKEN_CACHE].delete_many(list(entry_keys(client.token_cache_key(s))))
    client.reset_client()


def _body(request: requests.PreparedRequest) -> bytes:
    body = request.body
    if body is None:
        return b""
    return body.encode() if isinstance(body, str) else bytes(body)
