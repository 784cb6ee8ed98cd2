"""3. Per-identification cost inside the app, against bare Django views.

In one process, with a zero-latency in-process broker (the sandbox broker
served through ``responses``, i.e. django-eid's ``eid_broker`` machinery),
this times the two requests the app serves per identification (the start
POST and the success callback) through Django's test client, and counts their
SQL queries with ``CaptureQueriesContext``.

Reference, in the same process, alternating with the app: a pair of bare
Django views doing the same session and row writes (INSERT the row and
remember it in the session; SELECT it, UPDATE it with the identity, forget it
in the session) but no broker call, no checks, no signals. The ratio
app / reference is the price of what django-eid does on top of the unavoidable
(two broker calls, one insert, one update).

Then cProfile (CPU time) over the app's requests lists the hotspots.
"""

from __future__ import annotations

import cProfile
import io
import os
import pstats
import statistics
import time
from collections import Counter
from typing import Any

from benchmarks.common import RESULTS, header, log, row, table_header
from django_eid.sandbox.broker import record_of
from django_eid.sandbox.persons import builtin_persons

#: Who identifies in every run: the sandbox's first built-in person (the app's broker too).
SAMPLE = builtin_persons().NORWEGIAN
#: What the reference view stores as the raw record: the sandbox's record of SAMPLE.
REFERENCE_RECORD: dict[str, Any] = record_of(SAMPLE, "r", with_number=False)


# -- the reference views ----------------------------------------------------------


def reference_start(request: Any) -> Any:
    """The same writes as the start view: one INSERT, one session entry."""
    from django.http import HttpResponseRedirect

    from django_eid.models import Identification, new_external_id, new_reference

    row = Identification.objects.create(
        user=request.user,
        reference=new_reference(),
        external_id=new_external_id(),
        request_id=new_reference() + new_reference(),
        display="redirect",
        next_url="",
        user_agent=request.META.get("HTTP_USER_AGENT", ""),
        ip_address=request.META.get("REMOTE_ADDR"),
    )
    pending = request.session.get("ref_pending", {})
    pending[row.reference] = time.time()
    request.session["ref_pending"] = pending
    return HttpResponseRedirect(f"/broker/{row.request_id}")


def reference_success(request: Any, reference: str) -> Any:
    """The same writes as the success callback: SELECT, one UPDATE, the session entry gone."""
    from django.http import HttpResponseRedirect
    from django.utils import timezone

    from django_eid.models import Identification

    row = Identification.objects.filter(reference=reference, user_id=request.user.pk).first()
    assert row is not None
    Identification.objects.filter(pk=row.pk, status="PENDING").update(
        status="SUCCESS",
        identity_provider=SAMPLE.identity_provider,
        identity_provider_unique_id=SAMPLE.identity_provider_unique_id,
        name=SAMPLE.name,
        first_name=SAMPLE.first_name,
        middle_name=SAMPLE.middle_name,
        last_name=SAMPLE.last_name,
        date_of_birth=SAMPLE.birth_date,
        metadata={},
        raw=REFERENCE_RECORD,
        completed_at=timezone.now(),
    )
    pending = request.session.get("ref_pending", {})
    pending.pop(reference, None)
    request.session["ref_pending"] = pending
    return HttpResponseRedirect("/")


def urlpatterns() -> list[Any]:
    from django.urls import path

    from tests.urls import urlpatterns as base

    return [
        *base,
        path("ref/start/", reference_start),
        path("ref/return/<str:reference>/success/", reference_success),
    ]


# -- measuring ---------------------------------------------------------------------


class Flow:
    def __init__(self) -> None:
        from django.contrib.auth import get_user_model
        from django.test import Client

        from django_eid.sandbox.fake import EidBroker

        self.broker = EidBroker.from_settings()
        self.broker.start()
        self.person = self.broker.persons.NORWEGIAN
        user = get_user_model().objects.create_user("bench", password="pw")
        self.app = Client()
        self.app.force_login(user)
        self.ref = Client()
        self.ref.force_login(user)

    def close(self) -> None:
        self.broker.stop()

    def complete(self, start_response: Any) -> str:
        """The person at the broker identifies; returns the Success URL (not the app's cost).

        Straight to the sandbox core with the request id from the login URL
        (``EidBroker.complete`` looks through every session of the run).
        """
        request_id = start_response["Location"].rstrip("/").rsplit("/", 1)[-1]
        self.broker.broker.open(request_id)
        return self.broker.broker.identify(request_id, self.person)

    def app_once(self, queries: bool = False) -> tuple[float, float, int, int]:
        from django.db import connection
        from django.test.utils import CaptureQueriesContext

        connection.queries_log.clear()  # its cap (9000) would make the count 0
        with CaptureQueriesContext(connection) as q1:
            t0 = time.perf_counter()
            response = self.app.post("/eid/start/", {"display": "redirect"})
            t1 = time.perf_counter()
        start_queries = len(q1)  # now: the list is read from the log, cleared below
        assert response.status_code == 302, response.status_code
        # The person at the broker: not the app's cost, not timed.
        success = self.complete(response)
        connection.queries_log.clear()
        with CaptureQueriesContext(connection) as q2:
            t2 = time.perf_counter()
            response = self.app.get(success)
            t3 = time.perf_counter()
        assert response.status_code == 302, (response.status_code, response.content[:300])
        return t1 - t0, t3 - t2, start_queries, len(q2)

    def client_once(self) -> float:
        """The two broker calls alone (client + in-process broker), as the views make them."""
        from django_eid.client import ReturnUrls, get_client

        urls = ReturnUrls(
            success="http://testserver/eid/return/x/success/?requestId=[1]&externalId=[2]",
            abort="http://testserver/eid/return/x/abort/?requestId=[1]&externalId=[2]",
            error="http://testserver/eid/return/x/error/?status=[0]",
        )
        t0 = time.perf_counter()
        client = get_client()
        created = client.create_session(return_urls=urls, external_reference="x" * 32)
        t1 = time.perf_counter()
        self.broker.broker.open(created.request_id)
        self.broker.broker.identify(created.request_id, self.person)
        t2 = time.perf_counter()
        client.get_session(created.request_id)
        return (t1 - t0) + (time.perf_counter() - t2)

    def ref_once(self) -> tuple[float, float, int, int]:
        from django.db import connection
        from django.test.utils import CaptureQueriesContext

        connection.queries_log.clear()  # its cap (9000) would make the count 0
        with CaptureQueriesContext(connection) as q1:
            t0 = time.perf_counter()
            response = self.ref.post("/ref/start/", {"display": "redirect"})
            t1 = time.perf_counter()
        start_queries = len(q1)
        assert response.status_code == 302
        reference = self.ref.session["ref_pending"].popitem()[0]
        connection.queries_log.clear()
        with CaptureQueriesContext(connection) as q2:
            t2 = time.perf_counter()
            response = self.ref.get(f"/ref/return/{reference}/success/")
            t3 = time.perf_counter()
        assert response.status_code == 302
        return t1 - t0, t3 - t2, start_queries, len(q2)


def _queries_of_one_app_identification(flow: Flow) -> dict[str, list[str]]:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    out: dict[str, list[str]] = {}
    connection.queries_log.clear()
    with CaptureQueriesContext(connection) as q:
        response = flow.app.post("/eid/start/", {"display": "redirect"})
    assert response.status_code == 302
    out["start"] = [x["sql"][:160] for x in q.captured_queries]
    success = flow.complete(response)
    with CaptureQueriesContext(connection) as q:
        flow.app.get(success)
    out["success"] = [x["sql"][:160] for x in q.captured_queries]
    return out


def profile(flow: Flow, iterations: int) -> dict[str, Any]:
    # CPU time, not wall time: on a shared machine wall time charges whatever
    # function was running when the process was descheduled. Waiting for the
    # database is therefore not in the profile; the query counts show it.
    profiler = cProfile.Profile(time.process_time)
    for _ in range(iterations):
        profiler.enable()
        response = flow.app.post("/eid/start/", {"display": "redirect"})
        profiler.disable()
        success = flow.complete(response)
        profiler.enable()
        flow.app.get(success)
        profiler.disable()
    stats = pstats.Stats(profiler)
    entries = []
    for (filename, line, func), (_cc, ncalls, tottime, cumtime, _callers) in stats.stats.items():  # type: ignore[attr-defined]
        entries.append((filename, line, func, ncalls, tottime, cumtime))

    def short(filename: str) -> str:
        for marker in ("site-packages/", "/work/main/", "lib/python3"):
            if marker in filename:
                return filename.split(marker, 1)[1]
        return filename

    by_self = sorted(entries, key=lambda e: e[4], reverse=True)[:15]
    ours = sorted(
        (e for e in entries if "/django_eid/" in e[0] and "/sandbox/" not in e[0]),
        key=lambda e: e[5],
        reverse=True,
    )[:15]
    broker = sum(e[5] for e in entries if e[2] in ("_on_token", "_on_create", "_on_retrieve"))
    http = sum(e[5] for e in entries if e[2] == "request" and "requests/sessions.py" in e[0])
    total = sum(e[4] for e in entries)

    def fmt(e: tuple[Any, ...]) -> dict[str, Any]:
        return {
            "function": f"{short(e[0])}:{e[1]}({e[2]})",
            "calls_per_ident": round(e[3] / iterations, 1),
            "self_ms_per_ident": round(e[4] * 1000 / iterations, 3),
            "cum_ms_per_ident": round(e[5] * 1000 / iterations, 3),
        }

    out = io.StringIO()
    stats.stream = out  # type: ignore[attr-defined]
    stats.sort_stats("cumulative").print_stats(40)
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "app_cost_profile.txt").write_text(out.getvalue())
    return {
        "iterations": iterations,
        "profiled_ms_per_ident": round(total * 1000 / iterations, 3),
        "broker_stub_ms_per_ident": round(broker * 1000 / iterations, 3),
        "http_client_ms_per_ident": round(http * 1000 / iterations, 3),
        "top_self": [fmt(e) for e in by_self],
        "django_eid_cumulative": [fmt(e) for e in ours],
    }


def _counts(samples: list[tuple[float, float, int, int]], index: int) -> dict[int, int]:
    """How many iterations made each number of queries: ``{queries: iterations}``."""
    return dict(sorted(Counter(sample[index] for sample in samples).items()))


def _mode(counts: dict[int, int]) -> int:
    return max(counts, key=lambda k: counts[k])


def _forget_token() -> None:
    from django.core.cache import caches

    from django_eid.client import EidClient
    from tests.production.helpers import fresh_clients

    client = EidClient()
    caches[client.tokens.cache_alias].delete(client.tokens.key)
    client.close()
    fresh_clients()


def run(quick: bool = False) -> dict[str, Any]:
    header("3. Per-identification cost inside the app (in-process broker, zero latency)")
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tests.settings")
    import django
    from django.conf import settings

    django.setup()
    from django.test.utils import setup_databases, setup_test_environment, teardown_databases
    from django.urls import clear_url_caches

    import benchmarks.app_urls  # noqa: F401 - the urlconf below
    import tests.settings
    from django_eid.conf import eid_settings

    settings.ROOT_URLCONF = "benchmarks.app_urls"
    # Another benchmark of this process may have pointed django-eid elsewhere.
    settings.DJANGO_EID = dict(tests.settings.DJANGO_EID)
    eid_settings.clear()
    clear_url_caches()
    setup_test_environment()
    old = setup_databases(verbosity=0, interactive=False)
    _forget_token()  # a token of an earlier run's in-process broker would be refused
    flow = Flow()
    try:
        warmup, iterations = (20, 100) if quick else (30, 300)
        for _ in range(warmup):
            flow.app_once()
            flow.ref_once()
        app: list[tuple[float, float, int, int]] = []
        ref: list[tuple[float, float, int, int]] = []
        calls: list[float] = []
        for _ in range(iterations):
            app.append(flow.app_once())
            ref.append(flow.ref_once())
            calls.append(flow.client_once())
        queries = _queries_of_one_app_identification(flow)
        prof = profile(flow, 50 if quick else 150)
    finally:
        flow.close()
        teardown_databases(old, verbosity=0)

    def med(values: list[float]) -> float:
        return statistics.median(values) * 1000

    a_start, a_cb = med([x[0] for x in app]), med([x[1] for x in app])
    r_start, r_cb = med([x[0] for x in ref]), med([x[1] for x in ref])
    a_total = med([x[0] + x[1] for x in app])
    r_total = med([x[0] + x[1] for x in ref])
    c_total = med(calls)
    own = a_total - c_total
    result = {
        "database": settings.DATABASES["default"]["ENGINE"].rsplit(".", 1)[-1],
        "cache": settings.CACHES["default"]["BACKEND"].rsplit(".", 1)[-1],
        "iterations": iterations,
        "app_ms": {
            "start": round(a_start, 3),
            "callback": round(a_cb, 3),
            "total": round(a_total, 3),
        },
        "reference_ms": {
            "start": round(r_start, 3),
            "callback": round(r_cb, 3),
            "total": round(r_total, 3),
        },
        "ratio": round(a_total / r_total, 2),
        "broker_calls_ms": round(c_total, 3),
        "app_without_broker_calls_ms": round(own, 3),
        "ratio_without_broker_calls": round(own / r_total, 2),
        "app_queries": {"start": _counts(app, 2), "callback": _counts(app, 3)},
        "reference_queries": {"start": _counts(ref, 2), "callback": _counts(ref, 3)},
        "app_sql": queries,
        "profile": prof,
    }
    log(f"  {result['database']} + {result['cache']}, median of {iterations} identifications")
    table_header("app", "bare views")
    row("start (POST), ms", a_start, r_start)
    row("success callback (GET), ms", a_cb, r_cb)
    row("start + callback, ms", a_total, r_total, f"ratio x{result['ratio']}")
    row("  of which the 2 broker calls, ms", c_total, 0, "client + in-process sandbox broker")
    row(
        "  the rest, ms",
        own,
        r_total,
        f"ratio x{result['ratio_without_broker_calls']}",
    )
    for step in ("start", "callback"):
        row(
            f"SQL queries, {step}",
            _mode(result["app_queries"][step]),
            _mode(result["reference_queries"][step]),
            f"(counts seen: app {result['app_queries'][step]}, "
            f"bare {result['reference_queries'][step]})",
        )
    broker_ms = prof["broker_stub_ms_per_ident"]
    http_ms = prof["http_client_ms_per_ident"]
    row(
        "profiled: HTTP client + in-process broker",
        http_ms,
        "",
        f"CPU ms (the broker itself {broker_ms}); inflated by the profiler",
    )
    log("  top self CPU time per identification (cProfile, CPU clock):")
    for entry in prof["top_self"][:8]:
        log(f"    {entry['self_ms_per_ident']:>7.3f} ms  {entry['function']}")
    log("  django_eid functions by cumulative CPU time per identification:")
    for entry in prof["django_eid_cumulative"][:8]:
        log(
            f"    {entry['cum_ms_per_ident']:>7.3f} ms  x{entry['calls_per_ident']:<4} "
            f"{entry['function']}"
        )
    return result
