"""The access token, shared by every worker through a Django cache.

A deployment whose ``TOKEN_CACHE`` is shared by all its workers (Redis,
Memcached, a database cache) performs one token request per token lifetime:
when the token is missing or stale, one worker takes a short lock with the
atomic ``cache.add`` and fetches; the others wait briefly and read what it
stored, or, if it takes too long, fetch themselves so nobody hangs. When the
holder's request fails because the broker does not answer, the waiters fail at
once too, instead of each spending another ``TIMEOUT`` on a broker that is down.
Every wait (for the process's lock, for the other worker) ends by the deadline of the
call that needs the token (:func:`django_eid.deadline.current`).
"""

from __future__ import annotations

import hashlib
import logging
import math
import secrets
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django.core.cache import caches

from django_eid import deadline as deadlines
from django_eid import telemetry
from django_eid.exceptions import EidError, EidUnavailable

logger = logging.getLogger("django_eid.client")

#: Seconds between two looks at the cache while another worker fetches.
POLL_INTERVAL = 0.05
#: Seconds a waiter waits beyond ``TIMEOUT`` for the lock holder's outcome: the
#: holder's own call ends within ``TIMEOUT``, so a waiter learns how it went
#: (a token, or a failure) instead of starting a second call at that moment.
#: Within a call of the client, the call's own deadline ends the wait first.
HOLDER_GRACE = 0.5


@dataclass(frozen=True)
class AccessToken:
    """An OAuth access token of the broker and until when this app uses it."""

    access_token: str
    token_type: str
    expires_in: int
    #: Epoch seconds after which the token is not used any more (safety margin applied).
    use_until: float

    def __repr__(self) -> str:  # the token itself never reaches a log line
        return f"AccessToken(token_type={self.token_type!r}, expires_in={self.expires_in})"

    @classmethod
    def issued_now(cls, access_token: str, token_type: str, expires_in: int) -> AccessToken:
        # Stop using a token a little before it expires, so a call started just
        # before the end does not reach the broker with a dead token.
        margin = min(60.0, expires_in / 10)
        return cls(access_token, token_type, expires_in, time.time() + expires_in - margin)

    @property
    def fresh(self) -> bool:
        return time.time() < self.use_until


def cache_key(*parts: str) -> str:
    """Cache key for one client configuration (the secret is not one of its parts)."""
    digest = hashlib.sha256("\x1f".join(parts).encode()).hexdigest()[:40]
    return f"django_eid:token:{digest}"


def entry_keys(key: str) -> tuple[str, str, str]:
    """The cache entries of the token under ``key``: the token, its lock, its last failure."""
    return key, key + ":lock", key + ":failed"


class TokenStore:
    """Reads, shares and renews the token of one client configuration."""

    def __init__(
        self, cache_alias: str, key: str, fetch: Callable[[], AccessToken], wait: float
    ) -> None:
        self.cache_alias = cache_alias
        self.key, self.lock_key, self.failed_key = entry_keys(key)
        self._fetch = fetch
        self._wait = wait
        # The last token seen by this process saves a cache round trip per call.
        self._local: AccessToken | None = None
        self._local_lock = threading.Lock()
        # (monotonic time, message) of this process's last failure to reach the broker.
        self._local_failure: tuple[float, str] | None = None

    @property
    def cache(self) -> Any:
        return caches[self.cache_alias]

    def get(self) -> AccessToken:
        local = self._local
        if local is not None and local.fresh:
            return local
        since = time.monotonic()
        call = deadlines.current()
        # Another thread of this process may be fetching: wait for it within our deadline.
        if not self._local_lock.acquire(timeout=-1 if call is None else call.remaining()):
            raise _NoTokenInTime(_no_token(call, "another thread's token request"))
        try:
            local = self._local
            if local is not None and local.fresh:
                return local
            # The threads of a process share this store: if the one that held the lock
            # while we waited for it found the broker not answering, do not ask again
            # (each waiting thread would otherwise spend another TIMEOUT, one after another).
            failure = self._local_failure
            if failure is not None and failure[0] >= since:
                raise EidUnavailable(
                    f"{failure[1]} (another thread's token request, moments ago; "
                    "not repeated in this request)"
                )
            try:
                token = self._shared_or_fetch()
            except _NoTokenInTime:
                raise  # this call's time ran out, not the broker: other threads still try
            except EidUnavailable as err:
                self._local_failure = (time.monotonic(), str(err))
                raise
            except EidError:
                raise
            except Exception as err:  # any cache backend's own errors
                # A token cache outage must not take identification down with it:
                # fetch for this process alone until the cache is back.
                logger.warning("The token cache failed (%s); fetching a token directly.", err)
                token = self._fetch()
            self._local = token
            return token
        finally:
            self._local_lock.release()

    def last_seen(self) -> AccessToken | None:
        """The last token this process used, fresh or not; no cache round trip."""
        return self._local

    def invalidate(self, rejected: AccessToken) -> None:
        """Forget ``rejected`` (the broker answered 401), unless a newer token replaced it."""
        with self._local_lock:
            if self._local is not None and self._local.access_token == rejected.access_token:
                self._local = None
        try:
            current = self._read()
            if current is not None and current.access_token == rejected.access_token:
                self.cache.delete(self.key)
        except EidError:
            raise
        except Exception as err:
            logger.warning("The token cache failed (%s); the rejected token stays there.", err)

    def _read(self) -> AccessToken | None:
        value = self.cache.get(self.key)
        if not isinstance(value, dict):
            return None
        try:
            token = AccessToken(**value)
            # Junk (another version's layout, a hand-edited entry) is ignored, not fatal.
            fresh = token.fresh and isinstance(token.access_token, str)
        except TypeError:
            return None
        return token if fresh else None

    def _shared(self) -> AccessToken | None:
        """:meth:`_read` for a token this process needs (counted when another worker
        fetched it: with OpenTelemetry, ``eid.broker.token.requests``)."""
        token = self._read()
        if token is not None:
            telemetry.token_from_cache()
        return token

    def _store(self, token: AccessToken) -> None:
        # Rounded up: the entry must not vanish before the token stops being used
        # (a worker arriving in that gap would fetch a second token).
        ttl = max(1, math.ceil(token.use_until - time.time()))
        self.cache.set(
            self.key,
            {
                "access_token": token.access_token,
                "token_type": token.token_type,
                "expires_in": token.expires_in,
                "use_until": token.use_until,
            },
            ttl,
        )

    def _fetch_and_store(self) -> AccessToken:
        token = self._fetch()
        self._store(token)
        return token

    def _locked_fetch(self, lock_ttl: int) -> AccessToken | None:
        """Fetch under the shared lock; ``None`` if another worker holds it."""
        # A value of our own, so we release only our lock: a fetch slower than the
        # lock's TTL must not delete the lock another worker has taken since.
        owner = secrets.token_hex(8)
        if not self.cache.add(self.lock_key, owner, lock_ttl):
            return None
        try:
            # Another worker may have stored a token between our read and our lock.
            return self._shared() or self._fetch_and_store()
        except EidUnavailable as err:
            # Tell the workers waiting for this token that the broker did not answer,
            # so they do not each spend another TIMEOUT on it (set before the unlock).
            try:
                self.cache.set(self.failed_key, {"at": time.time(), "error": str(err)}, lock_ttl)
            except Exception as cache_err:
                logger.warning("The token cache failed (%s).", cache_err)
            raise
        finally:
            # Check-then-delete is not atomic: a lock that expired and was taken over in
            # between is deleted too; its new owner then just has company (one extra fetch
            # at worst). A cache failing here must not replace the broker's answer or error.
            try:
                if self.cache.get(self.lock_key) == owner:
                    self.cache.delete(self.lock_key)
            except Exception as cache_err:
                logger.warning("The token cache failed releasing the lock (%s).", cache_err)

    def _raise_if_holder_failed(self, since: float) -> None:
        """Raise the lock holder's failure if it happened after ``since`` (epoch seconds)."""
        failed = self.cache.get(self.failed_key)
        if (
            isinstance(failed, dict)
            and isinstance(failed.get("at"), float)
            and failed["at"] >= since
        ):
            raise EidUnavailable(
                f"{failed.get('error') or 'The token request failed'} "
                "(another worker's token request, moments ago; not repeated in this request)"
            )

    def _shared_or_fetch(self) -> AccessToken:
        token = self._shared()
        if token is not None:
            return token
        lock_ttl = max(1, int(self._wait) + 1)
        since = time.time()
        token = self._locked_fetch(lock_ttl)
        deadline = time.monotonic() + self._wait + HOLDER_GRACE
        call = deadlines.current()
        while token is None and time.monotonic() < deadline:
            if call is not None and call.remaining() <= POLL_INTERVAL:
                raise _NoTokenInTime(_no_token(call, "another worker's token request"))
            time.sleep(POLL_INTERVAL)
            token = self._shared()
            if token is None:
                # The broker did not answer the holder: do not ask it again right away.
                self._raise_if_holder_failed(since)
                # The holder gave up otherwise (crashed, lock expired): take over.
                token = self._locked_fetch(lock_ttl)
        return token or self._fetch_and_store()


class _NoTokenInTime(EidUnavailable):
    """The call's deadline passed while another thread or worker fetched the token."""


def _no_token(call: deadlines.Deadline | None, whose: str) -> str:
    within = f" within the {call.seconds:g} s timeout (TIMEOUT) of the call" if call else ""
    return f"No access token{within}: {whose} is still running"
