"""One deadline per broker call, against a real, slow HTTP server on loopback.

``TIMEOUT`` bounds the whole call: a broker trickling its answer a byte at a time (each
byte well within a read timeout), one that never answers, or one whose retries would run
past it, all end in :class:`EidUnavailable` at ``TIMEOUT``. The server is a raw socket
server in this process, so it can send a status line, headers and bodies as slowly as it
likes; ``responses`` cannot play any of this.

``TIMEOUT`` is a fifth of a second here, so that a test waits no longer than that, and
every other interval is scaled to it: a byte of a trickled answer every 20 ms, an answer
that would take 2 s if nothing cut it. Where what matters is the time a request is given
rather than when it ends (the time left of its call, not a ``TIMEOUT`` of its own), the
test reads the timeouts the transport passes ``requests`` (:class:`TimedClient`): a
margin of a few hundredths of a second is no proof on a loaded machine.
"""

from __future__ import annotations

import contextlib
import gc
import json
import os
import socket
import socketserver
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any
from urllib.parse import urlsplit

import pytest
import requests

from django_eid import deadline
from django_eid.client import EidClient
from django_eid.exceptions import EidUnavailable
from tests.fixtures_client import RECORD, REQUEST_ID, SECRET, SettingsWrapper

TIMEOUT = 0.2
#: Slack over TIMEOUT for a call cut at its deadline (a loaded 2-core machine included);
#: a call cut in time ends at TIMEOUT, so the slack costs nothing unless the cut fails.
SLACK = 1.0
#: Seconds between two bytes of a trickled answer: each one well within a read timeout.
TRICKLE = 0.02
#: Bytes trickled: 2 s, far past TIMEOUT + SLACK, if nothing cuts the call.
TRICKLED = 100
TOKEN_PATH = "/auth/oauth/connect/token"
SESSION_PATH = "/api/identification/session"

#: A behaviour: given the connection and the server, answer one request; ``True`` keeps
#: the connection open for the next request (keep-alive).
Behaviour = Callable[[socket.socket, "SlowBroker"], bool]


def answer(body: bytes, status: str = "200 OK") -> bytes:
    head = f"HTTP/1.1 {status}\r\nContent-Type: application/json\r\n"
    return f"{head}Content-Length: {len(body)}\r\n\r\n".encode() + body


ACCESS_TOKEN = "at-3f9c2e71d0b84a56"
TOKEN = answer(json.dumps({"access_token": ACCESS_TOKEN, "expires_in": 3600}).encode())
RECORD_ANSWER = answer(json.dumps(RECORD).encode())


class SlowBroker(socketserver.ThreadingTCPServer):
    """The broker on 127.0.0.1: answers the token and the record, as slowly as told."""

    allow_reuse_address = True
    daemon_threads = False
    block_on_close = True  # server_close() joins the handler threads

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.stopping = threading.Event()
        self.behaviours: dict[str, list[Behaviour]] = {}
        self.seen: list[str] = []
        self.connections = 0
        self.open: set[socket.socket] = set()
        self.lock = threading.Lock()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"

    def on(self, path: str, *behaviours: Behaviour) -> None:
        """Answer ``path`` with these behaviours in turn, the last one from then on."""
        self.behaviours[path] = list(behaviours)

    def behaviour(self, path: str) -> Behaviour:
        with self.lock:
            self.seen.append(path)
            queue = self.behaviours.get(path) or [send(TOKEN if "token" in path else b"")]
            return queue.pop(0) if len(queue) > 1 else queue[0]

    def calls(self, path: str) -> int:
        return self.seen.count(path)

    def pause(self, seconds: float) -> None:
        self.stopping.wait(seconds)

    def stop(self) -> None:
        """End every handler, those waiting for a kept-alive client's next request too."""
        self.stopping.set()
        self.shutdown()
        with self.lock:
            for conn in self.open:
                with contextlib.suppress(OSError):
                    conn.shutdown(socket.SHUT_RDWR)
        self.server_close()


class _Handler(socketserver.BaseRequestHandler):
    def handle(self) -> None:
        server: SlowBroker = self.server  # type: ignore[assignment]
        with server.lock:
            server.connections += 1
            server.open.add(self.request)
        reader = self.request.makefile("rb")
        try:
            while not server.stopping.is_set():
                line = reader.readline()
                if not line:
                    return
                length = 0
                while (header := reader.readline()) not in (b"\r\n", b"\n", b""):
                    name, _, value = header.decode("latin-1").partition(":")
                    if name.strip().lower() == "content-length":
                        length = int(value)
                reader.read(length)
                path = urlsplit(line.split()[1].decode()).path
                if not server.behaviour(path)(self.request, server):
                    return
        except OSError:
            return  # the client cut the connection: what the deadline is for
        finally:
            reader.close()
            with server.lock:
                server.open.discard(self.request)


# -- behaviours ------------------------------------------------------------------------


def send(data: bytes, after: float = 0.0) -> Behaviour:
    def behaviour(conn: socket.socket, server: SlowBroker) -> bool:
        server.pause(after)
        conn.sendall(data)
        return True

    return behaviour


def trickle(head: bytes, slow: bytes, tail: bytes) -> Behaviour:
    """Send ``head`` at once, ``slow`` one byte every TRICKLE seconds, then ``tail``."""

    def behaviour(conn: socket.socket, server: SlowBroker) -> bool:
        conn.sendall(head)
        for byte in slow:
            server.pause(TRICKLE)
            if server.stopping.is_set():
                return False
            conn.sendall(bytes([byte]))
        conn.sendall(tail)
        return True

    return behaviour


def silent(conn: socket.socket, server: SlowBroker) -> bool:
    """Read the request, never answer (until the test ends)."""
    server.stopping.wait(30)
    return False


#: The body, one byte at a time (the headers, Content-Length included, at once).
TRICKLED_BODY = trickle(
    b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n{"
    % (TRICKLED + 2),
    b" " * TRICKLED,
    b"}",
)
#: The headers, one byte at a time, after the status line.
TRICKLED_HEADERS = trickle(
    b"HTTP/1.1 200 OK\r\nX-Padding: ", b"x" * TRICKLED, b"\r\nContent-Length: 2\r\n\r\n{}"
)


# -- fixtures and helpers --------------------------------------------------------------


class TimedClient(EidClient):
    """The client, recording the timeout of every request it sends: ``(method, path,
    seconds)``, the time left of the call it is part of."""

    def create_http_session(self) -> requests.Session:
        http = super().create_http_session()
        self.timeouts: list[tuple[str, str, float]] = []
        send = http.request

        def request(method: str, url: str, **kwargs: Any) -> requests.Response:
            self.timeouts.append((method, urlsplit(url).path, kwargs["timeout"]))
            return send(method, url, **kwargs)

        http.request = request  # type: ignore[method-assign]
        return http

    def timeouts_of(self, path: str) -> list[float]:
        return [seconds for _, at, seconds in self.timeouts if at == path]


@pytest.fixture
def slow_broker(settings: SettingsWrapper) -> Iterator[SlowBroker]:
    server = SlowBroker()
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05})
    thread.start()
    settings.DJANGO_EID = {
        "CLIENT_ID": "test-client",
        "CLIENT_SECRET": SECRET,
        "BASE_URL": f"{server.url}/api",
        "AUTH_URL": f"{server.url}/auth",
        "SCOPES": ["identify"],
        "TIMEOUT": TIMEOUT,
    }
    try:
        yield server
    finally:
        server.stop()
        thread.join(5)


def timed(call: Callable[[], Any]) -> tuple[float, BaseException | None]:
    """Seconds ``call`` took, and what it raised."""
    started = time.monotonic()
    try:
        call()
    except Exception as err:
        return time.monotonic() - started, err
    return time.monotonic() - started, None


def assert_cut_at_the_deadline(
    elapsed: float, err: BaseException | None, what: str, *, timeout: float = TIMEOUT
) -> None:
    assert isinstance(err, EidUnavailable), f"{what}: {err!r} after {elapsed:.2f} s"
    assert elapsed < timeout + SLACK, f"{what} took {elapsed:.2f} s"
    message = str(err)
    assert f"{timeout:g} s timeout" in message
    assert SECRET not in message
    assert ACCESS_TOKEN not in message


# -- a call ends at its deadline -------------------------------------------------------


@pytest.mark.parametrize(
    "behaviour", [TRICKLED_BODY, TRICKLED_HEADERS, silent], ids=["body", "headers", "silent"]
)
def test_a_record_answered_too_slowly_ends_at_the_deadline(
    slow_broker: SlowBroker, behaviour: Behaviour
) -> None:
    slow_broker.on(SESSION_PATH, behaviour)
    client = EidClient()
    elapsed, err = timed(lambda: client.get_session(REQUEST_ID))
    assert_cut_at_the_deadline(elapsed, err, "get_session")
    assert f"GET {slow_broker.url}{SESSION_PATH}" in str(err)
    # The deadline does not leave time for a retry: one attempt, cut.
    assert slow_broker.calls(SESSION_PATH) == 1
    client.close()


@pytest.mark.parametrize(
    "behaviour", [TRICKLED_BODY, TRICKLED_HEADERS, silent], ids=["body", "headers", "silent"]
)
def test_a_token_answered_too_slowly_ends_the_call_at_the_deadline(
    slow_broker: SlowBroker, behaviour: Behaviour
) -> None:
    slow_broker.on(TOKEN_PATH, behaviour)
    client = EidClient()
    elapsed, err = timed(lambda: client.get_session(REQUEST_ID))
    assert_cut_at_the_deadline(elapsed, err, "get_session (token)")
    assert f"POST {slow_broker.url}{TOKEN_PATH}" in str(err)
    assert slow_broker.calls(SESSION_PATH) == 0
    client.close()


def test_the_token_request_spends_the_time_of_the_call(
    slow_broker: SlowBroker, eid: Callable[..., None]
) -> None:
    # A token after a tenth of a second, then a record that never comes: the record's
    # request gets the time left, not a TIMEOUT of its own. (A TIMEOUT of 0.4 s: the token
    # comes well before the deadline, on a loaded machine too.)
    eid(TIMEOUT=0.4)
    slow_broker.on(TOKEN_PATH, send(TOKEN, after=0.1))
    slow_broker.on(SESSION_PATH, silent)
    client = TimedClient()
    elapsed, err = timed(lambda: client.get_session(REQUEST_ID))
    assert_cut_at_the_deadline(elapsed, err, "get_session (token, then record)", timeout=0.4)
    assert f"GET {slow_broker.url}{SESSION_PATH}" in str(err)
    (token_timeout,) = client.timeouts_of(TOKEN_PATH)
    assert token_timeout <= 0.4
    (record_timeout,) = client.timeouts_of(SESSION_PATH)  # sent once the token came
    assert record_timeout <= 0.4 - 0.1


def test_retries_stop_at_the_deadline(slow_broker: SlowBroker, eid: Callable[..., None]) -> None:
    # A 503 after a tenth of a second, then nothing: the retry starts then (no backoff in
    # the suite) with the time left, and is cut at the deadline, not given a TIMEOUT of its
    # own. (A TIMEOUT of 0.4 s: the 503 comes well before it, on a loaded machine too.)
    eid(TIMEOUT=0.4)
    busy = send(answer(b"", "503 Service Unavailable"), after=0.1)
    slow_broker.on(SESSION_PATH, busy, silent)
    client = TimedClient()
    elapsed, err = timed(lambda: client.get_session(REQUEST_ID))
    assert_cut_at_the_deadline(elapsed, err, "get_session (retried)", timeout=0.4)
    assert slow_broker.calls(SESSION_PATH) == 2
    assert "2 attempt(s)" in str(err)
    first, retry = client.timeouts_of(SESSION_PATH)
    assert retry <= 0.4 - 0.1 < first
    client.close()


def test_a_create_answered_too_slowly_ends_at_the_deadline(slow_broker: SlowBroker) -> None:
    from django_eid.client import ReturnUrls

    slow_broker.on(SESSION_PATH, TRICKLED_BODY)
    urls = ReturnUrls("https://s.test/ok", "https://s.test/abort", "https://s.test/error")
    elapsed, err = timed(
        lambda: EidClient().create_session(return_urls=urls, external_reference="ref")
    )
    assert_cut_at_the_deadline(elapsed, err, "create_session")
    assert f"POST {slow_broker.url}{SESSION_PATH}" in str(err)


# -- within the deadline, nothing changes ------------------------------------------------


def test_a_prompt_call_succeeds(slow_broker: SlowBroker, eid: Callable[..., None]) -> None:
    eid(TIMEOUT=5.0)  # nothing waits for it: a generous deadline only keeps a loaded machine out
    slow_broker.on(SESSION_PATH, send(RECORD_ANSWER))
    client = EidClient()
    assert client.get_session(REQUEST_ID).request_id == REQUEST_ID
    assert client.get_session(REQUEST_ID).request_id == REQUEST_ID
    assert slow_broker.connections == 1  # one kept-alive connection for all three calls
    client.close()


def test_retries_happen_when_there_is_time(
    slow_broker: SlowBroker, eid: Callable[..., None], slept: list[float], real_backoff: None
) -> None:
    # The client's own backoff (0.2 s, then 0.4 s), recorded rather than slept, fits in a
    # TIMEOUT of a second: both retries are made, each after its delay.
    eid(TIMEOUT=1.0)
    busy = send(answer(b"", "503 Service Unavailable"))
    slow_broker.on(SESSION_PATH, busy, busy, send(RECORD_ANSWER))
    assert EidClient().get_session(REQUEST_ID).request_id == REQUEST_ID
    assert slow_broker.calls(SESSION_PATH) == 3
    assert slept == [0.2, 0.4]


def test_a_connection_back_in_the_pool_is_not_cut_at_its_last_call_s_deadline(
    slow_broker: SlowBroker, eid: Callable[..., None]
) -> None:
    # The first call ends at once, within a deadline of 0.15 s (a shorter outer deadline
    # holds); that deadline passes while the second call, on the same pooled connection,
    # waits 0.18 s for its answer, within its own TIMEOUT of 2 s.
    eid(TIMEOUT=2.0)
    slow_broker.on(SESSION_PATH, send(RECORD_ANSWER), send(RECORD_ANSWER, after=0.18))
    client = EidClient()
    client.get_token()
    with deadline.bounded(0.15):
        client.get_session(REQUEST_ID)
    elapsed, err = timed(lambda: client.get_session(REQUEST_ID))
    assert err is None, f"{err!r} after {elapsed:.2f} s"
    assert elapsed >= 0.18
    assert slow_broker.connections == 1
    client.close()


# -- nothing left behind -------------------------------------------------------------------


def _open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="needs /proc (Linux)")
def test_cut_calls_leave_no_thread_or_socket_behind(
    slow_broker: SlowBroker, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(deadline, "IDLE", 0.05)
    slow_broker.on(SESSION_PATH, TRICKLED_BODY)
    client = EidClient()
    client.get_token()
    gc.collect()
    fds = _open_fds()
    errors: list[BaseException] = []

    def cut_call() -> None:
        try:
            client.get_session(REQUEST_ID)
        except EidUnavailable as err:
            errors.append(err)

    callers = [threading.Thread(target=cut_call) for _ in range(4)]
    for caller in callers:
        caller.start()
    for caller in callers:
        caller.join(TIMEOUT + SLACK)
    assert len(errors) == 4
    # One watchdog thread for every call of the process, ended once idle.
    watchdogs = [t for t in threading.enumerate() if t.name == deadline.THREAD_NAME]
    assert len(watchdogs) <= 1
    for watchdog in watchdogs:
        watchdog.join(2)
    assert not any(t.name == deadline.THREAD_NAME for t in threading.enumerate())
    # The cut connections are closed, on our side and (once it notices) the server's.
    stop = time.monotonic() + 2 * TRICKLE + 1
    while _open_fds() > fds and time.monotonic() < stop:
        time.sleep(0.05)
        gc.collect()
    assert _open_fds() <= fds
    client.close()
