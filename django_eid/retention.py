"""The audit events of retention: an identification deleted or stripped leaves its events.

``eid_purge`` (expiry, deletion, anonymization), the account's deletion and the admin's
deletion each write an event for every identification they change, in the transaction of
the change (:mod:`django_eid.audit`). The events themselves have no foreign key: they
outlive the rows and the account, until ``eid_purge --events-older-than`` deletes them.
"""

from __future__ import annotations

import datetime
from typing import Any, Final

from django.db import connections, transaction
from django.db.models import QuerySet
from django.utils import timezone

from django_eid import audit
from django_eid.models import AuditEvent, Identification

#: The fields :func:`django_eid.audit.values_of` reads: what a batch loads of each row to
#: write its event (never a name, a number or the broker's record).
EVENT_FIELDS: Final = (
    "user",
    "status",
    "purpose",
    "display",
    "identity_provider",
    "level_of_assurance",
    "error_code",
    "error_status",
    "start_address_hash",
    "created_at",
    "completed_at",
)

#: The outcome codes of the events written here: by ``eid_purge``'s retention, by the
#: account's deletion, by a deletion in the admin.
RETENTION: Final = "retention"
ACCOUNT_DELETED: Final = "account_deleted"
ADMIN: Final = "admin"

#: Rows read per statement when writing the events of an account's or the admin's deletion.
CHUNK: Final = 1000


def locking(rows: QuerySet[Any]) -> QuerySet[Any]:
    """``rows`` taken ``FOR UPDATE`` where the database can lock a ``LIMIT``ed read: a row
    read for its event then changes only by the statement the event describes."""
    features = connections[rows.db].features
    if features.has_select_for_update and features.supports_select_for_update_with_limit:
        return rows.select_for_update()
    return rows


def events_of(
    rows: list[Identification], kind: str, *, at: datetime.datetime, outcome: str | None = None
) -> list[dict[str, Any]]:
    """The event of ``kind`` for each of ``rows`` (as the change leaves them)."""
    return [audit.values_of(row, kind, at=at, outcome=outcome) for row in rows]


def write_events(
    rows: QuerySet[Identification], kind: str, *, outcome: str, at: datetime.datetime | None = None
) -> int:
    """Write the event of ``kind`` for each of ``rows`` before they change; how many.

    In the caller's transaction, ``CHUNK`` rows read (and locked, where the database can) at
    a time by their primary key, so that an account with a million identifications needs no
    more memory than one with ten.
    """
    chosen = locking(rows.select_related(None).order_by("pk").only(*EVENT_FIELDS))
    written = 0
    last = None
    while True:
        chunk = list((chosen if last is None else chosen.filter(pk__gt=last))[:CHUNK])
        if not chunk:
            return written
        # Each chunk at its own time unless told (ties an export pages through: a chunk's).
        events = events_of(chunk, kind, at=at or timezone.now(), outcome=outcome)
        written += audit.write_many(events, using=rows.db)
        last = chunk[-1].pk


def record_account_deletion(sender: Any, instance: Any, using: str, **kwargs: Any) -> None:
    """``pre_delete`` of the user model: a ``purged`` event for each identification of the
    account, which its deletion cascades to.

    Django sends ``pre_delete`` inside the deletion's transaction, before any row goes: the
    events commit or roll back with the account.
    """
    if instance.pk is None:
        return
    write_events(
        Identification.objects.using(using).filter(user_id=instance.pk),
        AuditEvent.Kind.PURGED,
        outcome=ACCOUNT_DELETED,
    )


def delete_events(cutoff: datetime.datetime, *, batch_size: int, using: str) -> int:
    """Delete the events older than ``cutoff``, ``batch_size`` at a time (each batch its own
    transaction, found by the ``(at)`` index, oldest first); how many."""
    old = AuditEvent.objects.using(using).filter(at__lt=cutoff)
    deleted = 0
    while True:
        with transaction.atomic(using=using):
            ids = list(old.order_by("at").values_list("pk", flat=True)[:batch_size])
            if not ids:
                return deleted
            deleted += old.filter(pk__in=ids).delete()[0]
