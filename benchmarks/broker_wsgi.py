"""WSGI entry of the benchmark's broker: the sandbox, counting the calls it serves.

Counts go to Redis (``BENCH_COUNTER_REDIS_URL``) so that every gunicorn worker
adds to the same figures: ``bench:broker:token``, ``:create``, ``:retrieve``.
"""

from __future__ import annotations

import os
from typing import Any

import redis
from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "benchmarks.load_settings")
os.environ.setdefault("BENCH_ROLE", "broker")

_django = get_wsgi_application()
_counter = redis.Redis.from_url(os.environ["BENCH_COUNTER_REDIS_URL"])
_ROUTES = {
    ("POST", "/eid-sandbox/oauth/connect/token"): "token",
    ("POST", "/eid-sandbox/identification/session"): "create",
    ("GET", "/eid-sandbox/identification/session"): "retrieve",
}


def application(environ: dict[str, Any], start_response: Any) -> Any:
    kind = _ROUTES.get((environ.get("REQUEST_METHOD", ""), environ.get("PATH_INFO", "")))
    if kind:
        _counter.incr(f"bench:broker:{kind}")
    return _django(environ, start_response)
