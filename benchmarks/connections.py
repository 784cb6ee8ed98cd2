"""2. Connection reuse: TCP connections the broker accepts over N identifications.

T worker threads each run N identifications (create + retrieve, plus the
first token request) through :func:`django_eid.client.get_client`, the
per-thread client the views use. The stub counts the TCP connections it
accepts. Ideal: one per worker thread (the token endpoint and the API share a
host here; with two hosts it is one per host and thread).

Compared, in the same run, with a client that opens a connection per call
(``Connection: close`` on every request, what a fresh ``requests`` call or a
new Session per call costs).
"""

from __future__ import annotations

import os
import threading
import time
from typing import Any

import requests

from benchmarks.common import header, row, table_header
from tests.production.stub import BrokerStub
from tests.production.workers import configure_django

THREADS = int(os.environ.get("BENCH_CONNECTION_THREADS", "4"))


def _urls() -> Any:
    from django_eid.client import ReturnUrls

    return ReturnUrls(
        success="https://site.test/eid/return/r/success/?requestId=[1]&externalId=[2]",
        abort="https://site.test/eid/return/r/abort/?requestId=[1]&externalId=[2]",
        error="https://site.test/eid/return/r/error/?status=[0]",
    )


def _drive(stub: BrokerStub, per_thread: int, make_client: Any) -> dict[str, Any]:
    from django.conf import settings

    from django_eid.conf import eid_settings

    settings.DJANGO_EID = stub.settings(TIMEOUT=5)
    eid_settings.clear()  # a direct assignment sends no setting_changed
    stub.reset_counters()
    urls = _urls()
    errors: list[str] = []
    timings: list[float] = []
    lock = threading.Lock()

    def work() -> None:
        client = make_client()
        for i in range(per_thread):
            started = time.perf_counter()
            try:
                created = client.create_session(return_urls=urls, external_reference=f"c{i}")
                client.get_session(created.request_id)
            except Exception as err:
                with lock:
                    errors.append(f"{type(err).__name__}: {err}")
            else:
                with lock:
                    timings.append(time.perf_counter() - started)

    threads = [threading.Thread(target=work) for _ in range(THREADS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    seen = stub.snapshot()
    timings.sort()
    return {
        "threads": THREADS,
        "identifications": len(timings),
        "errors": len(errors),
        "connections": seen["connections"],
        "token_requests": seen["token_requests"],
        "http_calls": seen["token_requests"] + seen["creates"] + seen["retrieves"],
        "error_samples": errors[:3],
        "median_ms": round(timings[len(timings) // 2] * 1000, 2) if timings else None,
    }


def run(quick: bool = False) -> dict[str, Any]:
    header("2. Connection reuse (TCP connections accepted by the broker stub)")
    per_thread = 25 if quick else 100
    configure_django({})
    from django_eid.client import EidClient, get_client

    class ClosingClient(EidClient):
        """A client that asks for a new connection per call."""

        def create_http_session(self) -> requests.Session:
            session = super().create_http_session()
            session.headers["Connection"] = "close"
            return session

    with BrokerStub() as stub:
        # Each thread's get_client() is built fresh for the new settings (generation).
        reused = _drive(stub, per_thread, get_client)
        closing = _drive(stub, per_thread, ClosingClient)
    table_header("connections", "ideal")
    ideal = THREADS
    row(
        f"django-eid get_client(), {THREADS} threads",
        reused["connections"],
        ideal,
        f"{reused['http_calls']} HTTP calls, {reused['identifications']} idents, "
        f"median {reused['median_ms']} ms/ident",
    )
    row(
        "connection per call (Connection: close)",
        closing["connections"],
        ideal,
        f"{closing['http_calls']} HTTP calls, median {closing['median_ms']} ms/ident",
    )
    return {
        "per_thread": per_thread,
        "ideal_connections": ideal,
        "keep_alive": reused,
        "connection_per_call": closing,
    }
