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
identity may be stored. Reports the counts and the time the command took per row.
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
    from django.test.utils import setup_databases, setup_test_environment, teardown_databases
    from django.urls import clear_url_caches

    import tests.settings
    from django_eid.conf import eid_settings

    settings.ROOT_URLCONF = "tests.urls"
    clear_url_caches()
    setup_test_environment()
    old = setup_databases(verbosity=0, interactive=False)
    try:
        return _measure(USERS // 4 if quick else USERS, tests.settings, eid_settings)
    finally:
        teardown_databases(old, verbosity=0)


def _measure(users: int, test_settings: Any, eid_settings: Any) -> dict[str, Any]:
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
    assert stored == len(genuine), result
    assert once, result
    assert relayed == 0, result
    return result
