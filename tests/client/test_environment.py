"""The environment's proxies reach the broker calls, read once per host by the client.

Against real servers on loopback: the broker stub (tests/production/stub.py), and a
"proxy" that records the first line of every request it receives, then answers 502. A call
that went through the proxy shows in its record; one that did not shows in the stub's
counters.
"""

from __future__ import annotations

import socketserver
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from django_eid.client import EidClient, ReturnUrls
from django_eid.exceptions import EidUnavailable
from tests.production.stub import BrokerStub

URLS = ReturnUrls(
    success="https://site.test/eid/return/r/success/?requestId=[1]&externalId=[2]",
    abort="https://site.test/eid/return/r/abort/?requestId=[1]&externalId=[2]",
    error="https://site.test/eid/return/r/error/?status=[0]",
)
PROXY_VARIABLES = (
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "ALL_PROXY",
    "NO_PROXY",
    "REQUEST_METHOD",  # a CGI environment makes urllib ignore HTTP_PROXY
)


class Recorder(socketserver.ThreadingTCPServer):
    """A proxy that proxies nothing: it records each request line and answers 502."""

    daemon_threads = True
    allow_reuse_address = True

    def __init__(self) -> None:
        self.lines: list[str] = []
        super().__init__(("127.0.0.1", 0), _RecordingHandler)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


class _RecordingHandler(socketserver.StreamRequestHandler):
    def handle(self) -> None:
        assert isinstance(self.server, Recorder)
        self.server.lines.append(self.rfile.readline().decode("latin-1").strip())
        self.wfile.write(
            b"HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
        )


@pytest.fixture
def recorder() -> Iterator[Recorder]:
    server = Recorder()
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05})
    thread.start()
    yield server
    server.shutdown()
    server.server_close()
    thread.join(timeout=5)


@pytest.fixture
def stub() -> Iterator[BrokerStub]:
    with BrokerStub() as running:
        yield running


@pytest.fixture
def clean_environment(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    for name in PROXY_VARIABLES:
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.lower(), raising=False)
    return monkeypatch


def _client(settings: Any, **eid: Any) -> EidClient:
    settings.DJANGO_EID = eid
    return EidClient()


def test_https_proxy_from_the_environment_carries_the_calls(
    settings: Any, recorder: Recorder, clean_environment: pytest.MonkeyPatch
) -> None:
    clean_environment.setenv("HTTPS_PROXY", recorder.url)
    client = _client(
        settings,
        CLIENT_ID="c",
        CLIENT_SECRET="s" * 20,
        BASE_URL="https://api.broker.test/api",
        AUTH_URL="https://auth.broker.test/auth",
        TIMEOUT=3,
    )
    with pytest.raises(EidUnavailable):
        client.create_session(return_urls=URLS, external_reference="x" * 32)
    # The token request went to the proxy, as a tunnel to the broker's token host.
    assert recorder.lines
    assert {line.split(" ")[:2][0] for line in recorder.lines} == {"CONNECT"}
    assert all(line.startswith("CONNECT auth.broker.test:443 ") for line in recorder.lines)


def test_http_proxy_from_the_environment_reaches_the_broker(
    settings: Any, stub: BrokerStub, clean_environment: pytest.MonkeyPatch
) -> None:
    # The stub as the proxy: the broker's host name does not resolve; only a proxy reaches it.
    clean_environment.setenv("HTTP_PROXY", stub.url)
    client = _client(
        settings,
        **stub.settings(
            BASE_URL="http://broker.invalid/api", AUTH_URL="http://broker.invalid/auth"
        ),
    )
    created = client.create_session(return_urls=URLS, external_reference="x" * 32)
    assert client.get_session(created.request_id).request_id == created.request_id
    seen = stub.snapshot()
    assert (seen["token_requests"], seen["creates"], seen["retrieves"]) == (1, 1, 1)


def test_no_proxy_from_the_environment_is_honoured(
    settings: Any, stub: BrokerStub, recorder: Recorder, clean_environment: pytest.MonkeyPatch
) -> None:
    clean_environment.setenv("HTTP_PROXY", recorder.url)
    clean_environment.setenv("NO_PROXY", "localhost,127.0.0.1")
    client = _client(settings, **stub.settings())
    created = client.create_session(return_urls=URLS, external_reference="x" * 32)
    client.get_session(created.request_id)
    assert recorder.lines == []
    assert stub.snapshot()["creates"] == 1


def test_the_environment_is_read_once_per_host_by_a_client(
    settings: Any, stub: BrokerStub, recorder: Recorder, clean_environment: pytest.MonkeyPatch
) -> None:
    """Read once, not per call: a proxy named after the client's first call to the host is
    not used by that client; the next client (a new process, ``reset_client``) uses it."""
    client = _client(settings, **stub.settings(TIMEOUT=3))
    created = client.create_session(return_urls=URLS, external_reference="x" * 32)
    clean_environment.setenv("HTTP_PROXY", recorder.url)
    client.get_session(created.request_id)
    assert recorder.lines == []
    with pytest.raises(EidUnavailable, match="502"):
        EidClient().get_session(created.request_id)
    assert recorder.lines
    assert all(line.startswith(f"GET {stub.url}/api/") for line in recorder.lines)
