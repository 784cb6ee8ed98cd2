"""The pending limit (``MAX_PENDING_PER_USER``), and the statements every start runs.

What counts toward the limit is :func:`unfinished_count`'s; :class:`StartSql` runs the
limit's lock and count, and stores the broker's session id on the reserved row, in SQL
written out once per database backend (docs/benchmarks.md, benchmark 3).
"""

from __future__ import annotations

import datetime
import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, ClassVar, Final

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import connections, router
from django.utils import timezone

from django_eid import audit, crypto
from django_eid.conf import eid_settings
from django_eid.models import Identification

if TYPE_CHECKING:
    from django.db.backends.base.base import BaseDatabaseWrapper

logger = logging.getLogger("django_eid")

Status = Identification.Status

#: Seconds a start that failed at the broker, or an identification the user cancelled,
#: counts toward ``MAX_PENDING_PER_USER``. Only to stop a client hammering a failing broker,
#: or starting and cancelling in a loop (each start is a billed session), not to ration a
#: user: once the broker is back, or after a cancel, the user may start again within a minute.
FAILED_START_WINDOW: Final = 60


def unfinished_count(user: Any, *, using: str | None = None) -> int:
    """What ``MAX_PENDING_PER_USER`` limits: the user's pending identifications younger than
    ``SESSION_MAX_AGE``, and the starts that failed at the broker and the identifications
    cancelled in the last :data:`FAILED_START_WINDOW` seconds.

    ``user`` is a user or its primary key; ``using`` the database (by default the one
    Identification is written to: the count decides a write, and a replica may lag).
    """
    db = connections[using or router.db_for_write(Identification)]
    return StartSql.of(db).count_unfinished(db, getattr(user, "pk", user))


class StartSql:
    """The statements every start runs, in SQL: the pending limit's lock and count, and the
    broker's session id stored on the reserved row.

    Not through the ORM: building and compiling these querysets cost more than the
    database's work for them (docs/benchmarks.md, benchmark 3). Names come from the models'
    ``_meta``, quoted by the connection; every value is a parameter, prepared by its model
    field as the ORM would (a UUID key, say). Made once per database backend and user model.
    """

    _made: ClassVar[dict[tuple[type[BaseDatabaseWrapper], str], StartSql]] = {}

    @classmethod
    def of(cls, db: BaseDatabaseWrapper) -> StartSql:
        key = (type(db), settings.AUTH_USER_MODEL)
        made = cls._made.get(key)
        if made is None:
            made = cls._made[key] = cls(db)
        return made

    def __init__(self, db: BaseDatabaseWrapper) -> None:
        q = db.ops.quote_name
        ident = Identification._meta
        # A concrete field always has a column (None only for a field not yet set up).
        col = {f.name: q(f.column or f.name) for f in ident.concrete_fields}
        table = q(ident.db_table)
        # Names from the models' _meta, never input: S608 does not apply.
        self.count_sql = (
            f"SELECT COUNT(*) FROM {table} WHERE {col['user']} = %s AND ("  # noqa: S608
            f"({col['status']} = %s AND {col['created_at']} >= %s)"
            f" OR ({col['status']} = %s AND {col['request_id']} IS NULL"
            f" AND {col['anonymized_at']} IS NULL AND {col['created_at']} >= %s)"
            f" OR ({col['status']} = %s AND {col['completed_at']} >= %s))"
        )
        # The new row: every concrete column but the auto-incremented key, whose value
        # comes back (RETURNING where the database has it).
        self.insert_fields = [
            f for f in ident.concrete_fields if not (f.primary_key and f.db_returning)
        ]
        columns = ", ".join(col[f.name] for f in self.insert_fields)
        marks = ", ".join(["%s"] * len(self.insert_fields))
        self.returning = bool(db.features.can_return_columns_from_insert)
        pk_column = col[ident.pk.name]
        plain_insert = f"INSERT INTO {table} ({columns}) VALUES ({marks})"  # noqa: S608
        self.insert_sql = plain_insert + (f" RETURNING {pk_column}" if self.returning else "")
        # With its "started" event, where that is one statement (PostgreSQL).
        events = audit.EventSql.of(db)
        self.insert_with_event_sql = (
            events.after_insert(plain_insert, pk_column) if events.joined else None
        )
        self.pk_column = ident.pk.column or ident.pk.name
        self.request_id_sql = (
            f"UPDATE {table} SET {col['request_id']} = %s WHERE {col[ident.pk.name]} = %s"  # noqa: S608
        )
        # The user's row, whatever the user model's managers hide; None on a backend whose
        # lock is not a trailing clause (a table hint): the ORM's lock there.
        users = get_user_model()._meta
        clause = db.ops.for_update_sql()
        self.lock_sql: str | None = (
            f"SELECT 1 FROM {q(users.db_table)} WHERE "  # noqa: S608
            f"{q(users.pk.column or users.pk.name)} = %s {clause}"
            if clause.startswith("FOR UPDATE")
            else None
        )

    def count_unfinished(self, db: BaseDatabaseWrapper, user_pk: Any) -> int:
        if user_pk is None:
            raise ValueError("unfinished_count() needs a saved user")
        now = timezone.now()

        def ago(seconds: int) -> Any:
            return db.ops.adapt_datetimefield_value(now - datetime.timedelta(seconds=seconds))

        since, recently = ago(eid_settings.SESSION_MAX_AGE), ago(FAILED_START_WINDOW)
        user = Identification._meta.get_field("user").get_db_prep_value(user_pk, db)
        params = [user, Status.PENDING.value, since]
        params += [Status.ERROR.value, recently, Status.ABORTED.value, recently]
        with db.cursor() as cursor:
            cursor.execute(self.count_sql, params)
            (count,) = cursor.fetchone()
        return int(count)

    def lock(self, db: BaseDatabaseWrapper, user_pk: Any) -> None:
        """Lock the user's row until the transaction ends."""
        if not db.features.has_select_for_update:
            return  # SQLite: a write locks the whole database anyway
        user_model = get_user_model()
        if self.lock_sql is None:
            users = user_model._base_manager.using(db.alias).select_for_update()
            list(users.filter(pk=user_pk).values_list("pk", flat=True))
            return
        with db.cursor() as cursor:
            cursor.execute(self.lock_sql, [user_model._meta.pk.get_db_prep_value(user_pk, db)])
            cursor.fetchall()

    def insert(self, db: BaseDatabaseWrapper, row: Identification, *, event: bool = True) -> None:
        """INSERT the new ``row`` (its values prepared by its fields, as ``save()`` would:
        the defaults, the number's lookup hash) and, unless ``event`` is False (a row reserved
        before the broker is asked: :meth:`set_request_id` writes it), its ``started`` audit
        event: one statement on PostgreSQL, one transaction elsewhere. The row's key is set
        from the database."""
        if row.social_security_number:  # never at a start; kept in step as save() keeps it
            row.social_security_number_hash = crypto.lookup_hash(row.social_security_number)
        values = [f.get_db_prep_save(f.pre_save(row, add=True), db) for f in self.insert_fields]
        if not event:
            with db.cursor() as cursor:
                pk = self._insert_row(db, cursor, values)
        else:
            recorded = audit.values_of(row, audit.Kind.STARTED, at=row.created_at)
            events = audit.EventSql.of(db)
            if self.insert_with_event_sql is not None:
                with db.cursor() as cursor:
                    params = values + events.params_after_insert(recorded, db)
                    cursor.execute(self.insert_with_event_sql, params)
                    (pk,) = cursor.fetchone()
            else:
                with audit.atomic_change(db), db.cursor() as cursor:
                    recorded["identification_id"] = pk = self._insert_row(db, cursor, values)
                    cursor.execute(events.insert_sql, events.params(recorded, db))
            recorded["identification_id"] = pk
            audit.announce(recorded, using=db.alias)
        row.pk = pk
        row._state.adding = False
        row._state.db = db.alias

    def _insert_row(self, db: BaseDatabaseWrapper, cursor: Any, values: list[Any]) -> Any:
        """The row's ``INSERT`` alone; its new key."""
        cursor.execute(self.insert_sql, values)
        if self.returning:
            return cursor.fetchone()[0]
        return db.ops.last_insert_id(cursor, Identification._meta.db_table, self.pk_column)

    def set_request_id(self, db: BaseDatabaseWrapper, row: Identification, value: str) -> None:
        """The broker's session id on the reserved ``row``, and its ``started`` audit event
        (the session exists now: what the broker bills), in one statement on PostgreSQL,
        one transaction elsewhere."""
        ident = Identification._meta
        params = [
            ident.get_field("request_id").get_db_prep_value(value, db),
            ident.pk.get_db_prep_value(row.pk, db),
        ]
        recorded = audit.values_of(row, audit.Kind.STARTED, at=row.created_at)
        audit.change_with_event(db, self.request_id_sql, params, recorded)


class RowReader:
    """Model instances from the rows of raw SQL, as the ORM reads them (each column through
    its field's converters: JSON parsed, a UUID on SQLite made one, ...), without compiling
    a queryset or a ``RawQuerySet``'s column resolution per query: the return and the login
    read one row each this way (docs/benchmarks.md, benchmarks 3 and 8). Made once per
    database backend and model."""

    _made: ClassVar[dict[tuple[type[BaseDatabaseWrapper], str, tuple[str, ...]], RowReader]] = {}

    @classmethod
    def of(cls, db: BaseDatabaseWrapper, model: Any, names: tuple[str, ...]) -> RowReader:
        key = (type(db), model._meta.label, names)
        made = cls._made.get(key)
        if made is None:
            made = cls._made[key] = cls(db, model, names)
        return made

    def __init__(self, db: BaseDatabaseWrapper, model: Any, names: tuple[str, ...]) -> None:
        meta = model._meta
        self.model = model
        self.attnames = [meta.get_field(name).attname for name in names]
        self.converters = []
        for name in names:
            column = meta.get_field(name).get_col(meta.db_table)
            found = db.ops.get_db_converters(column) + column.get_db_converters(db)
            self.converters.append((column, found))

    def read(self, db: BaseDatabaseWrapper, values: Sequence[Any]) -> Any:
        """The instance of one row's ``values`` (in the order of ``names``)."""
        converted = []
        for value, (column, found) in zip(values, self.converters, strict=True):
            for convert in found:
                value = convert(value, column, db)
            converted.append(value)
        return self.model.from_db(db.alias, self.attnames, converted)
