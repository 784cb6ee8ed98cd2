"""The audit trail as CSV or JSON Lines (``manage.py eid_audit``), streamed.

Events are read oldest first in fixed-size chunks, each the next ``CHUNK`` events after the
last one written by ``(at, id)`` (keyset pagination over the ``(at)`` index, or
``(user_id, at)`` for one account's), and each is written as it comes: a million events
need no more memory than a thousand. Not ``QuerySet.iterator()``: SQLite's driver would
still fetch the whole result into memory, and a server-side cursor on PostgreSQL holds a
transaction open for the whole export.
"""

from __future__ import annotations

import csv
import datetime
import json
from collections.abc import Iterator
from typing import Any, Final, Protocol

from django.db.models import Q

from django_eid import audit
from django_eid.models import AuditEvent

#: The columns of an export, in their order: the event's id, then its columns as the audit
#: trail writes them (docs/reference/commands.md).
COLUMNS: Final = ("id", *audit.COLUMNS)

#: Events read per statement.
CHUNK: Final = 1000

FORMATS: Final = ("csv", "jsonl")


class Stream(Protocol):
    def write(self, text: str, /) -> Any: ...


def events(
    *,
    since: datetime.datetime | None = None,
    until: datetime.datetime | None = None,
    user: str | None = None,
    using: str | None = None,
    chunk: int | None = None,
) -> Iterator[tuple[Any, ...]]:
    """The events from ``since`` (inclusive) to ``until`` (exclusive), of the account
    ``user`` (its primary key as text) if given, oldest first, as tuples of :data:`COLUMNS`,
    read ``chunk`` (:data:`CHUNK`) at a time."""
    chunk = chunk or CHUNK
    chosen = AuditEvent.objects.using(using).order_by("at", "id")
    if since is not None:
        chosen = chosen.filter(at__gte=since)
    if until is not None:
        chosen = chosen.filter(at__lt=until)
    if user is not None:
        chosen = chosen.filter(user_id=user)
    rows = chosen.values_list(*COLUMNS)
    page = rows
    while True:
        batch = list(page[:chunk])
        yield from batch
        if len(batch) < chunk:
            return
        last_id, last_at = batch[-1][0], batch[-1][1]
        # After (last_at, last_id): `at >= last_at` is the index's range, the rest only
        # tells apart the events of that same instant.
        page = rows.filter(Q(at__gt=last_at) | Q(id__gt=last_id), at__gte=last_at)
        del batch  # not held while the next chunk is read


def _value(value: Any) -> Any:
    """A column's value as exported: a timestamp in ISO 8601, in UTC (with ``USE_TZ`` off, in
    the site's time as stored, without an offset)."""
    if isinstance(value, datetime.datetime):
        # Naive with USE_TZ off: the site's local time, exported as stored.
        return value.astimezone(datetime.UTC).isoformat() if value.tzinfo else value.isoformat()
    return value


def write(rows: Iterator[tuple[Any, ...]], out: Stream, fmt: str) -> int:
    """Write ``rows`` to ``out`` in ``fmt`` (``csv``: a header line, then one line per
    event, an empty field for none; ``jsonl``: one JSON object per line, ``null`` for none);
    how many events."""
    count = 0
    if fmt == "csv":
        writer = csv.writer(out)
        writer.writerow(COLUMNS)
        for row in rows:
            writer.writerow([_value(value) for value in row])
            count += 1
    else:
        for row in rows:
            record = dict(zip(COLUMNS, (_value(value) for value in row), strict=True))
            out.write(json.dumps(record, ensure_ascii=False) + "\n")
            count += 1
    return count
