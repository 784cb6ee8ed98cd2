"""HTTP transport to the broker: one ``requests.Session`` and the rules every call follows.

Every call goes through :meth:`Transport.request`, which ends it by its deadline
(``TIMEOUT``, :mod:`django_eid.deadline`), never follows a redirect (a bearer token
must not travel to another host), reads at most ``MAX_RESPONSE_BYTES``, and retries
what may be retried on connection errors, 429 and 502/503/504 within the deadline,
honouring ``Retry-After``. Failing to get an answer becomes :class:`EidUnavailable` or
:class:`EidProtocolError`; an answer the broker did give, 4xx included, is
returned as an :class:`Answer`, because what it means is the API's concern
(:mod:`django_eid.client`).
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from email.utils import parsedate_to_datetime
from typing import Any, Final
from urllib.parse import urlsplit

import requests
import requests.adapters
import requests.auth
import requests.utils
from urllib3.exceptions import NewConnectionError

from django_eid import __version__, telemetry
from django_eid.deadline import Deadline, DeadlineAdapter, bounded, watch
from django_eid.exceptions import EidProtocolError, EidUnavailable

USER_AGENT: Final = f"django-eid/{__version__} python-requests/{requests.__version__}"
MAX_RETRIES: Final = 2
BACKOFF: Final = 0.2
#: Connections kept per broker host; at least the threads of a busy worker process.
POOL_SIZE: Final = 32
#: Seconds an attempt is given at least: a retry is not started with less time left.
MIN_WAIT: Final = 0.05
RETRY_STATUSES: Final = frozenset({429, 502, 503, 504})
#: The broker's id of a request, by the header that carries it: ``RequestId`` is the one its
#: reference documents (some SDKs read ``Request-Id``); the others are gateways' spellings.
_REQUEST_ID_HEADERS: Final = (
    "RequestId",
    "Request-Id",
    "X-Request-Id",
    "X-Correlation-Id",
    "X-Amzn-RequestId",
)


def new_http_session(ca_bundle: str | None) -> requests.Session:
    """A ``requests.Session`` for the broker: pooled, identified, TLS always verified."""
    http = BrokerSession()
    # One pooled connection per thread that calls the broker at once; requests'
    # default of 10 would open and close extra connections on busier workers.
    # Its connections can be cut at a call's deadline, even in the middle of a read.
    adapter = DeadlineAdapter(pool_connections=4, pool_maxsize=POOL_SIZE)
    http.mount("https://", adapter)
    http.mount("http://", adapter)
    http.headers["User-Agent"] = USER_AGENT
    http.headers["Accept"] = "application/json"
    # TLS verification is always on; a private CA can be named, never disabled.
    http.verify = ca_bundle or True
    # Redirects are refused by ``allow_redirects=False`` on every call. (``max_redirects
    # = 0`` would make requests raise TooManyRedirects even then, hiding the status.)
    # Proxies and CA settings from the environment are honoured (BrokerSession); every
    # call passes ``auth`` explicitly, and .netrc is never read.
    return http


class BrokerSession(requests.Session):
    """A ``requests.Session`` that reads the environment's proxy and CA settings once per host.

    A plain session reads them on every call (``HTTPS_PROXY``, ``NO_PROXY``,
    ``REQUESTS_CA_BUNDLE``, ``CURL_CA_BUNDLE``: about 0.1 ms of ``os.environ`` per call).
    This one asks requests' own functions the first time it calls a scheme, host and port,
    and keeps their answer for the life of the session (of the client: restart the
    process, or :func:`django_eid.client.reset_client`, to read a changed environment).
    What they decide is unchanged but for one thing: the proxy that ``NO_PROXY`` does not
    exclude, and the environment's CA bundle unless a call passes ``verify`` or the session
    has a bundle of its own (``CA_BUNDLE``), which requests would let the environment's
    replace. ``.netrc`` is never read (every
    call of django-eid passes its own ``auth``).
    """

    #: Hosts remembered at most; a broker client calls two (token and API).
    MAX_HOSTS: Final = 16

    def __init__(self) -> None:
        super().__init__()
        # Off: the environment is read here, once per host, not by requests per call.
        self.trust_env = False
        self._environment: dict[str, tuple[dict[str, str], str | None]] = {}
        self._environment_lock = threading.Lock()

    def environment_for(self, url: str) -> tuple[dict[str, str], str | None]:
        """The environment's proxies for ``url`` and its CA bundle (``None``: none named)."""
        parts = urlsplit(url)
        origin = f"{parts.scheme}://{parts.netloc}".lower()
        found = self._environment.get(origin)
        if found is None:
            # requests' reading, as a trusting session does it per call.
            found = (
                requests.utils.get_environ_proxies(url, no_proxy=None),
                os.environ.get("REQUESTS_CA_BUNDLE") or os.environ.get("CURL_CA_BUNDLE") or None,
            )
            with self._environment_lock:
                if len(self._environment) < self.MAX_HOSTS:
                    self._environment[origin] = found
        return found

    def merge_environment_settings(
        self,
        url: Any,
        proxies: Any,
        stream: Any,
        verify: Any,
        cert: Any,
    ) -> Any:
        url = url.decode() if isinstance(url, bytes) else str(url)
        env_proxies, env_bundle = self.environment_for(url)
        if proxies is not None and proxies.get("no_proxy"):
            # A call's own NO_PROXY: read with it, for this call only (django-eid sets none).
            env_proxies = requests.utils.get_environ_proxies(url, no_proxy=proxies["no_proxy"])
        if proxies is not None:
            for key, value in env_proxies.items():
                proxies.setdefault(key, value)
        # The environment's CA bundle only where the site named none (CA_BUNDLE): requests
        # would otherwise let it replace the session's own on every call.
        if (verify is True or verify is None) and env_bundle and self.verify is True:
            verify = env_bundle
        return super().merge_environment_settings(url, proxies, stream, verify, cert)


@dataclass(frozen=True)
class Answer:
    """What the broker answered to one call, read in full."""

    #: The call, as error messages name it: ``"POST https://..."``.
    what: str
    status: int
    headers: Mapping[str, str]
    body: bytes

    def json(self) -> Any:
        """The body as JSON; :class:`EidProtocolError` if it is not JSON."""
        try:
            return json.loads(self.body)
        except (ValueError, UnicodeDecodeError, RecursionError) as err:
            raise EidProtocolError(
                f"{self.what} answered {self.status} with a body that is not JSON"
            ) from err

    def describe(self, scrub: Callable[[str], str]) -> tuple[dict[str, Any] | None, str]:
        """The error body (if a JSON object) and a short summary, passed through ``scrub``."""
        try:
            body = json.loads(self.body) if self.body.strip() else None
        except (ValueError, UnicodeDecodeError, RecursionError):
            body = None
        if not isinstance(body, dict):
            ctype = self.headers.get("Content-Type", "").split(";")[0] or "no content type"
            kind = "an empty body" if not self.body.strip() else f"a non-JSON body ({ctype})"
            return None, kind
        parts: list[str] = []
        # OAuth's, v1's and v2's error bodies, and the eID Hub's problem details.
        for key in ("error", "code", "error_description", "message", "title", "detail"):
            if isinstance(body.get(key), str | int) and not isinstance(body.get(key), bool):
                parts.append(str(body[key]))
        for name, fields in (
            ("errors", ("field", "message")),
            ("invalidParams", ("name", "reason")),
        ):
            items = body.get(name)
            if isinstance(items, list):
                for item in items[:5]:
                    if isinstance(item, dict):
                        parts.append(": ".join(str(item[k]) for k in fields if k in item))
        return body, scrub(" - ".join(p for p in parts if p))[:300] or "a JSON body"

    def request_id(self) -> str | None:
        """The broker's id of this request, from whichever header it used, for support."""
        return next((self.headers[h] for h in _REQUEST_ID_HEADERS if h in self.headers), None)


class HeaderAuth(requests.auth.AuthBase):
    """Sets (or, with ``None``, removes) the Authorization header of a request."""

    def __init__(self, value: str | None) -> None:
        self.value = value

    def __call__(self, r: requests.PreparedRequest) -> requests.PreparedRequest:
        r.headers.pop("Authorization", None)
        if self.value is not None:
            r.headers["Authorization"] = self.value
        return r


class Transport:
    """Sends requests over one ``requests.Session`` and reads the answers."""

    def __init__(self, http: requests.Session, *, timeout: float, max_bytes: int) -> None:
        self.http = http
        self.timeout = timeout
        self.max_bytes = max_bytes

    def request(
        self,
        method: str,
        url: str,
        *,
        auth: requests.auth.AuthBase,
        retry: bool,
        label: str | None = None,
        **kwargs: Any,
    ) -> Answer:
        """Send one call and read its answer, all within ``timeout`` (or the deadline of
        the call it is part of, :func:`django_eid.deadline.bounded`, if that ends sooner).

        ``retry`` says the call may be sent again after it may have reached the broker
        (it is idempotent); a call that certainly did not reach it is always resent.
        ``label`` names the URL in messages instead of ``url`` (whose path may hold a
        session id, which is personal data to ``eid_purge``). ``kwargs`` go to
        :meth:`requests.Session.request` (``data``, ``params``, ``headers``).
        """
        what = f"{method} {label or url}"
        with bounded(self.timeout) as deadline:

            def call() -> requests.Response:
                # Connect and each read wait at most the time left, never a fresh TIMEOUT.
                return self.http.request(
                    method,
                    url,
                    auth=auth,
                    timeout=max(deadline.remaining(), MIN_WAIT),
                    allow_redirects=False,
                    stream=True,
                    **kwargs,
                )

            return self._send(call, what, deadline, retry=retry)

    def close(self) -> None:
        self.http.close()

    def _send(
        self,
        call: Callable[[], requests.Response],
        what: str,
        deadline: Deadline,
        *,
        retry: bool,
    ) -> Answer:
        attempt = 0
        while True:
            delay: float | None = None
            status: int | None = None
            if deadline.expired():
                # Spent before this attempt (by the token request of the same call).
                raise _late(what, deadline, attempt)
            try:
                with watch(deadline) as w:
                    try:
                        if telemetry.ENABLED:
                            # The attempt in a CLIENT span (attempt: its resend count).
                            answer = telemetry.http_attempt(
                                what, attempt, lambda: self._read(call(), what, deadline)
                            )
                        else:
                            answer = self._read(call(), what, deadline)
                    except requests.RequestException as err:
                        if w.cut or deadline.expired():
                            raise _late(what, deadline, attempt + 1) from err
                        raise
                    if w.cut:
                        # Cut at the deadline: the body may end where it was cut.
                        raise _late(what, deadline, attempt + 1)
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
            # Honour Retry-After only within the deadline, and leave time for the attempt.
            if delay + MIN_WAIT > deadline.remaining():
                raise EidUnavailable(
                    f"{what} {outcome} after {attempt + 1} attempt(s); waiting {delay:g} s "
                    f"more would exceed the {deadline.seconds:g} s timeout",
                    status_code=status,
                )
            attempt += 1
            time.sleep(delay)

    def _read(self, response: requests.Response, what: str, deadline: Deadline) -> Answer:
        with response:
            declared = response.headers.get("Content-Length", "")
            if declared.isdigit() and int(declared) > self.max_bytes:
                raise EidProtocolError(f"{what} answered a body over {self.max_bytes} bytes")
            chunks: list[bytes] = []
            size = 0
            for chunk in response.iter_content(64 * 1024):
                if deadline.expired():
                    raise EidUnavailable(f"{what} answered too slowly: {_over(deadline)}")
                size += len(chunk)
                if size > self.max_bytes:
                    raise EidProtocolError(f"{what} answered a body over {self.max_bytes} bytes")
                chunks.append(chunk)
            return Answer(what, response.status_code, response.headers, b"".join(chunks))


def _over(deadline: Deadline) -> str:
    return f"not over within the {deadline.seconds:g} s timeout (TIMEOUT) of the call"


def _late(what: str, deadline: Deadline, attempts: int) -> EidUnavailable:
    return EidUnavailable(f"{what} {_over(deadline)}, after {attempts} attempt(s)")


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
