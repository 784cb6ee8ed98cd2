"""The account's deletion (``django_eid.retention``): it cascades to the account's
identifications, and each leaves a ``purged`` event (outcome ``account_deleted``) written
in the deletion's transaction; the account's earlier events stay.
(``eid_purge``'s events: ``tests/commands/test_eid_purge_events.py``; the admin's:
``tests/admin/test_audit_admin.py``.)"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from django.db import transaction
from django.db.models.signals import pre_delete

from django_eid import audit, retention
from django_eid.models import AuditEvent, Identification

pytestmark = pytest.mark.django_db

Status = Identification.Status
Kind = AuditEvent.Kind


def make(user: Any, count: int) -> list[int]:
    rows = [
        Identification.objects.create(
            user=user,
            status=Status.SUCCESS,
            name="Nordmann, Kari",
            identity_provider="NO_BANKID_WEB",
            level_of_assurance="high",
        )
        for _ in range(count)
    ]
    for row in rows:  # the trail the account had before its deletion
        audit.write(row, Kind.FINISHED)
    return [row.pk for row in rows]


def trail(user_id: Any) -> list[tuple[Any, ...]]:
    return sorted(
        AuditEvent.objects.filter(user_id=str(user_id)).values_list(
            "identification_id", "kind", "status", "outcome", "provider", "level_of_assurance"
        )
    )


def test_an_accounts_deletion_leaves_a_purged_event_for_each_identification(
    alice: Any, bob: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(retention, "CHUNK", 2)  # read in chunks: 5 rows, 3 chunks
    pks = make(alice, 5)
    bobs = make(bob, 1)
    alice_pk = alice.pk
    alice.delete()
    assert not Identification.objects.filter(pk__in=pks).exists()
    assert trail(alice_pk) == sorted(
        [(pk, Kind.FINISHED, "SUCCESS", "", "NO_BANKID_WEB", "high") for pk in pks]
        + [(pk, Kind.PURGED, "SUCCESS", "account_deleted", "NO_BANKID_WEB", "high") for pk in pks]
    )
    assert trail(bob.pk) == [(bobs[0], Kind.FINISHED, "SUCCESS", "", "NO_BANKID_WEB", "high")]
    assert Identification.objects.filter(pk__in=bobs).exists()


def test_a_deletion_of_many_accounts_at_once_writes_each_event(
    alice: Any, bob: Any, django_user_model: Any
) -> None:
    pks = make(alice, 2) + make(bob, 1)
    django_user_model.objects.filter(pk__in=[alice.pk, bob.pk]).delete()
    purged = AuditEvent.objects.filter(kind=Kind.PURGED, outcome="account_deleted")
    assert sorted(purged.values_list("identification_id", flat=True)) == pks


def test_an_account_without_identifications_leaves_no_event(alice: Any) -> None:
    alice.delete()
    assert not AuditEvent.objects.exists()


def test_a_deletion_rolled_back_leaves_no_event(alice: Any) -> None:
    """The events are written in the deletion's transaction: they go with it."""
    make(alice, 2)

    class Refused(Exception):
        pass

    written: list[int] = []

    def refuse(sender: Any, instance: Any, **kwargs: Any) -> None:
        # Connected after django-eid's receiver: runs once the events are written.
        written.append(AuditEvent.objects.filter(kind=Kind.PURGED).count())
        raise Refused

    pre_delete.connect(refuse, sender=type(alice))
    try:
        with pytest.raises(Refused), transaction.atomic():
            alice.delete()
    finally:
        pre_delete.disconnect(refuse, sender=type(alice))
    assert written == [2]
    assert not AuditEvent.objects.filter(kind=Kind.PURGED).exists()
    assert Identification.objects.filter(user=alice).count() == 2


PROXY_CHILD = """
import json
from django.conf import settings
settings.configure(
    INSTALLED_APPS=[
        "django.contrib.contenttypes", "django.contrib.auth", "django_eid", "tests.proxy_users",
    ],
    DATABASES={"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": ":memory:"}},
    USE_TZ=True,
    SECRET_KEY="child-secret-key-not-for-production-0123456789",
    DEFAULT_AUTO_FIELD="django.db.models.BigAutoField",
    DJANGO_EID={"CLIENT_ID": "test-client", "CLIENT_SECRET": "test-secret-s3cr3t-value"},
)
import django
django.setup()
from django.core.management import call_command
call_command("migrate", verbosity=0)  # a proxy needs no table of its own
from django_eid.models import AuditEvent, Identification
from tests.proxy_users.models import Customer

customer = Customer.objects.create(username="kari")
row = Identification.objects.create(user_id=customer.pk, status="SUCCESS")
customer.delete()
print(json.dumps({
    "rows": Identification.objects.count(),
    "events": list(AuditEvent.objects.values_list("kind", "identification_id", "outcome")),
    "row": row.pk,
}))
"""


@pytest.mark.own_process
def test_an_account_deleted_through_a_proxy_model_leaves_its_events() -> None:
    """An admin of a proxy of the user model (Django names the proxy as the sender)."""
    root = Path(__file__).resolve().parents[1]
    done = subprocess.run(  # noqa: S603 - this interpreter, a fixed script
        [sys.executable, "-c", PROXY_CHILD],
        cwd=root,
        env={**os.environ, "PYTHONPATH": str(root)},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    found = json.loads(done.stdout.strip().splitlines()[-1])
    assert found["rows"] == 0
    assert found["events"] == [["purged", found["row"], "account_deleted"]]
