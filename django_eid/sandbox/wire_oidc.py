"""The sandbox as an OpenID Connect provider: the broker side of ``BROKER_API = "oidc"``.

One OP per preset (``idura``, ``bankid-no``, ``signicat``, ``vipps``, and ``generic`` for
none), each at its own issuer, all over the one
:class:`~django_eid.sandbox.broker.SandboxBroker`: an authorization request becomes a
:class:`~django_eid.sandbox.wire.Session` of API ``"oidc"`` (the request kept in
``session.wire``), the person picker page ends it, and :func:`return_url` sends the browser
back to the relying party with a code or an error. Discovery, JWKS, PAR, the token endpoint
and userinfo are methods of :class:`OpenIdProvider` returning a
:class:`~django_eid.sandbox.wire.Reply`; no Django request is involved. Tokens are signed
with joserfc; the signing keys live in the sandbox's store, so every server process signs
with the same ones. The claim tables are the sandbox's own (the broker's side of the wire),
kept apart from the relying party's presets on purpose.
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import functools
import hashlib
import hmac
import json
import re
import secrets
import unicodedata
import uuid
from collections.abc import Collection, Mapping
from typing import TYPE_CHECKING, Any, Final
from urllib.parse import parse_qs, unquote_plus, urlencode, urlsplit, urlunsplit

from joserfc import jwt
from joserfc.errors import JoseError
from joserfc.jwk import ECKey, OctKey, RSAKey, import_key

from django_eid import vocabulary
from django_eid.records import is_http_url
from django_eid.sandbox.wire import MAX_FIELDS, CreateRequest, Refused, Reply, Session, parse_form

if TYPE_CHECKING:  # broker.py imports this module for its return URLs
    from django_eid.sandbox.broker import SandboxBroker

API: Final = "oidc"
GENERIC: Final = "generic"
PRESETS: Final = ("idura", "bankid-no", "signicat", "vipps", GENERIC)
#: Lifetimes in seconds (sandbox clock): the PAR request_uri (Idura's 120 s), the code
#: after the person finished, the picker page, the session, the access token, the id_token.
PAR_LIFETIME: Final = 120
CODE_LIFETIME: Final = 60
LOGIN_LIFETIME: Final = 600
SESSION_LIFETIME: Final = 3600
TOKEN_LIFETIME: Final = 600
ID_TOKEN_LIFETIME: Final = 300
#: The signing keys are kept this long after their last rotation (then new ones are made).
KEYS_LIFETIME: Final = 30 * 24 * 3600
#: A client assertion may live at most this long, plus the leeway for clock skew.
ASSERTION_MAX_LIFETIME: Final = 300
LEEWAY: Final = 30
REQUEST_URI_PREFIX: Final = "urn:ietf:params:oauth:request_uri:"
ASSERTION_TYPE: Final = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"
AUTH_METHODS: Final = ("client_secret_basic", "client_secret_post", "private_key_jwt")
#: The ways :meth:`OpenIdProvider.tamper_next_token` can sign a hostile id_token.
SIGNINGS: Final = ("unknown-key", "none", "hs256", "bad-signature")
_VERIFIER_RE: Final = re.compile(r"\A[A-Za-z0-9\-._~]{43,128}\Z")
_CHALLENGE_RE: Final = re.compile(r"\A[A-Za-z0-9_-]{43}\Z")
#: No parameter of ours is longer; a longer one is not a client of ours.
_MAX_PARAM: Final = 2048
_NO_STORE: Final = {"Cache-Control": "no-store", "Pragma": "no-cache"}
_SUBJECT_NAMESPACE: Final = uuid.UUID("6f1b3a52-8d0e-4c52-9a55-2b8f0f1c9e11")


@dataclasses.dataclass(frozen=True)
class Eid:
    """An eID an OP offers: what ``acr_values`` selects it, its country, the v1 provider
    the picker page uses for it, and the fixed claims the tokens then carry."""

    acr: str
    country: str | None
    provider: str | None
    claims: Mapping[str, Any] = dataclasses.field(default_factory=dict)


def _idura(
    acr: str, country: str, provider: str | None, scheme: str, used: str | None = None
) -> Eid:
    claims = {"authenticationtype": used or acr, "identityscheme": scheme}
    return Eid(acr, country, provider, claims)


_EIDAS: Final = "http://eidas.europa.eu/LoA/"
#: Each preset's eIDs by acr value, the first of a country being its default there.
EIDS: Final[Mapping[str, tuple[Eid, ...]]] = {
    "idura": (
        _idura("urn:grn:authn:no:bankid", "NO", "NO_BANKID_WEB", "nobankid-oidc"),
        _idura("urn:grn:authn:no:bankid:substantial", "NO", "NO_BANKID_MOBILE", "nobankid-oidc"),
        _idura("urn:grn:authn:no:vipps", "NO", None, "novippslogin"),
        _idura("urn:grn:authn:se:bankid", "SE", "SWE_BANKID", "sebankid"),
        _idura("urn:grn:authn:dk:mitid:substantial", "DK", "DA_NEMID", "dkmitid"),
        _idura("urn:grn:authn:dk:mitid:high", "DK", "DA_NEMID", "dkmitid"),
        _idura("urn:grn:authn:fi:all", "FI", "FI_TUPAS", "fitupas", "urn:grn:authn:fi:bank-id"),
    ),
    "signicat": (
        Eid("idp:nbid", "NO", "NO_BANKID_WEB", {"idp": "nbid"}),
        Eid("idp:sbid", "SE", "SWE_BANKID", {"idp": "sbid"}),
        Eid("idp:mitid", "DK", "DA_NEMID", {"idp": "mitid"}),
        Eid("idp:ftn", "FI", "FI_TUPAS", {"idp": "ftn"}),
    ),
    "bankid-no": (
        Eid(
            "urn:bankid:bid", "NO", "NO_BANKID_WEB", {"acr": "urn:bankid:bid;LOA=4", "amr": ["bid"]}
        ),
        Eid(
            "urn:bankid:bis",
            "NO",
            "NO_BANKID_MOBILE",
            {"acr": "urn:bankid:bis;LOA=3", "amr": ["bis-mfa", "bis-bid"]},
        ),
    ),
    # Vipps takes no acr_values: its one eID is the default.
    "vipps": (),
    GENERIC: (
        Eid(_EIDAS + "substantial", None, None),
        Eid(_EIDAS + "high", None, None),
        Eid(_EIDAS + "low", None, None),
    ),
}
#: The brokers whose every person identifies with a Norwegian eID (their claim shapes).
NORWEGIAN_ONLY: Final = frozenset({"bankid-no", "vipps"})
_VIPPS: Final = Eid("", "NO", None)
#: The scope that releases the national identity number, per preset.
NUMBER_SCOPES: Final[Mapping[str, frozenset[str]]] = {
    "idura": frozenset({"ssn"}),
    "signicat": frozenset({"nin"}),
    "bankid-no": frozenset({"nnin_altsub"}),
    "vipps": frozenset({"nin", "nnin"}),
    GENERIC: frozenset(),
}
SCOPES_SUPPORTED: Final[Mapping[str, tuple[str, ...]]] = {
    "idura": ("openid", "address", "email", "phone", "birthdate", "ssn"),
    "signicat": ("openid", "profile", "nin", "idp-id"),
    "bankid-no": ("openid", "profile", "nnin_altsub"),
    "vipps": ("openid", "name", "birthDate", "nin", "nnin", "email", "phoneNumber", "address"),
    GENERIC: ("openid", "profile"),
}
_PROTOCOL_CLAIMS: Final = ("iss", "aud", "sub", "iat", "exp", "nonce", "at_hash")
CLAIMS_SUPPORTED: Final[Mapping[str, tuple[str, ...]]] = {
    "idura": (
        *_PROTOCOL_CLAIMS,
        *("nbf", "identityscheme", "authenticationtype", "name", "given_name", "family_name"),
        *("birthdate", "country", "uniqueuserid", "socialno", "ssn", "uuid"),
        *("cprNumberIdentifier", "hetu", "satu"),
    ),
    "signicat": (
        *_PROTOCOL_CLAIMS,
        *("nbf", "acr", "idp", "idp_id", "name", "given_name", "family_name", "birthdate"),
        *("nin", "nin_type", "nin_issuing_country"),
    ),
    "bankid-no": (
        *_PROTOCOL_CLAIMS,
        *("azp", "acr", "amr", "bankid_altsub", "nnin_altsub", "api_ver", "name"),
        *("given_name", "family_name", "birthdate"),
    ),
    "vipps": (
        *_PROTOCOL_CLAIMS,
        *("name", "given_name", "family_name", "birthdate", "nin", "email", "phone_number"),
    ),
    GENERIC: (*_PROTOCOL_CLAIMS, "acr", "name", "given_name", "family_name", "birthdate"),
}
#: Where the identity is: the id_token (else only userinfo has it).
DATA_IN_ID_TOKEN: Final = frozenset({"idura", "bankid-no", GENERIC})


def signing_alg(preset: str) -> str:
    """``ES256`` at BankID Norge (since October 2025), ``RS256`` elsewhere."""
    return "ES256" if preset == "bankid-no" else "RS256"


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def s256(verifier: str) -> str:
    """The PKCE S256 challenge of ``verifier``."""
    return b64url(hashlib.sha256(verifier.encode()).digest())


def at_hash(access_token: str) -> str:
    """The left half of the SHA-256 of the access token, base64url (OIDC Core 3.1.3.6)."""
    return b64url(hashlib.sha256(access_token.encode()).digest()[:16])


def _key(kind: str, value: str) -> str:
    # Codes, tokens and request_uris are secrets: the store sees their hashes only.
    return f"oidc-{kind}:{hashlib.sha256(value.encode()).hexdigest()[:40]}"


# -- signing keys ------------------------------------------------------------------------
_KEYS: Final = "oidc-keys"
_KTY_OF_ALG: Final = {"RS256": "RSA", "ES256": "EC"}


def _new_key(kty: str) -> dict[str, Any]:
    key: RSAKey | ECKey = RSAKey.generate_key(2048) if kty == "RSA" else ECKey.generate_key("P-256")
    alg = "RS256" if kty == "RSA" else "ES256"
    return {**key.as_dict(private=True), "kid": key.thumbprint(), "alg": alg, "use": "sig"}


@functools.cache
def _first_keys() -> dict[str, list[dict[str, Any]]]:
    """A new store's first keys, made once per process: an RSA key takes ~0.1 s to make,
    and the ``eid_broker`` fixture starts every test with a new store. Rotation makes
    fresh ones."""
    return {"RSA": [_new_key("RSA")], "EC": [_new_key("EC")]}


def _keys(store: Any) -> dict[str, list[dict[str, Any]]]:
    """The signing keys, current first; made on first use. Two processes making them at
    once both save theirs and the last one wins: a token of the other one fails
    verification once, as after a real broker's rotation."""
    keys = store.get(_KEYS)
    if not keys or not keys.get("RSA") or not keys.get("EC"):
        keys = {kty: list(found) for kty, found in _first_keys().items()}
        store.set(_KEYS, keys, KEYS_LIFETIME)
    return dict(keys)


def rotate_keys(store: Any) -> None:
    """A new current RSA and EC key; the previous ones stay in the JWKS (older ones go)."""
    keys = _keys(store)
    rotated = {kty: [_new_key(kty), keys[kty][0]] for kty in ("RSA", "EC")}
    store.set(_KEYS, rotated, KEYS_LIFETIME)


def _imported(key: Mapping[str, Any]) -> RSAKey | ECKey:
    """A stored key, read; the read keys are kept (by their JWK text): reading an RSA
    private key costs ~60 ms, and the OP reads its keys on every token and JWKS call."""
    return _read_key(json.dumps({k: v for k, v in key.items() if k not in ("alg", "use")}))


@functools.lru_cache(maxsize=64)
def _read_key(text: str) -> RSAKey | ECKey:
    key = import_key(json.loads(text))
    assert isinstance(key, RSAKey | ECKey)
    return key


def jwks(store: Any) -> dict[str, Any]:
    """The public keys, current and previous, RSA and EC."""
    public = []
    for kty in ("RSA", "EC"):
        for key in _keys(store)[kty]:
            public.append({**_imported(key).as_dict(private=False), **_meta(key)})
    return {"keys": public}


def _meta(key: Mapping[str, Any]) -> dict[str, Any]:
    return {"kid": key["kid"], "alg": key["alg"], "use": key["use"]}


def signing_key(store: Any, alg: str) -> tuple[str, RSAKey | ECKey]:
    """The current key for ``alg`` and its ``kid``."""
    current = _keys(store)[_KTY_OF_ALG[alg]][0]
    return str(current["kid"]), _imported(current)


@dataclasses.dataclass(frozen=True)
class Tamper:
    """What the next id_token gets instead (the fixture's ``tamper_next_token``): claims
    and header fields replaced (``None`` removes one), and how it is signed."""

    claims: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    header: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    signing: str | None = None


# -- the authorization request -----------------------------------------------------------
class AuthorizationError(Exception):
    """An authorization request refused; redirected back when ``redirect_uri`` is trusted."""

    def __init__(
        self, error: str, description: str, redirect_uri: str | None = None, state: str = ""
    ) -> None:
        super().__init__(f"{error}: {description}")
        self.error = error
        self.description = description
        self.redirect_uri = redirect_uri
        self.state = state


@dataclasses.dataclass(frozen=True)
class Authorization:
    """The authorization endpoint's answer: where to send the browser, or a 400 page.

    ``location`` is the picker page (``session`` is the new one) or the RP's redirect_uri
    with an error; ``error`` (with ``location`` ``None``) is the text of the 400 page.
    """

    location: str | None
    error: str | None = None
    session: Session | None = None


def with_query(url: str, params: Mapping[str, str]) -> str:
    """``url`` with ``params`` appended to its query (RFC 6749 3.1.2: kept as it was)."""
    parts = urlsplit(url)
    added = urlencode(params)
    query = f"{parts.query}&{added}" if parts.query else added
    return urlunsplit(parts._replace(query=query, fragment=""))


def return_url(session: Session) -> str:
    """The redirect back to the RP: ``?code=&state=``, ``?error=access_denied&...`` when
    the person cancelled, ``?error=<status>&...`` for another failure; each with ``iss``,
    the OP's issuer (RFC 9207, advertised in the discovery document)."""
    wire = session.wire
    state = str(wire.get("state", ""))
    if session.status == vocabulary.SUCCESS:
        params = {"code": str(wire["code"]), "state": state}
    elif session.status == vocabulary.USER_ABORTED:
        description = "The person cancelled the identification."
        params = {"error": "access_denied", "error_description": description, "state": state}
    else:
        error = session.error or {}
        params = {
            "error": error.get("ErrorCode", "server_error"),
            "error_description": error.get("ErrorMessage", "The identification failed."),
            "state": state,
        }
    params["iss"] = str(wire["issuer"])
    return with_query(str(wire["redirect_uri"]), params)


def _single(form: Mapping[str, list[str]]) -> dict[str, str]:
    for name, values in form.items():
        if len(values) > 1:
            raise _oauth("invalid_request", f"'{name}' is given more than once.")
        if len(values[0]) > _MAX_PARAM:
            raise _oauth("invalid_request", f"'{name}' is too long.")
    return {name: values[0] for name, values in form.items()}


def _oauth(error: str, description: str, status: int = 400) -> Refused:
    headers = dict(_NO_STORE)
    if status == 401:
        headers["WWW-Authenticate"] = 'Basic realm="django-eid-sandbox"'
    return Refused(Reply(status, {"error": error, "error_description": description}, headers))


class OpenIdProvider:
    """The OP of one preset at ``issuer``, over ``broker`` (its client, store and clock).

    ``redirect_uris`` are the client's registered redirect URIs: an authorization request
    (or a pushed one) with any other ``redirect_uri`` is refused without a redirect, the
    URIs being compared as strings, exactly (RFC 6749 3.1.2.3, the OAuth 2.0 Security
    BCP): no prefix, no normalising of case, port, path or user information. ``None``
    accepts any absolute http(s) URL: only for the ``eid_broker`` fixture, an OP behind
    ``responses`` that no browser reaches and that does not know the test site's host.
    ``client_key`` is the PEM of the key the client signs its ``private_key_jwt``
    assertions with (the site's ``OIDC_PRIVATE_KEY``: the sandbox's stand-in for a
    registered client key), ``client_key_id`` its ``kid``.
    """

    def __init__(
        self,
        broker: SandboxBroker,
        *,
        preset: str,
        issuer: str,
        redirect_uris: Collection[str] | None,
        client_key: str | None = None,
        client_key_id: str | None = None,
    ) -> None:
        if preset not in PRESETS:
            raise ValueError(f"unknown preset {preset!r}: one of {', '.join(PRESETS)}")
        self.broker = broker
        self.store = broker.store
        self.preset = preset
        self.issuer = issuer
        self.redirect_uris = None if redirect_uris is None else tuple(redirect_uris)
        self.client_key = client_key or None
        self.client_key_id = client_key_id or None
        #: Applied to the next id_token the token endpoint issues (then cleared).
        self.tamper: Tamper | None = None

    def endpoint(self, name: str) -> str:
        """The URL of ``authorize``, ``token``, ``userinfo``, ``jwks`` or ``par``."""
        return f"{self.issuer.rstrip('/')}/{name}"

    # -- discovery and keys ---------------------------------------------------------------
    def discovery(self) -> Reply:
        """``GET {issuer}/.well-known/openid-configuration``."""
        alg = signing_alg(self.preset)
        document: dict[str, Any] = {
            "issuer": self.issuer,
            "authorization_endpoint": self.endpoint("authorize"),
            "token_endpoint": self.endpoint("token"),
            "userinfo_endpoint": self.endpoint("userinfo"),
            "jwks_uri": self.endpoint("jwks"),
            "pushed_authorization_request_endpoint": self.endpoint("par"),
            "require_pushed_authorization_requests": False,
            "response_types_supported": ["code"],
            "response_modes_supported": ["query"],
            "grant_types_supported": ["authorization_code"],
            "subject_types_supported": ["pairwise" if self.preset == "vipps" else "public"],
            "id_token_signing_alg_values_supported": [alg],
            "code_challenge_methods_supported": ["S256"],
            "token_endpoint_auth_methods_supported": list(AUTH_METHODS),
            "token_endpoint_auth_signing_alg_values_supported": ["RS256", "ES256"],
            "scopes_supported": list(SCOPES_SUPPORTED[self.preset]),
            "claims_supported": list(CLAIMS_SUPPORTED[self.preset]),
            "acr_values_supported": [eid.acr for eid in EIDS[self.preset]],
            "prompt_values_supported": ["login", "none", "consent"],
            "ui_locales_supported": ["en", "nb", "no", "sv", "da", "fi"],
            "request_parameter_supported": False,
            "request_uri_parameter_supported": True,
            "authorization_response_iss_parameter_supported": True,
        }
        return Reply(200, document)

    def jwks(self) -> Reply:
        """``GET {issuer}/jwks``: the RSA and EC public keys, current and previous."""
        return Reply(200, jwks(self.store))

    def rotate_keys(self) -> None:
        """Sign with new keys from now on; the previous ones stay in the JWKS."""
        rotate_keys(self.store)

    # -- the authorization request --------------------------------------------------------
    def _eids(self) -> dict[str, Eid]:
        return {eid.acr: eid for eid in EIDS[self.preset]}

    def _validate(self, params: Mapping[str, str], client_id: str | None = None) -> dict[str, str]:
        """The request's parameters, checked; raises :class:`AuthorizationError`."""
        given_client = params.get("client_id")
        if client_id is None:
            if not given_client or not hmac.compare_digest(
                given_client.encode(), self.broker.client_id.encode()
            ):
                raise AuthorizationError("invalid_client", "Unknown client_id.")
            client_id = given_client
        elif given_client is not None and given_client != client_id:
            raise AuthorizationError(
                "invalid_request", "client_id is not the authenticated client."
            )
        redirect_uri = self._registered(params.get("redirect_uri"))
        state = params.get("state", "")

        def refuse(error: str, description: str) -> AuthorizationError:
            return AuthorizationError(error, description, redirect_uri, state)

        if "request" in params:
            raise refuse("request_not_supported", "Request objects are not supported.")
        if "request_uri" in params:
            raise refuse("invalid_request", "request_uri comes from the PAR endpoint only.")
        if params.get("response_type") != "code":
            raise refuse("unsupported_response_type", "Only response_type=code is supported.")
        if params.get("response_mode", "query") != "query":
            raise refuse("invalid_request", "Only response_mode=query is supported.")
        if "openid" not in params.get("scope", "").split():
            raise refuse("invalid_scope", "The scope must contain openid.")
        if not state:
            raise refuse("invalid_request", "state is required.")
        if not params.get("nonce"):
            raise refuse("invalid_request", "nonce is required.")
        if params.get("code_challenge_method") != "S256":
            raise refuse("invalid_request", "PKCE is required: code_challenge_method=S256.")
        if not _CHALLENGE_RE.match(params.get("code_challenge", "")):
            raise refuse("invalid_request", "code_challenge is not an S256 challenge.")
        acr_values = params.get("acr_values", "").split()
        unknown = [acr for acr in acr_values if acr not in self._eids()]
        if unknown:
            raise refuse("invalid_request", "acr_values has a value this OP does not offer.")
        if "none" in params.get("prompt", "").split():
            raise refuse("login_required", "The sandbox keeps no login: the person must log in.")
        kept = (
            "redirect_uri",
            "scope",
            "state",
            "nonce",
            "code_challenge",
            "acr_values",
            "login_hint",
            "prompt",
            "ui_locales",
        )
        return {"client_id": client_id, **{name: params[name] for name in kept if name in params}}

    def _registered(self, redirect_uri: str | None) -> str:
        """``redirect_uri`` if it is one of the client's registered ones, else
        :class:`AuthorizationError` without a redirect URI: nobody is sent to an untrusted
        URI, not even with an error (RFC 6749 4.1.2.1)."""
        if not redirect_uri:
            raise AuthorizationError("invalid_request", "redirect_uri is required.")
        if not is_http_url(redirect_uri):
            raise AuthorizationError(
                "invalid_request", "redirect_uri is not an absolute http(s) URL."
            )
        if self.redirect_uris is not None and redirect_uri not in self.redirect_uris:
            registered = " or ".join(self.redirect_uris) or (
                "none (include django_eid.urls, or set OIDC_REDIRECT_URI)"
            )
            raise AuthorizationError(
                "invalid_request",
                f"redirect_uri is not registered for this client; registered: {registered}.",
            )
        return redirect_uri

    def par(self, *, authorization: str | None, content_type: str | None, body: bytes) -> Reply:
        """``POST {issuer}/par``: 201 ``{"request_uri", "expires_in"}`` (RFC 9126)."""
        try:
            params = _single(parse_form(content_type, body))
            client_id = self.authenticate(authorization, params)
            try:
                request = self._validate(without_credentials(params), client_id)
            except AuthorizationError as refused:
                raise _oauth(refused.error, refused.description) from None
        except Refused as refused:
            return refused.reply
        request_uri = REQUEST_URI_PREFIX + str(uuid.uuid4())
        expires_at = self.broker.clock() + PAR_LIFETIME
        record = {"client_id": client_id, "request": request, "expires_at": expires_at}
        self.store.set(_key("par", request_uri), record, PAR_LIFETIME)
        return Reply(201, {"request_uri": request_uri, "expires_in": PAR_LIFETIME}, _NO_STORE)

    def authorize(self, query: str) -> Authorization:
        """``GET {issuer}/authorize?...``: a session and its picker page, or an error."""
        try:
            form = parse_qs(query, keep_blank_values=True, max_num_fields=MAX_FIELDS)
            params = {name: values[0] for name, values in form.items()}
            repeated = sorted(name for name, values in form.items() if len(values) > 1)
            if repeated:
                raise AuthorizationError("invalid_request", f"'{repeated[0]}' is repeated.")
            pushed = "request_uri" in params
            request = self._pushed(params) if pushed else self._validate(params)
        except ValueError:
            return Authorization(None, "invalid_request: the query is not valid.")
        except AuthorizationError as refused:
            if refused.redirect_uri is None:
                return Authorization(None, f"{refused.error}: {refused.description}")
            error = {"error": refused.error, "error_description": refused.description}
            if refused.state:
                error["state"] = refused.state
            error["iss"] = self.issuer
            return Authorization(with_query(refused.redirect_uri, error))
        session = self.start(request, pushed=pushed)
        return Authorization(self.broker.login_url(session.request_id), session=session)

    def _pushed(self, params: Mapping[str, str]) -> dict[str, str]:
        """The request pushed under ``request_uri``: single use, 120 s, this client's."""
        key = _key("par", params["request_uri"])
        record = self.store.get(key)
        self.store.delete(key)
        if record is None or self.broker.clock() >= float(record["expires_at"]):
            raise AuthorizationError("invalid_request_uri", "Unknown, used or expired request_uri.")
        if params.get("client_id") != record["client_id"]:
            raise AuthorizationError("invalid_request", "client_id is not the one that pushed.")
        request = dict(record["request"])
        self._registered(request.get("redirect_uri"))  # still registered when it is used
        return request

    def start(self, request: Mapping[str, str], *, pushed: bool = False) -> Session:
        """The session of a valid authorization request, with its code ready for the end."""
        eids = [self._eids()[acr] for acr in request.get("acr_values", "").split()]
        scopes = set(request.get("scope", "").split())
        create = CreateRequest(
            return_urls={},
            external_reference=None,
            # One acr value picks the eID; none or several leave it to the person.
            identity_provider=eids[0].provider if len(eids) == 1 else None,
            language=vocabulary.broker_language(request["ui_locales"].split()[0])
            if request.get("ui_locales", "").split()
            else None,
            get_social_security_number=bool(scopes & NUMBER_SCOPES[self.preset]),
            iframe_domain=None,
        )
        code = secrets.token_urlsafe(32)
        wire = {
            **request,
            "preset": self.preset,
            "issuer": self.issuer,
            "pushed": pushed,
            "code": code,
            # BankID Norge's sub: new at every login.
            "login_id": str(uuid.uuid4()),
        }
        session = self.broker.start(
            request["client_id"],
            create,
            api=API,
            wire=wire,
            session_id=lambda: uuid.uuid4().hex,
            login_lifetime=LOGIN_LIFETIME,
            lifetime=SESSION_LIFETIME,
        )
        self.store.set(_key("code", code), {"session": session.request_id}, SESSION_LIFETIME)
        return session

    # -- client authentication ------------------------------------------------------------
    def authenticate(self, authorization: str | None, params: Mapping[str, str]) -> str:
        """The client of a token or PAR request: ``client_secret_basic`` (id and secret
        form-urlencoded, RFC 6749 2.3.1), ``client_secret_post`` or ``private_key_jwt``;
        exactly one of them."""
        client_id = self.broker.client_id
        scheme, _, encoded = (authorization or "").strip().partition(" ")
        methods = [
            bool(authorization),
            "client_secret" in params,
            "client_assertion" in params or "client_assertion_type" in params,
        ]
        if sum(methods) > 1:
            raise _oauth("invalid_request", "Use one client authentication method.")
        if not any(methods):
            raise _oauth("invalid_client", "Client authentication is required.", 401)
        if methods[2]:
            given = self._assertion_client(params)
        elif authorization:
            if scheme.lower() != "basic":
                raise _oauth("invalid_client", "Only Basic client credentials are accepted.", 401)
            try:
                decoded = base64.b64decode(encoded.strip(), validate=True).decode()
            except (binascii.Error, UnicodeDecodeError):
                raise _oauth("invalid_client", "Malformed Basic credentials.", 401) from None
            raw_id, _, raw_secret = decoded.partition(":")
            given, secret = unquote_plus(raw_id), unquote_plus(raw_secret)
            self._check_secret(given, secret)
        else:
            given = params.get("client_id", "")
            self._check_secret(given, params["client_secret"])
        if params.get("client_id", given) != given:
            raise _oauth("invalid_request", "client_id is not the authenticated client.")
        return client_id

    def _check_secret(self, given_id: str, secret: str) -> None:
        secret_ok = hmac.compare_digest(secret.encode(), self.broker.client_secret.encode())
        id_ok = hmac.compare_digest(given_id.encode(), self.broker.client_id.encode())
        if not (self.broker.client_secret and id_ok and secret_ok):
            raise _oauth("invalid_client", "Unknown client or wrong secret.", 401)

    def _assertion_client(self, params: Mapping[str, str]) -> str:
        """``private_key_jwt`` (RFC 7523): verified with the client's registered key."""
        if params.get("client_assertion_type") != ASSERTION_TYPE:
            raise _oauth("invalid_request", f"client_assertion_type must be {ASSERTION_TYPE}.")
        if not self.client_key:
            description = "No key is registered for the client (set OIDC_PRIVATE_KEY)."
            raise _oauth("invalid_client", description, 401)
        try:
            key = _client_public_key(self.client_key)
            token = jwt.decode(
                params.get("client_assertion", ""), key, algorithms=["RS256", "ES256"]
            )
        except (JoseError, ValueError, TypeError):
            raise _oauth("invalid_client", "The client assertion does not verify.", 401) from None
        claims, now = token.claims, self.broker.clock()
        kid = token.header.get("kid")
        audiences = claims.get("aud")
        audiences = [audiences] if isinstance(audiences, str) else audiences or []
        accepted = {self.issuer, self.endpoint("token"), self.endpoint("par")}
        problems = [
            (claims.get("iss") != self.broker.client_id, "iss is not the client"),
            (claims.get("sub") != self.broker.client_id, "sub is not the client"),
            (not set(audiences) & accepted, "aud is neither the issuer nor the endpoint"),
            (self.client_key_id is not None and kid != self.client_key_id, "unknown kid"),
            (not isinstance(claims.get("exp"), int), "exp is required"),
            (not claims.get("jti"), "jti is required"),
        ]
        for failed, why in problems:
            if failed:
                raise _oauth("invalid_client", f"The client assertion is not valid: {why}.", 401)
        exp = int(claims["exp"])
        if exp <= now - LEEWAY:
            raise _oauth("invalid_client", "The client assertion has expired.", 401)
        if exp > now + ASSERTION_MAX_LIFETIME + LEEWAY:
            raise _oauth("invalid_client", "The client assertion lives too long.", 401)
        jti_key = _key("jti", str(claims["jti"]))
        if self.store.get(jti_key) is not None:
            raise _oauth("invalid_client", "The client assertion was used before.", 401)
        self.store.set(jti_key, {"seen": True}, ASSERTION_MAX_LIFETIME + 2 * LEEWAY)
        return str(claims["iss"])

    # -- the token endpoint ---------------------------------------------------------------
    def token(self, *, authorization: str | None, content_type: str | None, body: bytes) -> Reply:
        """``POST {issuer}/token``: the authorization code grant, with PKCE."""
        try:
            params = _single(parse_form(content_type, body))
            client_id = self.authenticate(authorization, params)
            grant_type = params.get("grant_type")
            if not grant_type:
                raise _oauth("invalid_request", "grant_type is required.")
            if grant_type != "authorization_code":
                raise _oauth("unsupported_grant_type", "Only authorization_code is supported.")
            if not params.get("code"):
                raise _oauth("invalid_request", "code is required.")
            session = self._redeem(params["code"], client_id)
            if params.get("redirect_uri") != session.wire["redirect_uri"]:
                raise _oauth("invalid_grant", "redirect_uri is not the authorization request's.")
            verifier = params.get("code_verifier", "")
            if not _VERIFIER_RE.match(verifier):
                raise _oauth("invalid_grant", "code_verifier is missing or malformed.")
            if not hmac.compare_digest(s256(verifier), str(session.wire["code_challenge"])):
                raise _oauth("invalid_grant", "code_verifier does not match the code_challenge.")
        except Refused as refused:
            return refused.reply
        access_token = secrets.token_urlsafe(32)
        grant = {
            "session": session.request_id,
            "client_id": client_id,
            "issuer": self.issuer,
            "expires_at": self.broker.clock() + TOKEN_LIFETIME,
        }
        self.store.set(_key("token", access_token), grant, TOKEN_LIFETIME)
        body_out = {
            "token_type": "Bearer",
            "access_token": access_token,
            "expires_in": TOKEN_LIFETIME,
            "id_token": self.id_token(session, access_token),
            "scope": session.wire.get("scope", "openid"),
        }
        return Reply(200, body_out, _NO_STORE)

    def _redeem(self, code: str, client_id: str) -> Session:
        """The session of ``code``, which is used up whatever happens next."""
        key = _key("code", code)
        record = self.store.get(key)
        self.store.delete(key)
        session = self.broker.session(str(record["session"])) if record else None
        if session is None or session.api != API or session.wire.get("issuer") != self.issuer:
            raise _oauth("invalid_grant", "Unknown, used or expired code.")
        if session.client_id != client_id or session.status != vocabulary.SUCCESS:
            raise _oauth("invalid_grant", "Unknown, used or expired code.")
        if self.broker.clock() >= (session.ended_at or 0.0) + CODE_LIFETIME:
            raise _oauth("invalid_grant", "The code has expired.")
        return session

    def id_token(self, session: Session, access_token: str) -> str:
        """The signed id_token of ``session`` (tampered with once, if a test asked)."""
        issued = int(self.broker.clock())
        claims: dict[str, Any] = {
            "iss": self.issuer,
            "aud": session.client_id,
            "iat": issued,
            "exp": issued + ID_TOKEN_LIFETIME,
            "nonce": session.wire["nonce"],
            "at_hash": at_hash(access_token),
        }
        if self.preset in ("idura", "signicat"):
            claims["nbf"] = issued
        if self.preset == "bankid-no":
            claims["azp"] = session.client_id
        identity = self.claims(session)
        if self.preset in DATA_IN_ID_TOKEN:
            claims.update(identity)
        else:
            claims["sub"] = identity["sub"]
            if self.preset == "signicat":
                claims["idp"] = identity["idp"]
                claims["acr"] = self.eid(session).acr
        alg = signing_alg(self.preset)
        kid, key = signing_key(self.store, alg)
        header: dict[str, Any] = {"alg": alg, "kid": kid, "typ": "JWT"}
        tamper, self.tamper = self.tamper, None
        if tamper is None:
            return jwt.encode(header, claims, key, algorithms=[alg])
        return self._tampered(header, claims, tamper)

    def _tampered(self, header: dict[str, Any], claims: dict[str, Any], tamper: Tamper) -> str:
        header = {k: v for k, v in {**header, **tamper.header}.items() if v is not None}
        claims = {k: v for k, v in {**claims, **tamper.claims}.items() if v is not None}
        if tamper.signing == "none":
            header["alg"] = "none"
            return f"{_json_b64(header)}.{_json_b64(claims)}."
        if tamper.signing == "hs256":
            # The classic confusion: a symmetric token keyed with the client secret.
            header["alg"] = "HS256"
            secret = OctKey.import_key(self.broker.client_secret)
            return jwt.encode(header, claims, secret, algorithms=["HS256"])
        alg = str(header.get("alg", signing_alg(self.preset)))
        if alg not in _KTY_OF_ALG:
            raise ValueError(f"the sandbox signs with RS256 or ES256, not {alg!r}")
        if tamper.signing == "unknown-key":
            stranger = import_key(_new_key(_KTY_OF_ALG[alg]))
            header["kid"] = "unknown-" + secrets.token_hex(8)
            return jwt.encode(header, claims, stranger, algorithms=[alg])
        _, key = signing_key(self.store, alg)
        token = jwt.encode(header, claims, key, algorithms=[alg])
        if tamper.signing == "bad-signature":
            head, payload, signature = token.split(".")
            raw = bytearray(base64.urlsafe_b64decode(signature + "=" * (-len(signature) % 4)))
            raw[0] ^= 0xFF
            token = f"{head}.{payload}.{b64url(bytes(raw))}"
        return token

    # -- userinfo -------------------------------------------------------------------------
    def userinfo(self, *, authorization: str | None) -> Reply:
        """``GET``/``POST {issuer}/userinfo`` with ``Authorization: Bearer``: plain JSON."""
        scheme, _, token = (authorization or "").strip().partition(" ")
        grant = self.store.get(_key("token", token.strip())) if scheme.lower() == "bearer" else None
        session = None
        live = grant is not None and self.broker.clock() < float(grant["expires_at"])
        if grant is not None and live and grant.get("issuer") == self.issuer:
            session = self.broker.session(str(grant["session"]))
        if session is None or session.identity is None:
            challenge = 'Bearer realm="django-eid-sandbox", error="invalid_token"'
            body = {"error": "invalid_token", "error_description": "Unknown or expired token."}
            return Reply(401, body, {**_NO_STORE, "WWW-Authenticate": challenge})
        return Reply(200, self.claims(session), _NO_STORE)

    # -- claims -----------------------------------------------------------------------------
    def eid(self, session: Session) -> Eid:
        """The eID the session used: the one acr_values asked for, else the person's
        country's (the Norwegian brokers: their own, whoever the person is)."""
        eids = self._eids()
        asked = [acr for acr in session.wire.get("acr_values", "").split() if acr in eids]
        country = vocabulary.provider_country(session.identity_provider)
        if len(asked) > 1:  # the person chose: the asked eID of their country
            chosen = [acr for acr in asked if eids[acr].country == country]
            asked = chosen or asked
        if asked:
            return eids[asked[0]]
        if self.preset == "vipps":
            return _VIPPS
        if self.preset not in NORWEGIAN_ONLY:
            for eid in EIDS[self.preset]:
                if eid.country == country:
                    return eid
        return EIDS[self.preset][0]

    def claims(self, session: Session) -> dict[str, Any]:
        """The person's claims in this preset's names (userinfo's; the id_token's when the
        preset carries the data there). The number only when its scope was asked for."""
        identity = session.identity or {}
        eid = self.eid(session)
        given = " ".join(p for p in (identity.get("FirstName"), identity.get("MiddleName")) if p)
        family = identity.get("LastName") or ""
        person = _person_key(session)
        number = identity.get("SocialSecurityNumber")
        unique_id = identity.get("IdentityProviderUniqueId")
        common = {
            "name": f"{given} {family}".strip(),
            "given_name": given,
            "family_name": family,
            "birthdate": session.birth_date,
        }
        out: dict[str, Any]
        if self.preset == "idura":
            out = {"sub": "{" + str(uuid.uuid5(_SUBJECT_NAMESPACE, person)) + "}", **eid.claims}
            out.update(common, country=eid.country)
            scheme = eid.claims["identityscheme"]
            if scheme == "nobankid-oidc":
                out["uniqueuserid"] = unique_id or _derived_pid(person)
            if scheme in ("nobankid-oidc", "novippslogin") and number:
                out["socialno"] = number
            elif scheme == "sebankid" and number:
                out["ssn"] = number
            elif scheme == "dkmitid":
                out["uuid"] = str(uuid.uuid5(_SUBJECT_NAMESPACE, "mitid:" + person))
                if number:
                    out["cprNumberIdentifier"] = number
            elif scheme == "fitupas":
                out["satu"] = str(int(hashlib.sha256(person.encode()).hexdigest(), 16))[:8] + "K"
                if number:
                    out["hetu"] = number
            return out
        if self.preset == "signicat":
            sub = b64url(hashlib.sha256(f"signicat:{person}".encode()).digest())
            out = {"sub": sub, **eid.claims, "idp_id": unique_id or _derived_pid(person), **common}
            if number:
                out["nin"] = number
                out["nin_type"] = "BIRTH" if eid.country == "NO" else "PERSON"
                out["nin_issuing_country"] = eid.country
            return out
        if self.preset == "bankid-no":
            out = {
                "sub": session.wire["login_id"],
                "bankid_altsub": unique_id or _derived_pid(person),
            }
            out.update(eid.claims, api_ver=4, **common)
            if number:
                out["nnin_altsub"] = number
            return out
        if self.preset == "vipps":
            pairwise = f"vipps:{session.client_id}:{person}"
            sub = str(uuid.uuid5(_SUBJECT_NAMESPACE, pairwise))
            digits = str(int(hashlib.sha256(person.encode()).hexdigest(), 16))
            email_name = _ascii(f"{identity.get('FirstName', '')}.{family}").lower()
            out = {"sub": sub, **common}
            out["email"] = f"{email_name}@example.com"
            out["phone_number"] = "+474" + digits[:7]
            if number:
                out["nin"] = number
            return out
        sub = hashlib.sha256(f"generic:{person}".encode()).hexdigest()[:32]
        asked = session.wire.get("acr_values", "").split()
        return {"sub": sub, **common, "acr": asked[0] if asked else eid.acr}


def _client_public_key(pem: str) -> RSAKey | ECKey:
    """The client's key from its PEM, RSA or EC, never guessed (an unknown text would
    otherwise become a symmetric key)."""
    for kind in (RSAKey, ECKey):
        try:
            return kind.import_key(pem)
        except (ValueError, TypeError, JoseError):
            continue
    raise ValueError("OIDC_PRIVATE_KEY is neither an RSA nor an EC key in PEM")


def without_credentials(params: Mapping[str, str]) -> dict[str, str]:
    """An authorization request's parameters without the client's credentials."""
    secret = ("client_secret", "client_assertion", "client_assertion_type")
    return {name: value for name, value in params.items() if name not in secret}


def _json_b64(value: Mapping[str, Any]) -> str:
    return b64url(json.dumps(value, separators=(",", ":")).encode())


def _person_key(session: Session) -> str:
    """What stays the same for one person at every login (their stable subject). Not the
    number: it is in the identity only when its scope was asked for."""
    identity = session.identity or {}
    parts = [
        identity.get("FirstName"),
        identity.get("MiddleName"),
        identity.get("LastName"),
        session.birth_date,
        identity.get("IdentityProviderUniqueId"),
    ]
    return "|".join(str(part or "") for part in parts)


def _derived_pid(person: str) -> str:
    """A BankID-PID-shaped id for a person whose eID gave none (Swedish BankID)."""
    digits = str(int(hashlib.sha256(person.encode()).hexdigest(), 16))
    return f"9578-6000-4-{digits[:6]}"


def _ascii(text: str) -> str:
    decomposed = unicodedata.normalize("NFKD", text)
    return "".join(c for c in decomposed if c.isascii() and (c.isalnum() or c in ".-"))
