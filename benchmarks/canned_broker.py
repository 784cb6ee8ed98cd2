"""A broker that answers fixed v1 answers on loopback, in a process of its own (benchmark 3).

``python -m benchmarks.canned_broker PORT`` serves, over HTTP/1.1 keep-alive:

* ``POST /auth/oauth/connect/token``: one access token, valid for an hour;
* ``POST /api/identification/session``: a new ``RequestId`` (a counter) and, as ``Url``,
  the session's Success return URL already filled in (``[1]`` the ``RequestId``, ``[2]``
  the ``ExternalReference``), so that following it is the person coming back identified;
* ``GET /api/identification/session?requestId=...``: the sandbox's record of its first
  built-in person, ``SUCCESS``, under that ``RequestId``.

No checks, no state beyond the counter: what it costs is its own process's, and the
process measuring the app pays only for the round trips, as it would to a real broker.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import sys
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

from django_eid import vocabulary
from django_eid.sandbox.broker import record_of
from django_eid.sandbox.persons import builtin_persons

TOKEN_PATH = "/auth" + vocabulary.TOKEN_PATH
API_PATH = "/api" + vocabulary.SESSION_PATH
TOKEN = b'{"access_token": "canned-access-token", "token_type": "Bearer", "expires_in": 3600}'
_PLACEHOLDER = "RID-PLACEHOLDER"
#: The record, split where the RequestId goes (ids are [0-9a-z-]: nothing to escape).
_RECORD = json.dumps(record_of(builtin_persons().NORWEGIAN, _PLACEHOLDER)).split(_PLACEHOLDER)
_ids = itertools.count(1)


_session: dict[str, Any] = {}


def http() -> Any:
    """The bare reference views' broker client: one pooled ``requests.Session``, as a bare
    site would hold one (benchmarks 3 and 8)."""
    import requests

    if "session" not in _session:
        _session["session"] = requests.Session()
    return _session["session"]


@contextlib.contextmanager
def serving(log_name: str) -> Iterator[str]:
    """The canned broker in a process of its own on a free loopback port, for the block;
    its base URL. Its output goes to ``benchmarks/results/<log_name>``."""
    from benchmarks.common import RESULTS, free_port, server

    port = free_port()
    url = f"http://127.0.0.1:{port}"
    RESULTS.mkdir(exist_ok=True)
    command = [sys.executable, "-m", "benchmarks.canned_broker", str(port)]
    with server(command, dict(os.environ), RESULTS / log_name, probe=url + "/"):
        yield url


@contextlib.contextmanager
def in_process(url: str, urlconf: str, **eid: Any) -> Iterator[None]:
    """Django set up in this process against the canned broker at ``url`` (``DJANGO_EID``
    of :func:`settings` with ``eid``), ``urlconf`` the site's URLs, and a test database of
    its own, for the block (benchmarks 3 and 8)."""
    import django
    from django.conf import settings as django_settings

    django.setup()
    from django.test.utils import (
        setup_databases,
        setup_test_environment,
        teardown_databases,
        teardown_test_environment,
    )
    from django.urls import clear_url_caches

    from django_eid.client import reset_client
    from django_eid.conf import eid_settings

    django_settings.ROOT_URLCONF = urlconf
    # Another benchmark of this process may have pointed django-eid elsewhere.
    django_settings.DJANGO_EID = settings(url, **eid)
    eid_settings.clear()
    reset_client()
    clear_url_caches()
    setup_test_environment()
    old = setup_databases(verbosity=0, interactive=False)
    try:
        yield
    finally:
        teardown_databases(old, verbosity=0)
        # The next benchmark of this process sets it up again.
        teardown_test_environment()
        reset_client()


def settings(url: str, **extra: Any) -> dict[str, Any]:
    """``DJANGO_EID`` for a client of the canned broker at ``url``."""
    return {
        "CLIENT_ID": "bench-client",
        "CLIENT_SECRET": "bench-secret-0123456789",
        "BASE_URL": f"{url}/api",
        "AUTH_URL": f"{url}/auth",
        "SCOPES": ["identify"],
        "GET_SOCIAL_SECURITY_NUMBER": True,
        **extra,
    }


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # Headers and body go out in separate writes: without TCP_NODELAY the body waits for
    # the client's delayed ACK (40 ms on Linux) and every call would measure that.
    disable_nagle_algorithm = True

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _reply(self, status: int, body: bytes) -> None:
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        path = urlsplit(self.path).path
        if path == TOKEN_PATH:
            self._reply(200, TOKEN)
        elif path == API_PATH:
            request = json.loads(body)
            request_id = f"canned-{next(_ids):012d}"
            url = (
                request["ReturnUrls"]["Success"]
                .replace("[1]", request_id)
                .replace("[2]", request["ExternalReference"])
            )
            self._reply(200, json.dumps({"Url": url, "RequestId": request_id}).encode())
        else:
            self._reply(404, b'{"message": "not found"}')

    def do_GET(self) -> None:
        parts = urlsplit(self.path)
        if parts.path == API_PATH:
            request_id = parse_qs(parts.query)["requestId"][0]
            self._reply(200, request_id.join(_RECORD).encode())
        else:
            self._reply(404, b'{"message": "not found"}')


def main(port: int) -> None:
    server = ThreadingHTTPServer(("127.0.0.1", port), _Handler)
    server.daemon_threads = True
    server.serve_forever()


if __name__ == "__main__":
    main(int(sys.argv[1]))
