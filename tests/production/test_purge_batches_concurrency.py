"""The batched ``eid_purge`` and ``eid_reencrypt`` against a live transaction, on PostgreSQL.

Each test holds a transaction open in another thread (a callback verifying a session, a
re-verification moving a person claim, another purge, the admin changing a number), starts
the command, waits until PostgreSQL reports the command waiting for that transaction's
lock, and then commits it. The command must act on what is committed when its statement
runs, not on what its batch's earlier ``SELECT`` saw.
"""

from __future__ import annotations

import base64
import datetime
import io
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from django.core.management import call_command
from django.db import connection, transaction
from django.utils import timezone

from django_eid import claims, crypto
from django_eid.models import AuditEvent, Identification, PersonClaim
from tests.db_threads import close_thread_connections

pytestmark = [pytest.mark.production, pytest.mark.django_db(transaction=True)]

Status = Identification.Status
OLD_KEY, NEW_KEY = (base64.urlsafe_b64encode(c * 32).decode() for c in (b"o", b"n"))
KARI, CHANGED = "31127112345", "01018512345"


class InThread:
    """``target()`` in a thread of its own; ``result()`` joins it and re-raises."""

    def __init__(self, target: Callable[[], Any]) -> None:
        self._target = target
        self._result: Any = None
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            self._result = self._target()
        except BaseException as err:
            self._error = err
        finally:
            close_thread_connections()

    def result(self, timeout: float = 30) -> Any:
        self._thread.join(timeout)
        assert not self._thread.is_alive(), "the thread did not finish"
        if self._error is not None:
            raise self._error
        return self._result


@contextmanager
def held(change: Callable[[], None]) -> Iterator[None]:
    """``change()`` in another thread's open transaction, committed when the block ends."""
    done, release = threading.Event(), threading.Event()

    def hold() -> None:
        with transaction.atomic():
            change()
            done.set()
            assert release.wait(30)

    holder = InThread(hold)
    assert done.wait(30), "the live transaction did not start"
    try:
        yield
    finally:
        release.set()
        holder.result()


def wait_until_blocked() -> None:
    """Until some session waits for a row lock (the command, on the live transaction)."""
    deadline = time.monotonic() + 20
    with connection.cursor() as cursor:
        while time.monotonic() < deadline:
            cursor.execute("SELECT count(*) FROM pg_locks WHERE NOT granted")
            if cursor.fetchone()[0]:
                return
            time.sleep(0.02)
    raise AssertionError("the command never waited for the live transaction")


def command(name: str, *args: str) -> InThread:
    def run() -> str:
        out = io.StringIO()
        call_command(name, *args, stdout=out)
        return out.getvalue()

    return InThread(run)


def make(user: Any, *, status: str = Status.SUCCESS, age: datetime.timedelta, **kw: Any) -> int:
    created = timezone.now() - age
    return Identification.objects.create(
        user=user,
        status=status,
        name="Nordmann, Kari",
        identity_provider="NO_BANKID_WEB",
        created_at=created,
        completed_at=None if status == Status.PENDING else created,
        **kw,
    ).pk


@pytest.fixture
def kari(django_user_model: Any) -> Any:
    return django_user_model.objects.create_user("kari")


def test_expiry_leaves_a_session_verified_while_its_batch_runs(kari: Any) -> None:
    hour = datetime.timedelta(hours=1)  # past SESSION_MAX_AGE, younger than the cutoff
    others = [make(kari, status=Status.PENDING, age=hour) for _ in range(3)]
    verified = make(kari, status=Status.PENDING, age=hour)

    def verify() -> None:
        row = Identification.objects.select_for_update().get(pk=verified)
        row.status, row.completed_at = Status.SUCCESS, timezone.now()
        row.save()

    with held(verify):
        purge = command("eid_purge", "--older-than", "2h", "--batch-size", "10")
        wait_until_blocked()
    out = purge.result()
    assert "Expired 3 stale pending identification(s)." in out
    assert Identification.objects.get(pk=verified).status == Status.SUCCESS
    assert set(Identification.objects.filter(pk__in=others).values_list("status", flat=True)) == {
        Status.EXPIRED
    }
    # Each expired row has its event, and the verified one none (the batch locked its rows).
    expired = AuditEvent.objects.filter(kind=AuditEvent.Kind.EXPIRED)
    assert sorted(expired.values_list("identification_id", flat=True)) == sorted(others)


def test_anonymize_leaves_a_row_anonymized_meanwhile_as_it_is(kari: Any) -> None:
    old = datetime.timedelta(days=100)
    rows = [make(kari, age=old, identity_provider_unique_id=f"uid-{i}") for i in range(5)]
    earlier = timezone.now() - datetime.timedelta(minutes=5)

    def anonymize_one() -> None:  # an overlapping run, say
        Identification.objects.select_for_update().filter(pk=rows[2]).update(
            name="", anonymized_at=earlier
        )

    with held(anonymize_one):
        purge = command("eid_purge", "--older-than", "90d", "--anonymize", "--batch-size", "10")
        wait_until_blocked()
    out = purge.result()
    assert "Anonymized 4 finished identification(s)" in out
    assert Identification.objects.get(pk=rows[2]).anonymized_at == earlier
    assert not Identification.objects.filter(anonymized_at__isnull=True).exists()


def test_deletion_keeps_the_claim_a_re_verification_moved_meanwhile(kari: Any) -> None:
    old = make(kari, age=datetime.timedelta(days=100), identity_provider_unique_id="kari-uid")
    gone = make(kari, age=datetime.timedelta(days=100), identity_provider_unique_id="other")
    for pk in (old, gone):
        claims.claim(Identification.objects.get(pk=pk))
    (key,) = PersonClaim.objects.filter(identification_id=old).values_list("key", flat=True)
    new: list[int] = []

    def re_verify() -> None:  # the same person identifies again: the claim moves to the new row
        row = Identification.objects.get(
            pk=make(kari, age=datetime.timedelta(0), identity_provider_unique_id="kari-uid")
        )
        claims.claim(row)
        new.append(row.pk)

    with held(re_verify):
        purge = command("eid_purge", "--older-than", "90d", "--batch-size", "10")
        wait_until_blocked()
    out = purge.result()
    assert "Deleted 2 finished identification(s)" in out
    assert not Identification.objects.filter(pk__in=[old, gone]).exists()
    assert PersonClaim.objects.get(key=key).identification_id == new[0]
    assert not PersonClaim.objects.filter(identification_id=gone).exists()


def test_reencrypt_never_writes_back_a_number_changed_while_its_batch_waits(
    kari: Any, eid: Callable[..., None]
) -> None:
    eid(ENCRYPTION_KEYS=[OLD_KEY])
    rows = [make(kari, age=datetime.timedelta(0), social_security_number=KARI) for _ in range(3)]
    eid(ENCRYPTION_KEYS=[NEW_KEY, OLD_KEY])

    def change_the_number() -> None:  # the admin, say, saving the row under the first key
        row = Identification.objects.select_for_update().get(pk=rows[1])
        row.social_security_number = CHANGED
        row.save()

    with held(change_the_number):
        reencrypt = command("eid_reencrypt", "--batch-size", "10")
        wait_until_blocked()
    out = reencrypt.result()
    assert out == "Re-encrypted 2 identification(s) under the first key.\n"
    eid(ENCRYPTION_KEYS=[NEW_KEY])
    numbers = [Identification.objects.get(pk=pk).social_security_number for pk in rows]
    assert numbers == [KARI, CHANGED, KARI]
    assert Identification.objects.get(pk=rows[1]).social_security_number_hash == (
        crypto.lookup_hash(CHANGED)
    )
