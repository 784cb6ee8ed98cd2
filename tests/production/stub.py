"""The sandbox broker on loopback, over real TCP, for the production tier and the benchmarks.

A threaded HTTP/1.1 server (keep-alive) whose token, create and retrieve
answers are the sandbox's (:class:`~django_eid.sandbox.broker.SandboxBroker`,
the same model the ``eid_broker`` fixture serves). On top it counts what a
deployment pays for: token requests, TCP connections accepted, API calls, and
calls made with a token the broker no longer accepts. It can be told to stop
answering (``hang``: accept, read, never reply) or be killed and brought back on
the same port, to play a broker outage. Every session is identified by the
sample person as soon as it is created, so retrieving it answers their record.

It serves from the stdlib's HTTP server and the sandbox's Django-free core
(no settings needed), so benchmark driver processes and the test process can
run it without configuring anything.
"""

from __future__ import annotations

import contextlib
import json
import secrets
import socket
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlencode, urlsplit

from django_eid import vocabulary
from django_eid.sandbox.broker import SandboxBroker
from django_eid.sandbox.persons import Person, builtin_persons
from django_eid.sandbox.store import MemoryStore
from django_eid.sandbox.wire import Reply

CLIENT_ID = "stub-client"
CLIENT_SECRET = "stub-secret-0123456789"

#: Who identifies at the stub: the sandbox's first built-in person.
SAMPLE = builtin_persons().NORWEGIAN
API_PATH = "/api" + vocabulary.SESSION_PATH
TOKEN_PATH = "/auth" + vocabulary.TOKEN_PATH


@dataclass
class Counters:
    """What the stub saw. Read it through :meth:`BrokerStub.snapshot`."""

    connections: int = 0
    token_requests: int = 0
    token_times: list[float] = field(default_factory=list)
    creates: int = 0
    retrieves: int = 0
    #: Status calls (``{"Done": bool}``).
    statuses: int = 0
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

    def _send(self, reply: Reply) -> None:
        self.send_response(reply.status)
        self.send_header("Content-Type", "application/json")
        for name, value in reply.headers.items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(reply.content)))
        if self.close_connection:
            # Say so: a client that pools the connection would otherwise reuse a dead one.
            self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(reply.content)

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

    def _answer(self, method: str, body: bytes) -> None:
        stub = self.server.stub
        parts = urlsplit(self.path)
        if stub.latency:
            time.sleep(stub.latency)
        authorization = self.headers.get("Authorization")
        if (method, parts.path) == ("POST", TOKEN_PATH):
            content_type = self.headers.get("Content-Type")
            self._send(stub.token(authorization, content_type, body))
        elif (method, parts.path) == ("POST", API_PATH):
            self._send(stub.create(authorization, body))
        elif (method, parts.path) == ("GET", API_PATH):
            self._send(stub.retrieve(authorization, parts.query))
        elif (method, parts.path) == ("GET", "/api" + vocabulary.STATUS_PATH):
            self._send(stub.status(authorization, parts.query))
        else:
            self._send(Reply(404, {"message": "not found", "code": "NOT_FOUND"}))

    # -- routes ----------------------------------------------------------
    def do_POST(self) -> None:
        body = self._body()
        if not self._hang_if_told():
            self._answer("POST", body)

    def do_GET(self) -> None:
        if not self._hang_if_told():
            self._answer("GET", b"")


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
        person: Person | None = SAMPLE,
    ) -> None:
        self.token_lifetime = token_lifetime
        #: Who identifies in every session created; ``None``: nobody, the caller makes the
        #: person act at the broker (``stub.broker``, under ``stub.lock``).
        self.person = person
        self.latency = latency
        self.max_hang = max_hang
        self.lock = threading.Lock()
        self.counters = Counters()
        # Sessions and tokens outlive a restart (the same store), as at a real broker.
        self.broker = SandboxBroker(
            MemoryStore(),
            client_id=CLIENT_ID,
            client_secret=CLIENT_SECRET,
            login_url=lambda request_id: f"{self.url}/broker/{request_id}",
            token_lifetime=token_lifetime,
            # Short, and recognisable in a test's assertions and a benchmark's logs.
            tokens=lambda: "stub." + secrets.token_urlsafe(16),
        )
        #: request id -> (external reference, the Success URL the person is sent to).
        self.sessions: dict[str, tuple[str, str]] = {}
        self.hanging = threading.Event()
        self.recovered = threading.Event()
        self._sockets: list[socket.socket] = []
        self._port = port
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    # -- the broker's answers, counted (called by the handler threads) --------------
    def token(self, authorization: str | None, content_type: str | None, body: bytes) -> Reply:
        with self.lock:
            reply = self.broker.token(
                authorization=authorization, content_type=content_type, body=body
            )
            if reply.status == 200:
                self.counters.token_requests += 1
                self.counters.token_times.append(time.time())
        return reply

    def create(self, authorization: str | None, body: bytes) -> Reply:
        with self.lock:
            reply = self.broker.create_session(authorization=authorization, body=body)
            if self._counted_call(authorization, reply) and reply.status == 200:
                request_id = reply.body["RequestId"]
                session = self.broker.session(request_id)
                success_url = self.broker.identify(request_id, self.person) if self.person else ""
                self.counters.creates += 1
                external = session.external_reference if session else None
                self.sessions[request_id] = (external or "", success_url)
        return reply

    def retrieve(self, authorization: str | None, query: str) -> Reply:
        with self.lock:
            reply = self.broker.get_session(authorization=authorization, query=query)
            if self._counted_call(authorization, reply):
                self.counters.retrieves += 1
        return reply

    def status(self, authorization: str | None, query: str) -> Reply:
        with self.lock:
            reply = self.broker.session_status(authorization=authorization, query=query)
            if self._counted_call(authorization, reply):
                self.counters.statuses += 1
        return reply

    def _counted_call(self, authorization: str | None, reply: Reply) -> bool:
        """Count an API call: refused for its token, refused as malformed, or served."""
        c = self.counters
        if reply.status == 401:
            c.rejected_tokens += 1
            return False
        if reply.status == 400:
            c.bad_requests += 1
            return False
        called = time.time()
        c.tokens_used.add((authorization or "").removeprefix("Bearer "))
        c.last_call = called
        c.call_times.append(called)
        if c.first_call is None:
            c.first_call = called
        return True

    def identified_session(self, external_reference: str = "seeded") -> str:
        """A session the sample person identified in, made without HTTP (nothing counted).

        For callers that retrieve without creating first; returns its request id.
        """
        urls = {
            kind: f"https://site.test/{kind.lower()}/" for kind in ("Success", "Abort", "Error")
        }
        body = json.dumps({"ReturnUrls": urls, "ExternalReference": external_reference})
        with self.lock:
            issued = self.broker.token(
                authorization=None,
                content_type="application/x-www-form-urlencoded",
                body=urlencode(
                    {
                        "grant_type": "client_credentials",
                        "scope": "identify",
                        "client_id": CLIENT_ID,
                        "client_secret": CLIENT_SECRET,
                    }
                ).encode(),
            )
            bearer = f"Bearer {issued.body['access_token']}"
            created = self.broker.create_session(authorization=bearer, body=body.encode())
            request_id: str = created.body["RequestId"]
            self.broker.identify(request_id, SAMPLE)
        return request_id

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
            "GET_SOCIAL_SECURITY_NUMBER": True,
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
