"""OpenID Connect brokers (``BROKER_API = "oidc"``): authorization code flow with PKCE.

Idura (Criipto), BankID Norge, Signicat's OIDC server and Vipps Login behind the same
:class:`~django_eid.brokers.BrokerApi` as the REST session APIs. What differs:

- No session at the broker before the user goes there: :meth:`OidcApi.create_session`
  builds the authorization request (pushed first with PAR when the provider offers it,
  ``OIDC_PAR``) and the row's ``request_id`` is a digest of its ``state``.
- Every user comes back to one registered ``redirect_uri`` (``django_eid:oidc-callback``)
  with ``code`` and ``state``; ``state`` is the row's own ``external_id`` (128 random
  bits), so the callback finds the row and checks it like any return.
- The record exists only once the single-use ``code`` is exchanged, with the PKCE
  verifier, at the token endpoint (:meth:`OidcApi.record_of_return`); without the
  user's return there is nothing to ask, so a row is not settled without it.
- The ``code_verifier`` and ``nonce`` are never stored: both are keyed hashes of the
  row's ``external_id`` under ``SECRET_KEY`` (:func:`derived`), known only to the server.

The ``id_token`` is verified with joserfc (signature by a key of the provider's JWKS,
an allow-listed asymmetric algorithm, ``iss``, ``aud``/``azp``, ``exp``/``iat``/``nbf``,
``nonce``, ``at_hash``); the discovery document and the JWKS are fetched through
django-eid's transport and cached in ``TOKEN_CACHE``, the JWKS fetched again (at most
once a minute) when a token names an unknown key. What each broker's claims are called
is :mod:`django_eid.brokers.oidc_presets`'.
"""

from __future__ import annotations

import base64
import datetime
import hashlib
import hmac
import json
import logging
import re
import secrets
import time
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar, Final, NamedTuple, TypeGuard
from urllib.parse import quote_plus, urlencode, urlsplit

import requests.auth
from django.core.cache import caches
from django.utils import timezone
from django.utils.crypto import salted_hmac
from joserfc import jwt
from joserfc.errors import JoseError
from joserfc.jwk import ECKey, KeySet, RSAKey

from django_eid import crypto
from django_eid.brokers import (
    ApiCall,
    BrokerApi,
    BrokerConfig,
    ReturnedIds,
    ReturnUrls,
    SessionRequest,
)
from django_eid.brokers.oidc_presets import PRESETS, Claims, Preset, Provider, preset
from django_eid.conf import EidSettings, eid_settings
from django_eid.exceptions import (
    EidConfigurationError,
    EidError,
    EidProtocolError,
    EidUnavailable,
    IdTokenInvalid,
    InvalidClient,
    TokenError,
)
from django_eid.records import (
    NUMBER_MISSING,
    SCOPE_NOT_GRANTED,
    CreatedSession,
    IdentificationRecord,
    Progress,
    RecordError,
    is_http_url,
    storable_object,
)
from django_eid.scrub import scrub, secrets_of
from django_eid.transport import Answer, HeaderAuth, Transport

logger = logging.getLogger("django_eid.client")

#: The parameters of a return to the callback.
CODE: Final = "code"
STATE: Final = "state"
ERROR: Final = "error"
ERROR_DESCRIPTION: Final = "error_description"
#: The provider's issuer in an authorization response (RFC 9207): against mix-ups.
ISS: Final = "iss"

#: How long the discovery document and the JWKS are kept, in seconds.
METADATA_TTL: Final = 3600
#: A JWKS is fetched again for an unknown key at most this often per provider, in seconds.
JWKS_REFRESH_INTERVAL: Final = 60
#: Clock skew allowed on ``exp``, ``iat`` and ``nbf`` (the spec allows at most 2 minutes).
LEEWAY: Final = 120
#: The oldest ``iat`` an id_token may have, in seconds (beside LEEWAY): it is issued at the
#: code exchange, moments before it is read; an old one was kept, or its clock is wrong.
ID_TOKEN_MAX_AGE: Final = 600
#: Algorithms an id_token may be signed with: asymmetric only (never ``none``, never HS*).
ALGORITHMS: Final = ("RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384")
#: Parts of the authorization request that name the person (never in a front-channel URL).
_CODE_RE: Final = re.compile(r"^[\x21-\x7e]{1,2048}\Z")


def derived(purpose: str, external_id: str, *, secret: str | None = None) -> str:
    """A secret of one authorization request: a keyed hash of its ``state``.

    43 characters of base64url (256 bits): a valid PKCE ``code_verifier`` (RFC 7636
    4.1) and a ``nonce``. Under ``SECRET_KEY`` (or ``secret``, one of its fallbacks):
    whoever sees the ``state`` in a URL cannot compute either.
    """
    digest = salted_hmac(
        f"django_eid.oidc.{purpose}", external_id, secret=secret, algorithm="sha256"
    ).digest()
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode()


def code_challenge(verifier: str) -> str:
    """RFC 7636 S256: ``BASE64URL(SHA256(verifier))`` without padding."""
    digest = hashlib.sha256(verifier.encode("ascii")).digest()
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode()


def request_id_of(external_id: str) -> str:
    """The row's ``request_id`` for an OIDC authorization: no broker session id exists;
    a digest of the ``state`` keeps the column unique without storing the state twice."""
    return "oidc-" + hashlib.sha256(external_id.encode()).hexdigest()[:48]


def at_hash(access_token: str, alg: str) -> str:
    """OIDC Core 3.1.3.6: the left half of the access token's hash, base64url."""
    bits = {"256": hashlib.sha256, "384": hashlib.sha384, "512": hashlib.sha512}[alg[-3:]]
    digest = bits(access_token.encode("ascii")).digest()
    return base64.urlsafe_b64encode(digest[: len(digest) // 2]).rstrip(b"=").decode()


class OidcApi(BrokerApi):
    """An OpenID provider, spoken to as ``OIDC_PRESET`` says (:mod:`.oidc_presets`)."""

    name: ClassVar[str] = "oidc"
    # No client-credentials token: the authorization code is the grant.
    token_path: ClassVar[str] = ""
    default_base_url: ClassVar[str | None] = ""
    default_auth_url: ClassVar[str | None] = ""
    default_scopes: ClassVar[tuple[str, ...]] = ("openid",)
    request_id_param: ClassVar[str] = "request_id"  # never in a return: the state is the id
    external_id_param: ClassVar[str] = STATE
    return_params: ClassVar[tuple[str, ...]] = (CODE, STATE, ERROR, ERROR_DESCRIPTION, ISS)
    provider_re: ClassVar[re.Pattern[str]] = re.compile(r"^[a-z0-9]+(?:-[a-z0-9]+)*\Z")
    provider_example: ClassVar[str] = "no-bankid"
    published_providers: ClassVar[tuple[str, ...]] = tuple(
        sorted({name for p in PRESETS.values() for name in p.providers})
    )
    provider_families: ClassVar[Mapping[str, str]] = {
        name: spec.family for p in PRESETS.values() for name, spec in p.providers.items()
    }
    settles_without_return: ClassVar[bool] = False
    states_level: ClassVar[bool] = True

    def __init__(
        self,
        call: ApiCall,
        settings: EidSettings,
        *,
        transport: Transport | None = None,
        config: BrokerConfig | None = None,
    ) -> None:
        super().__init__(call, settings, transport=transport, config=config)
        self.preset: Preset = preset(settings.OIDC_PRESET)
        self.issuer: str = settings.OIDC_ISSUER

    # -- how the user comes back ------------------------------------------------------
    @classmethod
    def return_urls(cls, urls: ReturnUrls, *, external_reference: str) -> ReturnUrls:
        # One redirect URI for every outcome: the provider says which in its parameters.
        return ReturnUrls(success=urls.callback, abort=urls.callback, error=urls.callback)

    @classmethod
    def returned_ids(cls, params: Mapping[str, Sequence[str]]) -> ReturnedIds:
        errors = list(params.get(ERROR, ()))
        return ReturnedIds(
            request_id=[],
            external_id=list(params.get(STATE, ())),
            error_status=errors[0] if len(errors) == 1 else "",
        )

    @classmethod
    def return_kind(cls, params: Mapping[str, Sequence[str]]) -> str | None:
        """``abort`` for ``access_denied`` (the user cancelled, RFC 6749 4.1.2.1), ``error``
        for any other error, ``success`` for a code."""
        if params.get(ERROR):
            return "abort" if list(params[ERROR]) == ["access_denied"] else "error"
        return "success"

    @classmethod
    def provider_country(cls, provider: str | None) -> str | None:
        spec = _provider_spec(provider)
        return spec.country if spec is not None else None

    @classmethod
    def provider_level(cls, provider: str | None) -> str | None:
        spec = _provider_spec(provider)
        return spec.level if spec is not None else None

    # -- the calls --------------------------------------------------------------------
    def redirect_uri(self, urls: ReturnUrls) -> str:
        return self.settings.OIDC_REDIRECT_URI or urls.callback

    def scopes(self, request: SessionRequest) -> list[str]:
        return self.requested_scopes(number=request.get_social_security_number)

    def requested_scopes(self, *, number: bool) -> list[str]:
        """The scopes an authorization request asks for: ``SCOPES`` or the preset's, with
        ``openid``, and the number's when it is asked for."""
        configured = self.settings.SCOPES
        scopes = list(self.preset.scopes if configured is None else configured)
        if "openid" not in scopes:
            scopes.insert(0, "openid")
        if number:
            scopes += [s for s in self.preset.number_scopes if s not in scopes]
        return scopes

    def authorization_params(self, request: SessionRequest) -> dict[str, str]:
        state = request.external_reference
        params = {
            "response_type": "code",
            "client_id": self.settings.CLIENT_ID,
            "redirect_uri": self.redirect_uri(request.return_urls),
            "scope": " ".join(self.scopes(request)),
            "state": state,
            "nonce": derived("nonce", state),
            "code_challenge": code_challenge(derived("pkce", state)),
            "code_challenge_method": "S256",
            "response_mode": "query",
            "prompt": "login",
        }
        spec = self.preset.providers.get(request.identity_provider or "")
        acr = spec.acr if spec is not None else self.settings.OIDC_ACR_VALUES
        if acr:
            params["acr_values"] = acr
        if request.language:
            params["ui_locales"] = _UI_LOCALES.get(request.language, request.language.lower())
        if self.settings.OIDC_LOGIN_HINT:
            params["login_hint"] = self.settings.OIDC_LOGIN_HINT
        return params

    def create_session(self, request: SessionRequest) -> CreatedSession:
        metadata = self.discovery()
        params = self.authorization_params(request)
        par_endpoint = metadata.get("pushed_authorization_request_endpoint")
        use_par = self.settings.OIDC_PAR
        if use_par is None:
            use_par = isinstance(par_endpoint, str)
        if use_par and not isinstance(par_endpoint, str):
            raise EidProtocolError(
                "OIDC_PAR is True, but the provider's discovery document names no "
                "pushed_authorization_request_endpoint"
            )
        hint = self._number_hint(request)
        if hint and use_par:
            # A national identity number only ever travels in the back channel.
            params["login_hint"] = hint
        authorize = str(metadata["authorization_endpoint"])
        if use_par:
            request_uri = self._push(str(par_endpoint), params)
            query = {"client_id": self.settings.CLIENT_ID, "request_uri": request_uri}
        else:
            query = params
        joiner = "&" if urlsplit(authorize).query else "?"
        url = f"{authorize}{joiner}{urlencode(query, quote_via=quote_plus)}"
        return CreatedSession(url=url, request_id=request_id_of(request.external_reference))

    def _number_hint(self, request: SessionRequest) -> str | None:
        number = request.prefilled_social_security_number
        if not number:
            return None
        hints = self.preset.number_hint
        template = hints.get(request.identity_provider) or hints.get(None)
        return template.format(number=number) if template else None

    def _push(self, endpoint: str, params: Mapping[str, str]) -> str:
        """RFC 9126: the authorization request, pushed; its ``request_uri``."""
        answer = self._post(endpoint, dict(params), retry=False)
        if answer.status not in (200, 201):
            raise self._error(answer, TokenError)
        body = storable_object(answer.json(), answer.what)
        request_uri = body.get("request_uri")
        if not isinstance(request_uri, str) or not _CODE_RE.match(request_uri):
            raise EidProtocolError(f"{answer.what}: the answer has no request_uri")
        return request_uri

    def get_session(self, request_id: str, *, metadata: bool = False) -> IdentificationRecord:
        raise EidProtocolError(
            "an OpenID provider has no session to retrieve: the identity comes with the "
            "user's return (its authorization code)"
        )

    def session_done(self, request_id: str) -> bool | None:
        return None

    def cancel_session(self, request_id: str) -> None:
        # Nothing to end at the provider: a code that is never exchanged yields nothing.
        return None

    def record_of_return(
        self,
        request_id: str,
        *,
        external_id: str,
        params: Mapping[str, Sequence[str]],
        return_url: str,
    ) -> IdentificationRecord:
        """The identity of a return: the code exchanged, the id_token verified, userinfo
        read when the preset keeps the data there; a failed validation ends the session
        (a code cannot be exchanged twice) as a failure whose error names the step."""
        mixed_up = self._issuer_problem(params)
        if mixed_up is not None:
            # RFC 9207: the response may come from another provider (a mix-up attack); its
            # code is not sent anywhere, and the identification ends here.
            logger.warning("OpenID provider: %s", mixed_up)
            return _failed(request_id, "iss_mismatch", mixed_up)
        error = _one(params, ERROR)
        if error is not None:
            description = _one(params, ERROR_DESCRIPTION) or ""
            progress = Progress.ABORTED if error == "access_denied" else Progress.FAILED
            return IdentificationRecord(
                request_id=request_id,
                status=_printable(error)[:64] or "error",
                progress=progress,
                error=RecordError(
                    error_code=_printable(error)[:64],
                    error_message=scrub(description)[:300],
                ),
            )
        code = _one(params, CODE)
        if code is None or not _CODE_RE.match(code):
            return _failed(request_id, "invalid_request", "the return carries no usable code")
        try:
            claims, granted, signed = self._redeem(code, external_id, return_url)
        except (EidProtocolError, TokenError) as err:
            # The code is spent (or refused): another try cannot succeed, so the session
            # ends here. A provider out of reach before the exchange (EidUnavailable)
            # leaves it pending instead: the user may reload.
            level = logging.ERROR if isinstance(err, InvalidClient) else logging.WARNING
            logger.log(level, "OpenID provider: %s", err)
            if isinstance(err, TokenError):
                kind = err.error or "token_error"
            elif isinstance(err, _SpentCode):
                kind = "provider_unreachable"
            else:
                kind = "id_token_invalid" if isinstance(err, IdTokenInvalid) else "protocol_error"
            return _failed(request_id, kind, str(err))
        return self._record(request_id, claims, granted=granted, signed=signed)

    def _issuer_problem(self, params: Mapping[str, Sequence[str]]) -> str | None:
        """Why the return's ``iss`` (RFC 9207) does not show it is this provider's, or
        ``None``: when given, it must be the issuer; a provider whose discovery says it
        sends one (``authorization_response_iss_parameter_supported``) must send it."""
        values = list(params.get(ISS, ()))
        if len(values) > 1:
            return "the return carries iss more than once"
        if values:
            if hmac.compare_digest(values[0].encode(), self.issuer.encode()):
                return None
            return "the return's iss is not the provider's issuer (RFC 9207)"
        if self.discovery().get("authorization_response_iss_parameter_supported") is True:
            return "the return carries no iss, which the provider's discovery says it sends"
        return None

    # -- the code exchange ---------------------------------------------------------------
    def _redeem(
        self, code: str, external_id: str, return_url: str
    ) -> tuple[dict[str, Any], str | None, _Signed]:
        """The verified claims of the code's tokens, the ``scope`` the token answer says
        was granted (``None``: it says none, which means all that was asked, RFC 6749 5.1),
        and the id_token with the keys that verified it."""
        metadata = self.discovery()
        # The keys first: a provider whose keys cannot be had now does not get the code,
        # which a reload can then still exchange.
        self.jwks()
        data = {
            "grant_type": "authorization_code",
            "code": code,
            "redirect_uri": self.settings.OIDC_REDIRECT_URI or return_url,
            "code_verifier": derived("pkce", external_id),
        }
        answer = self._post(str(metadata["token_endpoint"]), data, retry=False)
        if answer.status >= 400:
            raise self._error(answer, TokenError)
        try:
            return self._claims_of(answer, nonce=derived("nonce", external_id))
        except EidUnavailable as err:
            # The code is spent: a reload would only be refused (invalid_grant).
            raise _SpentCode(f"after the code was exchanged, {err}") from err

    def _claims_of(
        self, answer: Answer, *, nonce: str
    ) -> tuple[dict[str, Any], str | None, _Signed]:
        """The verified claims of the token endpoint's answer (and userinfo's), the scope it
        says was granted, and the id_token with the keys that verified it."""
        body = storable_object(answer.json(), answer.what)
        granted = body.get("scope")
        id_token = body.get("id_token")
        access_token = body.get("access_token")
        if not isinstance(id_token, str) or not id_token:
            raise IdTokenInvalid(f"{answer.what} answered without an id_token")
        token_type = body.get("token_type")
        if not isinstance(token_type, str) or token_type.lower() != "bearer":
            raise EidProtocolError(f"{answer.what} answered a token_type other than Bearer")
        claims, keys = self._validated(
            id_token,
            nonce=nonce,
            access_token=access_token if isinstance(access_token, str) else None,
            from_token_endpoint=True,
        )
        signed = _Signed(id_token, keys)
        if self.preset.userinfo:
            if not isinstance(access_token, str) or not access_token:
                raise IdTokenInvalid(f"{answer.what} answered without an access_token")
            claims = {**claims, **self.userinfo(access_token, subject=str(claims["sub"]))}
        return claims, granted if isinstance(granted, str) else None, signed

    def validate_id_token(
        self,
        token: str,
        *,
        nonce: str | None,
        access_token: str | None = None,
        from_token_endpoint: bool = False,
    ) -> dict[str, Any]:
        """The claims of ``token`` once every check of OIDC Core 3.1.3.7 passed;
        :class:`IdTokenInvalid` naming the first that failed. ``from_token_endpoint``: the
        provider itself answered it to this client's code exchange (see :meth:`jwks`)."""
        return self._validated(
            token, nonce=nonce, access_token=access_token, from_token_endpoint=from_token_endpoint
        )[0]

    def _validated(
        self,
        token: str,
        *,
        nonce: str | None,
        access_token: str | None,
        from_token_endpoint: bool,
    ) -> tuple[dict[str, Any], KeySet]:
        """:meth:`validate_id_token`'s claims, and the provider's keys that verified them."""
        claims, keys = self._verify(token, what="the id_token", solicited=from_token_endpoint)
        self._check_claims(claims, what="the id_token", nonce=nonce)
        if access_token is not None and "at_hash" in claims:
            alg = self._header(token).get("alg", "")
            if not hmac.compare_digest(str(claims["at_hash"]), at_hash(access_token, alg)):
                raise IdTokenInvalid("the id_token's at_hash does not match its access token")
        return claims, keys

    def userinfo(self, access_token: str, *, subject: str) -> dict[str, Any]:
        """The userinfo endpoint's claims (JSON, or a JWT verified like the id_token); its
        ``sub`` must be the id_token's (OIDC Core 5.3.2)."""
        endpoint = self.discovery().get("userinfo_endpoint")
        if not isinstance(endpoint, str):
            raise EidProtocolError("the discovery document names no userinfo_endpoint")
        answer = self._transport().request(
            "GET", endpoint, auth=HeaderAuth(f"Bearer {access_token}"), retry=True
        )
        if answer.status >= 400:
            raise self._error(answer, TokenError)
        ctype = answer.headers.get("Content-Type", "").split(";")[0].strip().lower()
        if ctype == "application/jwt":
            text = answer.body.decode("ascii", "replace").strip()
            claims = self._verified(text, what="the userinfo JWT", solicited=True)
            self._check_claims(claims, what="the userinfo JWT", nonce=None, lifetime=False)
        else:
            claims = dict(storable_object(answer.json(), answer.what))
        if not isinstance(claims.get("sub"), str) or not hmac.compare_digest(
            str(claims["sub"]), subject
        ):
            raise IdTokenInvalid("the userinfo answer is about another subject than the id_token")
        return claims

    # -- verification ------------------------------------------------------------------
    @staticmethod
    def _header(token: str) -> dict[str, Any]:
        try:
            head = token.split(".", 1)[0]
            value = json.loads(base64.urlsafe_b64decode(head + "=" * (-len(head) % 4)))
        except (ValueError, UnicodeDecodeError) as err:
            raise IdTokenInvalid("the token's header is not base64url JSON") from err
        if not isinstance(value, dict):
            raise IdTokenInvalid("the token's header is not a JSON object")
        return value

    def algorithms(self) -> list[str]:
        """The algorithms accepted: the preset's (asymmetric ones only), narrowed to those
        the discovery document lists."""
        listed = self.discovery().get("id_token_signing_alg_values_supported")
        wanted = [a for a in self.preset.algorithms if a in ALGORITHMS]
        if not self.preset.providers:  # generic: any asymmetric algorithm the OP lists
            wanted = list(ALGORITHMS)
        if isinstance(listed, list):
            wanted = [a for a in wanted if a in listed]
        return wanted

    def _verified(self, token: str, *, what: str, solicited: bool = False) -> dict[str, Any]:
        return self._verify(token, what=what, solicited=solicited)[0]

    def _verify(
        self, token: str, *, what: str, solicited: bool = False
    ) -> tuple[dict[str, Any], KeySet]:
        """The claims of the signed ``token``, and the provider's keys that verified it."""
        if token.count(".") == 4:
            raise IdTokenInvalid(f"{what} is encrypted (JWE), which django-eid does not decrypt")
        if token.count(".") != 2:
            raise IdTokenInvalid(f"{what} is not a signed JWT")
        header = self._header(token)
        alg = header.get("alg")
        allowed = self.algorithms()
        if not isinstance(alg, str) or alg not in allowed:
            shown = alg[:20] if isinstance(alg, str) else type(alg).__name__
            raise IdTokenInvalid(f"{what} is signed with {shown!r}, not one of {allowed}")
        kid = header.get("kid")
        keys = self.jwks()
        if not _has_key(keys, kid, alg):
            # Keys rotate. A token the provider answered this client's own call with (the
            # code is spent: refusing it loses a paid identification) may fetch the keys
            # once more even within the refresh interval; any other may not.
            keys = self.jwks(refresh=True, beyond_the_interval=solicited)
            if not _has_key(keys, kid, alg):
                raise IdTokenInvalid(f"{what} names a key the provider's JWKS does not have")
        try:
            decoded = jwt.decode(token, _key_for(keys, kid, alg), algorithms=[alg])
        except JoseError as err:
            raise IdTokenInvalid(f"{what}'s signature does not verify ({err.error})") from err
        except ValueError as err:
            raise IdTokenInvalid(f"{what} cannot be decoded") from err
        claims = dict(decoded.claims)
        try:
            storable_object(claims, what)
        except EidProtocolError as err:
            raise IdTokenInvalid(str(err)) from err
        return claims, keys

    def _check_claims(
        self,
        claims: Mapping[str, Any],
        *,
        what: str,
        nonce: str | None,
        lifetime: bool = True,
    ) -> None:
        if claims.get("iss") != self.issuer:
            raise IdTokenInvalid(f"{what}'s issuer is not {self.issuer}")
        client_id = self.settings.CLIENT_ID
        aud = claims.get("aud")
        audiences = [aud] if isinstance(aud, str) else aud if isinstance(aud, list) else []
        if client_id not in audiences:
            raise IdTokenInvalid(f"{what} is not addressed to this client (aud)")
        if any(audience != client_id for audience in audiences):
            # OIDC Core 3.1.3.7 (3): no audience the client does not trust; it trusts none
            # but itself.
            raise IdTokenInvalid(f"{what} is addressed to another audience too (aud)")
        if len(audiences) > 1 and claims.get("azp") != client_id:
            raise IdTokenInvalid(f"{what} has several audiences and azp is not this client")
        if "azp" in claims and claims.get("azp") != client_id:
            raise IdTokenInvalid(f"{what}'s azp is another client")
        if not isinstance(claims.get("sub"), str) or not claims["sub"]:
            raise IdTokenInvalid(f"{what} has no sub")
        if lifetime:
            now = time.time()
            exp, iat, nbf = claims.get("exp"), claims.get("iat"), claims.get("nbf")
            if not _number(exp) or exp <= now - LEEWAY:
                raise IdTokenInvalid(f"{what} has expired (exp)")
            if not _number(iat) or iat > now + LEEWAY:
                raise IdTokenInvalid(f"{what} is issued in the future or not dated (iat)")
            if iat < now - ID_TOKEN_MAX_AGE - LEEWAY:
                raise IdTokenInvalid(f"{what} was issued too long ago (iat)")
            if nbf is not None and (not _number(nbf) or nbf > now + LEEWAY):
                raise IdTokenInvalid(f"{what} is not valid yet (nbf)")
        if nonce is not None:
            sent = claims.get("nonce")
            if not isinstance(sent, str) or not hmac.compare_digest(sent, nonce):
                raise IdTokenInvalid(f"{what}'s nonce is not the one of this authorization")

    # -- the provider's metadata -------------------------------------------------------
    def discovery(self, *, fresh: bool = False) -> dict[str, Any]:
        """The discovery document, from ``TOKEN_CACHE`` or fetched (and checked); ``fresh``
        fetches it whatever the cache holds."""
        key = _cache_key("discovery", self.issuer)
        cached = None if fresh else _cache_get(key)
        if isinstance(cached, dict):
            return cached
        # OIDC Discovery 4: the issuer without its trailing slash (Vipps' issuer has one).
        url = f"{self.issuer.rstrip('/')}/.well-known/openid-configuration"
        answer = self._transport().request("GET", url, auth=HeaderAuth(None), retry=True)
        if answer.status != 200:
            raise self._error(answer, EidProtocolError)
        body = dict(storable_object(answer.json(), answer.what))
        if body.get("issuer") != self.issuer:
            raise EidProtocolError(
                f"{answer.what}: the document's issuer is not OIDC_ISSUER ({self.issuer})"
            )
        for name in ("authorization_endpoint", "token_endpoint", "jwks_uri"):
            if not is_http_url(body.get(name)):
                raise EidProtocolError(f"{answer.what}: no absolute {name}")
        for name in ("userinfo_endpoint", "pushed_authorization_request_endpoint"):
            if name in body and not is_http_url(body[name]):
                raise EidProtocolError(f"{answer.what}: {name} is not an absolute URL")
        methods = body.get("code_challenge_methods_supported")
        if isinstance(methods, list) and "S256" not in methods:
            raise EidProtocolError(f"{answer.what}: the provider does not support PKCE S256")
        if self.issuer.startswith("https://"):
            for name, value in body.items():
                endpoint = name.endswith("endpoint") or name == "jwks_uri"
                if endpoint and isinstance(value, str) and not value.startswith("https://"):
                    raise EidProtocolError(f"{answer.what}: {name} is not https")
        _cache_set(key, body, METADATA_TTL)
        return body

    def jwks(self, *, refresh: bool = False, beyond_the_interval: bool = False) -> KeySet:
        """The provider's signing keys; ``refresh`` fetches them again (key rotation),
        at most once every :data:`JWKS_REFRESH_INTERVAL` seconds across all workers, unless
        ``beyond_the_interval``: for a token the provider answered the client's own call
        with, whose code is spent (a second rotation within the interval must not lose an
        identification). Each such token costs one fetch at most, and only a real login at
        the provider makes one."""
        key = _cache_key("jwks", self.issuer)
        cached = None if refresh else _cache_get(key)
        due = _cache_add(_cache_key("jwks-refresh", self.issuer)) if refresh else False
        if refresh and not due and not beyond_the_interval:
            cached = _cache_get(key)
        if not isinstance(cached, dict):
            url = str(self.discovery()["jwks_uri"])
            answer = self._transport().request("GET", url, auth=HeaderAuth(None), retry=True)
            if answer.status != 200:
                raise self._error(answer, EidProtocolError)
            cached = dict(storable_object(answer.json(), answer.what))
            if not isinstance(cached.get("keys"), list):
                raise EidProtocolError(f"{answer.what}: not a JWK set")
            _cache_set(key, cached, METADATA_TTL)
        usable = [
            k
            for k in cached["keys"]
            if isinstance(k, dict)
            and k.get("kty") in ("RSA", "EC")
            and k.get("use", "sig") == "sig"
        ]
        try:
            return KeySet.import_key_set({"keys": usable})
        except (JoseError, ValueError) as err:
            raise EidProtocolError("the provider's JWKS holds a key that cannot be read") from err

    # -- plumbing ---------------------------------------------------------------------
    def _transport(self) -> Transport:
        if self.transport is None:
            raise EidConfigurationError("the OIDC API needs the client's transport")
        return self.transport

    def _post(self, url: str, data: dict[str, str], *, retry: bool) -> Answer:
        """A form POST with the client's authentication (``TOKEN_AUTH_METHOD``)."""
        s = self.settings
        auth: requests.auth.AuthBase = HeaderAuth(None)
        method = self.config.token_auth_method
        if method == "post":
            data = {**data, "client_id": s.CLIENT_ID, "client_secret": s.CLIENT_SECRET}
        elif method == "private_key_jwt":
            data = {
                **data,
                "client_id": s.CLIENT_ID,
                "client_assertion_type": "urn:ietf:params:oauth:client-assertion-type:jwt-bearer",
                "client_assertion": self.client_assertion(url),
            }
        else:
            # RFC 6749 2.3.1: form-urlencoded before Basic (Idura's ids contain colons).
            auth = requests.auth.HTTPBasicAuth(
                quote_plus(s.CLIENT_ID, safe=""), quote_plus(s.CLIENT_SECRET, safe="")
            )
        return self._transport().request(
            "POST",
            url,
            auth=auth,
            retry=retry,
            data=data,
            headers={"Content-Type": "application/x-www-form-urlencoded"},
        )

    def client_assertion(self, audience: str) -> str:
        """RFC 7523: a JWT signed with ``OIDC_PRIVATE_KEY`` that authenticates the client."""
        s = self.settings
        key = private_key(s.OIDC_PRIVATE_KEY)
        alg = "ES256" if isinstance(key, ECKey) else "RS256"
        now = int(time.time())
        claims = {
            "iss": s.CLIENT_ID,
            "sub": s.CLIENT_ID,
            "aud": audience,
            "jti": secrets.token_urlsafe(24),
            "iat": now,
            "exp": now + 120,
        }
        header = {"alg": alg, "typ": "JWT"}
        if s.OIDC_PRIVATE_KEY_ID:
            header["kid"] = s.OIDC_PRIVATE_KEY_ID
        return jwt.encode(header, claims, key, algorithms=[alg])

    def _error(self, answer: Answer, cls: type[EidError]) -> EidError:
        s = self.settings
        hidden = secrets_of(s.CLIENT_ID, s.CLIENT_SECRET)
        body, summary = answer.describe(lambda text: scrub(text, secrets=hidden))
        message = f"{answer.what} answered {answer.status}: {summary}"
        if not issubclass(cls, TokenError):
            return cls(message)
        error = body.get("error") if body else None
        error = scrub(error, secrets=hidden)[:64] if isinstance(error, str) else None
        if error == "invalid_client" or (error is None and answer.status == 401):
            return InvalidClient(
                message, error=error or "invalid_client", status_code=answer.status
            )
        return cls(message, error=error, status_code=answer.status)

    def probe_client(self, redirect_uri: str) -> str | None:
        """Push an authorization request nobody will use, to learn whether the provider
        accepts this client's authentication and ``redirect_uri`` (``eid_check``): the
        ``request_uri`` it answered, ``None`` when it offers no PAR (nothing to learn
        without a user). Raises :class:`~django_eid.exceptions.TokenError` (or
        :class:`~django_eid.exceptions.InvalidClient`) for a refusal."""
        endpoint = self.discovery().get("pushed_authorization_request_endpoint")
        if not isinstance(endpoint, str):
            return None
        state = secrets.token_hex(16)
        request = SessionRequest(
            return_urls=ReturnUrls(redirect_uri, redirect_uri, redirect_uri, redirect_uri),
            external_reference=state,
        )
        return self._push(endpoint, self.authorization_params(request))

    def _record(
        self,
        request_id: str,
        claims: Mapping[str, Any],
        *,
        granted: str | None,
        signed: _Signed | None = None,
    ) -> IdentificationRecord:
        found: Claims = self.preset.read(claims)
        provider = found.provider
        if provider is None and not self.preset.providers:
            # A generic provider has no provider names: the person is their sub at this
            # issuer (the site's IDENTITY_PROVIDER names it, when set), so that the same
            # sub at another issuer is another person (ONE_ACCOUNT_PER_PERSON, same_person).
            provider = self.settings.IDENTITY_PROVIDER or issuer_label(self.issuer)
        received = {k: v for k, v in claims.items() if k not in _PROTOCOL_CLAIMS}
        # What the site asked for must be what it got: in a URL (no PAR) the browser can
        # strip a scope from the authorization request, and the number with it.
        number_asked = self.settings.GET_SOCIAL_SECURITY_NUMBER
        refusal = None
        if granted is not None and set(self.requested_scopes(number=number_asked)) - set(
            granted.split()
        ):
            refusal = SCOPE_NOT_GRANTED
        elif number_asked and not found.number:
            refusal = NUMBER_MISSING
        kept = None
        if signed is not None and self.settings.KEEP_EVIDENCE:
            kept = evidence_of(
                signed.id_token,
                signed.keys,
                issuer=self.issuer,
                preset=self.preset.name,
                unique_id=found.unique_id,
                client_id=self.settings.CLIENT_ID,
            )
        return IdentificationRecord(
            request_id=request_id,
            status="success",
            progress=Progress.SUCCESS,
            identity_provider=provider,
            identity_provider_unique_id=found.unique_id,
            name=found.name,
            first_name=found.first_name,
            last_name=found.last_name,
            date_of_birth=found.birth_date,
            social_security_number=found.number,
            national_id_country=found.number_country,
            national_id_type=found.number_type,
            level_of_assurance=found.level,
            refusal=refusal,
            # The national identity number is dropped from what is kept as received:
            # ``redacted()`` scrubs it besides.
            received={
                k: v for k, v in received.items() if not (found.number and v == found.number)
            },
            evidence=kept,
        )


def _provider_spec(provider: str | None) -> Provider | None:
    """The preset entry of ``provider``, a name of any preset (they share none)."""
    for p in PRESETS.values():
        spec = p.providers.get(provider or "")
        if spec is not None:
            return spec
    return None


def issuer_label(issuer: str) -> str:
    """The provider name of a generic OpenID provider's identities: its issuer without the
    scheme (``login.example.com/realms/shop``), cut to a provider's 64 characters with a
    digest of the whole, so that two issuers never share one."""
    label = issuer.split("://", 1)[-1].rstrip("/")
    if len(label) <= 64:
        return label
    return f"{label[:47]}~{hashlib.sha256(issuer.encode()).hexdigest()[:16]}"


#: Claims of the protocol, not of the person: not kept in ``raw``.
_PROTOCOL_CLAIMS: Final = frozenset(
    {"nonce", "at_hash", "c_hash", "sid", "jti", "aud", "azp", "iat", "nbf", "exp", "auth_time"}
)

#: ``LANGUAGE``'s codes as ``ui_locales`` (BCP 47).
_UI_LOCALES: Final = {"NO": "nb", "EN": "en", "SV": "sv", "DA": "da", "FI": "fi"}


class _Signed(NamedTuple):
    """An id_token as the provider sent it, and the provider's keys that verified it."""

    id_token: str
    keys: KeySet


class _SpentCode(EidProtocolError):
    """The provider went out of reach after the authorization code was exchanged (the JWKS
    fetched again, userinfo): the code cannot be exchanged again, so the session ends."""


def private_key(pem: str) -> RSAKey | ECKey:
    """``OIDC_PRIVATE_KEY``, read (RSA or EC); :class:`EidConfigurationError` otherwise."""
    for cls in (RSAKey, ECKey):
        try:
            key = cls.import_key(pem)
        except (JoseError, ValueError, TypeError):
            continue
        if key.is_private:
            return key
    raise EidConfigurationError("OIDC_PRIVATE_KEY is not an RSA or EC private key in PEM")


def _failed(request_id: str, code: str, message: str) -> IdentificationRecord:
    return IdentificationRecord(
        request_id=request_id,
        status=code[:64],
        progress=Progress.FAILED,
        error=RecordError(error_code=code[:64], error_message=scrub(message)[:300]),
    )


def _one(params: Mapping[str, Sequence[str]], name: str) -> str | None:
    values = list(params.get(name, ()))
    return values[0] if len(values) == 1 and values[0] else None


def _printable(text: str) -> str:
    return "".join(c for c in text if 32 < ord(c) < 127)


def _number(value: object) -> TypeGuard[int | float]:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _has_key(keys: KeySet, kid: object, alg: str) -> bool:
    try:
        _key_for(keys, kid, alg)
    except (ValueError, JoseError):
        return False
    return True


def _key_for(keys: KeySet, kid: object, alg: str) -> Any:
    """The key of ``kid`` (or the only key of ``alg``'s type when the token names none)."""
    kty = "EC" if alg.startswith("ES") else "RSA"
    if isinstance(kid, str):
        key = keys.get_by_kid(kid)
        if key.key_type != kty:
            raise ValueError("the key is of another type than the algorithm")
        return key
    if kid is not None:
        raise ValueError("kid is not a string")
    candidates = [k for k in keys.keys if k.key_type == kty]
    if len(candidates) != 1:
        raise ValueError("no kid, and not exactly one key of the algorithm's type")
    return candidates[0]


def _cache_key(kind: str, issuer: str) -> str:
    return f"django_eid:oidc:{kind}:{hashlib.sha256(issuer.encode()).hexdigest()[:32]}"


def _cache() -> Any:
    return caches[eid_settings.TOKEN_CACHE]


def _cache_get(key: str) -> Any:
    try:
        return _cache().get(key)
    except Exception:
        logger.warning("TOKEN_CACHE failed; the provider's metadata is fetched again.")
        return None


def _cache_set(key: str, value: Any, ttl: int) -> None:
    try:
        _cache().set(key, value, ttl)
    except Exception:
        logger.warning("TOKEN_CACHE failed; the provider's metadata is not kept.")


def _cache_add(key: str) -> bool:
    """Whether this caller may fetch the JWKS again now (one per interval, all workers)."""
    try:
        return bool(_cache().add(key, 1, JWKS_REFRESH_INTERVAL))
    except Exception:
        return True


#: The version of the evidence's JSON (``KEEP_EVIDENCE``): a later format must still read
#: this one (:func:`django_eid.evidence.verify`).
EVIDENCE_VERSION: Final = 1


def evidence_of(
    id_token: str,
    keys: KeySet,
    *,
    issuer: str,
    preset: str,
    unique_id: str | None,
    client_id: str,
) -> crypto.SensitiveText:
    """The evidence of an identification: the ``id_token`` as received, the public keys of
    the provider's JWK set that verified it, the issuer, the client it was issued to, the
    preset that read the identity from it (which claim is the person's unique id) and that
    unique id, as JSON. Masked in ``repr()``: the token holds the person's claims."""
    payload = {
        "version": EVIDENCE_VERSION,
        "id_token": id_token,
        "jwks": keys.as_dict(private=False),
        "issuer": issuer,
        "client_id": client_id,
        "preset": preset,
        "unique_id": unique_id or "",
        "kept_at": timezone.now().astimezone(datetime.UTC).isoformat(timespec="seconds"),
    }
    return crypto.SensitiveText(json.dumps(payload, separators=(",", ":"), sort_keys=True))
