"""``python -m benchmarks.events [--events N]``: the audit trail at a million events.

Issue 26's measurement, on one PostgreSQL database of its own (``eid_events``, recreated):

* the admin dashboard's figures (:func:`django_eid.dashboard.figures`): the first call on
  a new connection after the fill, then the median of ``--repeat`` calls, the queries
  counted, and the ``EXPLAIN (ANALYZE, BUFFERS)`` plan of each;
* the same with a covering index on ``(at, kind, status) INCLUDE (provider, display,
  identification_id, duration_ms)``, to judge whether one is worth its size;
* the export, ``eid_audit --format jsonl`` of every event to a sink that only counts:
  rows a second, and the peak of Python's allocations (``tracemalloc``, a second run).

The table is filled by SQL (``INSERT ... SELECT generate_series``, no Python per row): about
``N / 2.1`` identifications over two years, each a ``started`` event and, but for the
failed starts, a finishing one (mostly ``SUCCESS``), a few ``rejected`` and ``broker_error``
events; then ``CLUSTER`` by ``at`` (the fill writes in passes; a live table's rows lie in
the order they were written, by time) and ``VACUUM ANALYZE`` (autovacuum's work on a live
table, so index-only scans can skip the heap). Results go to ``benchmarks/results/events.json``. Not part of the test
suite or CI. See docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import datetime
import os
import statistics
import sys
import time
import tracemalloc
from typing import Any

from benchmarks.common import (
    RESULTS,
    ROOT,
    conclude,
    header,
    log,
    machine,
    recreate_database,
    row,
    services_env,
    with_database,
)

DATABASE = "eid_events"
SPAN_DAYS = 730
#: Events per identification, on average (started, finishing, a few more).
PER_IDENTIFICATION = 2.1
INDEX = "django_eid_event_bench_cover"


class Sink:
    """A text stream that counts what is written to it and keeps nothing."""

    def __init__(self) -> None:
        self.chars = 0
        self.lines = 0

    def write(self, text: str) -> int:
        self.chars += len(text)
        self.lines += text.count("\n")
        return len(text)

    def flush(self) -> None:
        pass


def fill(events: int) -> dict[str, Any]:
    """About ``events`` events, by SQL; how many and how long it took."""
    from django.db import connection

    from django_eid.models import AuditEvent

    table = connection.ops.quote_name(AuditEvent._meta.db_table)
    idents = int(events / PER_IDENTIFICATION)
    began = time.perf_counter()
    columns = (
        "at, kind, identification_id, user_id, purpose, broker_api, provider, "
        "level_of_assurance, status, outcome, display, address_hash, duration_ms"
    )
    with connection.cursor() as cursor:
        cursor.execute("SELECT setseed(0.26)")
        # The starts: 1% failed at once (ERROR), the rest created a session (PENDING).
        cursor.execute(
            f"INSERT INTO {table} ({columns}) "
            "SELECT now() - random() * %s * interval '1 day', 'started', g, (g %% 20000)::text, "
            "'verify', 'v1', (ARRAY['NO_BANKID_WEB', '', 'NO_BANKID_MOBILE', 'NO_BUYPASS', "
            "'SE_BANKID', 'DA_MITID'])[1 + g %% 6], '', "
            "CASE WHEN g %% 100 = 0 THEN 'ERROR' ELSE 'PENDING' END, '', "
            "CASE WHEN g %% 10 < 3 THEN 'iframe' ELSE 'redirect' END, md5(g::text), NULL "
            "FROM generate_series(1, %s) AS g",
            [SPAN_DAYS, idents],
        )
        # Their ends: about 74% SUCCESS, 13% ABORTED, 6.5% EXPIRED, 6.5% ERROR, 33 s to 3 min on.
        cursor.execute(
            f"INSERT INTO {table} ({columns}) "
            "SELECT at + d * interval '1 millisecond', "
            "CASE WHEN st = 'EXPIRED' THEN 'expired' WHEN r < 0.7 THEN 'returned' "
            "WHEN r < 0.95 THEN 'finished' ELSE 'reconciled' END, "
            "identification_id, user_id, purpose, broker_api, "
            "CASE WHEN provider = '' AND st = 'SUCCESS' THEN 'NO_BANKID_WEB' ELSE provider END, "
            "CASE WHEN st = 'SUCCESS' THEN 'high' ELSE '' END, st, '', display, address_hash, d "
            "FROM (SELECT *, random() AS r, (1000 * exp(3.5 + 0.6 * random() * 3))::int AS d, "
            "CASE WHEN random() < 0.74 THEN 'SUCCESS' WHEN random() < 0.5 THEN 'ABORTED' "
            "WHEN random() < 0.5 THEN 'EXPIRED' ELSE 'ERROR' END AS st "
            f"FROM {table} WHERE kind = 'started' AND status = 'PENDING') AS s",
        )
        # A few successes rejected afterwards, a few failed calls to the broker.
        cursor.execute(
            f"INSERT INTO {table} ({columns}) "
            "SELECT at, 'rejected', identification_id, user_id, purpose, broker_api, provider, "
            "level_of_assurance, 'REJECTED', 'rejected', display, address_hash, NULL "
            f"FROM {table} WHERE status = 'SUCCESS' AND random() < 0.03",
        )
        cursor.execute(
            f"INSERT INTO {table} ({columns}) "
            "SELECT at, 'broker_error', identification_id, user_id, purpose, broker_api, "
            "provider, level_of_assurance, 'ERROR', 'EidBrokerError', display, address_hash, "
            f"NULL FROM {table} WHERE kind = 'started' AND random() < 0.02",
        )
        # An append-only table's rows lie in the order they were written: by time.
        cursor.execute(f"CLUSTER {table} USING django_eid_event_at")
        filled = time.perf_counter() - began
        cursor.execute(f"VACUUM ANALYZE {table}")
        cursor.execute(f"SELECT count(*), pg_total_relation_size('{table}') FROM {table}")
        count, size = cursor.fetchone()
    return {
        "events": count,
        "identifications": idents,
        "fill_seconds": round(filled, 1),
        "vacuum_analyze_seconds": round(time.perf_counter() - began - filled, 1),
        "table_bytes": size,
    }


def _explain(sql: str, params: Any) -> list[str]:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(f"EXPLAIN (ANALYZE, BUFFERS) {sql}", params)
        return [line for (line,) in cursor.fetchall()]


def dashboard(repeat: int) -> dict[str, Any]:
    """The figures: the first call on a new connection, then ``repeat`` calls."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from django_eid.dashboard import figures

    connection.close()
    began = time.perf_counter()
    with CaptureQueriesContext(connection) as queries:
        found = figures()
    first = (time.perf_counter() - began) * 1000
    times = []
    for _ in range(repeat):
        began = time.perf_counter()
        figures()
        times.append((time.perf_counter() - began) * 1000)
    plans = []
    for query in queries.captured_queries:
        sql = query["sql"]
        # The captured SQL has its parameters inlined by the driver: EXPLAIN it as it ran.
        plans.append({"sql": sql, "plan": _explain(sql, None)})
    return {
        "first_ms": round(first, 1),
        "median_ms": round(statistics.median(times), 1),
        "max_ms": round(max(times), 1),
        "calls": repeat,
        "queries": len(queries.captured_queries),
        "started_30_days": sum(d.started for d in found.days),
        "sessions_12_months": sum(m.sessions for m in found.months),
        "plans": plans,
    }


def export() -> dict[str, Any]:
    """``eid_audit --format jsonl`` of every event: rows a second; the allocations' peak."""
    from django.core.management import call_command

    sink = Sink()
    began = time.perf_counter()
    call_command("eid_audit", "--format", "jsonl", stdout=sink)
    seconds = time.perf_counter() - began
    tracemalloc.start()
    call_command("eid_audit", "--format", "jsonl", stdout=Sink())
    _current, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return {
        "rows": sink.lines,
        "bytes": sink.chars,
        "seconds": round(seconds, 1),
        "rows_per_second": round(sink.lines / seconds),
        "tracemalloc_peak_bytes": peak,
    }


def covering_index(create: bool) -> int:
    """Create (or drop) the covering index; its size."""
    from django.db import connection

    with connection.cursor() as cursor:
        if not create:
            cursor.execute(f"DROP INDEX IF EXISTS {INDEX}")
            return 0
        began = time.perf_counter()
        cursor.execute(
            f"CREATE INDEX {INDEX} ON django_eid_auditevent (at, kind, status) "
            "INCLUDE (provider, display, identification_id, duration_ms)"
        )
        cursor.execute("VACUUM ANALYZE django_eid_auditevent")
        log(f"  index built in {time.perf_counter() - began:.1f} s")
        cursor.execute("SELECT pg_relation_size(%s)", [INDEX])
        (size,) = cursor.fetchone()
    return int(size)


def run(events: int, repeat: int, skip_export: bool) -> dict[str, Any]:
    from benchmarks import admin_changelist

    server = os.environ["DATABASE_URL"]
    recreate_database(with_database(server, DATABASE))
    admin_changelist.configure(server, DATABASE)
    from django.core.management import call_command
    from django.db import connection

    connection.settings_dict["NAME"] = DATABASE
    call_command("migrate", verbosity=0, skip_checks=True)
    result: dict[str, Any] = {}
    header(f"filling about {events} audit events")
    result["fill"] = fill(events)
    log(f"  {result['fill']}")

    header("the dashboard's figures (target: under 300 ms)")
    result["dashboard"] = dashboard(repeat)
    _report(result["dashboard"])

    header("the same with a covering index")
    result["covering_index_bytes"] = covering_index(create=True)
    row("index size (MB)", result["covering_index_bytes"] / 1e6)
    result["dashboard_covering"] = dashboard(repeat)
    _report(result["dashboard_covering"])
    covering_index(create=False)

    if skip_export:
        return result
    header("eid_audit --format jsonl, every event")
    result["export"] = export()
    for key, value in result["export"].items():
        row(key, value)
    return result


def _report(found: dict[str, Any]) -> None:
    row("first call (ms)", found["first_ms"])
    row(f"median of {found['calls']} (ms)", found["median_ms"], 300)
    row("max (ms)", found["max_ms"])
    row("queries", found["queries"])
    for plan in found["plans"]:
        top = next((line for line in plan["plan"] if "Execution Time" in line), "")
        log(f"    {top.strip()}: {plan['sql'][:90]}...")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.events", description=__doc__)
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=9, help="calls of the figures")
    parser.add_argument("--no-export", action="store_true", help="skip eid_audit's export")
    parser.add_argument("--output", default=str(RESULTS / "events.json"))
    parser.add_argument("--keep", action="store_true", help="keep the database after")
    args = parser.parse_args(argv)

    sys.path.insert(0, str(ROOT))
    services = services_env()
    os.environ["DATABASE_URL"] = services["DATABASE_URL"]
    os.environ["EID_TEST_REDIS_URL"] = services["EID_TEST_REDIS_URL"]
    os.environ["DJANGO_SETTINGS_MODULE"] = "tests.settings"
    started = time.monotonic()
    results: dict[str, Any] = {
        "started": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "machine": machine(),
    }
    results["events"] = run(args.events, args.repeat, args.no_export)
    return conclude(
        results, started=started, database=None if args.keep else DATABASE, output=args.output
    )


if __name__ == "__main__":
    sys.exit(main())
