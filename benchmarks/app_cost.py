"""3. Per-identification cost inside the app, against bare Django views doing the same.

The broker is a canned one (:mod:`benchmarks.canned_broker`): fixed v1 answers served on
loopback by a process of its own, so this process pays for the round trips and nothing of
the broker's work. In this process, through Django's test client, it times the two requests
the app serves per identification (the start POST and the success callback), and counts
their SQL queries with ``CaptureQueriesContext`` in iterations of their own (its debug
cursor costs time per query that production does not pay).

Reference, alternating with the app in the same process: a pair of bare Django views
making the same broker round trips (a pooled ``requests.Session``, the create POST and the
record GET to the same canned broker, a fixed bearer token) and the same session and row
writes (INSERT the row and remember it in the session; SELECT it, UPDATE it with the
identity, forget it in the session), with no checks, no token cache, no scrubbing, no
encryption, no signals. The ratio app / reference is the price of what django-eid does on
top of the unavoidable.

Wall time and this process's CPU time are both measured; the iterations are cut into
rounds, and the ratio of each round's medians is reported as min / median / max.
Then cProfile (CPU time) over the app's requests lists the hotspots.
"""

from __future__ import annotations

import cProfile
import datetime
import io
import os
import pstats
import statistics
import time
from collections import Counter
from typing import Any

from benchmarks import canned_broker
from benchmarks.common import RESULTS, header, log, row, table_header

# -- the reference views ----------------------------------------------------------


def reference_start(request: Any) -> Any:
    """The start: create the broker session, one INSERT, one session entry."""
    from django.conf import settings
    from django.http import HttpResponseRedirect

    from django_eid.models import Identification, new_external_id, new_reference

    base = settings.DJANGO_EID["BASE_URL"]
    reference, external_id = new_reference(), new_external_id()
    back = f"http://testserver/ref/return/{reference}"
    answer = canned_broker.http().post(
        f"{base}/identification/session",
        json={
            "ReturnUrls": {
                "Success": back + "/success/?requestId=[1]&externalId=[2]",
                "Abort": back + "/abort/?requestId=[1]&externalId=[2]",
                "Error": back + "/error/?status=[0]",
            },
            "ExternalReference": external_id,
        },
        headers={"Authorization": "Bearer canned-access-token"},
        timeout=5,
    )
    answer.raise_for_status()
    created = answer.json()
    row = Identification.objects.create(
        user=request.user,
        reference=reference,
        external_id=external_id,
        request_id=created["RequestId"],
        display="redirect",
        next_url="",
        user_agent=request.META.get("HTTP_USER_AGENT", ""),
        ip_address=request.META.get("REMOTE_ADDR"),
    )
    pending = request.session.get("ref_pending", {})
    pending[row.reference] = time.time()
    request.session["ref_pending"] = pending
    return HttpResponseRedirect(created["Url"])


def reference_success(request: Any, reference: str) -> Any:
    """The callback: SELECT, retrieve the record, one UPDATE, the session entry gone."""
    from django.conf import settings
    from django.http import HttpResponseRedirect
    from django.utils import timezone

    from django_eid.models import Identification

    row = Identification.objects.filter(reference=reference, user_id=request.user.pk).first()
    assert row is not None
    answer = canned_broker.http().get(
        f"{settings.DJANGO_EID['BASE_URL']}/identification/session",
        params={"requestId": row.request_id},
        headers={"Authorization": "Bearer canned-access-token"},
        timeout=5,
    )
    answer.raise_for_status()
    record = answer.json()
    record.pop("SocialSecurityNumber", None)
    Identification.objects.filter(pk=row.pk, status="PENDING").update(
        status="SUCCESS",
        identity_provider=record["IdentityProvider"],
        identity_provider_unique_id=record["IdentityProviderUniqueId"],
        name=record["Name"],
        first_name=record["FirstName"],
        middle_name=record["MiddleName"],
        last_name=record["LastName"],
        date_of_birth=datetime.datetime.strptime(record["DateOfBirth"], "%d%m%y").date(),
        metadata=record["MetaData"],
        raw=record,
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


def post_start(client: Any, path: str) -> Any:
    """The start POST as a browser sends the start page's form: url-encoded (the test
    client's default, multipart, would time a body parser no browser makes Django run)."""
    return client.post(path, "display=redirect", content_type="application/x-www-form-urlencoded")


class Flow:
    def __init__(self) -> None:
        from django.contrib.auth import get_user_model
        from django.test import Client

        user = get_user_model().objects.create_user("bench", password="pw")
        self.app = Client()
        self.app.force_login(user)
        self.ref = Client()
        self.ref.force_login(user)

    @staticmethod
    def _timed(call: Any) -> tuple[Any, float, float]:
        c0, t0 = time.process_time(), time.perf_counter()
        response = call()
        return response, time.perf_counter() - t0, time.process_time() - c0

    def once(
        self, client: Any, start_path: str, *, counted: bool = False
    ) -> tuple[float, float, int, int, float]:
        """(start s, callback s, start queries, callback queries, CPU s of both).

        The queries are counted only when ``counted`` (else -1), in iterations of their own:
        the debug cursor that counts them renders each statement with its parameters, about
        0.4 ms per ORM query here, which a site in production does not pay.
        """
        from django.db import connection
        from django.test.utils import CaptureQueriesContext

        def run(call: Any) -> tuple[Any, float, float, int]:
            if not counted:
                return (*self._timed(call), -1)
            connection.queries_log.clear()  # its cap (9000) would make the count 0
            with CaptureQueriesContext(connection) as queries:
                response, wall, cpu = self._timed(call)
            return response, wall, cpu, len(queries)

        response, start, cpu1, start_queries = run(lambda: post_start(client, start_path))
        assert response.status_code == 302, response.status_code
        # The canned broker's Url is the Success return: the person came back identified.
        success = response["Location"]
        response, callback, cpu2, callback_queries = run(lambda: client.get(success))
        assert response.status_code == 302, (response.status_code, response.content[:300])
        return start, callback, start_queries, callback_queries, cpu1 + cpu2

    def app_once(self, *, counted: bool = False) -> tuple[float, float, int, int, float]:
        return self.once(self.app, "/eid/start/", counted=counted)

    def ref_once(self, *, counted: bool = False) -> tuple[float, float, int, int, float]:
        return self.once(self.ref, "/ref/start/", counted=counted)

    def client_once(self) -> float:
        """The two broker calls alone (django-eid's client), as the views make them."""
        from django_eid.client import ReturnUrls, get_client

        urls = ReturnUrls(
            success="http://testserver/eid/return/x/success/?requestId=[1]&externalId=[2]",
            abort="http://testserver/eid/return/x/abort/?requestId=[1]&externalId=[2]",
            error="http://testserver/eid/return/x/error/?status=[0]",
        )
        t0 = time.perf_counter()
        client = get_client()
        created = client.create_session(return_urls=urls, external_reference="x" * 32)
        client.get_session(created.request_id)
        return time.perf_counter() - t0


def _queries_of_one_app_identification(flow: Flow) -> dict[str, list[str]]:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    out: dict[str, list[str]] = {}
    connection.queries_log.clear()
    with CaptureQueriesContext(connection) as q:
        response = post_start(flow.app, "/eid/start/")
    assert response.status_code == 302
    out["start"] = [x["sql"][:160] for x in q.captured_queries]
    success = response["Location"]
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
        response = post_start(flow.app, "/eid/start/")
        profiler.disable()
        success = response["Location"]
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
        "http_client_ms_per_ident": round(http * 1000 / iterations, 3),
        "top_self": [fmt(e) for e in by_self],
        "django_eid_cumulative": [fmt(e) for e in ours],
    }


def _counts(samples: list[tuple[float, float, int, int, float]], index: int) -> dict[int, int]:
    """How many iterations made each number of queries: ``{queries: iterations}``."""
    return dict(sorted(Counter(sample[index] for sample in samples).items()))


def _mode(counts: dict[int, int]) -> int:
    return max(counts, key=lambda k: counts[k])


def _spread(values: list[float]) -> dict[str, float]:
    return {
        "min": round(min(values), 2),
        "median": round(statistics.median(values), 2),
        "max": round(max(values), 2),
    }


def run(quick: bool = False) -> dict[str, Any]:
    header("3. Per-identification cost inside the app (canned broker on loopback)")
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tests.settings")
    with canned_broker.serving("canned_broker.log") as url:
        return _run(quick, url)


def _run(quick: bool, url: str) -> dict[str, Any]:
    from django.conf import settings

    rounds = 5
    with canned_broker.in_process(url, "benchmarks.app_urls"):
        flow = Flow()
        warmup, iterations = (20, 100) if quick else (30, 300)
        for _ in range(warmup):
            flow.app_once()
            flow.ref_once()
        app: list[tuple[float, float, int, int, float]] = []
        ref: list[tuple[float, float, int, int, float]] = []
        calls: list[float] = []
        for _ in range(iterations):
            app.append(flow.app_once())
            ref.append(flow.ref_once())
            calls.append(flow.client_once())
        # Counted apart from the timed iterations (see Flow.once).
        app_counted = [flow.app_once(counted=True) for _ in range(iterations // 10)]
        ref_counted = [flow.ref_once(counted=True) for _ in range(iterations // 10)]
        queries = _queries_of_one_app_identification(flow)
        prof = profile(flow, 50 if quick else 150)

    def med(values: list[float]) -> float:
        return statistics.median(values) * 1000

    def ratios(index: Any) -> list[float]:
        size = iterations // rounds
        return [
            med([index(x) for x in app[i * size : (i + 1) * size]])
            / med([index(x) for x in ref[i * size : (i + 1) * size]])
            for i in range(rounds)
        ]

    a_start, a_cb = med([x[0] for x in app]), med([x[1] for x in app])
    r_start, r_cb = med([x[0] for x in ref]), med([x[1] for x in ref])
    a_total = med([x[0] + x[1] for x in app])
    r_total = med([x[0] + x[1] for x in ref])
    a_cpu, r_cpu = med([x[4] for x in app]), med([x[4] for x in ref])
    c_total = med(calls)
    wall_rounds = ratios(lambda x: x[0] + x[1])
    cpu_rounds = ratios(lambda x: x[4])
    result = {
        "database": settings.DATABASES["default"]["ENGINE"].rsplit(".", 1)[-1],
        "cache": settings.CACHES["default"]["BACKEND"].rsplit(".", 1)[-1],
        "broker": "canned (benchmarks/canned_broker.py, own process, loopback)",
        "iterations": iterations,
        "app_ms": {
            "start": round(a_start, 3),
            "callback": round(a_cb, 3),
            "total": round(a_total, 3),
            "cpu": round(a_cpu, 3),
        },
        "reference_ms": {
            "start": round(r_start, 3),
            "callback": round(r_cb, 3),
            "total": round(r_total, 3),
            "cpu": round(r_cpu, 3),
        },
        "ratio": round(a_total / r_total, 2),
        "ratio_rounds": _spread(wall_rounds),
        "cpu_ratio": round(a_cpu / r_cpu, 2),
        "cpu_ratio_rounds": _spread(cpu_rounds),
        "broker_calls_ms": round(c_total, 3),
        "app_queries": {"start": _counts(app_counted, 2), "callback": _counts(app_counted, 3)},
        "reference_queries": {
            "start": _counts(ref_counted, 2),
            "callback": _counts(ref_counted, 3),
        },
        "app_sql": queries,
        "profile": prof,
    }
    log(f"  {result['database']} + {result['cache']}, median of {iterations} identifications")
    table_header("app", "bare views")
    row("start (POST), ms", a_start, r_start)
    row("success callback (GET), ms", a_cb, r_cb)
    row(
        "start + callback, ms",
        a_total,
        r_total,
        f"ratio x{result['ratio']} (rounds of {iterations // rounds}: {result['ratio_rounds']})",
    )
    row(
        "  CPU of this process, ms",
        a_cpu,
        r_cpu,
        f"ratio x{result['cpu_ratio']} (rounds: {result['cpu_ratio_rounds']})",
    )
    row("the 2 broker calls alone (client), ms", c_total, "", "create + retrieve, canned broker")
    for step in ("start", "callback"):
        row(
            f"SQL queries, {step}",
            _mode(result["app_queries"][step]),
            _mode(result["reference_queries"][step]),
            f"(counts seen: app {result['app_queries'][step]}, "
            f"bare {result['reference_queries'][step]})",
        )
    row("profiled: HTTP client", prof["http_client_ms_per_ident"], "", "CPU ms, with the profiler")
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
