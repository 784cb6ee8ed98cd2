"""8. A login by eID inside the app, against a password login of bare Django with the same
two broker calls; and what the anonymous caps cost a start.

The broker is benchmark 3's canned one (:mod:`benchmarks.canned_broker`: its ``Url`` is the
Success return already filled in, its record the sandbox's first built-in person), in a
process of its own on loopback. The person's account is linked (``LinkedIdentity``), so
each iteration is a whole login at the door: a visitor's browser (a fresh test client)
POSTs ``django_eid:login``, follows the broker's ``Url`` back to the Success return, and
is logged in there (Django's ``login()``, ``eid_login``).

Reference, alternating in the same process: a password login of bare Django views with the
same two broker round trips (a pooled ``requests.Session``), in the same two requests: a
POST that checks the password as Django's ``LoginView`` does (its ``AuthenticationForm``:
``authenticate()`` with ``ModelBackend``, ``confirm_login_allowed``), creates the broker
session and keeps the user in the session, then a GET that fetches the record and calls
``login()``. Measured twice: with Django's default password hasher (what a site runs:
PBKDF2, most of the reference's time) and with the MD5 hasher (hashing taken out: the
strict comparison, django-eid's own work against a bare login's).

The caps (``LOGIN_MAX_PENDING_PER_SESSION``, ``LOGIN_RATE``) are on: the SQL statements of
the start are listed, with those that touch the counters' table counted apart.
"""

from __future__ import annotations

import os
import statistics
import time
from typing import Any

from benchmarks import canned_broker
from benchmarks.common import header, log, row, table_header

PASSWORD = "bench-login-pw-1"  # a benchmark's throwaway account


def reference_start(request: Any) -> Any:
    """A password login's first half: the password checked as Django's ``LoginView`` checks
    it (``AuthenticationForm``: ``authenticate()``, then ``confirm_login_allowed``), the
    broker session created, the user remembered in the session."""
    from django.conf import settings
    from django.contrib.auth.forms import AuthenticationForm
    from django.http import HttpResponseRedirect

    # What Django's LoginView does with the POST: its form authenticates (ModelBackend) and
    # asks whether the user may log in.
    form = AuthenticationForm(request, data=request.POST)
    assert form.is_valid(), form.errors
    user = form.get_user()
    created = canned_broker.http().post(
        f"{settings.DJANGO_EID['BASE_URL']}/identification/session",
        json={"ReturnUrls": {"Success": "http://testserver/x"}, "ExternalReference": "x" * 32},
        headers={"Authorization": "Bearer canned-access-token"},
        timeout=5,
    )
    created.raise_for_status()
    request.session["ref_login"] = [user.pk, created.json()["RequestId"]]
    return HttpResponseRedirect("/ref/login/return/")


def reference_return(request: Any) -> Any:
    """Its second half: the broker's record fetched, Django's ``login()``."""
    from django.conf import settings
    from django.contrib.auth import get_user_model, login
    from django.http import HttpResponseRedirect

    user_pk, request_id = request.session.pop("ref_login")
    record = canned_broker.http().get(
        f"{settings.DJANGO_EID['BASE_URL']}/identification/session",
        params={"requestId": request_id},
        headers={"Authorization": "Bearer canned-access-token"},
        timeout=5,
    )
    record.raise_for_status()
    user = get_user_model()._default_manager.get(pk=user_pk)
    login(request, user, backend="django.contrib.auth.backends.ModelBackend")
    return HttpResponseRedirect("/")


def urlpatterns() -> list[Any]:
    from django.urls import path
    from django.views.decorators.csrf import csrf_exempt

    from tests.urls import urlpatterns as base

    return [
        *base,
        path("ref/login/", csrf_exempt(reference_start)),
        path("ref/login/return/", reference_return),
    ]


def app_login() -> tuple[float, int, list[str]]:
    """One login by eID in a fresh browser: (seconds, queries, the start's SQL)."""
    from django.contrib.auth import SESSION_KEY
    from django.db import connection
    from django.test import Client
    from django.test.utils import CaptureQueriesContext

    browser = Client()
    t0 = time.perf_counter()
    with CaptureQueriesContext(connection) as start_queries:
        started = browser.post(
            "/eid/login/",
            "purpose=login&display=redirect",
            content_type="application/x-www-form-urlencoded",
        )
    assert started.status_code == 302, started.content[:300]
    with CaptureQueriesContext(connection) as return_queries:
        back = browser.get(started["Location"])
    wall = time.perf_counter() - t0
    assert back.status_code == 302, back.content[:300]
    assert SESSION_KEY in browser.session
    sql = [q["sql"] for q in start_queries.captured_queries]
    return wall, len(start_queries) + len(return_queries), sql


def app_login_timed() -> float:
    """As :func:`app_login`, without the debug cursor's cost per query."""
    from django.test import Client

    browser = Client()
    t0 = time.perf_counter()
    started = browser.post(
        "/eid/login/",
        "purpose=login&display=redirect",
        content_type="application/x-www-form-urlencoded",
    )
    back = browser.get(started["Location"])
    wall = time.perf_counter() - t0
    assert back.status_code == 302
    return wall


def reference_timed(username: str) -> float:
    from django.test import Client

    browser = Client()
    t0 = time.perf_counter()
    started = browser.post(
        "/ref/login/",
        f"username={username}&password={PASSWORD}",
        content_type="application/x-www-form-urlencoded",
    )
    back = browser.get(started["Location"])
    wall = time.perf_counter() - t0
    assert back.status_code == 302, back.content[:300]
    return wall


def run(quick: bool = False) -> dict[str, Any]:
    header("8. A login by eID against a password login (canned broker on loopback)")
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tests.settings")
    with canned_broker.serving("canned_broker_login.log") as url:
        return _run(quick, url)


def _run(quick: bool, url: str) -> dict[str, Any]:
    from django.conf import global_settings, settings
    from django.test.utils import override_settings

    backends = [
        "django.contrib.auth.backends.ModelBackend",
        "django_eid.backends.EidBackend",
    ]
    warmup, iterations = (10, 60) if quick else (30, 300)
    with (
        canned_broker.in_process(
            url,
            "benchmarks.login_urls",
            # Generous caps, so that every iteration passes them: their cost is measured,
            # not their refusals.
            LOGIN_MAX_PENDING_PER_SESSION=5,
            LOGIN_RATE="1000000/h",
        ),
        override_settings(AUTHENTICATION_BACKENDS=backends),
    ):
        # Django is set up now.
        from django.contrib.auth import get_user_model

        from django_eid.models import LinkedIdentity
        from django_eid.person_keys import uid_key_of
        from django_eid.sandbox.persons import builtin_persons

        person = builtin_persons().NORWEGIAN
        users = get_user_model().objects
        with override_settings(PASSWORD_HASHERS=global_settings.PASSWORD_HASHERS):
            kari = users.create_user("kari", password=PASSWORD)
        key = uid_key_of("NO_BANKID_WEB", person.identity_provider_unique_id)
        LinkedIdentity.objects.create(user=kari, key=key, scheme="no-bankid")
        with override_settings(PASSWORD_HASHERS=["django.contrib.auth.hashers.MD5PasswordHasher"]):
            users.create_user("kari-md5", password=PASSWORD)
        with override_settings(PASSWORD_HASHERS=global_settings.PASSWORD_HASHERS):
            for _ in range(min(warmup, 5)):
                app_login_timed()
                reference_timed("kari")
            app, ref_default = [], []
            for _ in range(max(5, iterations // 10)):  # PBKDF2 takes its time
                app.append(app_login_timed())
                ref_default.append(reference_timed("kari"))
        with override_settings(PASSWORD_HASHERS=["django.contrib.auth.hashers.MD5PasswordHasher"]):
            for _ in range(warmup):
                reference_timed("kari-md5")
            app_md5, ref_md5 = [], []
            for _ in range(iterations):
                app_md5.append(app_login_timed())
                ref_md5.append(reference_timed("kari-md5"))
        counted = [app_login() for _ in range(max(5, iterations // 20))]

    def med(values: list[float]) -> float:
        return statistics.median(values) * 1000

    start_sql = counted[-1][2]
    table = "django_eid_startcounter"
    cap_statements = [sql for sql in start_sql if table in sql]
    result = {
        "database": settings.DATABASES["default"]["ENGINE"].rsplit(".", 1)[-1],
        "iterations": iterations,
        "app_ms": round(med(app), 3),
        "reference_default_hasher_ms": round(med(ref_default), 3),
        "ratio_default_hasher": round(med(app) / med(ref_default), 2),
        "app_ms_md5_round": round(med(app_md5), 3),
        "reference_md5_hasher_ms": round(med(ref_md5), 3),
        "ratio_md5_hasher": round(med(app_md5) / med(ref_md5), 2),
        "queries_per_login": statistics.mode(c[1] for c in counted),
        "start_statements": len(start_sql),
        "cap_statements_per_start": len(cap_statements),
        "cap_sql": [sql[:200] for sql in cap_statements],
        "start_sql": [sql[:160] for sql in start_sql],
    }
    log(f"  {result['database']}, median of {iterations} logins each")
    table_header("login by eID", "password login + 2 broker calls")
    row(
        "default hasher (PBKDF2), ms",
        result["app_ms"],
        result["reference_default_hasher_ms"],
        f"ratio x{result['ratio_default_hasher']}",
    )
    row(
        "MD5 hasher (hashing out), ms",
        result["app_ms_md5_round"],
        result["reference_md5_hasher_ms"],
        f"ratio x{result['ratio_md5_hasher']} (target: at most 1.3)",
    )
    row("SQL queries per login by eID (start + return)", result["queries_per_login"])
    row(
        "statements of the anonymous caps per start",
        result["cap_statements_per_start"],
        1,
        f"of {result['start_statements']} statements of the start",
    )
    return result
