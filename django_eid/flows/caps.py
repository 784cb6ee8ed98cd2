"""The caps on identifications started at the door, by visitors who are not logged in.

Each start is a session the broker bills, and a visitor without an account is anyone: the
pending limit of a user (:mod:`django_eid.flows.pending`) has no user to count by. So a start
at the door is counted per browser session (``LOGIN_MAX_PENDING_PER_SESSION`` in each window
of ``SESSION_MAX_AGE``: every start that can still be pending, and those that ended, which
the broker billed too; the session is known by a random key it keeps,
:func:`django_eid.state.browser_key`, so a first start needs no session saved before it) and per client address (``LOGIN_RATE``, ``"60/h"``: an attacker drops
the cookie, not the address). One statement counts both (:func:`spend`): an upsert on the
counters' primary key, which on PostgreSQL waits for a parallel start's row lock and then
counts on from it, so parallel starts cannot all pass.

Behind a proxy, ``REMOTE_ADDR`` must be the client's address (the proxy's middleware sets
it), or every visitor shares one counter. An IPv6 client is counted by its /64 network: one
host commonly holds all of it.
"""

from __future__ import annotations

import datetime
import ipaddress
import sqlite3
from typing import TYPE_CHECKING, Any, Final

from django.conf import settings
from django.db import IntegrityError, connections, router, transaction
from django.utils import timezone
from django.utils.crypto import salted_hmac

from django_eid import outcomes, telemetry
from django_eid.conf import eid_settings
from django_eid.flows.refused import Refused
from django_eid.models import StartCounter

if TYPE_CHECKING:
    from django.db.backends.base.base import BaseDatabaseWrapper

#: Key prefixes: a browser session's counter, a client address's.
SESSION: Final = "s:"
ADDRESS: Final = "a:"


def counter_key(prefix: str, value: str) -> str:
    """The key of ``value``'s counter: a keyed hash, never the browser's key or address."""
    digest = salted_hmac("django_eid.caps", value, algorithm="sha256").hexdigest()
    return prefix + digest


#: What every start without a usable client address is counted as, together: a server
#: behind a socket or a proxy that leaves ``REMOTE_ADDR`` empty (or writes ``ip:port``)
#: must not turn the cap off, so such starts share one counter (check the deployment).
UNKNOWN_ADDRESS: Final = "unknown"


def address_of(client_ip: str | None) -> str:
    """What a client address is counted as: the address, an IPv6 one's /64 network, and
    :data:`UNKNOWN_ADDRESS` for none or one that is not an address."""
    try:
        address = ipaddress.ip_address((client_ip or "").strip())
    except ValueError:
        return UNKNOWN_ADDRESS
    if address.version == 6:
        mapped = address.ipv4_mapped
        if mapped is not None:
            return str(mapped)
        return str(ipaddress.ip_network(f"{address}/64", strict=False))
    return str(address)


def window_start(now: datetime.datetime, seconds: int) -> datetime.datetime:
    """The start of the fixed window of ``seconds`` that ``now`` is in (aligned to the epoch),
    as the database stores datetimes: aware with ``USE_TZ``, else naive local time."""
    stamp = int(now.timestamp())
    start = datetime.datetime.fromtimestamp(stamp - stamp % seconds, tz=datetime.UTC)
    return start if settings.USE_TZ else timezone.make_naive(start)


def spend(browser_key: str | None, client_ip: str | None) -> None:
    """Count a start at the door; :class:`Refused` (``too_many_starts``, 429) past a cap.

    The start is counted even when refused: a flood stays refused until its window ends.
    """
    per_session = eid_settings.LOGIN_MAX_PENDING_PER_SESSION
    rate = eid_settings.LOGIN_RATE
    now = timezone.now()
    counters: list[tuple[str, datetime.datetime, int]] = []
    if per_session is not None and browser_key:
        window = window_start(now, eid_settings.SESSION_MAX_AGE)
        counters.append((counter_key(SESSION, browser_key), window, per_session))
    address = address_of(client_ip)
    if rate is not None:
        starts, seconds = rate
        counters.append((counter_key(ADDRESS, address), window_start(now, seconds), starts))
    if not counters:
        return
    counts = _count(counters)
    if any(counts.get(key, 0) > limit for key, _window, limit in counters):
        telemetry.refused(outcomes.TOO_MANY_STARTS.code)
        raise Refused(outcomes.TOO_MANY_STARTS)


def _count(counters: list[tuple[str, datetime.datetime, int]]) -> dict[str, int]:
    """Count one start on each counter, in one statement; each counter's count now.

    Rows in the order given (the session's first), so two starts lock shared counters in
    one order and never deadlock.
    """
    db = connections[router.db_for_write(StartCounter)]
    if not (db.features.supports_update_conflicts_with_target and _returns_from_upsert(db)):
        return _count_portably(db.alias, counters)
    sql = _upsert_sql(db, len(counters))
    params: list[Any] = []
    for key, window, _limit in counters:
        params += [key, db.ops.adapt_datetimefield_value(window), 1]
    with db.cursor() as cursor:
        cursor.execute(sql, params)
        return {str(key): int(count) for key, count in cursor.fetchall()}


def _returns_from_upsert(db: BaseDatabaseWrapper) -> bool:
    """PostgreSQL, and SQLite from 3.35: ``INSERT ... ON CONFLICT ... RETURNING``."""
    if db.vendor == "postgresql":
        return True
    return db.vendor == "sqlite" and sqlite3.sqlite_version_info >= (3, 35)


def _count_portably(
    alias: str, counters: list[tuple[str, datetime.datetime, int]]
) -> dict[str, int]:
    """:func:`_count` through the ORM, for a database without the upsert (MySQL, Oracle):
    each counter locked (``SELECT ... FOR UPDATE``) and counted in one transaction; more
    statements, the same decision."""
    counts: dict[str, int] = {}
    with transaction.atomic(using=alias):
        for key, window, _limit in counters:
            rows = StartCounter.objects.using(alias)
            try:
                with transaction.atomic(using=alias):
                    row, _made = rows.select_for_update().get_or_create(
                        key=key, defaults={"window_start": window, "count": 0}
                    )
            except IntegrityError:  # made by a parallel start meanwhile
                row = rows.select_for_update().get(key=key)
            row.count = row.count + 1 if row.window_start == window else 1
            row.window_start = window
            row.save(update_fields=["count", "window_start"])
            counts[key] = row.count
    return counts


_SQL: dict[tuple[str, int], str] = {}


def _upsert_sql(db: BaseDatabaseWrapper, rows: int) -> str:
    made = _SQL.get((db.vendor, rows))
    if made is None:
        q = db.ops.quote_name
        meta = StartCounter._meta
        table = q(meta.db_table)
        columns = {f.name: q(f.column or f.name) for f in meta.concrete_fields}
        key, window, count = columns["key"], columns["window_start"], columns["count"]
        values = ", ".join(["(%s, %s, %s)"] * rows)
        # Names from the model's _meta, never input. Every SET reads the row as it was.
        made = _SQL[(db.vendor, rows)] = (
            f"INSERT INTO {table} ({key}, {window}, {count}) VALUES {values} "  # noqa: S608
            f"ON CONFLICT ({key}) DO UPDATE SET "
            f"{count} = CASE WHEN {table}.{window} = excluded.{window} "
            f"THEN {table}.{count} + 1 ELSE 1 END, "
            f"{window} = excluded.{window} "
            f"RETURNING {key}, {count}"
        )
    return made


def forget_ended(now: datetime.datetime | None = None) -> int:
    """Delete the counters whose window is over (``eid_purge``); how many went."""
    now = now or timezone.now()
    longest = max(eid_settings.SESSION_MAX_AGE, (eid_settings.LOGIN_RATE or (0, 0))[1])
    cutoff = now - datetime.timedelta(seconds=longest)
    deleted, _ = StartCounter.objects.filter(window_start__lt=cutoff).delete()
    return deleted
