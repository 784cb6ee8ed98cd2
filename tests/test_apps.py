"""What ``AppConfig.ready()`` prepares, in a fresh interpreter."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
CHILD = """
import json, sys
from django.conf import settings
settings.configure(
    INSTALLED_APPS=["django.contrib.contenttypes", "django.contrib.auth", "django_eid"],
    CACHES={"default": {"BACKEND": sys.argv[1], "LOCATION": "redis://127.0.0.1:9/0"}},
    DATABASES={},
)
import django
django.setup()
print(json.dumps("redis" in sys.modules))
"""


@pytest.mark.parametrize(
    ("backend", "imported"),
    [
        ("django.core.cache.backends.redis.RedisCache", True),
        ("django.core.cache.backends.locmem.LocMemCache", False),
    ],
)
def test_ready_imports_the_redis_library_only_for_a_redis_cache(
    backend: str, imported: bool
) -> None:
    """The first identification of a worker does not pay for importing ``redis``; setting
    Django up connects to nothing (the Redis address here is a closed port)."""
    out = subprocess.run(  # noqa: S603 - this interpreter, fixed arguments
        [sys.executable, "-c", CHILD, backend],
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    ).stdout
    assert json.loads(out.strip().splitlines()[-1]) is imported
