"""Code that runs in spawned worker processes (tests and benchmarks).

Each worker is a fresh interpreter (``multiprocessing`` with ``spawn``) that
configures Django with ``tests.settings`` (so it shares the Redis cache of the
production tier when ``EID_TEST_REDIS_URL`` is set) and builds its own
:class:`~django_eid.client.EidClient`, like one web worker of a deployment.
"""

from __future__ import annotations

import os
import threading
import time
import traceback
from typing import Any


def configure_django(eid: dict[str, Any], caches: dict[str, Any] | None = None) -> None:
    """Set Django up in this process, pointing django-eid at ``eid``."""
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tests.settings")
    import django
    from django.conf import settings

    django.setup()
    # Nothing has read these yet: the caches and django-eid's settings are lazy.
    settings.DJANGO_EID = eid
    if caches is not None:
        settings.CACHES = caches


def hammer(
    eid: dict[str, Any],
    barrier: Any,
    duration: float,
    pause: float,
    threads: int,
    results: Any,
    caches: dict[str, Any] | None = None,
    *,
    request_id: str,
) -> None:
    """Retrieve the session ``request_id`` as fast as ``pause`` allows for ``duration`` seconds.

    Every thread uses this process's one ``EidClient`` instance (``threads``
    threads share it, as the threads of a web worker share the token).
    Puts ``{"pid", "calls", "errors": [...]}`` on ``results``.
    """
    out: dict[str, Any] = {"pid": os.getpid(), "calls": 0, "errors": []}
    try:
        configure_django(eid, caches)
        from django_eid.client import EidClient

        client = EidClient()
        lock = threading.Lock()
        barrier.wait(timeout=120)
        end = time.monotonic() + duration

        def run() -> None:
            while time.monotonic() < end:
                try:
                    client.get_session(request_id)
                except Exception as err:
                    with lock:
                        out["errors"].append(f"{type(err).__name__}: {err}"[:300])
                else:
                    with lock:
                        out["calls"] += 1
                time.sleep(pause)

        workers = [threading.Thread(target=run) for _ in range(threads)]
        for t in workers:
            t.start()
        for t in workers:
            t.join(timeout=duration + 60)
        client.close()
    except Exception:
        out["errors"].append(traceback.format_exc()[-2000:])
    results.put(out)


def identify(
    eid: dict[str, Any],
    barrier: Any,
    count: int,
    interval: float,
    results: Any,
    caches: dict[str, Any] | None = None,
) -> None:
    """``count`` identifications (create + retrieve), one every ``interval`` seconds.

    Uses :func:`django_eid.client.get_client`, as the views do.
    """
    out: dict[str, Any] = {"pid": os.getpid(), "identifications": 0, "errors": []}
    try:
        configure_django(eid, caches)
        from django_eid.client import ReturnUrls, get_client

        urls = ReturnUrls(
            success="https://site.test/eid/return/r/success/?requestId=[1]&externalId=[2]",
            abort="https://site.test/eid/return/r/abort/?requestId=[1]&externalId=[2]",
            error="https://site.test/eid/return/r/error/?status=[0]",
        )
        barrier.wait(timeout=120)
        start = time.monotonic()
        for i in range(count):
            # A steady pace, so the run spans several token lifetimes.
            delay = start + i * interval - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            try:
                client = get_client()
                created = client.create_session(return_urls=urls, external_reference=f"x{i}")
                record = client.get_session(created.request_id)
                assert record.request_id == created.request_id
            except Exception as err:
                out["errors"].append(f"{type(err).__name__}: {err}"[:300])
            else:
                out["identifications"] += 1
        get_client().close()
    except Exception:
        out["errors"].append(traceback.format_exc()[-2000:])
    results.put(out)


def run_processes(
    target: Any,
    count: int,
    eid: dict[str, Any],
    *args: Any,
    kwargs: dict[str, Any] | None = None,
    timeout: float = 180,
) -> list[dict[str, Any]]:
    """Run ``target(eid, barrier, *args, results, **kwargs)`` in ``count`` spawned processes.

    The processes meet at ``barrier`` before they start working; returns the
    dict each one put on ``results``.
    """
    import multiprocessing
    import queue

    ctx = multiprocessing.get_context("spawn")
    barrier = ctx.Barrier(count)
    results = ctx.Queue()
    procs = [
        ctx.Process(
            target=target, args=(eid, barrier, *args, results), kwargs=kwargs or {}, daemon=True
        )
        for _ in range(count)
    ]
    for p in procs:
        p.start()
    out: list[dict[str, Any]] = []
    deadline = time.monotonic() + timeout
    try:
        for _ in procs:
            try:
                out.append(results.get(timeout=max(0.1, deadline - time.monotonic())))
            except queue.Empty:
                break
    finally:
        for p in procs:
            p.join(timeout=max(0.1, deadline - time.monotonic()))
            if p.is_alive():
                p.kill()
                p.join(timeout=5)
    if len(out) != count:
        raise RuntimeError(f"only {len(out)} of {count} worker processes reported back")
    return out


def change_and_hang(database: str, pk: int, in_transaction: bool, ready: Any) -> None:
    """Abort identification ``pk`` in the test database ``database``; then hang (in a
    transaction when ``in_transaction``, as a request under ``ATOMIC_REQUESTS`` might),
    until the test kills this process. Puts the backend's pid on ``ready`` first.
    """
    configure_django({"CLIENT_ID": "x", "CLIENT_SECRET": "y"})
    from django.conf import settings
    from django.db import connection, transaction

    settings.DATABASES["default"]["NAME"] = database
    from django_eid.flows import finish
    from django_eid.models import Identification

    row = Identification.objects.get(pk=pk)
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        (backend,) = cursor.fetchone()
    ready.put(backend)
    if in_transaction:
        with transaction.atomic():
            finish.abort(row)
            ready.put("changed")
            time.sleep(3600)  # killed long before
    finish.abort(row)  # blocks on the test's lock of the events' table
    ready.put("changed")
