"""6. Completion outside the browser: 200 identifications, the phones' ways back, one run of
``eid_reconcile``.

Against the sandbox broker over loopback (the production tier's stub, a real HTTP server),
on PostgreSQL, each of 200 users starts an identification in a browser of their own (an IP
address and a user agent each) and identifies at the broker. Then:

- 45 % come back in the same browser (the callback);
- 30 % close the tab after identifying (no callback at all);
- 20 % come back in another browser, without the session (the app switch): the "go back"
  page, and the row settled there under the same-device rule;
- 5 % are relay attempts: the session's URL identified from another device (a victim's);
  the victim's browser lands on the return URL without the session.

After one ``eid_reconcile --older-than 0`` run: every broker ``SUCCESS`` of a genuine user
must be a ``SUCCESS`` row with exactly one ``identification_succeeded``, and no relayed
identity may be stored. A second run right after must ask about nothing: the relays, still
pending, rest for ``RECHECK``. Reports the counts and the time the command took per row.

Then the claim with a long history: 100,000 finished rows (25,000 with ``--quick``) are
added, and a run that finds nothing due is timed, with the partial index of pending rows
(migration 0005) and without it, with the query plan of the claim.
"""

from __future__ import annotations

import os
import random
import time
from collections import Counter
from io import StringIO
from typing import Any

from benchmarks.common import header, log, row, table_header

USERS = 200
#: Finished rows added for the claim's cost with a long history.
HISTORY = 100_000
SHARES = (("callback", 45), ("closed_tab", 30), ("other_browser", 20), ("relay", 5))


def _plan(users: int) -> list[str]:
    plan = [kind for kind, share in SHARES for _ in range(users * share // 100)]
    plan += ["callback"] * (users - len(plan))
    random.Random(2026).shuffle(plan)
    return plan


def run(quick: bool = False) -> dict[str, Any]:
    header("6. Completion outside the browser: app switches, closed tabs, relays")
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tests.settings")
    import django
    from django.conf import settings

    django.setup()
    from django.test.utils import (
        setup_databases,
        setup_test_environment,
        teardown_databases,
        teardown_test_environment,
    )
    from django.urls import clear_url_caches

    import tests.settings
    from django_eid.conf import eid_settings

    settings.ROOT_URLCONF = "tests.urls"
    clear_url_caches()
    setup_test_environment()
    old = setup_databases(verbosity=0, interactive=False)
    try:
        return _measure(USERS // 4 if quick else USERS, tests.settings, eid_settings, quick)
    finally:
        teardown_databases(old, verbosity=0)
        # The next benchmark of this process sets it up again.
        teardown_test_environment()


def _measure(users: int, test_settings: Any, eid_settings: Any, quick: bool) -> dict[str, Any]:
    from django.conf import settings
    from django.contrib.auth import get_user_model
    from django.core.management import call_command
    from django.test import Client

    from django_eid import signals
    from django_eid.client import reset_client
    from django_eid.models import Identification
    from django_eid.sandbox.persons import builtin_persons
    from tests.production.stub import BrokerStub

    succeeded: Counter[int] = Counter()

    def count(sender: Any, identification: Any, **kwargs: Any) -> None:
        succeeded[identification.pk] += 1

    signals.identification_succeeded.connect(count, weak=False, dispatch_uid="bench-reconcile")
    plan = _plan(users)
    person = builtin_persons().NORWEGIAN
    pages: Counter[str] = Counter()
    try:
        with BrokerStub(person=None) as stub:
            settings.DJANGO_EID = stub.settings(MAX_PENDING_PER_USER=5)
            eid_settings.clear()
            reset_client()
            rows: dict[int, str] = {}
            for i, kind in enumerate(plan):
                user = get_user_model().objects.create_user(f"phone{i}", password="pw")
                ip, ua = f"10.{i // 250}.{i % 250}.7", f"Mozilla/5.0 (Phone {i}) Mobile"
                browser = Client(REMOTE_ADDR=ip, HTTP_USER_AGENT=ua)
                browser.force_login(user)
                response = browser.post("/eid/start/", {"display": "redirect"})
                assert response.status_code == 302, response.status_code
                request_id = response["Location"].rstrip("/").rsplit("/", 1)[-1]
                row_ = Identification.objects.get(request_id=request_id)
                rows[row_.pk] = kind
                # The person identifies at the broker: in the starting browser, or (a relay)
                # in a victim's browser elsewhere.
                env = ("203.0.113.99", "Mozilla/5.0 (Victim)") if kind == "relay" else (ip, ua)
                with stub.lock:
                    url = stub.broker.identify(
                        request_id, person, ip_address=env[0], user_agent=env[1]
                    )
                path = url.split("://", 1)[1].split("/", 1)[1]
                if kind == "callback":
                    pages[str(browser.get("/" + path).status_code)] += 1
                elif kind in ("other_browser", "relay"):
                    other = Client()
                    other.get("/" + path)  # the interstitial, then its retry
                    page = other.get("/" + path + "&eid_retry=1")
                    pages[
                        "go back" if b"Go back to where you started" in page.content else "other"
                    ] += 1
            before = Counter(
                rows[pk]
                for pk in Identification.objects.filter(status="SUCCESS").values_list(
                    "pk", flat=True
                )
            )
            pending = Identification.objects.filter(status="PENDING").count()
            out = StringIO()
            t0 = time.perf_counter()
            call_command("eid_reconcile", "--older-than", "0", stdout=out)
            seconds = time.perf_counter() - t0
            again = StringIO()
            call_command("eid_reconcile", "--older-than", "0", stdout=again)
            statuses = {
                pk: status for pk, status in Identification.objects.values_list("pk", "status")
            }
    finally:
        signals.identification_succeeded.disconnect(dispatch_uid="bench-reconcile")
        settings.DJANGO_EID = dict(test_settings.DJANGO_EID)
        eid_settings.clear()
        reset_client()

    genuine = [pk for pk, kind in rows.items() if kind != "relay"]
    relays = [pk for pk, kind in rows.items() if kind == "relay"]
    stored = sum(statuses[pk] == "SUCCESS" for pk in genuine)
    once = all(succeeded[pk] == 1 for pk in genuine)
    relayed = sum(statuses[pk] == "SUCCESS" for pk in relays)
    result = {
        "users": users,
        "plan": dict(Counter(plan)),
        "success_before_reconcile": dict(before),
        "pending_before_reconcile": pending,
        "reconcile_output": out.getvalue().strip(),
        "second_run_output": again.getvalue().strip(),
        "reconcile_seconds": round(seconds, 3),
        "reconcile_ms_per_row": round(seconds / max(pending, 1) * 1000, 2),
        "genuine_successes_stored": stored,
        "genuine": len(genuine),
        "every_genuine_success_signalled_once": once,
        "relayed_identities_stored": relayed,
        "relays": len(relays),
        "pages": dict(pages),
    }
    log(f"  {users} identifications: {dict(Counter(plan))}")
    table_header("measured", "wanted")
    row("genuine broker SUCCESS stored as SUCCESS", f"{stored}/{len(genuine)}", len(genuine))
    row("  each with one identification_succeeded", once, True)
    row("relayed identities stored", f"{relayed}/{len(relays)}", 0)
    row("pending before the run", pending, "")
    row("eid_reconcile, ms per row", result["reconcile_ms_per_row"], "")
    log(f"  {result['reconcile_output']}")
    log(f"  then: {result['second_run_output']}")
    assert stored == len(genuine), result
    assert once, result
    assert relayed == 0, result
    assert result["second_run_output"] == "eid_reconcile: 0 row(s) checked: none.", result
    result["claim_with_history"] = _claim_with_history(HISTORY // 4 if quick else HISTORY)
    return result


def _claim_with_history(history: int) -> dict[str, Any]:
    """The claim with ``history`` finished rows, with and without the partial index of
    pending rows: with the few pending rows of benchmark 6, then with a backlog of pending
    rows that are resting (``BACKOFF``), none of them due."""
    import datetime
    import re
    import statistics

    from django.contrib.auth import get_user_model
    from django.core.management import call_command
    from django.db import connection
    from django.utils import timezone

    from django_eid.management.commands import eid_reconcile
    from django_eid.models import Identification

    user = get_user_model().objects.create_user("history", password="pw")
    now = timezone.now()
    resting = now + datetime.timedelta(days=1)

    def add(count: int, status: str, **fields: Any) -> None:
        start = now - datetime.timedelta(days=365)
        Identification.objects.bulk_create(
            (
                Identification(
                    user=user,
                    status=status,
                    created_at=start + datetime.timedelta(seconds=i * 31_536_000 // count),
                    **fields,
                )
                for i in range(count)
            ),
            batch_size=5000,
        )

    add(history, "SUCCESS")
    # The relays, still pending, stay out of the runs (there is no broker to ask any more).
    Identification.objects.filter(status="PENDING").update(claimed_until=resting)
    index = next(i for i in Identification._meta.indexes if i.name == "django_eid_pending_due")

    def measure() -> dict[str, Any]:
        with connection.cursor() as cursor:
            cursor.execute("ANALYZE django_eid_identification")
        candidates = (
            eid_reconcile.due(eid_reconcile.database_now("default"), 0)
            .order_by("created_at", "pk")
            .values_list("created_at", "pk")[:100]
        )
        sql, params = candidates.query.sql_with_params()
        executions, plan = [], []
        with connection.cursor() as cursor:
            for _ in range(21):
                cursor.execute("EXPLAIN (ANALYZE, BUFFERS) " + sql, params)
                plan = [line for (line,) in cursor.fetchall()]
                found = re.search(r"Execution Time: ([0-9.]+) ms", "\n".join(plan))
                assert found, plan
                executions.append(float(found.group(1)))
        runs = []
        for _ in range(21):
            t0 = time.perf_counter()
            call_command("eid_reconcile", "--older-than", "0", stdout=StringIO())
            runs.append(time.perf_counter() - t0)
        return {
            "claim_query_ms": round(statistics.median(executions), 3),
            "run_ms": round(statistics.median(runs) * 1000, 2),
            "index_used": next((line.strip() for line in plan if " using " in line), ""),
            "plan": plan,
        }

    def both() -> dict[str, Any]:
        measured = {"with_partial_index": measure()}
        with connection.schema_editor() as editor:
            editor.remove_index(Identification, index)
        try:
            measured["without_partial_index"] = measure()
        finally:
            with connection.schema_editor() as editor:
                editor.add_index(Identification, index)
        return measured

    result: dict[str, Any] = {"history_rows": history}
    result["few_pending"] = both()
    result["few_pending"]["pending_rows"] = Identification.objects.filter(status="PENDING").count()
    add(history // 5, "PENDING", claimed_until=resting)
    result["backlog"] = both()
    result["backlog"]["pending_rows"] = Identification.objects.filter(status="PENDING").count()
    log(f"  the claim with {history} finished rows (medians of 21), a run finding nothing due:")
    table_header("claim query", "whole run")
    for case in ("few_pending", "backlog"):
        for variant in ("with_partial_index", "without_partial_index"):
            measured = result[case][variant]
            label = f"{result[case]['pending_rows']} pending, {variant.replace('_', ' ')}"
            row(label, f"{measured['claim_query_ms']} ms", f"{measured['run_ms']} ms")
            log(f"    {measured['index_used']}")
    return result
