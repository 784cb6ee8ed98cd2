"""HTTP client of the identification broker.

One :class:`EidClient` holds one ``requests.Session`` (keep-alive), sends a
versioned User-Agent, puts a timeout on every call, never follows a redirect
with a bearer token, caps the size of what it reads, and turns every answer
that is not the contract into a typed :mod:`django_eid.exceptions` error.
"""

from __future__ import annotations

import functools
import json
import logging
import re
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from email.utils import parsedate_to_datetime
from typing import Any, Final
from urllib.parse import quote_plus

import requests
import requests.adapters
import requests.auth
from urllib3.exceptions import NewConnectionError

from django_eid import __version__
from django_eid.conf import EidSettings, eid_settings
from django_eid.exceptions import (
    EidApiError,
    EidConfigurationError,
    EidProtocolError,
    EidUnavailable,
    InvalidClient,
    InvalidScope,
    TokenError,
)
from django_eid.records import (
    CreatedSession,
    IdentificationRecord,
    parse_created,
    parse_record,
)
from django_eid.tokens import AccessToken, TokenStore, cache_key
from django_eid.validation import problems

logger = logging.getLogger("django_eid.client")

USER_AGENT: Final = f"django-eid/{__version__} python-requests/{requests.__version__}"
MAX_RETRIES: Final = 2
BACKOFF: Final = 0.2
#: Connections kept per broker host; at least the threads of a busy worker process.
POOL_SIZE: Final = 32
RETRY_STATUSES: Final = frozenset({429, 502, 503, 504})
_REQUEST_ID_HEADERS: Final = ("X-Request-Id", "Request-Id", "X-Correlation-Id", "X-Amzn-RequestId")
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


@dataclass(frozen=True)
class _Answer:
    status: int
    headers: Mapping[str, str]
    body: bytes

    def json(self, what: str) -> Any:
        try:
            return json.loads(self.body)
        except (ValueError, UnicodeDecodeError, RecursionError) as err:
            raise EidProtocolError(
                f"{what} answered {self.status} with a body that is not JSON"
            ) from err


class EidClient:
    """Talks to the broker: tokens, create a session, retrieve a session."""

    def __init__(self, *, app_settings: EidSettings | None = None) -> None:
        self.settings = app_settings or eid_settings
        self.generation = self.settings.generation
        errors = [p for p in problems(self.settings) if p.level == "error"]
        if errors:
            raise EidConfigurationError("; ".join(f"{p.message} ({p.id})" for p in errors))
        s = self.settings
        self.timeout = s.TIMEOUT
        self.max_bytes = s.MAX_RESPONSE_BYTES
        self.session = self.create_http_session()
        self.tokens = TokenStore(
            s.TOKEN_CACHE,
            cache_key(s.AUTH_URL, s.BASE_URL, s.CLIENT_ID, " ".join(s.SCOPES), s.TOKEN_AUTH_METHOD),
            self.fetch_token,
            wait=self.timeout,
        )

    def create_http_session(self) -> requests.Session:
        """The one ``requests.Session`` of this client; override to add proxies or adapters."""
        session = requests.Session()
        # One pooled connection per thread that calls the broker at once; requests'
        # default of 10 would open and close extra connections on busier workers.
        adapter = requests.adapters.HTTPAdapter(pool_connections=4, pool_maxsize=POOL_SIZE)
        session.mount("https://", adapter)
        session.mount("http://", adapter)
        session.headers["User-Agent"] = USER_AGENT
        session.headers["Accept"] = "application/json"
        # TLS verification is always on; a private CA can be named, never disabled.
        session.verify = self.settings.CA_BUNDLE or True
        # Redirects are refused by ``allow_redirects=False`` on every call. (``max_redirects
        # = 0`` would make requests raise TooManyRedirects even then, hiding the status.)
        # Proxies and CA settings from the environment are honoured; every call passes
        # ``auth`` explicitly so that .netrc credentials never replace ours.
        return session

    def close(self) -> None:
        self.session.close()

    # -- the three calls -------------------------------------------------
    def fetch_token(self) -> AccessToken:
        """Ask the token endpoint for a new token (no cache). Prefer :meth:`get_token`."""
        s = self.settings
        url = s.TOKEN_URL
        data = {"grant_type": "client_credentials", "scope": " ".join(s.SCOPES)}
        auth: requests.auth.AuthBase
        if s.TOKEN_AUTH_METHOD == "post":  # noqa: S105  (a method name, not a password)
            data.update(client_id=s.CLIENT_ID, client_secret=s.CLIENT_SECRET)
            auth = _HeaderAuth(None)
        else:
            # RFC 6749 2.3.1: both are form-urlencoded before they go into the Basic header
            # (and the broker's token server decodes them), so a secret with "+", "/", "%"
            # or ":" reaches it intact.
            auth = requests.auth.HTTPBasicAuth(
                quote_plus(s.CLIENT_ID, safe=""), quote_plus(s.CLIENT_SECRET, safe="")
            )
        what = f"POST {url}"
        answer = self._send(
            lambda: self.session.post(
                url,
                data=data,
                auth=auth,
                headers={"Content-Type": "application/x-www-form-urlencoded"},
                timeout=self.timeout,
                allow_redirects=False,
                stream=True,
            ),
            what,
            retry=True,
        )
        if answer.status >= 400:
            raise self._token_error(answer, what)
        body = answer.json(what)
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
    ) -> CreatedSession:
        """Create an identification session; returns where to send the user."""
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
            body["iFrame"] = {"Domain": iframe_domain, "WebMessaging": False}
            body["domain"] = iframe_domain
        url = f"{self.settings.BASE_URL}/identification/session"
        payload = json.dumps(body).encode()
        answer = self._api(
            "POST",
            url,
            lambda auth: self.session.post(
                url,
                data=payload,
                auth=auth,
                headers={"Content-Type": "application/json"},
                timeout=self.timeout,
                allow_redirects=False,
                stream=True,
            ),
            retry=False,
        )
        return parse_created(answer.json(f"POST {url}"), what=f"POST {url}")

    def get_session(self, request_id: str, *, metadata: bool = False) -> IdentificationRecord:
        """Retrieve a session's record. Call it after the user came back to the success URL."""
        url = f"{self.settings.BASE_URL}/identification/session"
        params = {"requestId": request_id}
        if metadata:
            params["metaData"] = "true"
        answer = self._api(
            "GET",
            url,
            lambda auth: self.session.get(
                url,
                params=params,
                auth=auth,
                timeout=self.timeout,
                allow_redirects=False,
                stream=True,
            ),
            retry=True,
        )
        return parse_record(answer.json(f"GET {url}"), what=f"GET {url}")

    # -- plumbing ----------------------------------------------------------
    def _api(
        self,
        method: str,
        url: str,
        call: Callable[[requests.auth.AuthBase], requests.Response],
        *,
        retry: bool,
    ) -> _Answer:
        what = f"{method} {url}"
        for attempt in (1, 2):
            token = self.get_token()
            auth = _HeaderAuth(f"Bearer {token.access_token}")
            answer = self._send(functools.partial(call, auth), what, retry=retry)
            if answer.status == 401 and attempt == 1:
                # Revoked or expired early: forget it, fetch a new one, try once more.
                logger.warning("%s answered 401; renewing the access token once.", what)
                self.tokens.invalidate(token)
                continue
            break
        if answer.status >= 400:
            raise self._api_error(answer, what)
        return answer

    def _send(self, call: Callable[[], requests.Response], what: str, *, retry: bool) -> _Answer:
        started = time.monotonic()
        attempt = 0
        while True:
            delay: float | None = None
            status: int | None = None
            try:
                answer = self._read(call(), what)
            except (requests.ConnectionError, requests.Timeout) as err:
                kind = "timed out" if isinstance(err, requests.Timeout) else "could not connect"
                outcome = f"{kind} ({type(err).__name__})"
                if attempt < MAX_RETRIES and (retry or _not_sent(err)):
                    delay = BACKOFF * 2**attempt
                else:
                    raise EidUnavailable(
                        f"{what} {outcome} after {attempt + 1} attempt(s)"
                    ) from err
            except requests.TooManyRedirects as err:
                raise EidProtocolError(
                    f"{what} answered a redirect; API calls do not follow redirects"
                ) from err
            except requests.RequestException as err:
                # A broken answer (bad chunking, undecodable content ...): not retried.
                raise EidUnavailable(
                    f"{what} failed ({type(err).__name__}) after {attempt + 1} attempt(s)"
                ) from err
            else:
                if retry and answer.status in RETRY_STATUSES and attempt < MAX_RETRIES:
                    status = answer.status
                    outcome = f"answered {status}"
                    delay = _retry_after(answer.headers) or BACKOFF * 2**attempt
                elif 300 <= answer.status < 400:
                    raise EidProtocolError(
                        f"{what} answered {answer.status} redirect; API calls do not follow "
                        "redirects"
                    )
                elif answer.status >= 500 or answer.status == 429:
                    raise EidUnavailable(
                        f"{what} answered {answer.status} after {attempt + 1} attempt(s)",
                        status_code=answer.status,
                    )
                else:
                    return answer
            # Honour Retry-After only within the time budget of one call.
            if time.monotonic() - started + delay > self.timeout:
                raise EidUnavailable(
                    f"{what} {outcome} after {attempt + 1} attempt(s); waiting {delay:g} s "
                    f"more would exceed the {self.timeout:g} s timeout",
                    status_code=status,
                )
            attempt += 1
            time.sleep(delay)

    def _read(self, response: requests.Response, what: str) -> _Answer:
        with response:
            declared = response.headers.get("Content-Length", "")
            if declared.isdigit() and int(declared) > self.max_bytes:
                raise EidProtocolError(f"{what} answered a body over {self.max_bytes} bytes")
            chunks: list[bytes] = []
            size = 0
            for chunk in response.iter_content(64 * 1024):
                size += len(chunk)
                if size > self.max_bytes:
                    raise EidProtocolError(f"{what} answered a body over {self.max_bytes} bytes")
                chunks.append(chunk)
            return _Answer(response.status_code, response.headers, b"".join(chunks))

    def _describe(self, answer: _Answer) -> tuple[dict[str, Any] | None, str]:
        """The parsed error body (if JSON object) and a short, scrubbed summary."""
        try:
            body = json.loads(answer.body) if answer.body.strip() else None
        except (ValueError, UnicodeDecodeError, RecursionError):
            body = None
        if not isinstance(body, dict):
            ctype = answer.headers.get("Content-Type", "").split(";")[0] or "no content type"
            kind = "an empty body" if not answer.body.strip() else f"a non-JSON body ({ctype})"
            return None, kind
        parts: list[str] = []
        for key in ("error", "code", "error_description", "message"):
            if isinstance(body.get(key), str | int) and not isinstance(body.get(key), bool):
                parts.append(str(body[key]))
        errors = body.get("errors")
        if isinstance(errors, list):
            for item in errors[:5]:
                if isinstance(item, dict):
                    parts.append(": ".join(str(item[k]) for k in ("field", "message") if k in item))
        return body, self._scrub(" - ".join(p for p in parts if p))[:300] or "a JSON body"

    def _scrub(self, text: str) -> str:
        secret = self.settings.CLIENT_SECRET
        if secret:
            text = text.replace(secret, "***")
        local = self.tokens._local
        if local is not None:
            text = text.replace(local.access_token, "***")
        text = _JWT_RE.sub("***", text)
        return _NIN_RE.sub("***********", text)

    def _token_error(self, answer: _Answer, what: str) -> TokenError:
        body, summary = self._describe(answer)
        error = body.get("error") if body else None
        error = error if isinstance(error, str) else None
        desc = body.get("error_description") if body else None
        desc = self._scrub(desc)[:300] if isinstance(desc, str) else None
        cls: type[TokenError] = TokenError
        message = f"{what} answered {answer.status}: {summary}"
        if error == "invalid_scope":
            cls = InvalidScope
            message += f" (scopes asked: {' '.join(self.settings.SCOPES)})"
        elif error == "invalid_client" or (error is None and answer.status == 401):
            cls = InvalidClient
            message += " (the client id or secret was not accepted)"
        return cls(message, error=error, description=desc, status_code=answer.status)

    def _api_error(self, answer: _Answer, what: str) -> EidApiError:
        body, summary = self._describe(answer)
        rid = next((answer.headers[h] for h in _REQUEST_ID_HEADERS if h in answer.headers), None)
        message = f"{what} answered {answer.status}: {summary}"
        if rid:
            message += f" (broker request id {rid[:100]})"
        return EidApiError(message, status_code=answer.status, body=body, broker_request_id=rid)


def _not_sent(err: Exception) -> bool:
    """True when the request certainly did not reach the broker (safe to resend a POST)."""
    if isinstance(err, requests.ConnectTimeout):
        return True
    reason = err.args[0] if err.args else None
    reason = getattr(reason, "reason", reason)
    return isinstance(reason, NewConnectionError)


def _retry_after(headers: Mapping[str, str]) -> float | None:
    value = headers.get("Retry-After", "").strip()
    if not value:
        return None
    if value.isdigit():
        return float(value)
    try:
        return max(0.0, parsedate_to_datetime(value).timestamp() - time.time())
    except (TypeError, ValueError, IndexError, OverflowError):
        return None


class _HeaderAuth(requests.auth.AuthBase):
    """Sets (or, with ``None``, removes) the Authorization header of a request."""

    def __init__(self, value: str | None) -> None:
        self.value = value

    def __call__(self, r: requests.PreparedRequest) -> requests.PreparedRequest:
        r.headers.pop("Authorization", None)
        if self.value is not None:
            r.headers["Authorization"] = self.value
        return r


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
