"""``python -m benchmarks [names...] [--quick]``: run the benchmarks, write results/latest.json.

Names: token, connections, app, load, outage, reconcile, pending, login (the default:
these eight, in that order), and million (issue 15's million identifications: a run of its own,
``make bench-million``, since it takes longer than the others together).
PostgreSQL and Redis come from ``DATABASE_URL`` / ``EID_TEST_REDIS_URL``, or
are started with ``.ci/services.sh start``. See docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import sys
import time
import traceback
from typing import Any

from benchmarks.common import RESULTS, ROOT, log, machine, services_env, with_database

DEFAULT = ("token", "connections", "app", "load", "outage", "reconcile", "pending", "login")
NAMES = (*DEFAULT, "million")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__)
    parser.add_argument("names", nargs="*", help=f"benchmarks to run: {', '.join(NAMES)}")
    parser.add_argument("--quick", action="store_true", help="smaller runs, for iterating")
    parser.add_argument(
        "--output", default=str(RESULTS / "latest.json"), help="where to write the results"
    )
    args = parser.parse_args(argv)
    names = args.names or list(DEFAULT)
    unknown = sorted(set(names) - set(NAMES))
    if unknown:
        parser.error(f"unknown benchmark(s) {', '.join(unknown)}; choose from {', '.join(NAMES)}")

    sys.path.insert(0, str(ROOT))
    services = services_env()
    # This process and its workers use tests.settings: PostgreSQL (a database of
    # its own, eid_bench, whose test copy benchmark 3 creates) and Redis.
    os.environ["DATABASE_URL"] = with_database(services["DATABASE_URL"], "eid_bench")
    os.environ["EID_TEST_REDIS_URL"] = services["EID_TEST_REDIS_URL"]
    os.environ["DJANGO_SETTINGS_MODULE"] = "tests.settings"

    results: dict[str, Any] = {
        "started": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "quick": args.quick,
        "machine": machine(),
        "benchmarks": {},
        "failed": {},
    }
    info = results["machine"]
    log(
        f"django-eid benchmarks on {info['nproc']} CPU(s), Python {info['python']}, "
        f"Django {info['django']}; load average at start {info.get('loadavg_at_start')}"
    )
    started = time.monotonic()
    for name in names:
        t0 = time.monotonic()
        try:
            results["benchmarks"][name] = _run(name, args.quick, services)
        except Exception as err:
            traceback.print_exc()
            results["failed"][name] = f"{type(err).__name__}: {err}"
        else:
            results["benchmarks"][name]["seconds"] = round(time.monotonic() - t0, 1)
    results["seconds"] = round(time.monotonic() - started, 1)
    RESULTS.mkdir(exist_ok=True)
    with open(args.output, "w") as fh:
        json.dump(results, fh, indent=2, default=str)
    log("")
    log(f"Wrote {args.output} ({results['seconds']} s).")
    if results["failed"]:
        log(f"FAILED: {', '.join(results['failed'])}")
        return 1
    return 0


def _run(name: str, quick: bool, services: dict[str, str]) -> dict[str, Any]:
    if name == "token":
        from benchmarks import token_economy

        return token_economy.run(quick)
    if name == "connections":
        from benchmarks import connections

        return connections.run(quick)
    if name == "app":
        from benchmarks import app_cost

        return app_cost.run(quick)
    if name == "load":
        from benchmarks import load

        return load.run(quick, services)
    if name == "reconcile":
        from benchmarks import reconcile

        return reconcile.run(quick)
    if name == "pending":
        from benchmarks import pending_limit

        return pending_limit.run(quick, services)
    if name == "login":
        from benchmarks import login_cost

        return login_cost.run(quick)
    if name == "million":
        return _million(quick, services)
    from benchmarks import outage

    return outage.run(quick, services)


def _million(quick: bool, services: dict[str, str]) -> dict[str, Any]:
    """benchmarks.million in a process of its own: it sets Django up on its own database."""
    import subprocess
    import tempfile

    from benchmarks.common import PYTHON

    with tempfile.TemporaryDirectory() as tmp:
        output = os.path.join(tmp, "million.json")
        rows = "100000" if quick else "1000000"
        subprocess.run(
            [PYTHON, "-m", "benchmarks.million", "--rows", rows, "--output", output],
            env={**os.environ, **services},
            cwd=ROOT,
            check=True,
        )
        with open(output) as fh:
            result: dict[str, Any] = json.load(fh)["million"]
    return result


if __name__ == "__main__":
    sys.exit(main())
