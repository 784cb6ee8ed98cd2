"""7. The pending limit under a burst: 60 parallel start POSTs of one account, gunicorn,
PostgreSQL, a broker that takes 0.5 s to create a session.

The example project under gunicorn (``APP_WORKERS`` x ``APP_THREADS``, enough threads for
every POST at once) and the sandbox broker in another gunicorn with 0.5 s of latency on
every call, both as in benchmark 4. One user logs in, then 60 threads POST the start form
at the same instant with the same session. ``MAX_PENDING_PER_USER`` is 5 (the example
project's default): at most 5 broker sessions may be created, the others get 429.
"""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import requests

from benchmarks.common import (
    RESULTS,
    free_port,
    header,
    log,
    row,
    server,
    table_header,
    with_database,
    with_redis_db,
)
from benchmarks.load import (
    app_env,
    base_env,
    db_counts,
    flush_redis,
    gunicorn,
    prepare_database,
    read_counters,
)

POSTS = 60
LIMIT = 5
LATENCY = 0.5
APP_WORKERS, APP_THREADS = 4, 16


def run(quick: bool = False, services: dict[str, str] | None = None) -> dict[str, Any]:
    header("7. The pending limit: 60 parallel starts of one account, broker at 0.5 s")
    assert services is not None
    database_url = with_database(services["DATABASE_URL"], "eid_bench_pending")
    app_redis = with_redis_db(services["EID_TEST_REDIS_URL"], 4)
    broker_redis = with_redis_db(services["EID_TEST_REDIS_URL"], 5)
    for url in (app_redis, broker_redis):
        flush_redis(url)
    prepare_database(database_url, app_redis, 1)
    app_port, broker_port = free_port(), free_port()
    broker_url = f"http://127.0.0.1:{broker_port}/eid-sandbox"
    broker_env = base_env(database_url, broker_redis)
    broker_env.update(
        BENCH_ROLE="broker",
        # The sandbox serves only the site whose broker it is: itself, at this port.
        EID_SANDBOX_URL=broker_url,
        BENCH_COUNTER_REDIS_URL=broker_redis,
        BENCH_SANDBOX_LATENCY=str(LATENCY),
    )
    env = app_env(database_url, app_redis, broker_url)
    with (
        server(
            gunicorn("benchmarks.broker_wsgi:application", broker_port, 2, 32),
            broker_env,
            RESULTS / "pending_broker.log",
            f"{broker_url}/oauth/connect/token",
        ),
        server(
            gunicorn("example_project.wsgi:application", app_port, APP_WORKERS, APP_THREADS),
            env,
            RESULTS / "pending_app.log",
            f"http://127.0.0.1:{app_port}/login/",
        ),
    ):
        site = f"http://127.0.0.1:{app_port}"
        browser = requests.Session()
        browser.get(f"{site}/login/", timeout=10)
        token = browser.cookies.get("csrftoken", "")
        login = browser.post(
            f"{site}/login/",
            data={"username": "bench0", "password": "bench-password", "csrfmiddlewaretoken": token},
            allow_redirects=False,
            timeout=10,
        )
        assert login.status_code == 302, login.status_code
        flush_redis(broker_redis)  # the probe's counters
        cookies = browser.cookies.get_dict()
        barrier = threading.Barrier(POSTS)

        def post(_: int) -> int:
            tab = requests.Session()
            tab.cookies.update(cookies)
            barrier.wait(timeout=60)
            answer = tab.post(
                f"{site}/eid/start/",
                data={"display": "redirect", "csrfmiddlewaretoken": cookies["csrftoken"]},
                headers={"Referer": f"{site}/verify/"},
                allow_redirects=False,
                timeout=60,
            )
            return answer.status_code

        started = time.monotonic()
        with ThreadPoolExecutor(POSTS) as pool:
            answers = list(pool.map(post, range(POSTS)))
        seconds = time.monotonic() - started
        counters = read_counters(broker_redis)
    rows = db_counts(database_url)
    result = {
        "posts": POSTS,
        "limit": LIMIT,
        "latency_s": LATENCY,
        "answers": {str(code): answers.count(code) for code in sorted(set(answers))},
        "broker_sessions_created": counters["create"],
        "rows": rows,
        "seconds": round(seconds, 2),
    }
    log(f"  {POSTS} POSTs at once; app {APP_WORKERS} workers x {APP_THREADS} threads")
    table_header("measured", "wanted")
    row("broker sessions created", counters["create"], f"<= {LIMIT}")
    row("answered 302 (to the broker)", answers.count(302), LIMIT)
    row("answered 429 (too many)", answers.count(429), POSTS - LIMIT)
    row("rows in the database", sum(rows.values()), LIMIT)
    row("all answered in, s", round(seconds, 2), "")
    assert counters["create"] <= LIMIT, result
    return result
