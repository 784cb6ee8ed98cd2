"""4. Load: the example project under gunicorn, the sandbox broker in another gunicorn, locust.

- The site: the example project (``benchmarks.load_settings``, role ``app``),
  gunicorn with ``APP_WORKERS`` worker processes x ``APP_THREADS`` threads, on
  PostgreSQL (sessions in the database) with the token cache on Redis.
- The broker: the same project serving only the embedded sandbox broker
  (``BENCH_ROLE=broker``), in a separate gunicorn, with ``SANDBOX_LATENCY``
  (default 50 ms) on every API call, its state in Redis; a WSGI wrapper
  counts token, create and retrieve calls in Redis.
- The load: locust, headless, ``USERS`` simulated users, each logged in once,
  running complete identifications back to back (no think time).

Reference (ideal): an identification holds an app thread for at least the two
broker calls (2 x latency), so the site cannot exceed
``min(users, app threads) / (2 x latency)`` identifications per second, and no
user sees a flow faster than 2 x latency.
"""

from __future__ import annotations

import contextlib
import csv
import json
import os
import subprocess
import time
from pathlib import Path
from typing import Any

from benchmarks.common import (
    PYTHON,
    RESULTS,
    ROOT,
    drop_database,
    free_port,
    header,
    log,
    process_tree_cpu,
    recreate_database,
    row,
    server,
    table_header,
    with_database,
    with_redis_db,
)

APP_WORKERS = 3
APP_THREADS = 4
BROKER_WORKERS = 2
BROKER_THREADS = 8
LATENCY = 0.05
TOKEN_LIFETIME = 10  # seconds, so that renewals happen during the run
#: Persistent database connections, as docs/deployment.md recommends (0: one per request).
CONN_MAX_AGE = int(os.environ.get("BENCH_CONN_MAX_AGE", "60"))
SECRET_KEY = "benchmark-secret-key-0123456789-abcdefghijklmnopqrstuvwxyz"
CLIENT_ID, CLIENT_SECRET = "sandbox-client", "sandbox-secret"
BIN = Path(PYTHON).parent


def base_env(database_url: str, redis_url: str) -> dict[str, str]:
    if CONN_MAX_AGE:
        database_url += f"?conn_max_age={CONN_MAX_AGE}&conn_health_checks=True"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("EID_", "DJANGO_"))}
    env.update(
        DJANGO_SETTINGS_MODULE="benchmarks.load_settings",
        PYTHONPATH=str(ROOT),
        ENV_FILE="/dev/null",  # never a developer's example_project/.env
        DEBUG="False",
        SECRET_KEY=SECRET_KEY,
        ALLOWED_HOSTS="127.0.0.1,localhost",
        SESSION_COOKIE_SECURE="False",
        DATABASE_URL=database_url,
        BENCH_PASSWORD="bench-password",
    )
    env.pop("CACHE_URL", None)
    env["REDIS_URL"] = redis_url
    return env


def app_env(database_url: str, redis_url: str, broker: str, timeout: float = 10) -> dict[str, str]:
    env = base_env(database_url, redis_url)
    env.update(
        BENCH_ROLE="app",
        EID_BASE_URL=broker,
        EID_AUTH_URL=broker,
        EID_CLIENT_ID=CLIENT_ID,
        EID_CLIENT_SECRET=CLIENT_SECRET,
        BENCH_EID_TIMEOUT=str(timeout),
    )
    return env


def gunicorn(app: str, port: int, workers: int, threads: int) -> list[str]:
    return [
        str(BIN / "gunicorn"),
        app,
        "--bind",
        f"127.0.0.1:{port}",
        "--workers",
        str(workers),
        "--worker-class",
        "gthread",
        "--threads",
        str(threads),
        "--timeout",
        "60",
        "--graceful-timeout",
        "5",
        # Longer than any pause of a simulated user: gunicorn's default (2 s) closes
        # idle keep-alive connections just as a client reuses them ("connection
        # reset", a load-driver artefact; in production a proxy holds the browsers'
        # connections).
        "--keep-alive",
        "30",
        "--log-level",
        "warning",
    ]


def prepare_database(database_url: str, redis_url: str, users: int) -> None:
    recreate_database(database_url)
    env = app_env(database_url, redis_url, "http://127.0.0.1:1/eid-sandbox")
    for args in (
        ["manage.py", "migrate", "--noinput", "-v", "0"],
        ["-m", "benchmarks.load_users", str(users)],
    ):
        done = subprocess.run(
            [PYTHON, *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300
        )
        if done.returncode != 0:
            raise RuntimeError(f"{args} failed: {done.stderr[-2000:]}")


def flush_redis(url: str) -> None:
    import redis

    redis.Redis.from_url(url).flushdb()


def read_counters(url: str) -> dict[str, int]:
    import redis

    r = redis.Redis.from_url(url)
    return {k: int(r.get(f"bench:broker:{k}") or 0) for k in ("token", "create", "retrieve")}


def service_pids() -> dict[str, int]:
    """PIDs of the PostgreSQL postmaster and Redis of ``.ci/services.sh`` (if found)."""
    base = Path(os.environ.get("EID_SERVICES_DIR", "/tmp/django-eid-services"))
    out: dict[str, int] = {}
    for name, path in (
        ("postgres", base / "pg/data/postmaster.pid"),
        ("redis", base / "redis/redis.pid"),
    ):
        with contextlib.suppress(OSError, ValueError, IndexError):
            out[name] = int(path.read_text().split()[0])
    return out


def db_counts(database_url: str) -> dict[str, int]:
    import psycopg

    from benchmarks.common import postgres_params

    params = postgres_params(database_url)
    params["dbname"] = database_url.rsplit("/", 1)[-1]
    with psycopg.connect(**params) as conn:
        rows = conn.execute(
            "SELECT status, count(*) FROM django_eid_identification GROUP BY status"
        ).fetchall()
    return {status: count for status, count in rows}


def read_locust(prefix: Path) -> dict[str, dict[str, Any]]:
    stats = {}
    with open(f"{prefix}_stats.csv", newline="") as fh:
        for entry in csv.DictReader(fh):
            stats[f"{entry['Type']} {entry['Name']}".strip()] = entry
    return stats


def run(quick: bool = False, services: dict[str, str] | None = None) -> dict[str, Any]:
    header("4. Load: example project under gunicorn, sandbox broker at 50 ms, locust")
    assert services is not None
    users = 12 if quick else 24
    duration = 15 if quick else 40
    database_url = with_database(services["DATABASE_URL"], "eid_bench_load")
    app_redis = with_redis_db(services["EID_TEST_REDIS_URL"], 2)
    broker_redis = with_redis_db(services["EID_TEST_REDIS_URL"], 3)
    RESULTS.mkdir(exist_ok=True)
    for url in (app_redis, broker_redis):
        flush_redis(url)
    prepare_database(database_url, app_redis, users)
    app_port, broker_port = free_port(), free_port()
    broker_url = f"http://127.0.0.1:{broker_port}/eid-sandbox"
    broker_env = base_env(database_url, broker_redis)
    broker_env.update(
        BENCH_ROLE="broker",
        # The sandbox serves only the site whose broker it is: itself, at this port.
        EID_SANDBOX_URL=broker_url,
        BENCH_COUNTER_REDIS_URL=broker_redis,
        BENCH_SANDBOX_LATENCY=str(LATENCY),
        BENCH_SANDBOX_TOKEN_LIFETIME=str(TOKEN_LIFETIME),
    )
    env = app_env(database_url, app_redis, broker_url)
    prefix = RESULTS / "load"
    locust_cmd = [
        str(BIN / "locust"),
        "-f",
        str(ROOT / "benchmarks" / "locustfile.py"),
        "--headless",
        "--users",
        str(users),
        "--spawn-rate",
        str(users),
        "--run-time",
        f"{duration}s",
        "--stop-timeout",
        "15",
        "--host",
        f"http://127.0.0.1:{app_port}",
        "--csv",
        str(prefix),
        "--only-summary",
        "--loglevel",
        "WARNING",
    ]
    summary_path = RESULTS / "load_locust_summary.json"
    summary_path.unlink(missing_ok=True)
    locust_env = {**env, "BENCH_USERS": str(users), "BENCH_LOCUST_SUMMARY": str(summary_path)}
    try:
        with (
            server(
                gunicorn(
                    "benchmarks.broker_wsgi:application",
                    broker_port,
                    BROKER_WORKERS,
                    BROKER_THREADS,
                ),
                broker_env,
                RESULTS / "load_broker.log",
                f"{broker_url}/oauth/connect/token",
            ) as broker_proc,
            server(
                gunicorn("example_project.wsgi:application", app_port, APP_WORKERS, APP_THREADS),
                env,
                RESULTS / "load_app.log",
                f"http://127.0.0.1:{app_port}/login/",
            ) as app_proc,
        ):
            flush_redis(broker_redis)  # counters from the probe, if any
            pids = service_pids()
            cpu_before = {
                "app": process_tree_cpu(app_proc.pid),
                "broker": process_tree_cpu(broker_proc.pid),
                **{k: process_tree_cpu(p) for k, p in pids.items()},
            }
            log(
                f"  {users} users for {duration} s; app {APP_WORKERS} workers x {APP_THREADS} threads,"
                f" broker {BROKER_WORKERS} x {BROKER_THREADS}, latency {LATENCY * 1000:.0f} ms"
            )
            started = time.monotonic()
            locust_cpu = 0.0
            with open(RESULTS / "load_locust.log", "wb") as out:
                locust = subprocess.Popen(
                    locust_cmd, cwd=ROOT, env=locust_env, stdout=out, stderr=subprocess.STDOUT
                )
                deadline = time.monotonic() + duration + 120
                while locust.poll() is None and time.monotonic() < deadline:
                    # Sampled while it runs (a reaped process has no /proc entry).
                    locust_cpu = max(locust_cpu, process_tree_cpu(locust.pid))
                    time.sleep(1)
                if locust.poll() is None:
                    locust.kill()
                    raise RuntimeError("locust did not finish in time")
            wall = time.monotonic() - started
            cpu_after = {
                "app": process_tree_cpu(app_proc.pid),
                "broker": process_tree_cpu(broker_proc.pid),
                **{k: process_tree_cpu(p) for k, p in pids.items()},
            }
            counters = read_counters(broker_redis)
    except BaseException:
        drop_database(database_url)
        raise
    try:
        stored = db_counts(database_url)
    finally:
        drop_database(database_url)
    stats = read_locust(prefix)
    flow = stats.get("FLOW identification", {})
    completed = int(flow.get("Request Count", 0) or 0)
    failures = sum(
        int(v.get("Failure Count", 0) or 0) for k, v in stats.items() if k != "Aggregated"
    )
    requests_total = int(stats.get("Aggregated", {}).get("Request Count", 0) or 0)
    rate = completed / duration
    threads = APP_WORKERS * APP_THREADS
    ideal = min(users, threads) / (2 * LATENCY)
    cpu = {k: round(cpu_after[k] - cpu_before.get(k, 0.0), 2) for k in cpu_after}
    cpu["locust"] = round(locust_cpu, 2)
    summary = json.loads(summary_path.read_text()) if summary_path.exists() else {}
    finished = int(summary.get("identifications", completed))
    window = TOKEN_LIFETIME - min(60, TOKEN_LIFETIME / 10)
    result = {
        "users": users,
        "duration_s": duration,
        "wall_s": round(wall, 1),
        "app": f"{APP_WORKERS} workers x {APP_THREADS} threads (gthread)",
        "conn_max_age": CONN_MAX_AGE,
        "broker": f"{BROKER_WORKERS} workers x {BROKER_THREADS} threads, latency {LATENCY} s",
        "identifications": completed,
        "identifications_incl_stopping": finished,
        "identifications_per_s": round(rate, 1),
        "ideal_per_s": round(ideal, 1),
        "ratio_to_ideal": round(rate / ideal, 3),
        "p50_ms": _float(flow.get("50%")),
        "p95_ms": _float(flow.get("95%")),
        "p99_ms": _float(flow.get("99%")),
        "min_flow_ms_ideal": 2 * LATENCY * 1000,
        "http_requests": requests_total,
        "errors": failures,
        "token_requests": counters["token"],
        "token_requests_ideal": int(duration // window) + 1,
        "broker_creates": counters["create"],
        "broker_retrieves": counters["retrieve"],
        "rows": stored,
        "rows_success": stored.get("SUCCESS", 0),
        "cpu_s": cpu,
        "cpu_ms_per_identification": {
            k: round(v * 1000 / finished, 2) if finished else None for k, v in cpu.items()
        },
        "steps_ms": {
            name.split(" ", 1)[1]: {"p50": _float(s.get("50%")), "p95": _float(s.get("95%"))}
            for name, s in stats.items()
            if name.startswith(("POST ", "GET "))
        },
    }
    table_header("measured", "ideal")
    row(
        "identifications/s",
        result["identifications_per_s"],
        result["ideal_per_s"],
        f"x{result['ratio_to_ideal']}",
    )
    row(
        "flow p50 / p95 / p99, ms",
        f"{result['p50_ms']:.0f}/{result['p95_ms']:.0f}/{result['p99_ms']:.0f}",
        result["min_flow_ms_ideal"],
        "(ideal: the 2 broker calls)",
    )
    row("errors", failures, 0, f"of {requests_total} HTTP requests")
    row(
        "token requests",
        counters["token"],
        result["token_requests_ideal"],
        f"lifetime {TOKEN_LIFETIME} s, {threads} app threads",
    )
    row(
        "broker create / retrieve calls",
        f"{counters['create']}/{counters['retrieve']}",
        f"{finished}/{finished}",
    )
    row(
        "rows SUCCESS vs identifications",
        result["rows_success"],
        finished,
        f"all rows: {stored}; incl. flows finished while locust stopped",
    )
    row("CPU ms per identification: app", result["cpu_ms_per_identification"]["app"], "", "")
    row("  broker (sandbox, Django)", result["cpu_ms_per_identification"]["broker"], "", "")
    for key in ("locust", "postgres", "redis"):
        if key in result["cpu_ms_per_identification"]:
            row(
                f"  {key} (shared with anything else)",
                result["cpu_ms_per_identification"][key],
                "",
                "",
            )
    return result


def _float(value: Any) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        return float("nan")
