"""The audit trail of ``manage.py eid_purge``: an ``expired`` event for each stale pending row
it expires, a ``purged`` or ``anonymized`` one for each row it deletes or strips, in the
batch's transaction; the events outlive the rows; ``--events-older-than`` deletes old events
in batches. (The rows themselves: ``test_eid_purge.py``; at scale: ``test_batches.py``.)
"""

from __future__ import annotations

import datetime
from typing import Any

import pytest
import time_machine
from django.contrib.auth.models import AbstractBaseUser
from django.core.management.base import CommandError
from django.db.models import signals
from django.utils import timezone

from django_eid.management.commands import eid_purge as purge_command
from django_eid.models import AuditEvent, Identification
from tests.commands.helpers import run

pytestmark = pytest.mark.django_db

Status = Identification.Status
Kind = AuditEvent.Kind
NOW = datetime.datetime(2026, 6, 1, 12, 0, tzinfo=datetime.UTC)


def make(user: Any, status: str, age: datetime.timedelta, **kw: Any) -> int:
    created = timezone.now() - age
    return Identification.objects.create(
        user=user,
        status=status,
        name="Nordmann, Kari",
        identity_provider="NO_BANKID_WEB",
        level_of_assurance="high",
        purpose=Identification.Purpose.VERIFY,
        start_address_hash="a" * 64,
        created_at=created,
        completed_at=None if status == Status.PENDING else created,
        **kw,
    ).pk


@pytest.fixture
def frozen() -> Any:
    with time_machine.travel(NOW, tick=False) as traveller:
        yield traveller


@pytest.fixture
def rows(alice: AbstractBaseUser, bob: AbstractBaseUser, frozen: Any) -> dict[str, int]:
    day = datetime.timedelta(days=1)
    return {
        "old success": make(alice, Status.SUCCESS, 100 * day),
        "old error": make(bob, Status.ERROR, 100 * day, error_code="E42"),
        "young success": make(alice, Status.SUCCESS, 10 * day),
        "stale": make(alice, Status.PENDING, datetime.timedelta(hours=2)),
        "stale and old": make(bob, Status.PENDING, 100 * day),
        "fresh pending": make(alice, Status.PENDING, datetime.timedelta(minutes=1)),
    }


def events() -> list[tuple[Any, ...]]:
    return list(
        AuditEvent.objects.order_by("id").values_list(
            "identification_id", "kind", "status", "outcome", "at"
        )
    )


@pytest.mark.parametrize(("flags", "kind"), [([], Kind.PURGED), (["--anonymize"], Kind.ANONYMIZED)])
def test_every_row_changed_has_its_event_and_the_events_outlive_the_rows(
    rows: dict[str, int], flags: list[str], kind: str, alice: Any, bob: Any
) -> None:
    run("eid_purge", "--older-than", "90d", "--batch-size", "1", *flags)
    expired = [
        (rows["stale"], Kind.EXPIRED, Status.EXPIRED, "", NOW),
        (rows["stale and old"], Kind.EXPIRED, Status.EXPIRED, "", NOW),
    ]
    purged = [
        (rows[name], kind, status, "retention", NOW)
        for name, status in [
            ("old success", Status.SUCCESS),
            ("old error", Status.ERROR),
            ("stale and old", Status.EXPIRED),
        ]
    ]
    assert sorted(events()) == sorted(expired + purged)
    # The events hold what an auditor asks, not who: the account, the provider, the level.
    event = AuditEvent.objects.get(identification_id=rows["old error"], kind=kind)
    assert (event.user_id, event.provider, event.level_of_assurance) == (
        str(bob.pk),
        "NO_BANKID_WEB",
        "high",
    )
    assert (event.purpose, event.address_hash, event.broker_api) == ("verify", "a" * 64, "v1")
    gone = Identification.objects.filter(pk__in=[rows["old success"], rows["old error"]])
    assert gone.exists() is (kind == Kind.ANONYMIZED)
    # A second run changes nothing and writes nothing.
    before = events()
    run("eid_purge", "--older-than", "90d", *flags)
    assert events() == before


def test_an_expiry_event_has_the_sessions_duration(rows: dict[str, int]) -> None:
    run("eid_purge", "--older-than", "90d")
    event = AuditEvent.objects.get(identification_id=rows["stale"])
    assert (event.kind, event.status, event.at) == (Kind.EXPIRED, Status.EXPIRED, NOW)
    assert event.duration_ms == 2 * 3600 * 1000
    assert Identification.objects.get(pk=rows["stale"]).completed_at == NOW


def test_site_receivers_of_deletions_do_not_change_the_events(
    rows: dict[str, int], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The slow path of the deletion (a site listens to ``post_delete``) writes them too."""
    seen: list[int] = []

    def receiver(sender: Any, instance: Identification, **kwargs: Any) -> None:
        seen.append(instance.pk)

    signals.post_delete.connect(receiver, sender=Identification)
    try:
        run("eid_purge", "--older-than", "90d")
    finally:
        signals.post_delete.disconnect(receiver, sender=Identification)
    purged = AuditEvent.objects.filter(kind=Kind.PURGED).values_list("identification_id", flat=True)
    assert (
        sorted(purged)
        == sorted(seen)
        == sorted([rows["old success"], rows["old error"], rows["stale and old"]])
    )


def test_a_batch_that_fails_writes_no_event(
    rows: dict[str, int], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Events and changes share the batch's transaction: rolled back together."""

    class Boom(Exception):
        pass

    def fail(*args: Any, **kwargs: Any) -> int:
        raise Boom

    monkeypatch.setattr(purge_command, "_release_claims", fail)
    with pytest.raises(Boom):
        run("eid_purge", "--older-than", "90d", "--batch-size", "100")
    # The expiry committed with its events; the deletion's batch rolled back with its own.
    assert {kind for _, kind, *_ in events()} == {Kind.EXPIRED}
    assert Identification.objects.filter(pk=rows["old success"]).exists()


@pytest.mark.parametrize("anonymize", [False, True])
def test_a_dry_run_counts_the_events_and_writes_none(rows: dict[str, int], anonymize: bool) -> None:
    flags = ["--anonymize"] if anonymize else []
    out = run("eid_purge", "--older-than", "90d", "--dry-run", *flags)
    assert "Would write 5 audit event(s).\n" in out
    assert events() == []
    run("eid_purge", "--older-than", "90d", *flags)
    assert len(events()) == 5


# -- --events-older-than --------------------------------------------------------------------------
def old_events(frozen: Any, ages_in_days: list[int]) -> list[int]:
    made = AuditEvent.objects.bulk_create(
        AuditEvent(
            at=NOW - datetime.timedelta(days=days),
            kind=Kind.STARTED,
            identification_id=i,
            status=Status.PENDING,
        )
        for i, days in enumerate(ages_in_days)
    )
    return [event.pk for event in made]


def test_events_older_than_deletes_old_events_in_batches(frozen: Any, alice: Any) -> None:
    kept = old_events(frozen, [10, 364, 365 * 5 - 1])
    old_events(frozen, [365 * 5 + 1] * 7)
    dry = run("eid_purge", "--events-older-than", "5y", "--dry-run")
    assert dry == "Would delete 7 audit event(s) older than 1825 days, 0:00:00.\n"
    assert AuditEvent.objects.count() == 10
    out = run("eid_purge", "--events-older-than", "5y", "--batch-size", "3")
    # Only the events: without --older-than no identification is looked at.
    assert out == "Deleted 7 audit event(s) older than 1825 days, 0:00:00.\n"
    assert sorted(AuditEvent.objects.values_list("pk", flat=True)) == kept


def test_both_ages_purge_rows_then_events_and_keep_the_new_events(
    rows: dict[str, int], frozen: Any
) -> None:
    old_events(frozen, [400, 400])
    out = run("eid_purge", "--older-than", "90d", "--events-older-than", "1y")
    assert "Deleted 3 finished identification(s)" in out
    assert out.endswith("Deleted 2 audit event(s) older than 365 days, 0:00:00.\n")
    # This run's events (expired, purged) are younger than any age: they stay.
    assert AuditEvent.objects.count() == 5


def test_one_of_the_ages_is_required() -> None:
    with pytest.raises(CommandError, match="--older-than, --events-older-than or both"):
        run("eid_purge")


@pytest.mark.parametrize("age", ["0", "29m", "0y"])
def test_a_short_events_age_needs_force(frozen: Any, age: str) -> None:
    old_events(frozen, [0, 1])
    with pytest.raises(CommandError, match=r"--events-older-than .* --force"):
        run("eid_purge", "--events-older-than", age)
    assert AuditEvent.objects.count() == 2
    assert "Deleted 1 audit event(s)" in run("eid_purge", "--events-older-than", age, "--force")


@pytest.mark.parametrize("age", ["5x", "y", "1.5y", "99999999y"])
def test_a_bad_events_age_is_a_clear_error_naming_its_option(frozen: Any, age: str) -> None:
    with pytest.raises(CommandError, match=r"^--events-older-than: "):
        run("eid_purge", "--events-older-than", age)


def test_a_session_pending_for_months_is_recorded_with_the_longest_duration(
    rows: dict[str, int],
) -> None:
    """100 days of milliseconds do not fit the column (PostgreSQL refuses the event)."""
    run("eid_purge", "--older-than", "90d")
    event = AuditEvent.objects.get(identification_id=rows["stale and old"], kind=Kind.EXPIRED)
    assert event.duration_ms == 2**31 - 1
