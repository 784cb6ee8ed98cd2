"""The audit trail: one :class:`~django_eid.models.AuditEvent` per change of an identification.

Every event is written in the transaction of the change it describes: no event without its
change, no change without its event. On PostgreSQL the change and its event are one
statement (``WITH changed AS (UPDATE ... RETURNING 1) INSERT INTO ... SELECT ... FROM
changed``: the event is inserted exactly when the row changed, with no extra round trip);
elsewhere the two statements share a transaction (:func:`atomic_change`). An event's values
come from the identification as the change leaves it (:func:`values_of`), never from the
broker's text: ids, codes, the provider, the level, a keyed hash of the start's address.

After the event's transaction commits, its numbers go to OpenTelemetry when the site has
it (:func:`django_eid.telemetry.record_event`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager
from contextvars import ContextVar
from functools import lru_cache
from typing import TYPE_CHECKING, Any, ClassVar, Final

from django.db import connections, router, transaction
from django.utils import timezone

from django_eid import telemetry
from django_eid.conf import eid_settings
from django_eid.models import AuditEvent
from django_eid.scrub import scrub

if TYPE_CHECKING:
    import datetime

    from django.db.backends.base.base import BaseDatabaseWrapper

    from django_eid.models import Identification

Kind = AuditEvent.Kind

#: The kinds that take an identification out of ``PENDING``.
FINISHING: frozenset[str] = frozenset(
    {Kind.RETURNED, Kind.FINISHED, Kind.RECONCILED, Kind.EXPIRED, Kind.CANCELLED}
)

#: How the identifications finished now are finished (:func:`finishing_as`).
_finishing: ContextVar[str] = ContextVar("django_eid_finishing", default=Kind.FINISHED.value)

#: The columns of an event, in the order of :class:`EventSql`'s statements.
COLUMNS: tuple[str, ...] = (
    "at",
    "kind",
    "identification_id",
    "user_id",
    "purpose",
    "broker_api",
    "provider",
    "level_of_assurance",
    "status",
    "outcome",
    "display",
    "address_hash",
    "duration_ms",
)

#: The longest duration an event stores (its column's maximum: about 24.8 days).
MAX_DURATION_MS: Final = 2**31 - 1

_NOT_A_CODE = re.compile(r"[^A-Za-z0-9_.:\-]")
#: A run of digits, with the separators a code keeps between them (``1203.8512-345``).
_DIGITS = re.compile(r"\d(?:[\d.:\-]*\d)?")
#: The most digits a run in a code may hold: an error number, a year; not a birth date or
#: a national identity number (six digits and more), however it was spelt.
MAX_DIGITS: Final = 5


@contextmanager
def finishing_as(kind: str) -> Iterator[None]:
    """Within this block an identification that finishes is recorded as ``kind``: the
    browser's return (``returned``), ``eid_reconcile`` (``reconciled``); ``finished`` else."""
    token = _finishing.set(kind)
    try:
        yield
    finally:
        _finishing.reset(token)


def finish_kind() -> str:
    return _finishing.get()


@lru_cache(maxsize=1024)
def code(value: str | None) -> str:
    """``value`` as an outcome code: printable ASCII without spaces, at most 64 characters,
    no run of more than :data:`MAX_DIGITS` digits. A broker's error code (and an error
    status a browser brings back) is a code, but not trusted to hold no personal data: the
    characters are kept first and the digits judged after, so a number spelt with spaces or
    dots is no way around it. (Cached: a purge writes the same few codes thousands of times.)"""
    kept = _NOT_A_CODE.sub("", scrub(value or ""))
    return _DIGITS.sub(_digits_or_mark, kept)[:64]


def _digits_or_mark(run: re.Match[str]) -> str:
    digits = sum(c.isdigit() for c in run.group())
    return run.group() if digits <= MAX_DIGITS else "#"


def values_of(
    row: Identification,
    kind: str,
    *,
    at: datetime.datetime | None = None,
    outcome: str | None = None,
    changes: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The event of ``kind`` for ``row`` as the change leaves it: ``row``'s attributes, with
    ``changes`` (the columns a change is about to write) over them."""
    changes = changes or {}

    def value(name: str) -> Any:
        if name in changes:
            return changes[name]
        return getattr(row, name)

    at = at or timezone.now()
    status = value("status")
    user_id = getattr(changes["user"], "pk", changes["user"]) if "user" in changes else row.user_id
    created, completed = row.created_at, value("completed_at")
    duration = None
    if kind in FINISHING and created is not None:
        elapsed = int(((completed or at) - created).total_seconds() * 1000)
        # A row finished months late (a purge after a long pause) still fits the column.
        duration = min(max(0, elapsed), MAX_DURATION_MS)
    if outcome is None:
        outcome = value("error_code") or (value("error_status") if status != "SUCCESS" else "")
    return {
        "at": at,
        "kind": str(kind),
        "identification_id": row.pk,
        "user_id": "" if user_id is None else str(user_id),
        "purpose": row.purpose,
        "broker_api": eid_settings.BROKER_API,
        "provider": code(value("identity_provider")),
        "level_of_assurance": code(value("level_of_assurance"))[:32],
        "status": status,
        "outcome": code(outcome),
        "display": row.display,
        "address_hash": row.start_address_hash,
        "duration_ms": duration,
    }


class EventSql:
    """The event's ``INSERT``, alone or joined to the change it records; made once per
    database backend. Names from the model's ``_meta``, every value a parameter prepared by
    its field as ``save()`` would."""

    _made: ClassVar[dict[str, EventSql]] = {}

    @classmethod
    def of(cls, db: BaseDatabaseWrapper) -> EventSql:
        made = cls._made.get(db.vendor)
        if made is None:
            made = cls._made[db.vendor] = cls(db)
        return made

    def __init__(self, db: BaseDatabaseWrapper) -> None:
        q = db.ops.quote_name
        meta = AuditEvent._meta
        self.fields: list[Any] = [meta.get_field(name) for name in COLUMNS]
        self.table = q(meta.db_table)
        self.columns = ", ".join(q(f.column) for f in self.fields)
        marks = ", ".join(["%s"] * len(self.fields))
        # Names from _meta, never input: S608 does not apply.
        self.insert_sql = f"INSERT INTO {self.table} ({self.columns}) VALUES ({marks})"  # noqa: S608
        #: Whether a change and its event can be one statement (a data-modifying CTE).
        self.joined = db.vendor == "postgresql"
        self._marks = marks
        self._at = meta.get_field("at")
        self._identification_column = q(self.fields[COLUMNS.index("identification_id")].column)

    def params(self, values: dict[str, Any], db: BaseDatabaseWrapper) -> list[Any]:
        # The values are the columns' own types already (values_of: text, integers): only
        # the time is adapted by its field, as save() would (a purge writes thousands).
        return [
            self._at.get_db_prep_save(value, connection=db) if name == "at" else value
            for name, value in ((name, values[name]) for name in COLUMNS)
        ]

    def after_change(self, change_sql: str) -> str:
        """``change_sql`` (an ``UPDATE``, or an ``INSERT`` that may do nothing) and the
        event, one statement: the event is inserted once if the change changed its row, not
        at all if it did not (the statement's row count tells which)."""
        return (
            f"WITH changed AS ({change_sql} RETURNING 1) "  # noqa: S608
            f"INSERT INTO {self.table} ({self.columns}) SELECT {self._marks} FROM changed"
        )

    def after_insert(self, insert_sql: str, pk_column: str) -> str:
        """``insert_sql`` (an ``INSERT`` of one identification) and its event, one statement
        that returns the new identification's key. ``identification_id``'s parameter is
        replaced by the inserted row's key."""
        marks = ["%s"] * len(self.fields)
        marks[COLUMNS.index("identification_id")] = f"new.{pk_column}"
        return (
            f"WITH new AS ({insert_sql} RETURNING {pk_column}) "  # noqa: S608
            f"INSERT INTO {self.table} ({self.columns}) SELECT {', '.join(marks)} FROM new "
            f"RETURNING {self._identification_column}"
        )

    def params_after_insert(self, values: dict[str, Any], db: BaseDatabaseWrapper) -> list[Any]:
        params = self.params(values, db)
        del params[COLUMNS.index("identification_id")]
        return params


def change_with_event(
    db: BaseDatabaseWrapper, sql: str, params: list[Any], recorded: dict[str, Any]
) -> int:
    """Run the change ``sql`` (an ``UPDATE``, or an ``INSERT`` that may do nothing) and, if
    it changed a row, insert the event ``recorded`` (:func:`values_of`): one statement on
    PostgreSQL, two in one transaction elsewhere. The rows changed; the event goes to
    OpenTelemetry after the commit when there is one."""
    events = EventSql.of(db)
    if events.joined:
        with db.cursor() as cursor:
            cursor.execute(events.after_change(sql), params + events.params(recorded, db))
            changed = cursor.rowcount
    else:
        with atomic_change(db), db.cursor() as cursor:
            cursor.execute(sql, params)
            changed = cursor.rowcount
            if changed:
                cursor.execute(events.insert_sql, events.params(recorded, db))
    if changed:
        announce(recorded, using=db.alias)
    return int(changed)


def atomic_change(db: BaseDatabaseWrapper) -> AbstractContextManager[Any]:
    """The transaction a change and its event share where they are two statements (a
    savepoint inside a caller's transaction, so that a failure there breaks nothing)."""
    return transaction.atomic(using=db.alias)


def write(
    row: Identification,
    kind: str,
    *,
    outcome: str | None = None,
    at: datetime.datetime | None = None,
    using: str | None = None,
) -> None:
    """Insert the event of ``kind`` for ``row``, in the transaction the caller has open
    for the change (inside one, or in autocommit for an event that is the change itself,
    ``broker_error``)."""
    db = connections[using or router.db_for_write(AuditEvent, instance=row)]
    values = values_of(row, kind, outcome=outcome, at=at)
    sql = EventSql.of(db)
    with db.cursor() as cursor:
        cursor.execute(sql.insert_sql, sql.params(values, db))
    announce(values, using=db.alias)


def write_many(events: Iterable[dict[str, Any]], *, using: str) -> int:
    """Insert ``events`` (:func:`values_of`'s), one prepared ``INSERT`` run for them all
    (``executemany``: no model instances, no SQL compiled per row); how many. For changes of
    many rows at once (``eid_purge``, an account's deletion), in the caller's transaction."""
    db = connections[using]
    sql = EventSql.of(db)
    params = [sql.params(values, db) for values in events]
    if params:
        with db.cursor() as cursor:
            cursor.executemany(sql.insert_sql, params)
    return len(params)


def announce(values: dict[str, Any], *, using: str) -> None:
    """The event's numbers to OpenTelemetry once its transaction commits (a change rolled
    back is not counted); nothing when the site has no OpenTelemetry."""
    if not telemetry.enabled():
        return
    transaction.on_commit(
        lambda: telemetry.record_event(
            kind=values["kind"],
            finishing=values["kind"] in FINISHING,
            status=values["status"],
            outcome=values["outcome"],
            purpose=values["purpose"],
            broker_api=values["broker_api"],
            provider=values["provider"],
            display=values["display"],
            duration_ms=values["duration_ms"],
        ),
        using=using,
    )
