"""The simulated identification broker: its behaviour, written once.

:class:`SandboxBroker` implements the contract of the interface document and
of ``wire-format.md`` (tokens, sessions, the record, the return URLs) without
any HTTP code. Two faces serve it: the sandbox Django app
(:mod:`django_eid.sandbox.views`) and the ``eid_broker`` pytest fixture
(:mod:`django_eid.sandbox.fake`). The API methods take what arrived (header,
form, body, query) and return a :class:`Reply`; the methods used by the person
at the broker (:meth:`~SandboxBroker.identify`, ``abort``, ``fail``) return the
return URL to send them to.
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import hashlib
import hmac
import json
import secrets
import string
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final
from urllib.parse import parse_qsl, unquote

from django_eid import vocabulary
from django_eid.records import lower_keys
from django_eid.sandbox import wire_eidhub, wire_oidc, wire_v2
from django_eid.sandbox.persons import Person
from django_eid.sandbox.store import Store, now
from django_eid.sandbox.wire import (
    MAX_FIELDS,
    CreateRequest,
    Refused,
    Reply,
    Session,
    api_error,
    fill_placeholders,
    oauth_error,
    parse_create_request,
    parse_form,
)

#: The only client the sandbox serves over HTTP: fixed and public, never the site's own
#: credentials (a sandbox left serving beside real ones would confirm guesses of the secret).
CLIENT_ID: Final = "sandbox-client"
CLIENT_SECRET: Final = "sandbox-secret"  # noqa: S105  (public: the sandbox's own)
#: Seconds a session is kept after its last change.
SESSION_LIFETIME: Final = 3600
#: The eID Hub's token: its scope and lifetime (the vendor's default).
HUB_SCOPES: Final = frozenset({"signicat-api"})
HUB_TOKEN_LIFETIME: Final = 600
#: Each successor API's return URL, by the API's name (v1 fills placeholders instead).
_RETURN_URLS: Final[dict[str, Callable[[Session], str]]] = {
    wire_v2.API: wire_v2.return_url,
    wire_eidhub.API: wire_eidhub.return_url,
    wire_oidc.API: wire_oidc.return_url,
}
_ALPHANUMERIC: Final = string.ascii_letters + string.digits
#: How a session can fail, as its record's ``Status`` says: an error, the user's time ran
#: out, or the broker does not know (``UNKNOWN``, of every v1 SDK's enum). The successor
#: APIs publish no ``UNKNOWN``: their sessions fail in the first two ways only.
FAILED_STATUSES: Final = (vocabulary.ERROR, vocabulary.TIMEOUT, vocabulary.UNKNOWN)
_FAILED_STATUSES_OF: Final = {
    "v1": FAILED_STATUSES,
    wire_v2.API: (vocabulary.ERROR, vocabulary.TIMEOUT),
    wire_eidhub.API: (vocabulary.ERROR, vocabulary.TIMEOUT),
}


def failed_statuses(api: str) -> tuple[str, ...]:
    """The statuses a session of ``api`` can fail with (:data:`FAILED_STATUSES`)."""
    return _FAILED_STATUSES_OF.get(api, (vocabulary.ERROR,))


class SessionError(Exception):
    """The person at the broker asked for something the session cannot do."""


class UnknownSession(SessionError):
    """No such session (never created, or expired)."""


class SessionFinished(SessionError):
    """The session already ended (identified, aborted or failed)."""


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _jwt_shaped(claims: Mapping[str, Any]) -> str:
    # Looks like the broker's RS256 JWT; nobody verifies the signature, so it is random.
    header = _b64url(json.dumps({"alg": "RS256", "typ": "JWT"}).encode())
    return f"{header}.{_b64url(json.dumps(claims).encode())}.{_b64url(secrets.token_bytes(64))}"


def _hashed(kind: str, value: str) -> str:
    # Request ids and tokens are long; hashing keeps cache keys short (memcached: 250).
    return f"{kind}:{hashlib.sha256(value.encode()).hexdigest()[:40]}"


def random_request_id() -> str:
    """A new ``RequestId`` in the shape of the public sample: 19 digits, then 181 letters/digits."""
    digits = "".join(secrets.choice(string.digits) for _ in range(19))
    return digits + "".join(secrets.choice(_ALPHANUMERIC) for _ in range(181))


def identity_of(
    person: Person,
    *,
    with_number: bool = True,
    user_agent: str | None = None,
    ip_address: str | None = None,
    provider: str | None = None,
) -> dict[str, Any]:
    """The identity fields of the record of ``person`` identified with ``provider`` (else
    their usual one), PascalCase, as on the wire. Swedish BankID gives no unique id."""
    used = provider or person.identity_provider
    unique_id = None if used in vocabulary.WITHOUT_UNIQUE_ID else person.identity_provider_unique_id
    identity: dict[str, Any] = {
        "IdentityProviderUniqueId": unique_id,
        "Name": person.name,
        "FirstName": person.first_name,
        "MiddleName": person.middle_name,
        "LastName": person.last_name,
        "DateOfBirth": person.date_of_birth,
        "EnvironmentInfo": {
            "UserAgent": user_agent or person.user_agent,
            "IPAddress": ip_address or person.ip_address,
        },
    }
    if with_number:
        identity["SocialSecurityNumber"] = person.national_identity_number
    return identity


def record_of(
    person: Person, request_id: str, status: str = "SUCCESS", *, with_number: bool = True
) -> dict[str, Any]:
    """The record the broker answers once ``person`` identified, in status ``status``.

    For tests that answer a retrieve with a record of their own (a hostile one,
    or one in a status the sandbox never reaches): start from this, change fields.
    """
    identity = identity_of(person, with_number=with_number)
    session = Session(
        request_id, "", {}, identity_provider=person.identity_provider, identity=identity
    )
    session.status = status
    return session.record()


class SandboxBroker:
    """The broker's behaviour over a :class:`~django_eid.sandbox.store.Store`.

    ``login_url`` turns a session id into the absolute URL of the login page,
    which is what the face serving it knows and the broker does not.
    """

    def __init__(
        self,
        store: Store,
        *,
        client_id: str,
        client_secret: str,
        login_url: Callable[[str], str],
        token_lifetime: int = 3600,
        clock: Callable[[], float] = now,
        request_ids: Callable[[], str] | None = None,
        tokens: Callable[[], str] | None = None,
        account_id: str | None = None,
    ) -> None:
        self.store = store
        self._account_id = account_id
        self.client_id = client_id
        self.client_secret = client_secret
        self.login_url = login_url
        self.token_lifetime = token_lifetime
        self.clock = clock
        # Tests that need to know a request id before the app asks for it pass their own.
        self.new_request_id = request_ids or random_request_id
        self._own_request_ids = request_ids is not None
        self.new_token = tokens

    # -- the token endpoint ------------------------------------------------
    def token(self, *, authorization: str | None, content_type: str | None, body: bytes) -> Reply:
        """``POST {auth_url}/oauth/connect/token``: the Authorization header and the form."""
        try:
            return self._token(authorization, parse_form(content_type, body))
        except Refused as refused:
            return refused.reply

    @property
    def account_id(self) -> str:
        """The eID Hub account of the configured client: the site's ``ACCOUNT_ID``, or one
        derived from the client id (stable)."""
        if self._account_id:
            return self._account_id
        return "a-sandbox-" + hashlib.sha256(self.client_id.encode()).hexdigest()[:20]

    def hub_token(
        self, *, authorization: str | None, content_type: str | None, body: bytes
    ) -> Reply:
        """``POST {auth_url}/auth/open/connect/token``: scope ``signicat-api``, a token of
        600 s whose payload names the account (``account_id``), as the eID Hub's does."""
        try:
            return self._token(
                authorization,
                parse_form(content_type, body),
                allowed_scopes=HUB_SCOPES,
                lifetime=HUB_TOKEN_LIFETIME,
                extra_claims={"account_id": self.account_id},
            )
        except Refused as refused:
            return refused.reply

    def _token(
        self,
        authorization: str | None,
        form: Mapping[str, Sequence[str]],
        *,
        allowed_scopes: frozenset[str] = vocabulary.SCOPES,
        lifetime: int | None = None,
        extra_claims: Mapping[str, Any] | None = None,
    ) -> Reply:
        for name, values in form.items():
            if len(values) > 1:
                raise oauth_error("invalid_request", f"'{name}' is given more than once.")
        params = {name: values[0] for name, values in form.items() if values}
        client_id = self._authenticate_client(authorization, params)
        grant_type = params.get("grant_type")
        if not grant_type:
            raise oauth_error("invalid_request", "'grant_type' is required.")
        if grant_type != "client_credentials":
            raise oauth_error("unsupported_grant_type", "Only client_credentials is supported.")
        scopes = params.get("scope", "").split()
        if not scopes:
            raise oauth_error("invalid_request", "'scope' is required.")
        unknown = sorted(set(scopes) - allowed_scopes)
        if unknown:
            raise oauth_error("invalid_scope", f"Unknown scope(s): {' '.join(unknown)}.")
        lifetime = self.token_lifetime if lifetime is None else lifetime
        issued = self.clock()
        expires_at = issued + lifetime
        claims = {
            **(extra_claims or {}),
            "iss": "django-eid-sandbox",
            "client_id": client_id,
            "scope": sorted(set(scopes)),
            "iat": int(issued),
            "exp": int(expires_at),
            "jti": secrets.token_hex(16),
        }
        token = self.new_token() if self.new_token else _jwt_shaped(claims)
        grant = {"client_id": client_id, "scope": claims["scope"], "expires_at": expires_at}
        self.store.set(_hashed("token", token), grant, lifetime)
        body = {"access_token": token, "expires_in": lifetime, "token_type": "Bearer"}
        return Reply(200, body, {"Cache-Control": "no-store", "Pragma": "no-cache"})

    def _authenticate_client(self, authorization: str | None, params: Mapping[str, str]) -> str:
        """client_secret_basic or client_secret_post (RFC 6749 2.3.1), never both."""
        if not self.client_id or not self.client_secret:
            # Otherwise an empty id and secret would match an unconfigured sandbox.
            raise oauth_error("invalid_client", "The sandbox has no client configured.", 401)
        in_body = "client_id" in params or "client_secret" in params
        scheme, _, encoded = (authorization or "").strip().partition(" ")
        if authorization and scheme.lower() == "basic":
            if in_body:
                raise oauth_error("invalid_request", "Use one client authentication method.")
            try:
                decoded = base64.b64decode(encoded.strip(), validate=True).decode()
            except (binascii.Error, UnicodeDecodeError):
                raise oauth_error("invalid_client", "Malformed Basic credentials.", 401) from None
            given_id, _, given_secret = decoded.partition(":")
            # RFC 6749 form-encodes both before Basic; most clients do not. Accept both.
            candidates = [(given_id, given_secret), (unquote(given_id), unquote(given_secret))]
        elif in_body:
            candidates = [(params.get("client_id", ""), params.get("client_secret", ""))]
        else:
            raise oauth_error("invalid_client", "Client authentication is required.", 401)
        for cid, secret in candidates:
            if hmac.compare_digest(cid.encode(), self.client_id.encode()) and hmac.compare_digest(
                secret.encode(), self.client_secret.encode()
            ):
                return cid
        raise oauth_error("invalid_client", "Unknown client or wrong secret.", 401)

    def _authorize(self, authorization: str | None, scope: str = "identify") -> str:
        """The client id of a valid bearer token with ``scope``."""
        scheme, _, token = (authorization or "").strip().partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            raise api_error(401, "UNAUTHORIZED", "A Bearer access token is required.")
        grant = self.store.get(_hashed("token", token.strip()))
        if grant is None or grant.get("client_id") != self.client_id:
            raise api_error(401, "UNAUTHORIZED", "The access token is not valid.", "invalid_token")
        if self.clock() >= float(grant.get("expires_at", 0)):
            raise api_error(401, "UNAUTHORIZED", "The access token has expired.", "invalid_token")
        if scope not in grant.get("scope", ()):
            raise api_error(
                403, "FORBIDDEN", f"The access token lacks scope '{scope}'.", "insufficient_scope"
            )
        return str(grant["client_id"])

    def authorize(self, authorization: str | None, scope: str = "identify") -> str:
        """The client id of a valid bearer token with ``scope``; raises :class:`Refused`
        with a ``{"message", "code"}`` reply, which another API's layer re-renders."""
        return self._authorize(authorization, scope)

    # -- the identification endpoints ---------------------------------------
    def create_session(self, *, authorization: str | None, body: bytes) -> Reply:
        """``POST {base_url}/identification/session`` with a JSON body."""
        try:
            client_id = self._authorize(authorization)
            request = parse_create_request(body)
        except Refused as refused:
            return refused.reply
        session = self.start(client_id, request)
        return Reply(
            200, {"Url": self.login_url(session.request_id), "RequestId": session.request_id}
        )

    def get_session(self, *, authorization: str | None, query: str) -> Reply:
        """``GET {base_url}/identification/session?requestId=...``; ``query`` as sent."""
        try:
            client_id = self._authorize(authorization)
        except Refused as refused:
            return refused.reply
        params = parse_qsl(query, keep_blank_values=True, max_num_fields=MAX_FIELDS)
        ids = [value for name, value in params if name.lower() == "requestid"]
        if len(ids) != 1 or not ids[0]:
            error = {"field": "requestId", "message": "Exactly one requestId is required."}
            return Reply(400, {"message": "The request is not valid.", "errors": [error]})
        session = self.session(ids[0])
        if session is None or session.client_id != client_id:
            body = {"message": "No identification session has this requestId.", "code": "NOT_FOUND"}
            return Reply(404, body)
        return Reply(200, session.record())

    def session_status(self, *, authorization: str | None, query: str) -> Reply:
        """``GET {base_url}/identification/session/status?requestId=...``: ``{"Done": bool}``."""
        reply = self.get_session(authorization=authorization, query=query)
        if reply.status != 200:
            return reply
        done = reply.body["Status"] not in vocabulary.IN_PROGRESS
        return Reply(200, {vocabulary.DONE: done})

    def invalidate(self, *, authorization: str | None, query: str, body: bytes) -> Reply:
        """``PUT {base_url}/identification/session/invalidate`` with ``{"RequestId": ...}``
        (or, as one SDK sends it, ``?requestId=``): the session ends as ``INVALIDATED`` and
        its identity is no longer served. An ``ERROR`` session cannot be invalidated."""
        try:
            client_id = self._authorize(authorization)
        except Refused as refused:
            return refused.reply
        ids = [
            v for k, v in parse_qsl(query, max_num_fields=MAX_FIELDS) if k.lower() == "requestid"
        ]
        try:
            parsed = json.loads(body) if body.strip() else {}
        except (ValueError, UnicodeDecodeError):
            parsed = None
        if isinstance(parsed, dict):
            given = lower_keys(parsed).get(vocabulary.INVALIDATE_REQUEST_ID.lower())
            if given is not None:
                ids.append(given)
        if parsed is None or len(ids) != 1 or not isinstance(ids[0], str) or not ids[0]:
            error = {"field": "RequestId", "message": "Exactly one RequestId is required."}
            return Reply(400, {"message": "The request is not valid.", "errors": [error]})
        session = self.session(ids[0])
        if session is None or session.client_id != client_id:
            missing = {
                "message": "No identification session has this requestId.",
                "code": "NOT_FOUND",
            }
            return Reply(404, missing)
        if session.status == vocabulary.ERROR:
            message = "A session that ended in ERROR cannot be invalidated."
            return Reply(400, {"message": message, "code": "INVALID_STATUS"})
        session.status = vocabulary.INVALIDATED
        session.identity = session.birth_date = None
        self._save(session)
        return Reply(200, {})

    # -- sessions, and the person at the broker ------------------------------
    def start(
        self,
        client_id: str,
        request: CreateRequest,
        *,
        api: str = "v1",
        wire: Mapping[str, Any] | None = None,
        session_id: Callable[[], str] | None = None,
        login_lifetime: float | None = None,
        identity_lifetime: float | None = None,
        lifetime: float | None = None,
    ) -> Session:
        """A new session of ``client_id`` for ``request``, whichever API asked for it.

        ``api`` and ``wire`` are what the asking API's layer needs to render the session
        later; the lifetimes (seconds after creation) are those of its API: the login
        page's, the identity's, the session's own (``None``: v1's, kept an hour after its
        last change). ``session_id`` makes the API's kind of id, unless the test gave
        its own request ids.
        """
        created = self.clock()

        def after(seconds: float | None) -> float | None:
            return None if seconds is None else created + seconds

        new_id = session_id if session_id and not self._own_request_ids else self.new_request_id
        session = Session(
            request_id=new_id(),
            client_id=client_id,
            created_at=created,
            api=api,
            wire=dict(wire or {}),
            login_expires_at=after(login_lifetime),
            identity_until=after(identity_lifetime),
            delete_at=after(lifetime),
            **dataclasses.asdict(request),
        )
        self._save(session)
        return session

    def session(self, request_id: str) -> Session | None:
        """The session with this id, or ``None``; its lifetimes applied as of now."""
        key = _hashed("session", request_id)
        value = self.store.get(key)
        if value is None or value.get("request_id") != request_id:
            return None
        try:
            session = Session(**value)
        except TypeError:  # written by another version of the sandbox
            return None
        moment = self.clock()
        if session.delete_at is not None and moment >= session.delete_at:
            # A cache keeps whole seconds; the session's own clock decides.
            self.store.delete(key)
            return None
        changed = False
        login_over = session.login_expires_at is not None and moment >= session.login_expires_at
        if login_over and session.in_progress:
            session.status = vocabulary.TIMEOUT
            changed = True
        identity_over = session.identity_until is not None and moment >= session.identity_until
        if identity_over and (session.identity is not None or session.birth_date is not None):
            session.identity = session.birth_date = None
            changed = True
        if changed:
            self._save(session)
        return session

    def end_by_client(self, request_id: str, client_id: str) -> Session:
        """The client ended the session (v2 invalidate, eID Hub cancel): ``INVALIDATED``,
        its identity dropped. Raises :class:`UnknownSession` (not the client's either) and
        :class:`SessionFinished` for a session that ended in ``ERROR``."""
        session = self.session(request_id)
        if session is None or session.client_id != client_id:
            raise UnknownSession(request_id[:40])
        if session.status == vocabulary.ERROR:
            raise SessionFinished(session.status)
        session.status = vocabulary.INVALIDATED
        session.identity = session.birth_date = None
        self._save(session)
        return session

    def _save(self, session: Session) -> None:
        # A read-modify-write: two simultaneous clicks may both win. Fine for a sandbox.
        ttl: float = SESSION_LIFETIME
        if session.delete_at is not None:
            ttl = max(1.0, session.delete_at - self.clock())
        self.store.set(_hashed("session", session.request_id), dataclasses.asdict(session), ttl)

    def _pending(self, request_id: str) -> Session:
        session = self.session(request_id)
        if session is None:
            raise UnknownSession(request_id[:40])
        if not session.in_progress:
            raise SessionFinished(session.status)
        return session

    def open(self, request_id: str) -> Session:
        """The person opened the login page: CREATED becomes USERINITIATED."""
        session = self.session(request_id)
        if session is None:
            raise UnknownSession(request_id[:40])
        if session.status == vocabulary.CREATED:
            session.status = vocabulary.USER_INITIATED
            self._save(session)
        return session

    def identify(
        self,
        request_id: str,
        person: Person,
        *,
        provider: str | None = None,
        user_agent: str | None = None,
        ip_address: str | None = None,
    ) -> str:
        """The person identified; returns the Success URL with ``[1]`` and ``[2]`` filled."""
        session = self._pending(request_id)
        session.identity_provider = (
            session.identity_provider or provider or person.identity_provider
        )
        session.identity = identity_of(
            person,
            with_number=session.get_social_security_number,
            user_agent=user_agent,
            ip_address=ip_address,
            provider=session.identity_provider,
        )
        session.birth_date = person.birth_date.isoformat()
        session.status = vocabulary.SUCCESS
        session.ended_at = self.clock()
        self._save(session)
        return self.return_url(session)

    def abort(self, request_id: str) -> str:
        """The person cancelled; returns the Abort URL with ``[1]`` and ``[2]`` filled."""
        session = self._pending(request_id)
        session.status = vocabulary.USER_ABORTED
        session.ended_at = self.clock()
        self._save(session)
        return self.return_url(session)

    def fail(
        self,
        request_id: str,
        status: str = "TIMEOUT",
        *,
        message: str | None = None,
        record_status: str = vocabulary.ERROR,
    ) -> str:
        """The identification failed with the code ``status``; returns the Error URL with
        ``[0]``. ``record_status`` is how the record then reads: ``ERROR``, ``TIMEOUT`` or
        (v1 only) ``UNKNOWN`` (:func:`failed_statuses`)."""
        if not (0 < len(status) <= 64 and all(32 < ord(c) < 127 for c in status)):
            raise ValueError("the error status is a short code of printable ASCII")
        session = self._pending(request_id)
        if record_status not in failed_statuses(session.api):
            allowed = ", ".join(failed_statuses(session.api))
            raise ValueError(f"a {session.api} session fails with one of {allowed}")
        session.status = record_status
        session.error = {
            "NativeErrorCode": f"SANDBOX-{status}",
            "ErrorCode": status,
            "ErrorMessage": message or f"Sandbox: the identification failed ({status}).",
        }
        session.ended_at = self.clock()
        self._save(session)
        return self.return_url(session)

    @staticmethod
    def return_url(session: Session) -> str:
        """Where the person goes now that ``session`` ended, as the API that created it
        says. For v1, placeholders filled: ``[1]`` (request id) and ``[2]`` (external
        reference) in every URL, as the deployed service does, and ``[0]`` (the error
        status) in the Error URL; the successors append ``sessionId``. ``""`` when the
        session has no return URLs (headless)."""
        if session.api != "v1":
            return _RETURN_URLS[session.api](session)
        values = {
            vocabulary.REQUEST_ID: session.request_id,
            vocabulary.EXTERNAL_ID: session.external_reference or "",
        }
        if session.status == vocabulary.SUCCESS:
            url = session.return_urls["Success"]
        elif session.status == vocabulary.USER_ABORTED:
            url = session.return_urls["Abort"]
        elif session.status in FAILED_STATUSES:
            url = session.return_urls["Error"]
            values[vocabulary.ERROR_STATUS] = (session.error or {}).get(
                "ErrorCode", vocabulary.UNKNOWN
            )
        else:
            raise SessionError(f"session in status {session.status} has no return URL")
        return fill_placeholders(url, values)
