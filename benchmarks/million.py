"""``python -m benchmarks.million [--rows N]``: django-eid with a million identifications.

Issue 15's measurement, each item on an empty table and then on a filled one, in one
run on one PostgreSQL database of its own (``eid_million``, recreated):

* the hot paths: the start's count of the user's unfinished identifications, the insert
  of a new row, the callback's select and update, ``verified_for``: the median of
  ``--repeat`` calls, and the
  ``EXPLAIN (ANALYZE, BUFFERS)`` plan of each of their statements (writes rolled back);
* the admin's changelist pages (``benchmarks.admin_changelist``'s pages and timing);
* the table's and each index's size;
* ``eid_purge`` (delete, and ``--anonymize``) with a backlog of 10% and of 90% of the
  rows, and ``eid_reencrypt`` after a key rotation: the wall time, the peak memory (max
  RSS) of the command's own process, and the longest transaction PostgreSQL saw while it
  ran. These destroy rows, so each runs on a copy of the database (``CREATE DATABASE
  ... TEMPLATE``), dropped after.

The table is filled by ``benchmarks.admin_changelist.fill`` (two years of rows, mostly
SUCCESS/ABORTED/ERROR/EXPIRED) for ``--users`` users; then about 4% of the rows (verified
ones) get an encrypted national identity number, a few distinct ciphertexts reused.
Results go to ``benchmarks/results/million.json`` (``--output``). See docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import os
import statistics
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

from benchmarks.common import (
    PYTHON,
    RESULTS,
    ROOT,
    conclude,
    header,
    log,
    machine,
    postgres_params,
    recreate_database,
    services_env,
    with_database,
)

DATABASE = "eid_million"
COPY = "eid_million_copy"
#: The share of the rows holding a national identity number (issue 15: about 4%).
NUMBER_SHARE = 0.04
#: Backlogs of the purge runs: the share of the rows older than ``--older-than``. The
#: rows' ``created_at`` spread evenly over two years, so a share is an age in days.
BACKLOGS = (0.1, 0.9)
SPAN_DAYS = 730
#: Runs its arguments as a child and prints the child's peak RSS (kB) to stderr. A child
#: of this benchmark's process itself would report at least that process's RSS: Linux
#: carries a forked process's size into ``ru_maxrss`` across ``exec``. This launcher is
#: small, so what its child reports is the command's own peak.
LAUNCHER = """
import os, subprocess, sys
proc = subprocess.Popen(sys.argv[1:])
_pid, status, usage = os.wait4(proc.pid, 0)
sys.stderr.write(f"{usage.ru_maxrss}\\n")
sys.exit(os.waitstatus_to_exitcode(status))
"""


# -- the hot paths ------------------------------------------------------------------


def _explain(sql: str) -> list[str]:
    """``EXPLAIN (ANALYZE, BUFFERS)`` of ``sql``, a write rolled back."""
    from django.db import connection, transaction

    with transaction.atomic():
        with connection.cursor() as cursor:
            cursor.execute(f"EXPLAIN (ANALYZE, BUFFERS) {sql}")
            plan = [line for (line,) in cursor.fetchall()]
        transaction.set_rollback(True)
    return plan


def _timed(
    calls: list[Callable[[], Any]], rewrite: Callable[[str], str] = lambda sql: sql
) -> dict[str, Any]:
    """Run each call, timed; the median, and the plans of the last call's statements."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    times = []
    captured: list[dict[str, str]] = []
    for call in calls:
        with CaptureQueriesContext(connection) as queries:
            began = time.perf_counter()
            call()
            times.append((time.perf_counter() - began) * 1000)
        captured = queries.captured_queries
    result: dict[str, Any] = {
        "median_ms": round(statistics.median(times), 3),
        "max_ms": round(max(times), 3),
        "calls": len(times),
        "queries": len(captured),
    }
    # rewrite: an INSERT explained again needs a reference of its own (unique).
    result["plans"] = [
        {"sql": q["sql"], "plan": _explain(rewrite(q["sql"]))}
        for q in captured
        if q["sql"].split(None, 1)[0].upper() in {"SELECT", "INSERT", "UPDATE", "DELETE"}
    ]
    return result


def hot_paths(repeat: int) -> dict[str, Any]:
    """The per-identification queries, on users picked across the table."""
    from django.contrib.auth import get_user_model

    from django_eid import flow
    from django_eid.models import Identification

    user_model = get_user_model()
    pks = list(user_model.objects.order_by("pk").values_list("pk", flat=True))
    step = max(1, len(pks) // repeat)
    users = [user_model.objects.get(pk=pk) for pk in pks[::step][:repeat]]
    # Users that have verified rows, for verified_for to find one (the filled table).
    verified = list(
        Identification.objects.verified().order_by().values_list("user_id", flat=True)[:repeat]
    )
    verified_users = [user_model.objects.get(pk=pk) for pk in verified] or users

    rows: list[Identification] = []

    def insert(user: Any) -> Callable[[], None]:
        def call() -> None:
            rows.append(
                Identification.objects.create(
                    user=user,
                    reference=uuid.uuid4().hex,
                    status=Identification.Status.PENDING,
                    identity_provider="NO_BANKID_WEB",
                    user_agent="benchmark",
                )
            )

        return call

    figures = {
        # The start's count under the user's lock: what MAX_PENDING_PER_USER limits.
        "start_count": _timed([lambda u=u: flow.unfinished_count(u) for u in users]),
    }
    figures["insert"] = _timed(
        [insert(u) for u in users], lambda sql: sql.replace(rows[-1].reference, uuid.uuid4().hex)
    )
    figures["callback_select"] = _timed([lambda r=r: flow.find(r.user, r.reference) for r in rows])
    figures["callback_update"] = _timed([lambda r=r: flow.expire(r) for r in rows])
    figures["verified_for"] = _timed(
        [
            lambda u=u: Identification.objects.verified_for(u, max_age=86400 * 365)
            for u in verified_users
        ]
    )
    for name, item in figures.items():
        log(f"  {name:<24} median {item['median_ms']:8.2f} ms  max {item['max_ms']:8.2f} ms")
    return figures


# -- sizes ------------------------------------------------------------------------------


def sizes() -> dict[str, Any]:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*), pg_relation_size('django_eid_identification'),"
            " pg_indexes_size('django_eid_identification')"
            " FROM django_eid_identification"
        )
        count, table, indexes = cursor.fetchone()
        cursor.execute(
            "SELECT indexrelname, pg_relation_size(indexrelid) FROM pg_stat_user_indexes"
            " WHERE relname = 'django_eid_identification' ORDER BY 2 DESC, 1"
        )
        each = dict(cursor.fetchall())
    mb = 1024 * 1024
    log(f"  {count} rows; table {table / mb:.1f} MB; {len(each)} indexes, {indexes / mb:.1f} MB")
    for name, size in each.items():
        log(f"    {name:<48} {size / mb:8.1f} MB")
    return {"rows": count, "table_bytes": table, "indexes_bytes": indexes, "indexes": each}


# -- filling ------------------------------------------------------------------------------


def fill(rows: int, users: int) -> float:
    """Fill the table; the seconds it took."""
    from django.db import connection

    from benchmarks import admin_changelist
    from django_eid import crypto

    began = time.monotonic()
    admin_changelist.fill(rows, users=users)
    # A few distinct numbers, encrypted once: the ciphertexts differ from row to row in
    # production but not in size, which is what the table and the commands feel.
    numbers = [
        f"{day:02d}0{month}85{n:05d}"
        for n, (day, month) in enumerate([(1, 1), (12, 3), (23, 6), (30, 9), (15, 4)])
    ]
    ciphertexts = [crypto.encrypt(n) for n in numbers]
    hashes = [crypto.lookup_hash(n) for n in numbers]
    # SUCCESS is 70% of the rows: one in 17 of them is about 4% of all.
    with connection.cursor() as cursor:
        cursor.execute(
            "UPDATE django_eid_identification"
            " SET social_security_number = (%s::text[])[1 + id %% 5],"
            " social_security_number_hash = (%s::text[])[1 + id %% 5],"
            " national_id_country = 'NO', national_id_kind = 'PERSONAL'"
            " WHERE status = 'SUCCESS' AND id %% 17 = 0",
            [ciphertexts, hashes],
        )
        log(f"  {cursor.rowcount} rows with a national identity number")
        cursor.execute("VACUUM ANALYZE django_eid_identification")
    return round(time.monotonic() - began, 1)


# -- the commands ------------------------------------------------------------------------


@contextlib.contextmanager
def longest_transaction(dbname: str) -> Iterator[dict[str, float]]:
    """Sample ``pg_stat_activity`` every 20 ms: the longest transaction seen in ``dbname``."""
    import psycopg

    seen = {"seconds": 0.0, "samples": 0}
    stop = threading.Event()

    def watch() -> None:
        with psycopg.connect(**postgres_params(os.environ["DATABASE_URL"])) as conn:
            while not stop.is_set():
                (age,) = conn.execute(
                    "SELECT coalesce(max(extract(epoch FROM clock_timestamp() - xact_start)), 0)"
                    " FROM pg_stat_activity WHERE datname = %s AND pid <> pg_backend_pid()",
                    [dbname],
                ).fetchone()
                seen["seconds"] = max(seen["seconds"], float(age))
                seen["samples"] += 1
                stop.wait(0.02)

    thread = threading.Thread(target=watch, daemon=True)
    thread.start()
    try:
        yield seen
    finally:
        stop.set()
        thread.join()


def _commits(dbname: str) -> int:
    """Transactions committed in ``dbname`` so far (statistics of ended backends)."""
    import psycopg

    time.sleep(1)  # backends flush their statistics at most every second, and at exit
    with psycopg.connect(**postgres_params(os.environ["DATABASE_URL"])) as conn:
        conn.execute("SELECT pg_stat_clear_snapshot()")
        (count,) = conn.execute(
            "SELECT coalesce(sum(xact_commit), 0) FROM pg_stat_database WHERE datname = %s",
            [dbname],
        ).fetchone()
    return int(count)


def command(dbname: str, args: list[str], settings: str = "tests.settings") -> dict[str, Any]:
    """Run ``python -m django <args>`` on database ``dbname``: time, peak RSS, transaction."""
    env = {
        **os.environ,
        "DATABASE_URL": with_database(os.environ["DATABASE_URL"], dbname),
        "DJANGO_SETTINGS_MODULE": settings,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
    }
    from django.db import connections

    connections.close_all()  # this process's own statements are not the command's
    commits_before = _commits(dbname)
    with longest_transaction(dbname) as seen:
        began = time.monotonic()
        proc = subprocess.run(
            # The system checks are not what is measured (and tests.settings' sandbox fails
            # one without DEBUG).
            [PYTHON, "-c", LAUNCHER, PYTHON, "-m", "django", *args, "--skip-checks"],
            env=env,
            cwd=ROOT,
            capture_output=True,
        )
        output = (proc.stdout + proc.stderr).decode(errors="replace")
        seconds = time.monotonic() - began
    if proc.returncode:
        raise RuntimeError(f"{' '.join(args)} exited with {proc.returncode}:\n{output[-2000:]}")
    figures = {
        "args": args,
        # Transactions committed in the database during the run: a batched run commits one
        # per batch (and a few of its own); one transaction for everything would be ~1.
        "commits": _commits(dbname) - commits_before,
        "seconds": round(seconds, 2),
        "peak_rss_mb": round(int(output.split()[-1]) / 1024, 1),  # kilobytes on Linux
        "longest_transaction_s": round(seen["seconds"], 3),
        "output_tail": output.strip().splitlines()[-4:-1],
    }
    log(
        f"  {' '.join(args):<58} {figures['seconds']:8.2f} s  {figures['peak_rss_mb']:6.1f} MB"
        f"  longest transaction {figures['longest_transaction_s']:.3f} s,"
        f" {figures['commits']} commits"
    )
    return figures


def _drop_copy(url: str) -> None:
    """Drop the copy. Not ``WITH (FORCE)``: that refuses to end an autovacuum worker (a
    superuser's process) busy after a large purge; a plain ``DROP`` cancels it."""
    import psycopg

    with psycopg.connect(**postgres_params(url)) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{COPY}"')


def on_copy(source: str, args: list[str], settings: str = "tests.settings") -> dict[str, Any]:
    """Run a destructive command on a fresh copy of ``source``, then drop the copy."""
    import psycopg
    from django.db import connections

    connections.close_all()  # a template database must have no other connection
    url = os.environ["DATABASE_URL"]
    _drop_copy(url)
    with psycopg.connect(**postgres_params(url)) as conn:
        conn.execute(f'CREATE DATABASE "{COPY}" TEMPLATE "{source}"')
    try:
        return command(COPY, args, settings)
    finally:
        _drop_copy(url)


def commands(filled: bool, batch_size: int) -> dict[str, Any]:
    batch = ["--batch-size", str(batch_size)]
    figures: dict[str, Any] = {}
    if not filled:
        # Nothing to destroy: the empty table itself.
        run: Callable[..., dict[str, Any]] = lambda args, settings="tests.settings": command(  # noqa: E731
            DATABASE, args, settings
        )
    else:
        run = lambda args, settings="tests.settings": on_copy(DATABASE, args, settings)  # noqa: E731
    for share in BACKLOGS:
        days = round(SPAN_DAYS * (1 - share))
        age = ["--older-than", f"{days}d"]
        figures[f"purge {share:.0%}"] = run(["eid_purge", *age, *batch])
        figures[f"anonymize {share:.0%}"] = run(["eid_purge", *age, "--anonymize", *batch])
    figures["reencrypt"] = run(["eid_reencrypt", *batch], "benchmarks.million_settings")
    return figures


# -- the run ------------------------------------------------------------------------------


def phase(label: str, repeat: int, batch_size: int, filled: bool) -> dict[str, Any]:
    from benchmarks import admin_changelist

    header(f"{label}: hot paths")
    result: dict[str, Any] = {"hot_paths": hot_paths(repeat)}
    header(f"{label}: admin changelist pages")
    result["admin"] = admin_changelist.measure(max(3, repeat // 4))
    header(f"{label}: sizes")
    result["sizes"] = sizes()
    header(f"{label}: eid_purge, eid_reencrypt (peak RSS of the command's process)")
    result["commands"] = commands(filled, batch_size)
    return result


def run(rows: int, users: int, repeat: int, batch_size: int) -> dict[str, Any]:
    """Both phases, on ``DATABASE`` (recreated); ``DATABASE_URL`` names the server."""
    from benchmarks import admin_changelist

    server = os.environ["DATABASE_URL"]
    recreate_database(with_database(server, DATABASE))
    admin_changelist.configure(server, DATABASE)
    os.environ["DATABASE_URL"] = server  # the commands' copies are named from it
    from django.contrib.auth import get_user_model
    from django.core.management import call_command
    from django.db import connection

    connection.settings_dict["NAME"] = DATABASE
    call_command("migrate", verbosity=0, skip_checks=True)
    # Users, but no identifications yet: the hot paths' calls on the empty table.
    get_user_model().objects.bulk_create(
        get_user_model()(username=f"bench-empty-{i}", password="!") for i in range(repeat)
    )
    result: dict[str, Any] = {"rows": rows, "users": users, "batch_size": batch_size}
    result["empty"] = phase("empty table", repeat, batch_size, filled=False)
    header(f"filling {rows} rows for {users} users")
    result["fill_seconds"] = fill(rows, users)
    log(f"  filled in {result['fill_seconds']} s")
    result["filled"] = phase(f"{rows} rows", repeat, batch_size, filled=True)
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.million", description=__doc__)
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--users", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=20, help="calls per hot path")
    parser.add_argument("--batch-size", type=int, default=1000, help="of the commands")
    parser.add_argument("--output", default=str(RESULTS / "million.json"))
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
    results["million"] = run(args.rows, args.users, args.repeat, args.batch_size)
    return conclude(
        results, started=started, database=None if args.keep else DATABASE, output=args.output
    )


if __name__ == "__main__":
    sys.exit(main())
