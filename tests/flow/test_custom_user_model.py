"""The start with a user model unlike Django's (tests/uuid_users), in a fresh interpreter:
``AUTH_USER_MODEL`` is read once, when Django sets up."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CHILD = """
import json
from django.conf import settings
settings.configure(
    INSTALLED_APPS=[
        "django.contrib.contenttypes", "django.contrib.auth", "django_eid", "tests.uuid_users",
    ],
    AUTH_USER_MODEL="uuid_users.Member",
    DATABASES={"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": ":memory:"}},
    USE_TZ=True,
    SECRET_KEY="child-secret-key-not-for-production-0123456789",
    DEFAULT_AUTO_FIELD="django.db.models.BigAutoField",
    DJANGO_EID={
        "CLIENT_ID": "test-client",
        "CLIENT_SECRET": "test-secret-s3cr3t-value",
        # A closed port: every start fails at the broker, and counts toward the limit.
        "BASE_URL": "http://127.0.0.1:9/api",
        "AUTH_URL": "http://127.0.0.1:9/auth",
        "SCOPES": ["identify"],
        "MAX_PENDING_PER_USER": 2,
    },
)
import django
django.setup()
from django.core.management import call_command
call_command("migrate", run_syncdb=True, verbosity=0)
from django_eid import flow, outcomes
from django_eid.brokers import ReturnUrls
from tests.uuid_users.models import Member

def urls(reference):
    return ReturnUrls(*(f"https://shop.example/{reference}/{kind}/" for kind in ("s", "a", "e")))

member = Member.objects.create(username="kari")
other = Member.objects.create(username="ola")
seen = []
for _ in range(3):
    try:
        flow.start(member, return_urls=urls, host="shop.example")
        seen.append("started")
    except flow.BrokerFailed:
        seen.append("failed at the broker")
    except flow.Refused as refused:
        seen.append("limit" if refused.outcome is outcomes.TOO_MANY_PENDING else refused.outcome.code)
print(json.dumps({
    "starts": seen,
    "member": flow.unfinished_count(member),
    "by key": flow.unfinished_count(member.pk),
    "other": flow.unfinished_count(other),
}))
"""


@pytest.mark.own_process
def test_the_pending_limit_with_a_uuid_keyed_user_model() -> None:
    """The start's own SQL passes the user's key as its model field prepares it (SQLite
    stores a UUID as 32 hex digits; the raw ``uuid.UUID`` could not even be bound). The
    child sets up its own broker: v1 at a closed port."""
    out = subprocess.run(  # noqa: S603 - this interpreter, fixed arguments
        [sys.executable, "-c", CHILD],
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    assert json.loads(out.stdout.strip().splitlines()[-1]) == {
        "starts": ["failed at the broker", "failed at the broker", "limit"],
        "member": 2,
        "by key": 2,
        "other": 0,
    }
