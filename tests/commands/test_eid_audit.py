"""``manage.py eid_audit``: the audit trail exported as CSV or JSON Lines, filtered by period
and account, oldest first, streamed with bounded memory; bad arguments are clear errors.
(``--verify``: ``tests/test_evidence.py``, with the evidence.)
"""

from __future__ import annotations

import csv
import datetime
import gc
import io
import json
import tracemalloc
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from django_eid import export
from django_eid.models import AuditEvent
from tests.commands.helpers import run

pytestmark = pytest.mark.django_db

Kind = AuditEvent.Kind
UTC = datetime.UTC
OSLO = ZoneInfo("Europe/Oslo")
HEADER = (
    "id,at,kind,identification_id,user_id,purpose,broker_api,provider,level_of_assurance,"
    "status,outcome,display,address_hash,duration_ms"
)


def event(at: datetime.datetime, **fields: Any) -> AuditEvent:
    values: dict[str, Any] = {
        "kind": Kind.FINISHED,
        "identification_id": 7,
        "user_id": "42",
        "purpose": "verify",
        "broker_api": "v2",
        "provider": "no_bankid",
        "level_of_assurance": "high",
        "status": "SUCCESS",
        "outcome": "",
        "display": "redirect",
        "address_hash": "f" * 64,
        "duration_ms": 81234,
    }
    values.update(fields)
    made: AuditEvent = AuditEvent.objects.create(at=at, **values)
    return made


@pytest.fixture
def trail(settings: Any) -> dict[str, AuditEvent]:
    settings.TIME_ZONE = "Europe/Oslo"
    jan = datetime.datetime(2026, 1, 15, 9, 30, tzinfo=UTC)
    return {
        "started": event(jan, kind=Kind.STARTED, status="PENDING", duration_ms=None),
        "finished": event(jan + datetime.timedelta(minutes=1, seconds=21)),
        # Midnight in Oslo on 1 February is 23:00 UTC on 31 January.
        "last of january": event(
            datetime.datetime(2026, 1, 31, 22, 59, 59, tzinfo=UTC), user_id="43"
        ),
        "first of february": event(
            datetime.datetime(2026, 1, 31, 23, 0, tzinfo=UTC), kind=Kind.PURGED, outcome="retention"
        ),
        "other account": event(
            datetime.datetime(2026, 3, 1, tzinfo=UTC), user_id="43", identification_id=None
        ),
    }


def parsed_csv(text: str) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(text)))


def parsed_jsonl(text: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in text.splitlines()]


def ids(records: list[dict[str, Any]]) -> list[int]:
    return [int(r["id"]) for r in records]


def test_csv_has_the_columns_in_order_and_every_event_oldest_first(
    trail: dict[str, AuditEvent],
) -> None:
    out = run("eid_audit")
    assert out.splitlines()[0] == HEADER
    records = parsed_csv(out)
    assert ids(records) == [e.pk for e in trail.values()]
    first, finished = records[0], records[1]
    assert first == {
        "id": str(trail["started"].pk),
        "at": "2026-01-15T09:30:00+00:00",
        "kind": "started",
        "identification_id": "7",
        "user_id": "42",
        "purpose": "verify",
        "broker_api": "v2",
        "provider": "no_bankid",
        "level_of_assurance": "high",
        "status": "PENDING",
        "outcome": "",
        "display": "redirect",
        "address_hash": "f" * 64,
        "duration_ms": "",  # none
    }
    assert (finished["at"], finished["duration_ms"]) == ("2026-01-15T09:31:21+00:00", "81234")
    assert records[-1]["identification_id"] == ""


def test_jsonl_is_one_object_per_line_with_the_same_values(trail: dict[str, AuditEvent]) -> None:
    records = parsed_jsonl(run("eid_audit", "--format", "jsonl"))
    assert ids(records) == [e.pk for e in trail.values()]
    assert all(list(r) == list(export.COLUMNS) for r in records)
    started = records[0]
    assert started["id"] == trail["started"].pk
    assert started["at"] == "2026-01-15T09:30:00+00:00"
    assert (started["identification_id"], started["user_id"]) == (7, "42")
    assert started["duration_ms"] is None
    assert records[1]["duration_ms"] == 81234
    assert records[-1]["identification_id"] is None
    # The same values as the CSV, as text.
    as_csv = parsed_csv(run("eid_audit"))
    assert [{k: "" if v is None else str(v) for k, v in r.items()} for r in records] == as_csv


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        # Dates and naive times are the site's (Oslo), --until is exclusive.
        (["--until", "2026-02-01"], ["started", "finished", "last of january"]),
        (["--since", "2026-02-01"], ["first of february", "other account"]),
        (
            ["--since", "2026-01-15T10:31:21"],
            ["finished", "last of january", "first of february", "other account"],
        ),
        (
            ["--since", "2026-01-15T09:31:21Z", "--until", "2026-01-31T23:00:00+00:00"],
            ["finished", "last of january"],
        ),
        (["--user", "42"], ["started", "finished", "first of february"]),
        (["--user", "43", "--since", "2026-02-01"], ["other account"]),
        (["--user", "44"], []),
        (["--since", "2027-01-01"], []),
    ],
)
def test_the_filters(trail: dict[str, AuditEvent], args: list[str], expected: list[str]) -> None:
    for fmt, parse in (("csv", parsed_csv), ("jsonl", parsed_jsonl)):
        records = parse(run("eid_audit", "--format", fmt, *args))
        assert ids(records) == [trail[name].pk for name in expected], fmt


def test_an_empty_trail_is_a_header_alone_or_nothing() -> None:
    assert run("eid_audit").splitlines() == [HEADER]
    assert run("eid_audit", "--format", "jsonl") == ""


def test_events_of_the_same_instant_are_all_exported_across_chunks(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The keyset is (at, id): a chunk ending inside a run of equal timestamps loses none."""
    monkeypatch.setattr(export, "CHUNK", 3)
    at = datetime.datetime(2026, 1, 1, tzinfo=UTC)
    made = AuditEvent.objects.bulk_create(
        [AuditEvent(at=at, kind=Kind.STARTED) for _ in range(7)]
        + [AuditEvent(at=at - datetime.timedelta(seconds=1), kind=Kind.STARTED) for _ in range(2)]
    )
    records = parsed_jsonl(run("eid_audit", "--format", "jsonl"))
    assert ids(records) == [e.pk for e in made[7:]] + [e.pk for e in made[:7]]


def test_output_writes_a_file(trail: dict[str, AuditEvent], tmp_path: Path) -> None:
    target = tmp_path / "trail.csv"
    assert run("eid_audit", "--output", str(target), "--user", "42") == ""
    with target.open(newline="", encoding="utf-8") as f:
        records = list(csv.DictReader(f))
    assert ids(records) == [trail[n].pk for n in ("started", "finished", "first of february")]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--since", "yesterday"], "--since: 'yesterday' is not a date"),
        (["--until", "2026-13-01"], "--until: '2026-13-01' is not a date"),
        (["--since", "2026-02-01", "--until", "2026-02-01"], "is not before --until"),
        (["--format", "xml"], "invalid choice: 'xml'"),
        (["--user", " "], "--user: give the account's primary key"),
        (["--verify", "12", "--user", "42"], "--verify takes no export option (--user)"),
        (["--verify", "12", "--format", "csv"], "--verify takes no export option (--format)"),
        (["--verify", "twelve"], "invalid int value: 'twelve'"),
        (["--output", "/nonexistent/dir/trail.csv"], "--output: No such file or directory"),
    ],
)
def test_bad_arguments_are_clear_errors(args: list[str], message: str) -> None:
    with pytest.raises(CommandError) as raised:
        run("eid_audit", *args)
    assert message in str(raised.value)


# -- memory ------------------------------------------------------------------------------------
class Sink:
    """Standard output that counts the lines and keeps none (a buffer would grow with N)."""

    def __init__(self) -> None:
        self.lines = 0

    def write(self, text: str) -> None:
        self.lines += text.count("\n")

    def flush(self) -> None:
        pass


def many(count: int) -> None:
    start = datetime.datetime(2026, 1, 1, tzinfo=UTC)
    AuditEvent.objects.bulk_create(
        (
            AuditEvent(
                at=start + datetime.timedelta(seconds=i // 3),
                kind=Kind.FINISHED,
                identification_id=i,
                user_id=str(i % 50),
                purpose="verify",
                broker_api="v2",
                provider="no_bankid",
                level_of_assurance="high",
                status="SUCCESS",
                display="redirect",
                address_hash=f"{i:064x}",
                duration_ms=i,
            )
            for i in range(count)
        ),
        batch_size=2000,
    )


def peak(fmt: str) -> tuple[int, int]:
    """The peak of memory allocated while exporting, and the lines written."""
    sink = Sink()
    gc.collect()
    tracemalloc.start()
    try:
        call_command("eid_audit", "--format", fmt, stdout=sink)
        return tracemalloc.get_traced_memory()[1], sink.lines
    finally:
        tracemalloc.stop()


def test_peak_memory_does_not_grow_with_the_number_of_events(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Chunks of 100 rather than 1,000: the same streaming, a tenth of the events to write.
    monkeypatch.setattr(export, "CHUNK", 100)
    peaks: dict[tuple[str, int], int] = {}
    for count in (300, 1_500):
        many(count - AuditEvent.objects.count())
        for fmt, header in (("csv", 1), ("jsonl", 0)):
            peaks[fmt, count], lines = peak(fmt)
            assert lines == count + header
    # 1,200 more events of some 700 bytes each as Python objects: loading them at once
    # would add over 800 kB (a chunk is 100 events).
    for fmt in ("csv", "jsonl"):
        assert peaks[fmt, 1_500] < peaks[fmt, 300] * 1.25 + 100_000, peaks


def test_without_time_zones_the_times_are_the_sites_as_stored(settings: Any) -> None:
    """``USE_TZ = False``: the events' times are naive, in the site's time; the options are
    read and the times written the same way."""
    settings.USE_TZ = False
    inside = event(datetime.datetime(2026, 2, 1, 0, 30))
    event(datetime.datetime(2026, 1, 31, 23, 30))
    out = run("eid_audit", "--since", "2026-02-01", "--until", "2026-02-02", "--format", "jsonl")
    (line,) = out.splitlines()
    assert json.loads(line)["id"] == inside.pk
    assert json.loads(line)["at"] == "2026-02-01T00:30:00"
