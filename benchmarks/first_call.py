"""CPU of the first broker call in a new worker process, and of the second.

``python -m benchmarks.first_call`` (with ``EID_TEST_REDIS_URL`` set, so that the token
cache is Django's Redis backend, as deployed): a fresh interpreter sets up Django
(``tests.settings``, i.e. ``AppConfig.ready()`` runs), then makes one create + retrieve
through ``get_client()`` against the canned broker (:mod:`benchmarks.canned_broker`), then
another, and prints the CPU time of each. Repeated in ``--runs`` fresh processes; prints
min / median / max. What the first call costs above the second is what a worker's first
identification pays once.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

from benchmarks.common import RESULTS, free_port, server

CHILD = """
import json, os, sys, time
import django
django.setup()
from django.conf import settings
settings.DJANGO_EID = canned_broker.settings(sys.argv[1])
from django_eid.client import ReturnUrls, get_client
urls = ReturnUrls(success="https://s.test/[1]/[2]", abort="https://s.test/a", error="https://s.test/e")
cpu = []
for _ in range(2):
    c0 = time.process_time()
    client = get_client()
    client.get_session(client.create_session(return_urls=urls, external_reference="x" * 32).request_id)
    cpu.append(time.process_time() - c0)
print(json.dumps({"first_ms": cpu[0] * 1000, "second_ms": cpu[1] * 1000,
                  "redis_imported_at_setup": "redis" in sys.modules}))
"""


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.first_call")
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args()
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    env = dict(os.environ, DJANGO_SETTINGS_MODULE="tests.settings")
    RESULTS.mkdir(exist_ok=True)
    results = []
    with server(
        [sys.executable, "-m", "benchmarks.canned_broker", str(port)],
        env,
        RESULTS / "canned_broker.log",
        probe=url + "/",
    ):
        for _ in range(args.runs):
            out = subprocess.run(
                [sys.executable, "-c", CHILD, url],
                env=env,
                capture_output=True,
                text=True,
                check=True,
                timeout=120,
            ).stdout
            results.append(json.loads(out.strip().splitlines()[-1]))
            time.sleep(0.1)
    for key in ("first_ms", "second_ms"):
        values = [r[key] for r in results]
        print(
            f"{key}: min {min(values):.1f}  median {statistics.median(values):.1f}  "
            f"max {max(values):.1f}  (CPU ms, {len(values)} fresh processes)"
        )


if __name__ == "__main__":
    main()
