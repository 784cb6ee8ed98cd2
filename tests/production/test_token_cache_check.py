"""The system check that warns when the token cache is per-process (``django_eid.W003``)."""

from __future__ import annotations

import io
from typing import Any

import pytest
from django.core import checks
from django.core.management import call_command

LOCMEM = {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}
DUMMY = {"BACKEND": "django.core.cache.backends.dummy.DummyCache"}
REDIS = {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": "redis://h:6379"}
DATABASE = {"BACKEND": "django.core.cache.backends.db.DatabaseCache", "LOCATION": "eid_cache"}


def w003(settings: Any, *, debug: bool, backend: dict[str, str]) -> list[Any]:
    settings.DEBUG = debug
    settings.CACHES = {"default": LOCMEM, "eid": backend}
    settings.DJANGO_EID = {
        **settings.DJANGO_EID,
        "TOKEN_CACHE": "eid",
        "BASE_URL": "https://api.broker.test",
        "AUTH_URL": "https://auth.broker.test",
    }
    return [m for m in checks.run_checks(tags=["django_eid"]) if m.id == "django_eid.W003"]


@pytest.mark.parametrize("backend", [LOCMEM, DUMMY], ids=["locmem", "dummy"])
def test_a_per_process_token_cache_outside_debug_warns(
    settings: Any, backend: dict[str, str]
) -> None:
    (message,) = w003(settings, debug=False, backend=backend)
    assert message.level == checks.WARNING
    assert "'eid'" in message.msg
    assert backend["BACKEND"].rsplit(".", 1)[-1] in message.msg
    assert "Each worker process will then fetch its own access token" in message.hint


@pytest.mark.parametrize("backend", [LOCMEM, DUMMY], ids=["locmem", "dummy"])
def test_no_warning_in_debug(settings: Any, backend: dict[str, str]) -> None:
    assert w003(settings, debug=True, backend=backend) == []


@pytest.mark.parametrize("backend", [REDIS, DATABASE], ids=["redis", "database"])
def test_no_warning_for_a_shared_cache(settings: Any, backend: dict[str, str]) -> None:
    assert w003(settings, debug=False, backend=backend) == []


def test_manage_py_check_prints_it(settings: Any) -> None:
    w003(settings, debug=False, backend=LOCMEM)
    out = io.StringIO()
    call_command("check", "--tag", "django_eid", stdout=out, stderr=out)
    assert "django_eid.W003" in out.getvalue()
