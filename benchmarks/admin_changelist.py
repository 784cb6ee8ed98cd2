"""``python -m benchmarks.admin_changelist [--rows N]``: the admin's changelist pages, timed.

Fills a database of its own (``DATABASE_URL`` with the name ``eid_admin_bench``) with
``--rows`` identifications of 10% as many users, once (a later run reuses them), and
times each kind of changelist page through Django's test client: the median of
``--repeat`` requests, and the time its SQL took. Run it on the code of two checkouts
(``PYTHONPATH``) to compare them; the migrations of the code run are applied first.
"""

from __future__ import annotations

import argparse
import datetime
import os
import random
import statistics
import sys
import time


def configure(database_url: str, name: str = "eid_admin_bench") -> None:
    base, _, _name = database_url.rpartition("/")
    os.environ["DATABASE_URL"] = f"{base}/{name}"
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tests.settings")
    import psycopg

    with psycopg.connect(database_url, autocommit=True) as conn:
        exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name]).fetchone()
        if not exists:
            conn.execute(f'CREATE DATABASE "{name}"')
    import django

    django.setup()


def fill(rows: int, users: int | None = None) -> None:
    """``rows`` identifications (kept if there already are as many) of ``users`` users
    (default: a tenth as many as rows)."""
    from django.contrib.auth import get_user_model
    from django.db import connection
    from django.utils import timezone

    from django_eid.models import Identification

    have = Identification.objects.count()
    if have >= rows:
        return
    user_model = get_user_model()
    users = users or max(1, rows // 10)
    user_model.objects.bulk_create(
        (
            user_model(username=f"user-{i}", email=f"user-{i}@example.com", password="!")
            for i in range(user_model.objects.count(), users)
        ),
        batch_size=5000,
    )
    user_ids = list(user_model.objects.values_list("pk", flat=True))
    rng = random.Random(15)
    statuses = ["SUCCESS"] * 700 + ["ABORTED"] * 150 + ["ERROR"] * 80 + ["EXPIRED"] * 50
    statuses += ["PENDING"] * 19 + ["REJECTED"]
    providers = ["NO_BANKID_WEB"] * 6 + ["NO_BANKID_MOBILE"] * 3 + ["SWE_BANKID"]
    names = ["Nordmann, Kari", "Hansen, Ola", "Johansen, Per", "Olsen, Anne", "Larsen, Ida"]
    now = timezone.now()
    span = datetime.timedelta(days=730).total_seconds()
    batch = 5000
    for start in range(have, rows, batch):
        objs = []
        for i in range(start, min(rows, start + batch)):
            status = rng.choice(statuses)
            objs.append(
                Identification(
                    user_id=rng.choice(user_ids),
                    reference=f"ref-{i:08d}",
                    request_id=f"req-{i:08d}",
                    status=status,
                    identity_provider=rng.choice(providers),
                    identity_provider_unique_id=f"pid-{i % (rows // 3 + 1)}",
                    name=rng.choice(names),
                    first_name="Kari",
                    last_name="Nordmann",
                    date_of_birth=datetime.date(1971, 12, 31),
                    raw={"RequestId": f"req-{i:08d}", "Status": status, "pad": "x" * 600},
                    created_at=now - datetime.timedelta(seconds=span * (1 - i / rows)),
                    completed_at=None if status == "PENDING" else now,
                )
            )
        Identification.objects.bulk_create(objs)
        print(f"  {start + len(objs)} rows", file=sys.stderr)
    with connection.cursor() as cursor:
        cursor.execute("VACUUM ANALYZE django_eid_identification")
        cursor.execute("VACUUM ANALYZE auth_user")


PAGES: dict[str, dict[str, str]] = {
    "all": {},
    "page 2": {"p": "2"},
    "status ERROR": {"status__exact": "ERROR"},
    "status REJECTED (rare)": {"status__exact": "REJECTED"},
    "provider SWE_BANKID": {"identity_provider": "SWE_BANKID"},
    "provider with no rows": {"identity_provider": "FI_TUPAS"},
    "created this month": {},  # filled in: the filter's own range
    "search username": {"q": "user-4242"},
    "search e-mail": {"q": "user-4242@example.com"},
    "search reference": {"q": "ref-00004242"},
    "search common name": {"q": "Nordmann"},
}


def measure(repeat: int) -> dict[str, dict[str, float | int]]:
    """Print, and return, each page's median time, SQL time, query count and status."""
    from django.contrib.auth import get_user_model
    from django.db import connection
    from django.test import Client
    from django.test.utils import CaptureQueriesContext
    from django.utils import timezone

    user_model = get_user_model()
    root = user_model.objects.filter(username="bench-root").first()
    if root is None:
        root = user_model.objects.create_superuser("bench-root", "root@example.com", "pw")
    client = Client()
    client.force_login(root)
    today = timezone.localdate()
    month = today.replace(day=1)
    PAGES["created this month"] = {
        "created_at__gte": f"{month} 00:00:00+00:00",
        "created_at__lt": f"{today + datetime.timedelta(days=1)} 00:00:00+00:00",
    }
    url = "/admin/django_eid/identification/"
    client.get(url)  # warm the caches, the templates
    print(f"{'page':28} {'median ms':>10} {'SQL ms':>8} {'queries':>8}  status")
    figures: dict[str, dict[str, float | int]] = {}
    for label, params in PAGES.items():
        times, sql_times = [], []
        status = 0
        for _ in range(repeat):
            with CaptureQueriesContext(connection) as captured:
                began = time.perf_counter()
                status = client.get(url, params).status_code
                times.append((time.perf_counter() - began) * 1000)
            sql_times.append(sum(float(q["time"]) for q in captured.captured_queries) * 1000)
        print(
            f"{label:28} {statistics.median(times):10.1f} {statistics.median(sql_times):8.1f}"
            f" {len(captured.captured_queries):8d}  {status}"
        )
        figures[label] = {
            "median_ms": round(statistics.median(times), 1),
            "sql_ms": round(statistics.median(sql_times), 1),
            "queries": len(captured.captured_queries),
            "status": status,
        }
    return figures


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    database_url = os.environ.get("DATABASE_URL")
    if not database_url or not database_url.startswith("postgres"):
        parser.error("set DATABASE_URL to a PostgreSQL server (.ci/services.sh env)")
    configure(database_url)
    from django.core.management import call_command

    call_command("migrate", verbosity=0, skip_checks=True)
    fill(args.rows)
    measure(args.repeat)
    return 0


if __name__ == "__main__":
    sys.exit(main())
