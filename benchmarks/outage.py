"""5. Broker outage: the broker stops answering, then dies, then comes back.

The example project runs under gunicorn (``WORKERS`` x ``THREADS``) with
``DJANGO_EID["TIMEOUT"] = 2`` against the broker stub of this process, whose
tokens live 4 s (so the token runs out during the outage, too). One driver
thread per app thread runs complete identifications back to back (start, then
the success callback as the broker would send the user back), through four
phases:

1. ``normal``: the stub answers;
2. ``hang``: the stub accepts connections and reads requests but never answers;
3. ``killed``: the stub is gone (connections refused);
4. ``back``: the stub listens again on the same port.

Measured: the longest time any request held an app thread in each phase
(reference: the configured TIMEOUT), the answers users got (the error page,
502/503), and how long after the broker came back the first identification
succeeded (no restart of the app).
"""

from __future__ import annotations

import re
import threading
import time
from collections import Counter
from typing import Any

import requests

from benchmarks.common import (
    RESULTS,
    drop_database,
    free_port,
    header,
    log,
    row,
    server,
    table_header,
    with_database,
    with_redis_db,
)
from benchmarks.load import app_env, flush_redis, gunicorn, prepare_database
from tests.production.stub import CLIENT_ID, CLIENT_SECRET, BrokerStub

WORKERS, THREADS = 2, 3
TIMEOUT = 2.0
LIFETIME = 4
PHASES = (("normal", 3.0), ("hang", 6.0), ("killed", 3.0), ("back", 5.0))
ERROR_TEXT = "could not be reached"


class Driver:
    def __init__(self, base: str, stub: BrokerStub, username: str) -> None:
        self.base = base
        self.stub = stub
        self.http = requests.Session()
        self.username = username
        self.events: list[dict[str, Any]] = []
        self.phase = "normal"
        self.stop = threading.Event()

    def login(self) -> None:
        self.http.get(f"{self.base}/login/", timeout=30)
        response = self.http.post(
            f"{self.base}/login/",
            data={
                "username": self.username,
                "password": "bench-password",
                "csrfmiddlewaretoken": self.http.cookies.get("csrftoken", ""),
            },
            allow_redirects=False,
            timeout=30,
        )
        assert response.status_code == 302, response.status_code

    def record(
        self, kind: str, started: float, phase: str, response: requests.Response | None
    ) -> None:
        body = response.text if response is not None else ""
        self.events.append(
            {
                "phase": phase,
                "kind": kind,
                "at": started,
                "seconds": time.monotonic() - started,
                "status": response.status_code if response is not None else None,
                "error_page": ERROR_TEXT in body,
            }
        )

    def run(self) -> None:
        while not self.stop.is_set():
            started, phase = time.monotonic(), self.phase
            try:
                response = self.http.post(
                    f"{self.base}/eid/start/",
                    data={
                        "display": "redirect",
                        "csrfmiddlewaretoken": self.http.cookies.get("csrftoken", ""),
                    },
                    allow_redirects=False,
                    timeout=60,
                )
            except requests.RequestException:
                self.record("start", started, phase, None)
                continue
            self.record("start", started, phase, response)
            if response.status_code != 302:
                time.sleep(0.2)
                continue
            request_id = response.headers["Location"].rsplit("/", 1)[-1]
            external = self.stub.external_reference(request_id)
            reference = re.search(r"/return/([^/]+)/success/", self._success_url(request_id))
            if external is None or reference is None:
                continue
            started, phase = time.monotonic(), self.phase
            try:
                response = self.http.get(
                    f"{self.base}/eid/return/{reference.group(1)}/success/",
                    params={"requestId": request_id, "externalId": external},
                    allow_redirects=False,
                    timeout=60,
                )
            except requests.RequestException:
                self.record("callback", started, phase, None)
                continue
            self.record("callback", started, phase, response)
            if response.status_code >= 500:
                time.sleep(0.2)

    def _success_url(self, request_id: str) -> str:
        with self.stub.lock:
            entry = self.stub.sessions.get(request_id)
        return entry[1] if entry else ""


def _server_side_times(path: Any) -> dict[str, Any]:
    """How long app threads held each flow request (gunicorn's own timing, no queueing)."""
    times = []
    try:
        lines = path.read_text().splitlines()
    except OSError:
        lines = []
    for line in lines:
        parts = line.split()
        if len(parts) == 4 and parts[1].startswith("/eid/") and parts[3].isdigit():
            times.append(int(parts[3]) / 1e6)
    return {
        "requests": len(times),
        "max": round(max(times, default=0.0), 2),
        "over_timeout": sum(1 for t in times if t > TIMEOUT + 0.25),
    }


def run(quick: bool = False, services: dict[str, str] | None = None) -> dict[str, Any]:
    header("5. Broker outage (TIMEOUT 2 s): hang, kill, come back")
    assert services is not None
    database_url = with_database(services["DATABASE_URL"], "eid_bench_outage")
    app_redis = with_redis_db(services["EID_TEST_REDIS_URL"], 4)
    flush_redis(app_redis)
    drivers_count = WORKERS * THREADS
    prepare_database(database_url, app_redis, drivers_count)
    port = free_port()
    stub = BrokerStub(token_lifetime=LIFETIME, max_hang=30)
    stub.start()
    timeline: list[tuple[str, float]] = []
    try:
        env = app_env(database_url, app_redis, f"{stub.url}/api", timeout=TIMEOUT)
        env.update(
            EID_AUTH_URL=f"{stub.url}/auth",
            EID_CLIENT_ID=CLIENT_ID,
            EID_CLIENT_SECRET=CLIENT_SECRET,
        )
        base = f"http://127.0.0.1:{port}"
        access_log = RESULTS / "outage_access.log"
        access_log.unlink(missing_ok=True)
        with server(
            [
                *gunicorn("example_project.wsgi:application", port, WORKERS, THREADS),
                "--access-logfile",
                str(access_log),
                # Method, path, status, and the time the worker thread spent on it (µs).
                "--access-logformat",
                "%(m)s %(U)s %(s)s %(D)s",
            ],
            env,
            RESULTS / "outage_app.log",
            f"{base}/login/",
        ):
            drivers = [Driver(base, stub, f"bench{i}") for i in range(drivers_count)]
            for d in drivers:
                d.login()
            threads = [threading.Thread(target=d.run, daemon=True) for d in drivers]
            for t in threads:
                t.start()
            for phase, seconds in PHASES:
                for d in drivers:
                    d.phase = phase
                timeline.append((phase, time.monotonic()))
                if phase == "hang":
                    stub.hang()
                elif phase == "killed":
                    stub.stop()
                elif phase == "back":
                    stub.restart()
                time.sleep(seconds)
            for d in drivers:
                d.stop.set()
            for t in threads:
                t.join(timeout=30)
            stuck = sum(t.is_alive() for t in threads)
    finally:
        stub.stop()
        drop_database(database_url)
        flush_redis(app_redis)

    events = [e for d in drivers for e in d.events]
    held = _server_side_times(access_log)
    back_at = dict(timeline)["back"]
    phases: dict[str, Any] = {}
    for phase, _ in PHASES:
        mine = [e for e in events if e["phase"] == phase]
        statuses = Counter(str(e["status"]) for e in mine)
        failed = [e for e in mine if e["status"] not in (302,)]
        phases[phase] = {
            "requests": len(mine),
            "statuses": dict(statuses),
            "max_seconds": round(max((e["seconds"] for e in mine), default=0.0), 2),
            "slowest": sorted(
                ({k: e[k] for k in ("kind", "status", "seconds")} for e in mine),
                key=lambda e: -e["seconds"],
            )[:3],
            "failed_with_error_page": sum(
                1 for e in failed if e["status"] in (502, 503) and e["error_page"]
            ),
            "failed_otherwise": sum(
                1 for e in failed if not (e["status"] in (502, 503) and e["error_page"])
            ),
            "identifications": sum(
                1 for e in mine if e["kind"] == "callback" and e["status"] == 302
            ),
        }
    successes_after = sorted(
        e["at"] + e["seconds"]
        for e in events
        if e["kind"] == "callback" and e["status"] == 302 and e["at"] >= back_at
    )
    recovery = round(successes_after[0] - back_at, 2) if successes_after else None
    outage = [e for e in events if e["phase"] in ("hang", "killed")]
    result = {
        "timeout_s": TIMEOUT,
        "token_lifetime_s": LIFETIME,
        "app": f"{WORKERS} workers x {THREADS} threads",
        "phases": phases,
        "phase_starts_s": {name: round(at - timeline[0][1], 2) for name, at in timeline},
        "max_seen_by_users_s_during_outage": round(
            max((e["seconds"] for e in outage), default=0.0), 2
        ),
        "max_thread_held_s": held,
        "recovered_after_s": recovery,
        "drivers_stuck": stuck,
        "stub": {
            k: v for k, v in stub.snapshot().items() if k not in ("token_times", "call_times")
        },
        "events": sorted(
            (
                {
                    "t": round(e["at"] - timeline[0][1], 2),
                    "s": round(e["seconds"], 2),
                    "kind": e["kind"],
                    "status": e["status"],
                }
                for e in events
                if e["phase"] in ("hang", "killed")
            ),
            key=lambda e: e["t"],
        ),
    }
    table_header("max wait s", "TIMEOUT")
    for phase, _ in PHASES:
        p = phases[phase]
        row(
            f"{phase}: {p['requests']} requests",
            p["max_seconds"],
            TIMEOUT,
            f"statuses {p['statuses']}; error page {p['failed_with_error_page']}, "
            f"other failures {p['failed_otherwise']}; {p['identifications']} identified",
        )
    row(
        "longest request in an app thread (all phases)",
        held["max"],
        TIMEOUT,
        f"gunicorn access log; {held['over_timeout']} of {held['requests']} over TIMEOUT + 0.25 s",
    )
    row("first identification after the broker is back, s", recovery, "", "no restart")
    log(f"  driver threads stuck at the end: {stuck}")
    return result
