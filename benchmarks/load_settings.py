"""Settings of benchmarks 4 and 5: the example project, as deployed, plus benchmark knobs.

``BENCH_ROLE=app`` (default) is the site under test: the example project with
the broker reached over HTTP (``EID_BASE_URL``...). ``BENCH_ROLE=broker`` is the
same project serving only the embedded sandbox broker, with an injected
latency, in its own gunicorn.
"""

from __future__ import annotations

import os

from example_project.settings import *  # noqa: F403
from example_project.settings import DJANGO_EID

ROLE = os.environ.get("BENCH_ROLE", "app")

# Logging in is not what is measured: a cheap hasher keeps PBKDF2 out of the figures.
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]

DJANGO_EID = {**DJANGO_EID, "TIMEOUT": float(os.environ.get("BENCH_EID_TIMEOUT", "10"))}

if ROLE == "broker":
    DJANGO_EID.update(
        SANDBOX_ALLOW_WITHOUT_DEBUG=True,
        SANDBOX_LATENCY=float(os.environ.get("BENCH_SANDBOX_LATENCY", "0.05")),
        SANDBOX_TOKEN_LIFETIME=int(os.environ.get("BENCH_SANDBOX_TOKEN_LIFETIME", "3600")),
    )
    # The broker is another site on the same host name (127.0.0.1): keep its
    # cookies apart from the app's (cookies do not look at the port).
    SESSION_COOKIE_NAME = "broker_sessionid"
    CSRF_COOKIE_NAME = "broker_csrftoken"
