"""The suite's broker (the ``broker`` fixture): the sandbox, scripted.

One model of the broker serves every suite: :class:`ScriptedBroker` is the
public ``eid_broker`` double (:class:`~django_eid.sandbox.fake.EidBroker`, the
sandbox's :class:`~django_eid.sandbox.broker.SandboxBroker` behind
``responses``) with what these suites add on top: the request ids and the
token known in advance, the login page at a fixed URL, a count of calls, and
the short names the tests script it with. Records are the sandbox's record of
:data:`SAMPLE`, a built-in person, changed field by field where a test needs it.
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import itertools
import json
import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Final

import requests
import responses

from django_eid import vocabulary
from django_eid.brokers.oidc import request_id_of
from django_eid.conf import eid_settings
from django_eid.sandbox import wire_oidc
from django_eid.sandbox.broker import identity_of, record_of
from django_eid.sandbox.fake import EidBroker
from django_eid.sandbox.faults import Answer, Endpoint, Raised
from django_eid.sandbox.persons import builtin_persons
from django_eid.sandbox.store import MemoryStore
from django_eid.sandbox.wire import Session
from django_eid.sandbox.wire_oidc import API as OIDC
from tests.fixtures_client import CLIENT_ID, SECRET, SESSION_URL, TOKEN_URL

#: Where hostile redirects point; the app must never request it (``broker.evil_calls``).
EVIL: Final = "https://evil.example/steal"
#: Where the suites' OpenID providers live (``OIDC_ISSUER`` is ``{OIDC_HOST}/oidc/<preset>``).
OIDC_HOST: Final = "https://op.broker.test"

#: ``DJANGO_EID`` beside the suite's credentials and URLs, for each broker API
#: (``BROKER_API``): what a parametrized suite sets (``tests/conftest.py``, ``apis`` mark).
API_SETTINGS: Final[dict[str, dict[str, Any]]] = {
    "v1": {"BROKER_API": "v1"},
    "v2": {"BROKER_API": "v2"},
    # The hub's scope is its own (``SCOPES`` falls back to it).
    "eid-hub": {"BROKER_API": "eid-hub", "ACCOUNT_ID": "a-spge-sandbox", "SCOPES": None},
    # OpenID Connect: the sandbox's OP of each preset at its issuer (the suite's client id
    # and secret are its client); each preset's own scopes (``SCOPES`` falls back to them).
    **{
        f"oidc-{preset}": {
            "BROKER_API": "oidc",
            "OIDC_PRESET": preset,
            "OIDC_ISSUER": f"{OIDC_HOST}/oidc/{preset}",
            "SCOPES": None,
        }
        for preset in ("idura", "bankid-no", "signicat", "vipps")
    },
}
#: The REST session APIs: a session at the broker that can be retrieved, polled and
#: invalidated without the user's return (``@pytest.mark.apis(*REST_APIS, reason=...)``).
REST_APIS: Final = ("v1", "v2", "eid-hub")
#: The OpenID Connect entries of :data:`API_SETTINGS`.
OIDC_APIS: Final = tuple(name for name in API_SETTINGS if name not in REST_APIS)
#: Why a test runs for :data:`REST_APIS` only (the ``reason`` of its ``apis`` mark): what
#: it tests does not exist with OpenID Connect.
NO_SESSION_TO_ASK: Final = (
    "OIDC: no session at the provider to retrieve, poll or invalidate; only the user's "
    "return with its code yields the identity (no settling without it, in another "
    "browser, by the frame's status poll or by eid_reconcile)"
)
RETURN_IS_THE_ANSWER: Final = (
    "OIDC: an error or cancel return is the provider's own answer, final; no record is "
    "retrieved to confirm or overrule it"
)
NO_BROKER_IDS: Final = (
    "OIDC: no broker session id in the returns (the state is the row's external id) and "
    "the row's request id is django-eid's own digest of it"
)
CODE_IS_SPENT: Final = (
    "OIDC: the code is single use: its exchange is never retried, and any answer but an "
    "unreachable provider ends the row"
)
STABLE_SUBJECT: Final = (
    "OIDC: every identity names the person by a stable subject (BankID's PID, sub): "
    "there is no record without a unique id"
)
NO_CLIENT_TOKEN: Final = (
    "OIDC: no client-credentials token before the start (the code is the grant)"
)

#: The person of every record the suites are sent; its fields are the expected values.
SAMPLE = builtin_persons().NORWEGIAN
SSN = SAMPLE.national_identity_number
#: The identity fields of a v1 record (what the successors' wire layers render), the number
#: aside; ``EnvironmentInfo`` last.
_IDENTITY_FIELDS: Final = tuple(identity_of(SAMPLE, with_number=False))
UNIQUE_ID = SAMPLE.identity_provider_unique_id or ""
#: The properties of v1's record beside ``RequestId``, in the published schema's order: what
#: a return reads of the broker's answer.
RECORD_PROPERTIES: Final = (
    "Status",
    "IdentityProvider",
    "IdentityProviderUniqueId",
    "Name",
    "FirstName",
    "MiddleName",
    "LastName",
    "DateOfBirth",
    "SocialSecurityNumber",
    "EnvironmentInfo",
    "Error",
    "MetaData",
)
#: Where the broker sends the user (the ``Url`` of every create response).
BROKER_PAGE = "https://id.broker.test/NoBankIDWeb/Start?sessionid=Qm9nZXQ&language=NO"
#: The one access token the broker issues, known in advance so tests can look for leaks.
ACCESS_TOKEN = "eyJhbGciOiJSUzI1NiJ9.eyJzY29wZSI6WyJpZGVudGlmeSJdfQ.c2lnbmF0dXJlLXNlY3JldA"
#: Any JWT, whole or cut after its header: ``eyJ`` (base64url of ``{"``) and then a dot. The dot
#: tells a token from random base64 that holds those three letters by chance (a key's
#: thumbprint, a Fernet token, a CSRF token), which failed tests that looked for "eyJ" alone.
JWT_SHAPE = re.compile(r"eyJ[A-Za-z0-9_-]*\.")


def jwts_in(text: str) -> list[str]:
    """The JWTs, or their beginnings, in ``text``: a leak check that never matches by chance."""
    return JWT_SHAPE.findall(text)


#: base64("test-client:test-secret-s3cr3t-value"): the Basic credentials.
BASIC_CREDENTIALS = "dGVzdC1jbGllbnQ6dGVzdC1zZWNyZXQtczNjcjN0LXZhbHVl"

_ids = itertools.count(1)

#: The provider of :data:`SAMPLE`'s identification, by OIDC preset (the eID each asks
#: for by default for a Norwegian: BankID).
_OIDC_PROVIDERS: Final = {"idura": "no-bankid", "bankid-no": "bid", "signicat": "nbid"}


@dataclass(frozen=True)
class Expected:
    """What the app stores of :data:`SAMPLE`'s scripted record where the broker APIs word
    the same thing differently (:func:`expected`)."""

    first_name: str
    middle_name: str
    provider: str
    #: Whether cancelling asks the broker to end its session (the REST APIs' invalidate).
    invalidates: bool
    #: Database queries a return costs beyond the REST APIs': OIDC's one callback URL
    #: finds its row by the ``state`` first.
    extra_return_queries: int


def expected() -> Expected:
    """:class:`Expected` for the broker API in use (``BROKER_API``, ``OIDC_PRESET``)."""
    if eid_settings.BROKER_API != OIDC:
        return Expected(
            SAMPLE.first_name, SAMPLE.middle_name or "", SAMPLE.identity_provider, True, 0
        )
    # OIDC's given_name carries the middle name.
    given = " ".join(n for n in (SAMPLE.first_name, SAMPLE.middle_name) if n)
    preset = str(eid_settings.OIDC_PRESET)
    return Expected(given, "", _OIDC_PROVIDERS.get(preset, preset), False, 1)


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


@functools.cache
def op_keys() -> dict[str, Any]:
    """The sandbox OP's signing keys, made once per test run: a 2048-bit RSA key takes
    some 70 ms, which most OIDC tests of the suites would otherwise pay (some 8 s per
    preset). A test that rotates them (``rotate_keys``) changes its own store only."""
    store = MemoryStore()
    wire_oidc.jwks(store)  # made on first use
    keys: dict[str, Any] = store.get(wire_oidc._KEYS)
    return keys


class ScriptedBroker(EidBroker):
    """The sandbox broker at the test settings' URLs, scripted by the test."""

    def __init__(self) -> None:
        self.next_request_ids: list[str] = []
        oidc = eid_settings.BROKER_API == OIDC
        super().__init__(
            token_url=TOKEN_URL,
            session_url=SESSION_URL,
            client_id=CLIENT_ID,
            client_secret=SECRET,
            login_url=lambda request_id: BROKER_PAGE,
            request_ids=self._request_id,
            tokens=lambda: ACCESS_TOKEN,
            # The hub's token names its account (``BROKER_API = "eid-hub"``).
            account_id=eid_settings.ACCOUNT_ID or None,
            # ``BROKER_API = "oidc"``: the OP of the preset at the issuer too.
            oidc_issuer=eid_settings.OIDC_ISSUER if oidc else None,
            oidc_preset=eid_settings.OIDC_PRESET if oidc else None,
        )
        if oidc:
            # The OP signs with the keys of the run (see op_keys): not new ones per test.
            self.store.set(wire_oidc._KEYS, copy.deepcopy(op_keys()), wire_oidc.KEYS_LIFETIME)
        #: Calls per endpoint (``counts.clear()`` to count from here).
        self.counts: Counter[str] = Counter()
        # The sandbox's sessions are found by a row's request id too: for OpenID Connect
        # (``oidc-...``, django-eid's own) the OP's session of that state, so a test plays
        # the person at the broker (``broker.broker.identify(started.request_id, ...)``)
        # whatever the API.
        self._lookup = self.broker.session
        self.broker.session = lambda request_id: self._lookup(self.session_id(request_id))  # type: ignore[method-assign]
        #: Every call, oldest first, with its endpoint (whichever API's URL it went to).
        self.served: list[tuple[Endpoint, Call]] = []
        #: Requests that reached the hostile site (:data:`EVIL`): a redirect followed.
        self.evil_calls: list[Any] = []
        for method in (responses.GET, responses.POST):
            self.mock.add_callback(method, re.compile(r"https://evil\.example/.*"), self._evil)

    def _evil(self, request: Any) -> tuple[int, dict[str, str], bytes]:
        self.evil_calls.append(request)  # a redirect was followed: the tests say it never is
        return 200, {"Content-Type": "application/json"}, b'{"stolen": true}'

    def _request_id(self) -> str:
        return self.next_request_ids.pop(0) if self.next_request_ids else new_request_id()

    def serve(self, endpoint: Endpoint, request: requests.PreparedRequest) -> Answer:
        self.counts[endpoint] += 1
        self.served.append((endpoint, Call(request)))
        answer = super().serve(endpoint, request)
        if endpoint == "par":
            # OpenID Connect's create: the pushed authorization request (credentials aside).
            self.create_requests.append(self.authorization_requests[-1])
        return answer

    # -- OpenID Connect: the OP's sessions under the row's request id ------------------
    @property
    def is_oidc(self) -> bool:
        return self.oidc is not None

    def session_id(self, request_id: str) -> str:
        """The broker's session id of a row's ``request_id``: the same for the REST APIs;
        for OpenID Connect the OP's session whose ``state`` the row's id is a digest of
        (:func:`django_eid.brokers.oidc.request_id_of`)."""
        if not self.is_oidc or not request_id.startswith("oidc-"):
            return request_id
        for session_id in self._request_ids:
            session = self._lookup(session_id)
            state = str(session.wire.get("state", "")) if session is not None else ""
            if request_id_of(state) == request_id:
                return session_id
        return request_id

    def pending(self, request_id: str | None = None) -> Session:
        return super().pending(None if request_id is None else self.session_id(request_id))

    def endpoint(self, kind: Endpoint) -> Endpoint:
        """The endpoint of the app's API that does what ``kind`` does for the REST APIs.

        For OpenID Connect, a ``"create"`` is the pushed authorization request (``"par"``)
        and a ``"retrieve"`` the code's exchange at the ``"token"`` endpoint: a scripted
        HTTP failure of a retrieval is a failure of the token endpoint, which serves the
        record (the id_token) only when the user returns with the code. The token endpoint
        is not per session: such an answer is the next token call's, whichever session.
        """
        if self.is_oidc:
            return {"create": "par", "retrieve": "token"}.get(kind, kind)  # type: ignore[return-value]
        return kind

    @property
    def api(self) -> str:
        """The broker API the app speaks now (``BROKER_API``)."""
        return eid_settings.BROKER_API

    def on_the_wire(self, body: dict[str, Any]) -> dict[str, Any]:
        """A v1 record (:func:`record`) as the app's broker API sends it.

        The suites script records in v1's words; for ``"v2"`` and ``"eid-hub"`` the
        session's fields are replaced by the record's and the sandbox's wire layer of
        that API renders it, as it renders its own sessions. For ``"oidc"`` the OP's
        session takes the record's state (``{}`` is returned: nothing is retrieved): a
        ``SUCCESS`` sends the user back with a code whose exchange renders the id_token
        and userinfo from it, a cancel with ``error=access_denied``, a failure with
        ``error=<ErrorCode>``.
        """
        if self.api == "v1":
            return body
        session = self.broker.session(self.session_id(str(body.get("RequestId"))))
        assert session is not None, "the session of a scripted record is started first"
        error = body.get("Error")
        identity = {key: body.get(key) for key in _IDENTITY_FIELDS}
        if "SocialSecurityNumber" in body:
            identity["SocialSecurityNumber"] = body["SocialSecurityNumber"]
        has_identity = any(body.get(key) for key in _IDENTITY_FIELDS[:-1])
        born = body.get("DateOfBirth")
        rendered = dataclasses.replace(
            session,
            status=str(body.get("Status") or "UNKNOWN"),
            identity_provider=body.get("IdentityProvider"),
            identity=identity if has_identity else None,
            birth_date=_iso_date(born) if isinstance(born, str) else None,
            error={
                "ErrorCode": str(error.get("ErrorCode") or ""),
                "ErrorMessage": str(error.get("ErrorMessage") or ""),
                "NativeErrorCode": str(error.get("NativeErrorCode") or ""),
            }
            if isinstance(error, dict)
            else None,
        )
        if self.is_oidc:
            # The OP's session ends as the record says: its redirect and its code's
            # exchange (the id_token, userinfo) come from it, the code valid from now.
            ended = rendered.status not in vocabulary.IN_PROGRESS
            rendered.ended_at = self.broker.clock() if ended else None
        # The session is in that state from now on, as at a real broker: a call the flow
        # makes after the scripted one (another browser, a poll) sees the same session.
        self.broker._save(rendered)
        if self.is_oidc:
            # Nothing is retrieved: the OP serves the session's state itself. Fields a test
            # adds to this and answers (:meth:`will_answer`) go into the next id_token.
            return {}
        sandbox = self.v2 if self.api == "v2" else self.hub
        return dict(sandbox.render(rendered))

    # -- scripting ------------------------------------------------------------------
    def script(
        self,
        endpoint: Endpoint,
        answer: Scripted,
        *,
        times: int | None = None,
        request_id: str | None = None,
    ) -> None:
        """Answer ``endpoint`` with ``answer`` (see :meth:`inject`)."""
        self.inject(
            endpoint,
            answer.status,
            body=answer.body,
            headers=answer.headers,
            exception=answer.exception,
            times=times,
            request_id=request_id,
        )

    def inject(
        self,
        endpoint: Endpoint,
        status: int = 200,
        *,
        request_id: str | None = None,
        **answer: Any,
    ) -> None:
        """:meth:`EidBroker.inject`; for OpenID Connect at the endpoint that does the work
        of ``endpoint`` (:meth:`endpoint`), for whichever session calls it next."""
        if self.is_oidc:
            endpoint, request_id = self.endpoint(endpoint), None
        super().inject(endpoint, status, request_id=request_id, **answer)

    def fault(self, kind: Endpoint, answer: Scripted, *, once: bool = False) -> None:
        """Answer ``kind`` calls with ``answer``: the next one (``once``) or all of them."""
        self.script(kind, answer, times=1 if once else None)

    def answer_record(self, request_id: str, answer: dict[str, Any] | Scripted) -> None:
        """Retrieving ``request_id`` answers ``answer`` (a record) until healed."""
        if self.is_oidc and not isinstance(answer, Scripted):
            self.on_the_wire(answer)  # the OP's session is in that state
            return
        scripted = answer if isinstance(answer, Scripted) else reply(body=self.on_the_wire(answer))
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
        """The next ``times`` retrievals of ``request_id`` answer ``answer``; a record given
        as ``json`` (in v1's words) is sent in the app's broker API."""
        if isinstance(answer.get("json"), dict) and "Status" in answer["json"]:
            if self.is_oidc and answer.get("status", 200) == 200:
                self.on_the_wire(answer["json"])  # the OP's session is in that state
                return
            answer = {**answer, "json": self.on_the_wire(answer["json"])}
        elif self.is_oidc and isinstance(answer.get("json"), dict) and len(answer) == 1:
            # What :meth:`on_the_wire` gave (nothing) with fields added: OIDC's record is
            # the id_token's claims, so they are claims of the next one.
            self.tamper_next_token(claims=answer["json"])
            return
        self.script("retrieve", _scripted(**answer), times=times, request_id=request_id)

    # -- what was sent ----------------------------------------------------------------
    def calls(self, kind: Endpoint) -> list[Call]:
        """The calls of ``kind`` (at whichever API's URL, :meth:`endpoint`), oldest first."""
        kind = self.endpoint(kind)
        return [call for endpoint, call in self.served if endpoint == kind]

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


def _iso_date(ddmmyy: str) -> str | None:
    """v1's ``DateOfBirth`` (``ddMMyy``) as the successors write it, the century guessed;
    one given in their words (ISO) already is kept."""
    if len(ddmmyy) == 10 and ddmmyy[4] == ddmmyy[7] == "-":
        return ddmmyy
    try:
        day, month, year = int(ddmmyy[:2]), int(ddmmyy[2:4]), int(ddmmyy[4:6])
    except ValueError:
        return None
    century = 1900 if year > 30 else 2000
    return f"{century + year:04d}-{month:02d}-{day:02d}" if len(ddmmyy) == 6 else None


@dataclass(frozen=True)
class Call:
    """A call the broker served, as ``responses`` records one (``call.request``)."""

    request: requests.PreparedRequest


def _scripted(
    status: int = 200, *, json: Any = None, body: Any = None, headers: dict[str, str] | None = None
) -> Scripted:
    # The flow suite's answers are written as responses.add arguments: json=, body=.
    if isinstance(body, BaseException):
        return Scripted(exception=body)
    if json is not None:
        return reply(status, json, headers=headers)
    return reply(status, raw=body or b"", headers=headers)
