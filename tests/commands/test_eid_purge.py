"""Retention with ``manage.py eid_purge``: old finished rows are deleted or stripped of every
personal field (``--anonymize``), stale pending ones expire, ``--dry-run`` counts exactly and
changes nothing, bad ages are clear errors, an age shorter than a session needs ``--force``,
and live traffic is safe. At scale (batches, memory, resumed runs): ``test_batches.py``.
"""

from __future__ import annotations

import datetime
from collections.abc import Callable

import pytest
from django.contrib.auth.models import AbstractBaseUser
from django.core.management.base import CommandError
from django.test import Client
from django.utils import timezone

from django_eid.management.commands.eid_purge import PERSONAL_FIELDS
from django_eid.models import Identification
from tests.commands.helpers import run
from tests.fixtures_broker import SSN
from tests.fixtures_views import Signals, Started, snapshot

pytestmark = pytest.mark.django_db

Status = Identification.Status


# -- retention ---------------------------------------------------------------------------------
AGES = {  # name: (status, age)
    "success 100 days": (Status.SUCCESS, datetime.timedelta(days=100)),
    "error 100 days": (Status.ERROR, datetime.timedelta(days=100)),
    "aborted 100 days": (Status.ABORTED, datetime.timedelta(days=100)),
    "rejected 100 days": (Status.REJECTED, datetime.timedelta(days=100)),
    "expired 91 days": (Status.EXPIRED, datetime.timedelta(days=91)),
    "success 89 days": (Status.SUCCESS, datetime.timedelta(days=89)),
    "pending 1 hour": (Status.PENDING, datetime.timedelta(hours=1)),
    "pending 100 days": (Status.PENDING, datetime.timedelta(days=100)),
    "pending 1 minute": (Status.PENDING, datetime.timedelta(minutes=1)),
}
OLD_FINISHED = {
    "success 100 days",
    "error 100 days",
    "aborted 100 days",
    "rejected 100 days",
    "expired 91 days",
}
STALE = {"pending 1 hour", "pending 100 days"}


@pytest.fixture
def rows(alice: AbstractBaseUser) -> dict[str, int]:
    now = timezone.now()
    made = {}
    for name, (status, age) in AGES.items():
        row = Identification.objects.create(
            user=alice,
            status=status,
            name="Kari Nordmann",
            first_name="Kari",
            identity_provider="NO_BANKID_WEB",
            identity_provider_unique_id="uid",
            social_security_number=SSN,
            date_of_birth=datetime.date(1971, 12, 31),
            user_agent="Mozilla",
            ip_address="203.0.113.7",
            metadata={"k": "v"},
            raw={"Name": "Kari Nordmann"},
            error_code="E" if status == Status.ERROR else "",
        )
        Identification.objects.filter(pk=row.pk).update(created_at=now - age)
        made[name] = row.pk
    return made


def status_of(rows: dict[str, int]) -> dict[str, str | None]:
    current = {r.pk: r.status for r in Identification.objects.all()}
    return {name: current.get(pk) for name, pk in rows.items()}


@pytest.mark.parametrize("age", ["90d", "90", "2160h", "129600m", "7776000s", " 90D "])
def test_purge_deletes_old_finished_rows_and_expires_stale_pending_ones(
    rows: dict[str, int], age: str
) -> None:
    out = run("eid_purge", "--older-than", age)
    assert "Deleted 6 " in out
    assert "Expired 2 " in out
    expected = {
        n: None if n in OLD_FINISHED | {"pending 100 days"} else s for n, (s, _) in AGES.items()
    }
    expected["pending 1 hour"] = Status.EXPIRED
    assert status_of(rows) == expected


def test_purge_anonymizes_instead_when_asked(rows: dict[str, int]) -> None:
    before = snapshot()
    out = run("eid_purge", "--older-than", "90d", "--anonymize")
    assert "Anonymized 6 " in out
    assert "Expired 2 " in out
    after = snapshot()
    for name, pk in rows.items():
        stripped = name in OLD_FINISHED | {"pending 100 days"}
        for field, blank in PERSONAL_FIELDS.items():
            assert (after[pk][field] == blank) is stripped or before[pk][field] == blank, field
        assert after[pk]["identity_provider"] == "NO_BANKID_WEB"  # statistics stay
        assert after[pk]["created_at"] == before[pk]["created_at"]
    assert Identification.objects.with_social_security_number(SSN).count() == 3
    again = run("eid_purge", "--older-than", "90d", "--anonymize")
    assert "Anonymized 0 " in again
    assert "Expired 0 " in again


def test_anonymize_also_strips_rows_that_never_had_a_name(alice: AbstractBaseUser) -> None:
    row = Identification.objects.create(
        user=alice, status=Status.ABORTED, user_agent="Mozilla", ip_address="203.0.113.7"
    )
    Identification.objects.filter(pk=row.pk).update(
        created_at=timezone.now() - datetime.timedelta(days=100)
    )
    assert "Would anonymize 1 " in run(
        "eid_purge", "--older-than", "90d", "--anonymize", "--dry-run"
    )
    run("eid_purge", "--older-than", "90d", "--anonymize")
    row.refresh_from_db()
    assert (row.user_agent, row.ip_address) == ("", None)


@pytest.mark.parametrize("anonymize", [False, True])
def test_a_dry_run_counts_exactly_what_a_run_does_and_changes_nothing(
    rows: dict[str, int], anonymize: bool
) -> None:
    flags = ["--anonymize"] if anonymize else []
    before = snapshot()
    out = run("eid_purge", "--older-than", "90d", "--dry-run", *flags)
    assert snapshot() == before
    verb = "anonymize" if anonymize else "delete"
    assert out == (
        "Would expire 2 stale pending identification(s).\n"
        f"Would {verb} 6 finished identification(s) older than 90 days, 0:00:00.\n"
        "Would write 8 audit event(s).\n"
    )


@pytest.mark.parametrize(
    "age",
    [
        "",
        "abc",
        "-5d",
        "90x",
        "1.5d",
        "d",
        "90 d",
        "0x10",
        "99999999999999999999d",
        "999999999w",
        "\u0661\u0660d",
    ],
)
def test_a_bad_age_is_a_clear_command_error(rows: dict[str, int], age: str) -> None:
    before = snapshot()
    with pytest.raises(CommandError, match="--older-than"):
        run("eid_purge", "--older-than", age)
    assert snapshot() == before


def test_purge_races_traffic_safely(
    start: Callable[..., Started], alice_client: Client, signals: Signals
) -> None:
    live, stale = start(ends="success"), start(ends="success")
    old = stale.row.created_at - datetime.timedelta(hours=1)
    Identification.objects.filter(pk=stale.pk).update(created_at=old)
    signals.clear()
    run("eid_purge", "--older-than", "0s", "--force")
    assert alice_client.get(live.success_url()).status_code == 302  # untouched, completes
    assert alice_client.get(stale.success_url()).status_code == 404  # expired, then purged
    assert signals.names == ["identification_succeeded"]


def test_anonymize_leaves_nothing_that_leads_back_to_the_person(
    alice: AbstractBaseUser,
) -> None:
    row = Identification.objects.create(
        user=alice,
        status=Status.REJECTED,
        request_id="broker-session-of-kari",  # names the full record at the broker
        next_url="/apply/?loan=kari-nordmann",
        error_code="REJECTED",
        error_message="Kari is 17: too young.",  # a receiver's reason
        name="Nordmann, Kari",
        created_at=timezone.now() - datetime.timedelta(days=100),
    )
    run("eid_purge", "--older-than", "90d", "--anonymize")
    row.refresh_from_db()
    assert (row.request_id, row.next_url, row.error_message, row.name) == (None, "", "", "")
    assert (row.status, row.error_code) == (Status.REJECTED, "REJECTED")  # statistics stay


@pytest.mark.parametrize("age", ["0", "0d", "0s", "29m"])
def test_an_age_shorter_than_a_session_needs_force(rows: dict[str, int], age: str) -> None:
    before = snapshot()
    with pytest.raises(CommandError, match="--force"):
        run("eid_purge", "--older-than", age)
    assert snapshot() == before
    # Every finished row goes, and the two stale pending ones once expired.
    assert "Deleted 8 " in run("eid_purge", "--older-than", age, "--force")
