"""The broker's client: access tokens, and the calls of the broker's API.

:class:`EidClient` fetches and shares the access token, renews a rejected one once, and
turns failed answers into typed :mod:`django_eid.exceptions` errors. What each call sends
and how its answer reads is the concern of the API in use (:mod:`django_eid.brokers`);
how a request travels (timeouts, redirects, size cap, retries) is
:mod:`django_eid.transport`'s.

Each call of :class:`EidClient` ends within ``TIMEOUT``, everything included: the wait
for (or the request of) an access token, retries, the renewal of a rejected token
(:mod:`django_eid.deadline`).
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Concatenate, Final, ParamSpec, TypeVar
from urllib.parse import quote_plus

import requests
import requests.auth

from django_eid import telemetry
from django_eid.brokers import BrokerApi, BrokerConfig, ReturnUrls, SessionRequest
from django_eid.conf import EidSettings, eid_settings
from django_eid.deadline import bounded
from django_eid.exceptions import (
    EidApiError,
    EidConfigurationError,
    EidProtocolError,
    InvalidClient,
    InvalidScope,
    TokenError,
)
from django_eid.records import CreatedSession, IdentificationRecord
from django_eid.scrub import scrub, scrub_json, secrets_of
from django_eid.tokens import AccessToken, TokenStore, cache_key
from django_eid.transport import Answer, HeaderAuth, Transport, new_http_session
from django_eid.validation import problems

logger = logging.getLogger("django_eid.client")

__all__ = ["EidClient", "ReturnUrls", "get_client", "reset_client", "token_cache_key"]


P = ParamSpec("P")
R = TypeVar("R")


#: The broker operation of each call, as telemetry names it (``eid.broker.operation``);
#: ``get_token`` is none (its request, when it makes one, is ``fetch_token``'s).
_OPERATIONS: Final = {
    "fetch_token": "token",
    "create_session": "create_session",
    "get_session": "get_session",
    "record_of_return": "get_session",
    "session_done": "status",
    "invalidate_session": "invalidate",
}


def _within_timeout(
    method: Callable[Concatenate[EidClient, P], R],
) -> Callable[Concatenate[EidClient, P], R]:
    """Run ``method`` as one call with one deadline, ``TIMEOUT`` from now (and, with
    OpenTelemetry, in a span of its operation)."""
    operation = _OPERATIONS.get(method.__name__)

    @functools.wraps(method)
    def bounded_call(self: EidClient, /, *args: P.args, **kwargs: P.kwargs) -> R:
        if telemetry.ENABLED and operation is not None:
            with bounded(self.settings.TIMEOUT), telemetry.operation(operation, self.settings):
                return method(self, *args, **kwargs)
        with bounded(self.settings.TIMEOUT):
            return method(self, *args, **kwargs)

    return bounded_call


def token_cache_key(s: EidSettings, config: BrokerConfig | None = None) -> str:
    """Where the access token of the client configured by ``s`` is cached (``config``: the
    broker's configuration of ``s``, when the caller has it already)."""
    config = config or BrokerConfig.of(s)
    return cache_key(
        config.auth_url,
        config.base_url,
        s.CLIENT_ID,
        " ".join(config.scopes),
        config.token_auth_method,
    )


class EidClient:
    """Talks to the broker: tokens, then the calls of its API (:attr:`api`)."""

    #: The API the broker is spoken to in.
    api: BrokerApi

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
        # Read once: the token's cache key and the API take the same configuration.
        self.config = BrokerConfig.of(s)
        self.tokens = TokenStore(
            s.TOKEN_CACHE, token_cache_key(s, self.config), self.fetch_token, wait=s.TIMEOUT
        )
        self.api = self.config.api(self._api, s, transport=self.transport, config=self.config)

    def create_http_session(self) -> requests.Session:
        """The one ``requests.Session`` of this client; override to add proxies or adapters.

        An adapter of your own should be a :class:`~django_eid.deadline.DeadlineAdapter`,
        or an answer trickling in slowly is not cut at the deadline of the call.
        """
        return new_http_session(self.settings.CA_BUNDLE)

    @property
    def http(self) -> requests.Session:
        """The ``requests.Session`` every call of this client goes through."""
        return self.transport.http

    def close(self) -> None:
        self.transport.close()

    # -- the three calls -------------------------------------------------
    @_within_timeout
    def fetch_token(self) -> AccessToken:
        """Ask the token endpoint for a new token (no cache). Prefer :meth:`get_token`."""
        s = self.settings
        data = {"grant_type": "client_credentials", "scope": " ".join(self.config.scopes)}
        auth: requests.auth.AuthBase
        if self.config.token_auth_method == "post":  # noqa: S105  (a method name, not a password)
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
            self.config.token_url,
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
            raise EidProtocolError(
                f"{what} answered token_type {self._scrub(str(token_type))[:40]!r}, not Bearer"
            )
        logger.info("Fetched a broker access token (lifetime %s s).", expires_in)
        return AccessToken.issued_now(token, "Bearer", expires_in)

    @_within_timeout
    def get_token(self) -> AccessToken:
        """The shared access token, fetched only when the shared cache has none."""
        return self.tokens.get()

    @_within_timeout
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

        ``return_urls`` are django-eid's own (no query): the API adds what brings the
        session's ids back. ``prefilled_social_security_number`` pre-fills the number in
        the forms of the providers that have one (a hint for the user, never a proof:
        compare the record). It travels in the request body only, never in a URL or a log.
        """
        return self.api.create_session(
            SessionRequest(
                return_urls=return_urls,
                external_reference=external_reference,
                identity_provider=identity_provider,
                language=language,
                get_social_security_number=get_social_security_number,
                iframe_domain=iframe_domain,
                iframe_web_messaging=iframe_web_messaging,
                prefilled_social_security_number=prefilled_social_security_number,
            )
        )

    @_within_timeout
    def get_session(self, request_id: str, *, metadata: bool = False) -> IdentificationRecord:
        """Retrieve a session's record. Call it after the user came back to the success URL.

        ``metadata`` asks for add-on data where the API has it (v1's ``metaData``).
        Raises :class:`EidProtocolError` when the answer is the record of another session:
        whatever it says, it is not about ``request_id``. A record that names no session
        is the one asked for (the published schema requires no field of it).
        """
        record = self.api.get_session(request_id, metadata=metadata)
        if record.request_id is None:
            return dataclasses.replace(record, request_id=request_id)
        if record.request_id != request_id:
            raise EidProtocolError("get_session answered the record of another session")
        return record

    @_within_timeout
    def record_of_return(
        self,
        request_id: str,
        *,
        external_id: str,
        params: Mapping[str, Sequence[str]],
        return_url: str,
    ) -> IdentificationRecord:
        """The record of a session its user came back from (:meth:`get_session` for the
        REST APIs; the exchange of the return's code for OpenID Connect)."""
        record = self.api.record_of_return(
            request_id, external_id=external_id, params=params, return_url=return_url
        )
        if record.request_id is None:
            return dataclasses.replace(record, request_id=request_id)
        if record.request_id != request_id:
            raise EidProtocolError("get_session answered the record of another session")
        return record

    @_within_timeout
    def session_done(self, request_id: str) -> bool | None:
        """Whether the session ended (in any way), from a call without personal data;
        ``None`` when the API has none (retrieve the record instead).

        Cheap enough to ask while the user is still at the broker; retrieve the record
        (:meth:`get_session`) once it says ``True``.
        """
        return self.api.session_done(request_id)

    @_within_timeout
    def invalidate_session(self, request_id: str) -> None:
        """End a session at the broker, so its record can no longer be used (an
        :class:`EidApiError` when the broker refuses, e.g. for a session that failed)."""
        self.api.cancel_session(request_id)

    # -- plumbing ----------------------------------------------------------
    def _api(self, method: str, url: str, *, retry: bool, **kwargs: Any) -> Answer:
        """One call of the session API with the access token; raise for a 4xx answer."""
        with bounded(self.settings.TIMEOUT):
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

    def _secrets(self) -> tuple[str, ...]:
        """This client's secret (in the forms it travels in) and its last access token."""
        s = self.settings
        token = self.tokens.last_seen()
        last = (token.access_token,) if token is not None else ()
        return (*secrets_of(s.CLIENT_ID, s.CLIENT_SECRET), *last)

    def _scrub(self, text: str) -> str:
        """``text`` without the secret, access tokens or national identity numbers."""
        return scrub(text, secrets=self._secrets())

    def _scrub_body(self, body: dict[str, Any] | None) -> dict[str, Any] | None:
        """An error body as an exception keeps it: scrubbed like its message."""
        return None if body is None else scrub_json(body, secrets=self._secrets())

    def _token_error(self, answer: Answer) -> TokenError:
        body, summary = answer.describe(self._scrub)
        error = body.get("error") if body else None
        error = self._scrub(error)[:100] if isinstance(error, str) else None
        desc = body.get("error_description") if body else None
        desc = self._scrub(desc)[:300] if isinstance(desc, str) else None
        cls: type[TokenError] = TokenError
        message = f"{answer.what} answered {answer.status}: {summary}"
        if error == "invalid_scope":
            cls = InvalidScope
            message += f" (scopes asked: {' '.join(self.config.scopes)})"
        elif error == "invalid_client" or (error is None and answer.status == 401):
            cls = InvalidClient
            message += " (the client id or secret was not accepted)"
        return cls(message, error=error, description=desc, status_code=answer.status)

    def _api_error(self, answer: Answer) -> EidApiError:
        body, summary = answer.describe(self._scrub)
        rid = answer.request_id()
        # A header of the broker's choosing: scrubbed like the body.
        rid = self._scrub(rid)[:100] if rid else None
        message = f"{answer.what} answered {answer.status}: {summary}"
        if rid:
            message += f" (broker request id {rid})"
        return EidApiError(
            message, status_code=answer.status, body=self._scrub_body(body), broker_request_id=rid
        )


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
