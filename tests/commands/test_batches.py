"""``eid_purge`` and ``eid_reencrypt`` at scale: batches, bounded memory, resumable runs.

The number of statements grows with the batches, not the rows, and the delete mode reads
nothing of a row but its primary key (no ``raw``, no number to decrypt). A run stopped
inside its Nth batch leaves the batches before it done and the Nth undone (its claims
included), and a second run finishes the rest. Peak memory stays the same for 5,000 and
20,000 rows to purge. Concurrency with live traffic on PostgreSQL:
``tests/production/test_purge_batches_concurrency.py``.
"""

from __future__ import annotations

import base64
import datetime
import gc
import re
import tracemalloc
from collections.abc import Callable
from typing import Any

import pytest
from django.core.management.base import CommandError
from django.db import connection
from django.db.models import signals
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from django_eid import claims, crypto, person_keys
from django_eid.management.commands import eid_purge as purge_command
from django_eid.models import Identification, PersonClaim
from tests.commands.helpers import run
from tests.models.stored import ciphertexts

pytestmark = pytest.mark.django_db

Status = Identification.Status
OLD_KEY, NEW_KEY = (base64.urlsafe_b64encode(c * 32).decode() for c in (b"o", b"n"))
RAW = {"Name": "Nordmann, Kari", "Padding": "x" * 1500}  # a record is a few kilobytes


class Boom(Exception):
    """Stands for a run killed in the middle of a batch."""


def make(
    user: Any,
    count: int,
    *,
    status: str = Status.SUCCESS,
    days: float = 100,
    claimed: bool = False,
    number: bool = True,
) -> list[int]:
    """``count`` identifications of ``user`` created ``days`` ago; their pks, in order."""
    created = timezone.now() - datetime.timedelta(days=days)
    rows = Identification.objects.bulk_create(
        Identification(
            user=user,
            status=status,
            name="Nordmann, Kari",
            identity_provider="NO_BANKID_WEB",
            identity_provider_unique_id=f"uid-{days}-{i}",
            social_security_number=f"311271{i:05d}" if number else None,
            # bulk_create does not call save(), which sets it
            social_security_number_hash=crypto.lookup_hash(f"311271{i:05d}") if number else None,
            raw=RAW,
            created_at=created,
            completed_at=None if status == Status.PENDING else created,
        )
        for i in range(count)
    )
    if claimed:
        PersonClaim.objects.bulk_create(
            PersonClaim(key=f"uid:{row.pk:064d}", identification=row) for row in rows
        )
    return [row.pk for row in rows]


def statements(command: str, *args: str) -> list[str]:
    with CaptureQueriesContext(connection) as captured:
        run(command, *args)
    return [q["sql"] for q in captured.captured_queries]


def changing(sqls: list[str], verb: str) -> list[str]:
    """The statements that ``verb`` (``DELETE``, ``UPDATE``) identifications."""
    table = '"django_eid_identification"'
    return [s for s in sqls if s.startswith((f"{verb} {table}", f"{verb} FROM {table}"))]


@pytest.fixture
def kari(django_user_model: Any) -> Any:
    return django_user_model.objects.create_user("kari")


# -- batches ------------------------------------------------------------------------------------
def test_delete_mode_runs_a_fixed_number_of_statements_per_batch_and_reads_only_ids(
    kari: Any,
) -> None:
    make(kari, 30, claimed=True)
    one_batch = statements("eid_purge", "--older-than", "90d", "--batch-size", "30")
    assert not Identification.objects.exists()
    assert not PersonClaim.objects.exists()

    make(kari, 60, claimed=True)
    twice_the_rows = statements("eid_purge", "--older-than", "90d", "--batch-size", "60")
    assert len(twice_the_rows) == len(one_batch)  # rows doubled, batches did not
    assert not Identification.objects.exists()

    make(kari, 60, claimed=True)
    six_batches = statements("eid_purge", "--older-than", "90d", "--batch-size", "10")
    deletes = changing(six_batches, "DELETE")
    assert len(deletes) == 6
    # Every batch: its rows' ids and event fields (locked where the database can), those
    # still qualifying, the claims, the rows, their events; the transaction's two
    # statements on SQLite are its savepoint and its release.
    assert len(six_batches) - len(one_batch) == 5 * 7
    claim_deletes = [s for s in six_batches if s.startswith('DELETE FROM "django_eid_personclaim"')]
    assert len(claim_deletes) == 6
    for sql in claim_deletes:
        # By a list of ids: a subquery of the batch could be planned as a nested loop over
        # both tables when PostgreSQL's statistics predate the rows (minutes per batch).
        assert "SELECT" not in sql
    for sql in deletes:
        # The DELETE itself says which rows qualify, not only the SELECT before it.
        assert '"created_at" <' in sql
        assert '"status" = ' in sql
    for sql in six_batches:
        assert '"raw"' not in sql
        assert '"social_security_number"' not in sql
        assert '"name"' not in sql


def test_anonymize_runs_a_fixed_number_of_statements_per_batch(kari: Any) -> None:
    make(kari, 30, claimed=True)
    one_batch = statements("eid_purge", "--older-than", "90d", "--anonymize", "--batch-size", "30")
    make(kari, 60, claimed=True)
    doubled = statements("eid_purge", "--older-than", "90d", "--anonymize", "--batch-size", "60")
    assert len(doubled) == len(one_batch)
    assert not PersonClaim.objects.exists()
    assert set(Identification.objects.values_list("name", flat=True)) == {""}

    make(kari, 25)
    sqls = statements("eid_purge", "--older-than", "90d", "--anonymize", "--batch-size", "10")
    updates = changing(sqls, "UPDATE")
    assert len(updates) == 3
    for sql in updates:
        assert '"anonymized_at" IS NULL' in sql
        assert '"created_at" <' in sql
    assert Identification.objects.filter(anonymized_at__isnull=True).count() == 0


def test_stale_pending_rows_expire_in_batches(kari: Any) -> None:
    stale = make(kari, 25, status=Status.PENDING, days=1)
    fresh = make(kari, 3, status=Status.PENDING, days=0)
    sqls = statements("eid_purge", "--older-than", "90d", "--batch-size", "10")
    updates = changing(sqls, "UPDATE")
    assert len(updates) == 3
    for sql in updates:
        assert '"status" = ' in sql  # still pending when its batch runs
        assert '"created_at" <' in sql
    assert set(Identification.objects.filter(pk__in=stale).values_list("status", flat=True)) == {
        Status.EXPIRED
    }
    assert set(Identification.objects.filter(pk__in=fresh).values_list("status", flat=True)) == {
        Status.PENDING
    }


@pytest.mark.parametrize("anonymize", [False, True])
def test_the_summary_is_unchanged_and_progress_comes_every_ten_batches(
    kari: Any, anonymize: bool
) -> None:
    make(kari, 23)
    make(kari, 3, status=Status.PENDING, days=1)
    flags = ["--anonymize"] if anonymize else []
    verb = "Anonymized" if anonymize else "Deleted"
    dry = run("eid_purge", "--older-than", "90d", "--dry-run", "--batch-size", "2", *flags)
    assert "Would expire 3 " in dry
    assert f"Would {verb[:-1].lower()} 23 " in dry
    out = run("eid_purge", "--older-than", "90d", "--batch-size", "2", *flags)
    assert out == (
        f"{verb} 20 finished identification(s) so far.\n"
        f"{verb} 23 finished identification(s) older than 90 days, 0:00:00.\n"
        "Expired 3 stale pending identification(s).\n"
        "Removed 0 ended start counter(s).\n"
    )


@pytest.mark.parametrize("command", ["eid_purge", "eid_reencrypt"])
@pytest.mark.parametrize("size", ["0", "-1"])
def test_a_batch_size_below_one_is_a_clear_error(kari: Any, command: str, size: str) -> None:
    make(kari, 2)
    args = ["--older-than", "90d"] if command == "eid_purge" else []
    with pytest.raises(CommandError, match="--batch-size"):
        run(command, *args, "--batch-size", size)
    assert Identification.objects.count() == 2


def test_site_receivers_of_deletions_still_run_with_only_the_ids_read(kari: Any) -> None:
    """A site auditing deletions keeps its ``post_delete``; the rows are still not loaded."""
    pks = make(kari, 7, claimed=True)
    seen: list[int] = []

    def audit(sender: Any, instance: Identification, **kwargs: Any) -> None:
        seen.append(instance.pk)

    signals.post_delete.connect(audit, sender=Identification)
    try:
        sqls = statements("eid_purge", "--older-than", "90d", "--batch-size", "3")
    finally:
        signals.post_delete.disconnect(audit, sender=Identification)
    assert sorted(seen) == pks
    assert not Identification.objects.exists()
    assert not PersonClaim.objects.exists()
    for sql in sqls:
        assert '"raw"' not in sql
        assert '"social_security_number"' not in sql


# -- a run stopped in the middle ----------------------------------------------------------------
@pytest.mark.parametrize("anonymize", [False, True])
def test_a_run_killed_in_its_third_batch_leaves_whole_batches_and_a_rerun_finishes(
    kari: Any, monkeypatch: pytest.MonkeyPatch, anonymize: bool
) -> None:
    pks = make(kari, 25, claimed=True)
    stale = make(kari, 4, status=Status.PENDING, days=0.5)
    flags = ["--anonymize"] if anonymize else []
    release = purge_command._release_claims
    calls = 0

    def release_then_die_in_the_third_batch(rows: Any) -> None:
        nonlocal calls
        calls += 1
        release(rows)
        if calls == 3:
            raise Boom  # after the claims went: the batch's rollback must bring them back

    monkeypatch.setattr(purge_command, "_release_claims", release_then_die_in_the_third_batch)
    with pytest.raises(Boom):
        run("eid_purge", "--older-than", "90d", "--batch-size", "10", *flags)
    monkeypatch.undo()

    done, undone = pks[:20], pks[20:]
    # The expiry and the first two batches committed; the third rolled back whole.
    assert set(Identification.objects.filter(pk__in=stale).values_list("status", flat=True)) == {
        Status.EXPIRED
    }
    assert set(PersonClaim.objects.values_list("identification_id", flat=True)) == set(undone)
    purged = Identification.objects.filter(pk__in=done)
    if anonymize:
        assert [(row.name, row.raw) for row in purged] == [("", {})] * 20
    else:
        assert not purged.exists()
    assert set(
        Identification.objects.filter(pk__in=undone).values_list("name", "anonymized_at")
    ) == {("Nordmann, Kari", None)}

    verb = "anonymize" if anonymize else "delete"
    assert f"Would {verb} 5 " in run("eid_purge", "--older-than", "90d", "--dry-run", *flags)
    again = run("eid_purge", "--older-than", "90d", "--batch-size", "10", *flags)
    assert f"{'Anonymized' if anonymize else 'Deleted'} 5 finished" in again
    assert "Expired 0 " in again
    assert not PersonClaim.objects.exists()
    if anonymize:
        assert Identification.objects.filter(pk__in=pks, anonymized_at__isnull=True).count() == 0
    else:
        assert not Identification.objects.filter(pk__in=pks).exists()


# -- memory -------------------------------------------------------------------------------------
def peak_memory(run_it: Callable[[], object]) -> int:
    gc.collect()
    tracemalloc.start()
    try:
        run_it()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def copies(pk: int, count: int) -> None:
    """``count`` copies of row ``pk``, each with a person claim, in two statements (a
    ``bulk_create`` of 20,000 rows takes seconds)."""
    columns = [
        f.column
        for f in Identification._meta.concrete_fields
        if f.column not in ("id", "reference", "request_id")
    ]
    names = ", ".join(f'"{c}"' for c in columns)
    with connection.cursor() as cursor:
        # The model's own column names, no input.
        table = '"django_eid_identification"'
        insert = f'INSERT INTO {table} ("reference", {names}) '
        select = f"SELECT 'copy-' || n.i, {names} FROM n, {table} WHERE id = %s"  # noqa: S608
        sql = "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < %s) "
        cursor.execute(
            sql + insert + select,
            [count, pk],
        )
        cursor.execute(
            'INSERT INTO "django_eid_personclaim" ("key", "identification_id") '
            "SELECT 'uid:' || id, id FROM \"django_eid_identification\""
        )


@pytest.mark.parametrize("anonymize", [False, True])
def test_peak_memory_does_not_grow_with_the_backlog(kari: Any, anonymize: bool) -> None:
    # Batches of 100 rather than 1,000: the same batching, a tenth of the rows to write.
    flags = ["--batch-size", "100", *(["--anonymize"] if anonymize else [])]
    peaks = {}
    for count in (300, 1_500):
        (template,) = make(kari, 1)
        copies(template, count - 1)
        assert Identification.objects.count() == PersonClaim.objects.count() == count
        peaks[count] = peak_memory(lambda: run("eid_purge", "--older-than", "90d", *flags))
        assert not PersonClaim.objects.exists()
        assert not Identification.objects.filter(anonymized_at__isnull=True).exists()
        Identification.objects.all().delete()
    # 1,200 more rows of about 2 kB: loading them would add some 2.4 MB (a batch is 100).
    # The margin is PostgreSQL's: its driver's caches fill over the first few dozen batches,
    # then stay (peaks of 373, 534, 644 and 657 kB at 3, 15, 30 and 45 batches).
    assert peaks[1_500] < peaks[300] * 1.25 + 400_000, peaks


# -- eid_reencrypt --------------------------------------------------------------------------------
def test_reencrypt_runs_a_fixed_number_of_statements_per_batch(kari: Any, eid: Any) -> None:
    eid(ENCRYPTION_KEYS=[OLD_KEY])
    make(kari, 20)
    eid(ENCRYPTION_KEYS=[NEW_KEY, OLD_KEY])
    one_batch = statements("eid_reencrypt", "--batch-size", "20")
    eid(ENCRYPTION_KEYS=[OLD_KEY])
    Identification.objects.all().delete()
    make(kari, 40)
    eid(ENCRYPTION_KEYS=[NEW_KEY, OLD_KEY])
    doubled = statements("eid_reencrypt", "--batch-size", "40")
    assert len(doubled) == len(one_batch)
    assert len(changing(doubled, "UPDATE")) == 1
    eid(ENCRYPTION_KEYS=[NEW_KEY])
    assert len({row.social_security_number for row in Identification.objects.all()}) == 40


def test_reencrypt_killed_in_its_second_batch_resumes(
    kari: Any, eid: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    eid(ENCRYPTION_KEYS=[OLD_KEY])
    pks = make(kari, 9)
    PersonClaim.objects.bulk_create(
        PersonClaim(
            key=person_keys.ssn_key(str(row.social_security_number_hash)), identification=row
        )
        for row in Identification.objects.filter(pk__in=pks)
    )
    eid(ENCRYPTION_KEYS=[NEW_KEY, OLD_KEY])
    rekey = claims.rekey
    calls = 0

    def rekey_then_die_in_the_second_batch(row: Identification) -> None:
        nonlocal calls
        calls += 1
        rekey(row)
        if calls == 5:  # the second row of the second batch
            raise Boom

    monkeypatch.setattr(claims, "rekey", rekey_then_die_in_the_second_batch)
    with pytest.raises(Boom):
        run("eid_reencrypt", "--batch-size", "4")
    monkeypatch.undo()

    stored = ciphertexts()
    assert [crypto.is_current(stored[pk]) for pk in pks] == [True] * 4 + [False] * 5
    # The claims moved with their rows, and only those.
    current = {
        person_keys.ssn_key(h)
        for h in Identification.objects.filter(pk__in=pks[:4]).values_list(
            "social_security_number_hash", flat=True
        )
    }
    assert current <= set(PersonClaim.objects.values_list("key", flat=True))
    assert run("eid_reencrypt", "--dry-run") == "5 identification(s) are not under the first key.\n"
    assert run("eid_reencrypt", "--batch-size", "4") == (
        "Re-encrypted 5 identification(s) under the first key.\n"
    )
    eid(ENCRYPTION_KEYS=[NEW_KEY])
    for row in Identification.objects.filter(pk__in=pks):
        assert row.social_security_number
        assert PersonClaim.objects.get(identification=row).key == person_keys.ssn_key(
            str(row.social_security_number_hash)
        )


def test_reencrypt_names_at_most_twenty_unreadable_rows_and_counts_them_all(
    kari: Any, eid: Any
) -> None:
    eid(ENCRYPTION_KEYS=[OLD_KEY])
    pks = make(kari, 23)
    eid(ENCRYPTION_KEYS=[NEW_KEY])
    with pytest.raises(CommandError) as info:
        run("eid_reencrypt", "--batch-size", "5")
    message = str(info.value)
    assert "23 identification(s) cannot be decrypted" in message
    assert re.search(rf"ids: {', '.join(map(str, pks[:20]))} and 3 more\)", message)
