"""A small, real broker on loopback for the production tier and the benchmarks.

A threaded HTTP/1.1 server (keep-alive) that speaks the token, create and
retrieve calls of the wire format, and counts what a deployment pays for:
token requests, TCP connections accepted, API calls, and calls made with a
token it no longer accepts. It can be told to stop answering (``hang``: accept,
read, never reply) or be killed and brought back on the same port, to play a
broker outage.

It is deliberately stdlib-only (no Django), so benchmark driver processes and
the test process can run it without configuring anything.
"""

from __future__ import annotations

import base64
import contextlib
import json
import secrets
import socket
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

CLIENT_ID = "stub-client"
CLIENT_SECRET = "stub-secret-0123456789"

RECORD_TEMPLATE: dict[str, Any] = {
    "Status": "SUCCESS",
    "IdentityProvider": "NO_BANKID_WEB",
    "IdentityProviderUniqueId": "9578-6000-4-12345",
    "Name": "Nordmann, Kari Marie",
    "FirstName": "Kari",
    "MiddleName": "Marie",
    "LastName": "Nordmann",
    "DateOfBirth": "311271",
    "SocialSecurityNumber": "31127112345",
    "EnvironmentInfo": {"UserAgent": "Mozilla/5.0 (X11; Linux x86_64)", "IPAddress": "203.0.113.7"},
    "Error": None,
    "MetaData": {},
}


@dataclass
class Counters:
    """What the stub saw. Read it through :meth:`BrokerStub.snapshot`."""

    connections: int = 0
    token_requests: int = 0
    token_times: list[float] = field(default_factory=list)
    creates: int = 0
    retrieves: int = 0
    #: API calls with a token the stub never issued or that had expired.
    rejected_tokens: int = 0
    #: Requests that arrived while the stub was hanging (never answered).
    hung: int = 0
    #: Distinct tokens presented on API calls.
    tokens_used: set[str] = field(default_factory=set)
    bad_requests: int = 0
    #: Arrival times of the first and the latest API call (create or retrieve).
    first_call: float | None = None
    last_call: float | None = None
    #: Arrival time of every API call (with a valid token).
    call_times: list[float] = field(default_factory=list)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    allow_reuse_address = True
    request_queue_size = 128
    stub: BrokerStub

    def process_request(self, request: Any, client_address: Any) -> None:
        # Like gunicorn: no Nagle delay between a response's header and body writes
        # (with the client's delayed ACK that would add ~40 ms per keep-alive call).
        request.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        with self.stub.lock:
            self.stub.counters.connections += 1
        self.stub._track(request)
        super().process_request(request, client_address)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:
        pass

    # -- helpers -------------------------------------------------------
    def _body(self) -> bytes:
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""

    def _send(self, status: int, body: Any) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        if self.close_connection:
            # Say so: a client that pools the connection would otherwise reuse a dead one.
            self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(data)

    def _hang_if_told(self) -> bool:
        stub = self.server.stub
        if not stub.hanging.is_set():
            return False
        with stub.lock:
            stub.counters.hung += 1
        # Never answer: wait until the outage ends (or the stub is stopped),
        # then drop the connection without a reply.
        stub.recovered.wait(timeout=stub.max_hang)
        self.close_connection = True
        return True

    def _bearer_ok(self) -> bool:
        stub = self.server.stub
        auth = self.headers.get("Authorization", "")
        token = auth[7:] if auth.startswith("Bearer ") else ""
        now = time.time()
        with stub.lock:
            expires = stub.tokens.get(token)
            if expires is None or now >= expires:
                stub.counters.rejected_tokens += 1
                return False
            stub.counters.tokens_used.add(token)
            stub.counters.last_call = now
            stub.counters.call_times.append(now)
            if stub.counters.first_call is None:
                stub.counters.first_call = now
        return True

    # -- routes ----------------------------------------------------------
    def do_POST(self) -> None:
        body = self._body()
        if self._hang_if_told():
            return
        stub = self.server.stub
        path = urlsplit(self.path).path
        if stub.latency:
            time.sleep(stub.latency)
        if path == "/auth/oauth/connect/token":
            expected = "Basic " + base64.b64encode(f"{CLIENT_ID}:{CLIENT_SECRET}".encode()).decode()
            if self.headers.get("Authorization") != expected:
                self._send(401, {"error": "invalid_client"})
                return
            form = parse_qs(body.decode())
            if form.get("grant_type") != ["client_credentials"]:
                self._send(400, {"error": "unsupported_grant_type"})
                return
            token = "stub." + secrets.token_urlsafe(16)
            with stub.lock:
                stub.counters.token_requests += 1
                stub.counters.token_times.append(time.time())
                stub.tokens[token] = time.time() + stub.token_lifetime
            self._send(
                200,
                {"access_token": token, "expires_in": stub.token_lifetime, "token_type": "Bearer"},
            )
            return
        if path == "/api/identification/session":
            if not self._bearer_ok():
                self._send(401, {"message": "token expired", "code": 401})
                return
            try:
                request = json.loads(body)
                external = str(request["ExternalReference"])
                success_url = str(request["ReturnUrls"]["Success"])
            except (ValueError, KeyError, TypeError):
                with stub.lock:
                    stub.counters.bad_requests += 1
                self._send(400, {"message": "bad request", "code": 400})
                return
            request_id = secrets.token_urlsafe(48)
            with stub.lock:
                stub.counters.creates += 1
                stub.sessions[request_id] = (external, success_url)
            self._send(
                200,
                {"Url": f"{stub.url}/broker/{request_id}", "RequestId": request_id},
            )
            return
        self._send(404, {"message": "not found", "code": 404})

    def do_GET(self) -> None:
        if self._hang_if_told():
            return
        stub = self.server.stub
        parts = urlsplit(self.path)
        if stub.latency:
            time.sleep(stub.latency)
        if parts.path == "/api/identification/session":
            if not self._bearer_ok():
                self._send(401, {"message": "token expired", "code": 401})
                return
            request_id = (parse_qs(parts.query).get("requestId") or [""])[0]
            with stub.lock:
                stub.counters.retrieves += 1
            self._send(200, {**RECORD_TEMPLATE, "RequestId": request_id})
            return
        self._send(404, {"message": "not found", "code": 404})


class BrokerStub:
    """The stub. ``with BrokerStub(token_lifetime=3) as stub: ...``.

    ``stub.settings()`` is the ``DJANGO_EID`` dict that points a client at it.
    """

    def __init__(
        self,
        *,
        token_lifetime: int = 3600,
        latency: float = 0.0,
        port: int = 0,
        max_hang: float = 60.0,
    ) -> None:
        self.token_lifetime = token_lifetime
        self.latency = latency
        self.max_hang = max_hang
        self.lock = threading.Lock()
        self.counters = Counters()
        self.tokens: dict[str, float] = {}
        self.sessions: dict[str, tuple[str, str]] = {}
        self.hanging = threading.Event()
        self.recovered = threading.Event()
        self._sockets: list[socket.socket] = []
        self._port = port
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle -----------------------------------------------------------
    def start(self) -> BrokerStub:
        server = _Server(("127.0.0.1", self._port), _Handler)
        server.stub = self
        self._port = server.server_address[1]
        self._server = server
        self._thread = threading.Thread(
            target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop listening and drop every open connection (a killed broker)."""
        server, self._server = self._server, None
        if server is None:
            return
        self.recovered.set()  # release hanging handlers
        server.shutdown()
        server.server_close()
        with self.lock:
            sockets, self._sockets = self._sockets, []
        for sock in sockets:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
        if self._thread is not None:
            self._thread.join(timeout=5)

    def restart(self) -> None:
        """Come back on the same port, with the same tokens (a broker restart)."""
        self.hanging.clear()
        self.recovered.clear()
        self.start()

    def __enter__(self) -> BrokerStub:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- outage ----------------------------------------------------------------
    def hang(self) -> None:
        """Accept connections and read requests, but never answer."""
        self.recovered.clear()
        self.hanging.set()

    def answer_again(self) -> None:
        self.hanging.clear()
        self.recovered.set()

    # -- reading ---------------------------------------------------------------
    @property
    def port(self) -> int:
        return self._port

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._port}"

    def settings(self, **extra: Any) -> dict[str, Any]:
        """A ``DJANGO_EID`` dict for a client of this stub."""
        return {
            "CLIENT_ID": CLIENT_ID,
            "CLIENT_SECRET": CLIENT_SECRET,
            "BASE_URL": f"{self.url}/api",
            "AUTH_URL": f"{self.url}/auth",
            "SCOPES": ["identify"],
            "TIMEOUT": 5,
            **extra,
        }

    def snapshot(self) -> dict[str, Any]:
        with self.lock:
            c = self.counters
            return {
                "connections": c.connections,
                "token_requests": c.token_requests,
                "token_times": list(c.token_times),
                "creates": c.creates,
                "retrieves": c.retrieves,
                "rejected_tokens": c.rejected_tokens,
                "hung": c.hung,
                "tokens_used": len(c.tokens_used),
                "bad_requests": c.bad_requests,
                "first_call": c.first_call,
                "last_call": c.last_call,
                "call_times": list(c.call_times),
            }

    def reset_counters(self) -> None:
        with self.lock:
            self.counters = Counters()

    def external_reference(self, request_id: str) -> str | None:
        with self.lock:
            entry = self.sessions.get(request_id)
        return entry[0] if entry else None

    def _track(self, sock: socket.socket) -> None:
        with self.lock:
            self._sockets = [s for s in self._sockets if s.fileno() != -1]
            self._sockets.append(sock)


def use_window(lifetime: float) -> float:
    """Seconds a token of ``lifetime`` is used (the client's safety margin applied)."""
    return lifetime - min(60.0, lifetime / 10)


def ideal_token_requests(call_times: list[float], window: float) -> int:
    """Token requests a perfectly shared token needs for API calls at ``call_times``.

    One token serves every call of its ``window``; the next is fetched by the
    first call after it ran out (renewal on demand, as the client does).
    """
    count, until = 0, float("-inf")
    for t in sorted(call_times):
        if t >= until:
            count, until = count + 1, t + window
    return count
