"""The broker's API: access tokens, creating and retrieving identification sessions.

:class:`EidClient` builds the requests of the three calls, renews a rejected
access token once, and turns the broker's answers into records or typed
:mod:`django_eid.exceptions` errors. How a request travels (timeouts,
redirects, size cap, retries) is :mod:`django_eid.transport`'s concern.
"""

from __future__ import annotations

import json
import logging
import re
import threading
from dataclasses import dataclass
from typing import Any, Final
from urllib.parse import quote_plus

import requests
import requests.auth

from django_eid import vocabulary
from django_eid.conf import EidSettings, eid_settings
from django_eid.exceptions import (
    EidApiError,
    EidConfigurationError,
    EidProtocolError,
    InvalidClient,
    InvalidScope,
    TokenError,
)
from django_eid.records import (
    CreatedSession,
    IdentificationRecord,
    parse_created,
    parse_done,
    parse_record,
)
from django_eid.tokens import AccessToken, TokenStore, cache_key
from django_eid.transport import Answer, HeaderAuth, Transport, new_http_session
from django_eid.validation import problems

logger = logging.getLogger("django_eid.client")

#: Eleven digits standing alone: a national identity number, kept out of error messages.
_NIN_RE: Final = re.compile(r"(?<!\d)\d{11}(?!\d)")
#: A JWT (the broker's access tokens are JWTs), kept out of error messages.
_JWT_RE: Final = re.compile(r"eyJ[\w-]*\.[\w-]+\.[\w-]*")


@dataclass(frozen=True)
class ReturnUrls:
    """The three return URLs, with their ``[0]``/``[1]``/``[2]`` placeholders."""

    success: str
    abort: str
    error: str


def token_cache_key(s: EidSettings) -> str:
    """Where the access token of the client configured by ``s`` is cached."""
    return cache_key(s.AUTH_URL, s.BASE_URL, s.CLIENT_ID, " ".join(s.SCOPES), s.TOKEN_AUTH_METHOD)


class EidClient:
    """Talks to the broker: tokens, create a session, retrieve a session."""

    def __init__(self, *, app_settings: EidSettings | None = None) -> None:
        self.settings = app_settings or eid_settings
        self.generation = self.settings.generation
        errors = [p for p in problems(self.settings) if p.level == "error"]
        if errors:
            raise EidConfigurationError("; ".join(f"{p.message} ({p.id})" for p in errors))
        s = self.settings
        self.transport = Transport(
            self.create_http_session(), timeout=s.TIMEOUT, max_bytes=s.MAX_RESPONSE_BYTES
        )
        self.tokens = TokenStore(
            s.TOKEN_CACHE, token_cache_key(s), self.fetch_token, wait=s.TIMEOUT
        )

    def create_http_session(self) -> requests.Session:
        """The one ``requests.Session`` of this client; override to add proxies or adapters."""
        return new_http_session(self.settings.CA_BUNDLE)

    @property
    def http(self) -> requests.Session:
        """The ``requests.Session`` every call of this client goes through."""
        return self.transport.http

    def close(self) -> None:
        self.transport.close()

    # -- the three calls -------------------------------------------------
    def fetch_token(self) -> AccessToken:
        """Ask the token endpoint for a new token (no cache). Prefer :meth:`get_token`."""
        s = self.settings
        data = {"grant_type": "client_credentials", "scope": " ".join(s.SCOPES)}
        auth: requests.auth.AuthBase
        if s.TOKEN_AUTH_METHOD == "post":  # noqa: S105  (a method name, not a password)
            data.update(client_id=s.CLIENT_ID, client_secret=s.CLIENT_SECRET)
            auth = HeaderAuth(None)
        else:
            # RFC 6749 2.3.1: both are form-urlencoded before they go into the Basic header
            # (and the broker's token server decodes them), so a secret with "+", "/", "%"
            # or ":" reaches it intact.
            auth = requests.auth.HTTPBasicAuth(
                quote_plus(s.CLIENT_ID, safe=""), quote_plus(s.CLIENT_SECRET, safe="")
            )
        answer = self.transport.request(
            "POST",
            s.TOKEN_URL,
            auth=auth,
            retry=True,
            data=data,
            headers={"Content-Type": "application/x-www-form-urlencoded"},
        )
        if answer.status >= 400:
            raise self._token_error(answer)
        what = answer.what
        body = answer.json()
        if not isinstance(body, dict):
            raise EidProtocolError(
                f"{what} answered with JSON {type(body).__name__}, not an object"
            )
        token = body.get("access_token")
        token_type = body.get("token_type") or "Bearer"
        expires_in = body.get("expires_in")
        if not isinstance(token, str) or not token:
            raise EidProtocolError(f"{what} answered {answer.status} without an access_token")
        if isinstance(expires_in, str) and expires_in.isdigit():
            expires_in = int(expires_in)
        if not isinstance(expires_in, int) or isinstance(expires_in, bool) or expires_in <= 0:
            raise EidProtocolError(f"{what} answered without a positive integer expires_in")
        if not isinstance(token_type, str) or token_type.lower() != "bearer":
            raise EidProtocolError(f"{what} answered token_type {token_type!r}, not Bearer")
        logger.info("Fetched a broker access token (lifetime %s s).", expires_in)
        return AccessToken.issued_now(token, "Bearer", expires_in)

    def get_token(self) -> AccessToken:
        """The shared access token, fetched only when the shared cache has none."""
        return self.tokens.get()

    def create_session(
        self,
        *,
        return_urls: ReturnUrls,
        external_reference: str,
        identity_provider: str | None = None,
        language: str | None = None,
        get_social_security_number: bool = False,
        iframe_domain: str | None = None,
        iframe_web_messaging: bool = False,
        prefilled_social_security_number: str | None = None,
    ) -> CreatedSession:
        """Create an identification session; returns where to send the user.

        ``prefilled_social_security_number`` pre-fills the number in the forms of the
        providers that have one (a hint for the user, never a proof: compare the record).
        It travels in the request body only, never in a URL or a log.
        """
        body: dict[str, Any] = {
            "ReturnUrls": {
                "Success": return_urls.success,
                "Abort": return_urls.abort,
                "Error": return_urls.error,
            },
            "ExternalReference": external_reference,
            "GetSocialSecurityNumber": bool(get_social_security_number),
        }
        if identity_provider:
            body["IdentityProvider"] = identity_provider
        if language:
            body["Language"] = language
        if iframe_domain:
            # The interface document reads top-level ``domain``; the deployed service
            # reads ``iFrame.Domain``. Send both.
            body["iFrame"] = {"Domain": iframe_domain, "WebMessaging": iframe_web_messaging}
            body["domain"] = iframe_domain
        if prefilled_social_security_number:
            body["PreFilledSocialSecurityNumber"] = prefilled_social_security_number
        answer = self._api(
            "POST",
            f"{self.settings.BASE_URL}{vocabulary.SESSION_PATH}",
            # Not idempotent: a resent create could open (and bill) a second session.
            retry=False,
            data=json.dumps(body).encode(),
            headers={"Content-Type": "application/json"},
        )
        return parse_created(answer.json(), what=answer.what)

    def get_session(self, request_id: str, *, metadata: bool = False) -> IdentificationRecord:
        """Retrieve a session's record. Call it after the user came back to the success URL.

        Raises :class:`EidProtocolError` when the answer is the record of another session:
        whatever it says, it is not about ``request_id``.
        """
        params = {vocabulary.REQUEST_ID_PARAM: request_id}
        if metadata:
            params[vocabulary.METADATA_PARAM] = "true"
        answer = self._api(
            "GET", f"{self.settings.BASE_URL}{vocabulary.SESSION_PATH}", retry=True, params=params
        )
        record = parse_record(answer.json(), what=answer.what)
        if record.request_id != request_id:
            raise EidProtocolError(f"{answer.what} answered the record of another session")
        return record

    def session_done(self, request_id: str) -> bool:
        """Whether the session ended (in any way), from the status call: no personal data.

        Cheap enough to ask while the user is still at the broker; retrieve the record
        (:meth:`get_session`) once it says ``True``.
        """
        answer = self._api(
            "GET",
            f"{self.settings.BASE_URL}{vocabulary.STATUS_PATH}",
            retry=True,
            params={vocabulary.REQUEST_ID_PARAM: request_id},
        )
        return parse_done(answer.json(), what=answer.what)

    def invalidate_session(self, request_id: str) -> None:
        """End a session at the broker, so its record can no longer be used.

        A finished ``SUCCESS`` session becomes ``INVALIDATED`` and its identity is no longer
        served; the broker refuses to invalidate an ``ERROR`` session (an
        :class:`EidApiError`).
        """
        self._api(
            "PUT",
            f"{self.settings.BASE_URL}{vocabulary.INVALIDATE_PATH}",
            # Idempotent: invalidating twice leaves the session as invalidating once does.
            retry=True,
            data=json.dumps({vocabulary.INVALIDATE_REQUEST_ID: request_id}).encode(),
            headers={"Content-Type": "application/json"},
        )

    # -- plumbing ----------------------------------------------------------
    def _api(self, method: str, url: str, *, retry: bool, **kwargs: Any) -> Answer:
        """One call of the session API with the access token; raise for a 4xx answer."""
        for attempt in (1, 2):
            token = self.get_token()
            auth = HeaderAuth(f"Bearer {token.access_token}")
            answer = self.transport.request(method, url, auth=auth, retry=retry, **kwargs)
            if answer.status == 401 and attempt == 1:
                # Revoked or expired early: forget it, fetch a new one, try once more.
                logger.warning("%s answered 401; renewing the access token once.", answer.what)
                self.tokens.invalidate(token)
                continue
            break
        if answer.status >= 400:
            raise self._api_error(answer)
        return answer

    def _scrub(self, text: str) -> str:
        """``text`` without the secret, access tokens or national identity numbers."""
        secret = self.settings.CLIENT_SECRET
        if secret:
            text = text.replace(secret, "***")
        token = self.tokens.last_seen()
        if token is not None:
            text = text.replace(token.access_token, "***")
        text = _JWT_RE.sub("***", text)
        return _NIN_RE.sub("***********", text)

    def _token_error(self, answer: Answer) -> TokenError:
        body, summary = answer.describe(self._scrub)
        error = body.get("error") if body else None
        error = error if isinstance(error, str) else None
        desc = body.get("error_description") if body else None
        desc = self._scrub(desc)[:300] if isinstance(desc, str) else None
        cls: type[TokenError] = TokenError
        message = f"{answer.what} answered {answer.status}: {summary}"
        if error == "invalid_scope":
            cls = InvalidScope
            message += f" (scopes asked: {' '.join(self.settings.SCOPES)})"
        elif error == "invalid_client" or (error is None and answer.status == 401):
            cls = InvalidClient
            message += " (the client id or secret was not accepted)"
        return cls(message, error=error, description=desc, status_code=answer.status)

    def _api_error(self, answer: Answer) -> EidApiError:
        body, summary = answer.describe(self._scrub)
        rid = answer.request_id()
        message = f"{answer.what} answered {answer.status}: {summary}"
        if rid:
            message += f" (broker request id {rid[:100]})"
        return EidApiError(message, status_code=answer.status, body=body, broker_request_id=rid)


# One client per process, shared by its threads: its connection pool (urllib3's,
# thread-safe) then stays warm across requests even under servers that start a
# thread per request (runserver), where a per-thread client would reconnect each time.
_shared: list[EidClient] = []
_shared_lock = threading.Lock()


def get_client() -> EidClient:
    """The process's client; a new one is made when ``DJANGO_EID`` changes."""
    client = _shared[0] if _shared else None
    if client is not None and client.generation == eid_settings.generation:
        return client
    with _shared_lock:
        client = _shared[0] if _shared else None
        if client is None or client.generation != eid_settings.generation:
            # The old client is left to the garbage collector, not closed: another
            # thread may still be in the middle of a call with it.
            client = EidClient()
            _shared[:] = [client]
        return client


def reset_client() -> None:
    """Close and forget the shared client (tests; after changing settings by hand)."""
    with _shared_lock:
        for client in _shared:
            client.close()
        _shared.clear()
