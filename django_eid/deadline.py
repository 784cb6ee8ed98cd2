"""One deadline per broker call, and the watchdog that enforces it.

``requests`` bounds each socket operation (connect, each read), not a call: a broker or
a middlebox that sends its answer a byte at a time, each byte within the read timeout,
holds a call for as long as it likes. So every call of :class:`~django_eid.client.EidClient`
runs under a :class:`Deadline` of ``TIMEOUT`` seconds (:func:`bounded`), token included:
the transport passes ``requests`` the time left as its timeouts, sleeps between retries
only within it, and registers the connection of each attempt with one shared daemon
thread, the watchdog, which shuts that connection's socket down when the deadline passes.
The blocked read then returns at once and the transport raises
:class:`~django_eid.exceptions.EidUnavailable`.

The connection is reached through :class:`DeadlineAdapter`, which ``new_http_session``
mounts: its connection pools register every connection they hand out while an attempt
is watched (:func:`watch`) and release it when it goes back to the pool, before any other
thread can take it.
"""

from __future__ import annotations

import contextlib
import contextvars
import heapq
import itertools
import os
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any, Final

import requests.adapters
from urllib3 import HTTPConnectionPool, HTTPSConnectionPool

#: Seconds the watchdog thread lingers without work before it ends (a new call starts it again).
IDLE: Final = 5.0
#: Seconds between two looks at a connection that had no socket yet when its deadline passed
#: (still connecting: the connect timeout, at most the time that was left, ends that).
RECHECK: Final = 0.05
THREAD_NAME: Final = "django-eid-deadline"


class Deadline:
    """The moment (``time.monotonic()``) by which a call must be over."""

    def __init__(self, seconds: float) -> None:
        #: The budget the call was given, for messages.
        self.seconds = seconds
        self.at = time.monotonic() + seconds

    def remaining(self) -> float:
        """Seconds left; ``0.0`` once the deadline has passed."""
        return max(0.0, self.at - time.monotonic())

    def expired(self) -> bool:
        return time.monotonic() >= self.at

    def __repr__(self) -> str:
        return f"Deadline({self.seconds:g} s, {self.remaining():.3f} s left)"


_current: contextvars.ContextVar[Deadline | None] = contextvars.ContextVar(
    "django_eid_deadline", default=None
)


def current() -> Deadline | None:
    """The deadline of the call running in this thread (context), if any."""
    return _current.get()


@contextlib.contextmanager
def bounded(seconds: float) -> Iterator[Deadline]:
    """Run the block as one call that must end within ``seconds``.

    Nested, the deadline that ends first holds: a token request made during an API call
    spends the API call's time, not a budget of its own.
    """
    outer = _current.get()
    if outer is not None and outer.remaining() <= seconds:
        yield outer
        return
    deadline = Deadline(seconds)
    token = _current.set(deadline)
    try:
        yield deadline
    finally:
        _current.reset(token)


class _Guard:
    """One connection watched until one deadline; released when the attempt ends."""

    __slots__ = ("active", "conn", "watch")

    def __init__(self, conn: Any, watch: Watch) -> None:
        self.conn = conn
        self.watch = watch
        self.active = True


class Watch:
    """The connections of one attempt of a call, cut when its deadline passes."""

    def __init__(self, deadline: Deadline) -> None:
        self.deadline = deadline
        #: Set (before the socket is shut down) when the watchdog cut a connection: a
        #: body read up to that point may be incomplete, whatever the parser made of it.
        self.cut = False
        self.guards: list[_Guard] = []


_watch: contextvars.ContextVar[Watch | None] = contextvars.ContextVar(
    "django_eid_watch", default=None
)


class _Watchdog:
    """One daemon thread per process that shuts sockets down at their deadline."""

    def __init__(self) -> None:
        self._cond = threading.Condition(threading.Lock())
        self._heap: list[tuple[float, int, _Guard]] = []
        self._seq = itertools.count()
        self._thread: threading.Thread | None = None

    def guard(self, conn: Any, watch: Watch) -> None:
        guard = _Guard(conn, watch)
        with self._cond:
            watch.guards.append(guard)
            heapq.heappush(self._heap, (watch.deadline.at, next(self._seq), guard))
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name=THREAD_NAME, daemon=True)
                self._thread.start()
            else:
                self._cond.notify()

    def release(self, guards: list[_Guard]) -> None:
        # Under the lock: once this returns, the watchdog will not touch these sockets,
        # so a connection put back into the pool is safe for the next thread's call.
        with self._cond:
            for guard in guards:
                guard.active = False

    def release_conn(self, conn: Any) -> None:
        watch = _watch.get()
        if watch is not None:
            self.release([g for g in watch.guards if g.conn is conn])

    def _run(self) -> None:
        with self._cond:
            while True:
                while self._heap and not self._heap[0][2].active:
                    heapq.heappop(self._heap)
                if not self._heap:
                    self._cond.wait(IDLE)
                    if not self._heap:
                        self._thread = None
                        return
                    continue
                at, _, guard = self._heap[0]
                now = time.monotonic()
                if at > now:
                    self._cond.wait(at - now)
                    continue
                heapq.heappop(self._heap)
                sock = _socket_of(guard.conn)
                if sock is None:
                    # Not connected yet: look again shortly, until the attempt ends.
                    entry = (now + RECHECK, next(self._seq), guard)
                    heapq.heappush(self._heap, entry)
                    continue
                # Marked before the cut, so the reader that wakes up sees it.
                guard.watch.cut = True
                with contextlib.suppress(OSError):  # already closed or reset
                    # ``socket.socket.shutdown``, not ``SSLSocket.shutdown``, which also
                    # drops the TLS object the reading thread is using at that moment.
                    socket.socket.shutdown(sock, socket.SHUT_RDWR)


def _socket_of(conn: Any) -> socket.socket | None:
    """The OS socket of a urllib3 connection; ``None`` while it has none."""
    sock = getattr(conn, "sock", None)
    # TLS-in-TLS (an HTTPS proxy) and pyOpenSSL wrap the socket: reach the real one.
    while sock is not None and not isinstance(sock, socket.socket):
        sock = getattr(sock, "socket", None)
    return sock


_watchdog = _Watchdog()


def _after_fork() -> None:
    # A forked worker has no watchdog thread, and the parent's lock may have been held.
    global _watchdog
    _watchdog = _Watchdog()


os.register_at_fork(after_in_child=_after_fork)


@contextlib.contextmanager
def watch(deadline: Deadline) -> Iterator[Watch]:
    """Watch the connections this block's requests use; cut them at ``deadline``."""
    w = Watch(deadline)
    token = _watch.set(w)
    try:
        yield w
    finally:
        _watch.reset(token)
        _watchdog.release(w.guards)


class _WatchedPool:
    """Registers the connections it hands out during a watched attempt."""

    def _get_conn(self, timeout: float | None = None) -> Any:
        conn = super()._get_conn(timeout)  # type: ignore[misc]
        w = _watch.get()
        if w is not None:
            _watchdog.guard(conn, w)
        return conn

    def _put_conn(self, conn: Any) -> None:
        if conn is not None:
            _watchdog.release_conn(conn)
        super()._put_conn(conn)  # type: ignore[misc]


class WatchedHTTPConnectionPool(_WatchedPool, HTTPConnectionPool):
    pass


class WatchedHTTPSConnectionPool(_WatchedPool, HTTPSConnectionPool):
    pass


_POOLS: Final = {"http": WatchedHTTPConnectionPool, "https": WatchedHTTPSConnectionPool}


class DeadlineAdapter(requests.adapters.HTTPAdapter):
    """An ``HTTPAdapter`` whose connections the watchdog can cut at a call's deadline.

    Mount it (or a subclass) for the broker's URLs in an overridden
    :meth:`~django_eid.client.EidClient.create_http_session`; with another adapter the
    time left still bounds every connect, read and retry, but an answer trickling in
    within each read timeout is not cut.
    """

    def init_poolmanager(self, *args: Any, **kwargs: Any) -> None:
        super().init_poolmanager(*args, **kwargs)
        self.poolmanager.pool_classes_by_scheme = dict(_POOLS)

    def proxy_manager_for(self, proxy: str, **proxy_kwargs: Any) -> Any:
        manager = super().proxy_manager_for(proxy, **proxy_kwargs)
        manager.pool_classes_by_scheme = dict(_POOLS)
        return manager
