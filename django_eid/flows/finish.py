"""Finishing an identification: every transition out of ``PENDING``.

Each is one conditional ``UPDATE ... WHERE status = 'PENDING'`` (:func:`transition`):
whoever changes the row acts and sends the signal, anyone else sees the finished row.
:func:`complete` maps the broker's record to the row's columns and, for a ``SUCCESS``,
applies the site's rules (:mod:`django_eid.flows.rules`) in the same transaction, so a
rejected identity is never visible as ``SUCCESS``. Signals are sent after the row is
committed (:func:`send`), except ``identification_verifying``.
"""

from __future__ import annotations

import logging
from contextlib import nullcontext
from typing import TYPE_CHECKING, Any

from django.core.exceptions import ValidationError
from django.core.validators import validate_ipv46_address
from django.db import DatabaseError, connections, router, transaction
from django.utils import timezone
from django.utils.translation import gettext
from django.views.decorators.debug import sensitive_variables

from django_eid import audit, claims, crypto, outcomes, signals
from django_eid.brokers import broker_api
from django_eid.client import get_client
from django_eid.conf import eid_settings
from django_eid.exceptions import EidConfigurationError, EidError, IdentificationRejected
from django_eid.flows import link, login, rules
from django_eid.flows.refused import Refused
from django_eid.models import Identification, LinkedIdentity, fit, fit_json
from django_eid.records import IdentificationRecord, Progress
from django_eid.scrub import scrub, scrub_json

if TYPE_CHECKING:
    from django.http import HttpRequest

logger = logging.getLogger("django_eid")

Status = Identification.Status


def is_expired(row: Identification) -> bool:
    """Pending for longer than ``SESSION_MAX_AGE``."""
    age = (timezone.now() - row.created_at).total_seconds()
    return age > eid_settings.SESSION_MAX_AGE


def expire_if_stale(row: Identification) -> bool:
    """A pending row older than ``SESSION_MAX_AGE`` becomes ``EXPIRED``; True if this did it.

    Without asking the broker: for a row that cannot be asked (no ``request_id``), or a
    front end that must not call the broker. A row that is about to be finished is decided
    by the broker's record instead (:func:`~django_eid.flows.returns.return_to`, :func:`~django_eid.flows.settle.settle`): it may have
    succeeded, paid for, however late it is looked at.
    """
    return not row.is_finished and is_expired(row) and expire(row)


def undecided(row: Identification, record: IdentificationRecord) -> bool:
    """Whether ``record`` cannot finish ``row`` yet: the session is still at the broker, or
    the record carries no status (logged; then it is treated as still in progress)."""
    if record.progress is Progress.UNKNOWN:
        # An unknown status (the successors' list is not published) is not a missing one.
        status = "".join(c for c in (record.status or "")[:32] if 32 < ord(c) < 127)
        logger.warning(
            "The broker's record of identification %s has %s; it is left pending.",
            row.pk,
            f"the status {status!r}, unknown to django-eid" if status else "no status",
        )
    return record.in_progress


def transition(row: Identification, event: str | None = None, **fields: Any) -> bool:
    """Move ``row`` out of PENDING with ``fields``; False if someone else did first.

    One ``UPDATE ... WHERE status = 'PENDING'``, atomic on its own (no BEGIN/COMMIT or
    SAVEPOINT round trips), and its audit event of kind ``event`` (by default how rows
    finish here: :func:`django_eid.audit.finishing_as`): on PostgreSQL in the same statement,
    elsewhere in the same transaction. Its SQL is made once per database backend and set of
    fields, each value prepared by its model field as the ORM's ``update()`` would (the
    number encrypted, JSON adapted, a user given by its key): every return runs it, and
    compiling the ORM's ``update()`` of twenty columns cost more than the database's work
    for it (docs/benchmarks.md).
    """
    fields.setdefault("completed_at", timezone.now())
    db = connections[router.db_for_write(Identification, instance=row)]
    sql, prepared = _UpdateSql.of(db, tuple(fields))
    values = [prepare(fields[name], db) for name, prepare in prepared]
    values += [Identification._meta.pk.get_db_prep_value(row.pk, db), Status.PENDING.value]
    kind = event or audit.finish_kind()
    recorded = audit.values_of(row, kind, at=fields["completed_at"], changes=fields)
    changed = audit.change_with_event(db, sql, values, recorded)
    if changed:
        for name, value in fields.items():
            setattr(row, name, value)
    else:
        row.refresh_from_db()
    return bool(changed)


class _UpdateSql:
    """The ``UPDATE`` of :func:`transition` for one set of fields, on one backend."""

    _made: dict[tuple[str, tuple[str, ...]], tuple[str, list[tuple[str, Any]]]] = {}

    @classmethod
    def of(cls, db: Any, names: tuple[str, ...]) -> tuple[str, list[tuple[str, Any]]]:
        key = (db.vendor, names)
        made = cls._made.get(key)
        if made is None:
            made = cls._made[key] = cls._make(db, names)
        return made

    @staticmethod
    def _make(db: Any, names: tuple[str, ...]) -> tuple[str, list[tuple[str, Any]]]:
        q = db.ops.quote_name
        meta = Identification._meta
        sets, prepared = [], []
        for name in names:
            field = meta.get_field(name)
            column = getattr(field, "column", None)
            if not column:
                raise ValueError(f"transition(): {name!r} is not a column of Identification")
            sets.append(f"{q(column)} = %s")
            prepared.append((name, _preparer(field)))
        pk_column = q(meta.pk.column or meta.pk.name)
        status = q(meta.get_field("status").column or "status")
        # Names from the model's _meta, never input.
        sql = (
            f"UPDATE {q(meta.db_table)} SET {', '.join(sets)} "  # noqa: S608
            f"WHERE {pk_column} = %s AND {status} = %s"
        )
        return sql, prepared


def _preparer(field: Any) -> Any:
    """How the ORM's ``update()`` prepares a value of ``field`` for the database."""

    def prepare(value: Any, db: Any) -> Any:
        if hasattr(value, "prepare_database_save"):  # a model instance: its key
            value = value.prepare_database_save(field)
        return field.get_db_prep_save(value, connection=db)

    return prepare


def expire(row: Identification) -> bool:
    """Mark ``row`` expired; False if it had finished otherwise."""
    return transition(row, audit.Kind.EXPIRED, status=Status.EXPIRED)


def abort(
    row: Identification, request: HttpRequest | None = None, *, event: str | None = None
) -> bool:
    """Mark ``row`` aborted; False if it had already finished otherwise (a race lost)."""
    if not transition(row, event, status=Status.ABORTED):
        return False
    logger.info("Identification %s aborted by the user.", row.pk)
    send(signals.identification_aborted, row, request)
    return True


def cancel(row: Identification, request: HttpRequest | None = None) -> bool:
    """The user gave up before returning: ``row`` ends ``ABORTED`` and its broker session
    is invalidated, so it can no longer end otherwise; False if ``row`` had finished.

    The broker's answer does not decide: the row is aborted first (a callback arriving
    meanwhile then finds it finished), and a broker that cannot invalidate is logged.
    """
    if not abort(row, request, event=audit.Kind.CANCELLED):
        return False
    if row.request_id:
        try:
            get_client().invalidate_session(row.request_id)
        except (EidError, EidConfigurationError) as err:
            logger.warning("Invalidating identification %s at the broker failed: %s", row.pk, err)
    return True


def fail(
    row: Identification,
    request: HttpRequest | None = None,
    error_status: str = "UNKNOWN",
    *,
    record: IdentificationRecord | None = None,
) -> bool:
    """Mark ``row`` failed with ``error_status`` (the Error URL's ``[0]``, or the record's
    status) and the broker's details from ``record``; False if it had finished otherwise."""
    fields: dict[str, Any] = {
        "status": Status.ERROR,
        "error_status": fit("error_status", error_status),
    }
    if record is not None:
        fields.update(error_fields(record))
    if not transition(row, **fields):
        return False
    logger.info("Identification %s failed at the broker (status %s).", row.pk, row.error_status)
    send(signals.identification_failed, row, request)
    return True


# Every local may hold personal data: hidden from error reports (technical 500, e-mails).
@sensitive_variables()
def complete(
    row: Identification, record: IdentificationRecord, *, request: HttpRequest | None = None
) -> bool:
    """Finish ``row`` with its retrieved ``record``; False if it had finished otherwise.

    ``SUCCESS`` passes the site's rules and becomes ``SUCCESS`` or ``REJECTED`` (``ERROR``
    when a rule cannot run); any other final status becomes ``ERROR``. A record still in
    progress, or without a ``Status``, raises :class:`Refused` (``in_progress``) and leaves
    the row pending.
    """
    if undecided(row, record):
        raise Refused(outcomes.IN_PROGRESS)
    fields = _identity_fields(row, record)
    if not record.is_success:
        fields.update(
            status=Status.ERROR,
            error_status=fit("error_status", record.status or ""),
            **error_fields(record),
        )
        if not transition(row, **fields):
            return False
        logger.info("Identification %s ended with record status %s.", row.pk, record.status)
        send(signals.identification_failed, row, request)
        return True
    code = rules.provider_refusal(row, record)
    if code is not None:
        return _reject(row, fields, code, request)
    if row.at_the_door and row.user_id is None:
        # Who the door opens for: the account linked to the person, known before the
        # rules run, so that they and the receivers see it; the rules of the door first.
        account = login.account_of(row, fields)
        if account is not None:
            fields["user"] = account
        provider = fields.get("identity_provider") or row.identity_provider
        code = login.refusal(fields.get("level_of_assurance", ""), provider, account)
        if code is not None:
            return _reject(row, fields, code, request)
    return _succeed(row, fields, request)


def _reject(
    row: Identification, fields: dict[str, Any], code: str, request: HttpRequest | None
) -> bool:
    """Finish ``row`` ``REJECTED`` with django-eid's own reason ``code``; never visible as
    ``SUCCESS``."""
    fields.update(
        status=Status.REJECTED,
        error_code=code,
        error_message=fit("error_message", outcomes.rejection_message(code) or ""),
    )
    if not transition(row, **fields):
        return False
    logger.info("Identification %s rejected (%s).", row.pk, code)
    send(signals.identification_failed, row, request)
    return True


def _succeed(row: Identification, fields: dict[str, Any], request: HttpRequest | None) -> bool:
    """``SUCCESS``, with the site's rules applied before it commits.

    One transaction holds the row from ``PENDING`` to its outcome: the rules run in a
    savepoint after the ``SUCCESS`` update, and a refusal rolls back to it (the claims and
    the receivers' own writes with it) and stores the refusal instead. A concurrent request
    sees ``PENDING``, then the outcome, and a second callback waits for the row's lock and
    then finds it finished: the rules run once.
    """
    if not rules.has_rules(row):
        if not transition(row, status=Status.SUCCESS, **fields):
            return False
    else:
        refused: rules.Refusal | None = None
        with transaction.atomic():
            if not transition(row, status=Status.SUCCESS, **fields):
                return False
            try:
                with transaction.atomic():
                    rules.apply_rules(row, request)
            except rules.Refusal as refusal:
                refused = refusal
                outcome = {
                    "status": refusal.status,
                    "error_code": refusal.code,
                    "error_message": fit("error_message", refusal.message),
                }
                Identification.objects.filter(pk=row.pk).update(**outcome)
                for name, value in outcome.items():
                    setattr(row, name, value)
                audit.write(row, audit.Kind.REJECTED)
        if refused is not None:
            logger.info("Identification %s refused by the site's rules (%s).", row.pk, refused.code)
            send(signals.identification_failed, row, request)
            return True
    logger.info("Identification %s succeeded (provider %s).", row.pk, row.identity_provider)
    if row.user_id is None:
        # A person without an account, at the door: the receivers hear of it when it is
        # bound to one (django_eid.flows.signup.bind).
        return True
    receive_success(row, request)
    if row.status == Status.SUCCESS and not row.at_the_door:  # not rejected by a receiver
        _link(row)  # at the door, the link is what found the account
    return True


def _link(row: Identification) -> None:
    """Link the account to the person (``LINK_ON_VERIFY``). The ``SUCCESS`` is stored
    already: a database that fails here costs the link only (``eid_link`` makes it later)."""
    db = connections[router.db_for_write(LinkedIdentity)]
    # Inside a caller's transaction a failed INSERT must not break it: savepoint.
    savepoint = transaction.atomic(using=db.alias) if db.in_atomic_block else nullcontext()
    try:
        with savepoint:
            link.link(row)
    except DatabaseError as err:
        logger.error(
            "Linking the account of identification %s to its person failed: %s",
            row.pk,
            type(err).__name__,
        )


def error_fields(record: IdentificationRecord) -> dict[str, Any]:
    err = record.error
    if err is None:
        return {}
    code = err.error_code or err.native_error_code or ""
    return {
        "error_code": fit("error_code", code),
        # The broker's free text: it may quote the person's number.
        "error_message": fit("error_message", scrub(err.error_message or "")),
    }


# Every local may hold personal data: hidden from error reports (technical 500, e-mails).
@sensitive_variables()
def _identity_fields(row: Identification, record: IdentificationRecord) -> dict[str, Any]:
    """The columns of ``row`` that ``record`` fills, cut to what they store."""
    provider = record.identity_provider or row.identity_provider
    country = record.national_id_country or broker_api().provider_country(provider)
    national_id = record.national_id(country=country)
    number = national_id.number if national_id else record.social_security_number
    # Masked in repr(): a traceback through the store shows no national identity number.
    ssn = crypto.SensitiveText(number or "") or None
    if not eid_settings.GET_SOCIAL_SECURITY_NUMBER:
        # Sent although not asked for: it may still tell the century of the birth date,
        # but the site chose not to keep it.
        ssn = None
    stated = record.stated_birth_date
    if (
        national_id
        and stated
        and stated.strftime("%d%m%y") != national_id.birth_date.strftime("%d%m%y")
    ):
        # The number is what the registry issued; the broker's two-digit date is not.
        logger.warning(
            "Identification %s: the record's DateOfBirth disagrees with its national identity "
            "number; the number's date is stored.",
            row.pk,
        )
    fields: dict[str, Any] = {
        "identity_provider_unique_id": fit(
            "identity_provider_unique_id", record.identity_provider_unique_id or ""
        ),
        "name": fit("name", record.name or ""),
        "first_name": fit("first_name", record.first_name or ""),
        "middle_name": fit("middle_name", record.middle_name or ""),
        "last_name": fit("last_name", record.last_name or ""),
        "date_of_birth": national_id.birth_date if national_id else stated,
        "social_security_number": ssn,
        "social_security_number_hash": crypto.lookup_hash(ssn) if ssn else None,
        "national_id_country": national_id.country if national_id and ssn else "",
        "national_id_kind": national_id.kind if national_id and ssn else "",
        "level_of_assurance": fit("level_of_assurance", record.level_of_assurance or ""),
        # Scrubbed (a number the broker put elsewhere) and capped, as every broker text.
        "metadata": fit_json(scrub_json(dict(record.metadata))),
        "raw": fit_json(record.redacted()),
        # The provider's signed token and its keys, encrypted (django_eid.evidence).
        "evidence": record.evidence if eid_settings.KEEP_EVIDENCE else None,
    }
    if record.identity_provider:
        # A record without a provider keeps the one that was asked for.
        fields["identity_provider"] = fit("identity_provider", record.identity_provider)
    if record.environment_info.user_agent:
        fields["user_agent"] = fit("user_agent", record.environment_info.user_agent)
    if record.environment_info.ip_address:
        # What the broker saw, or nothing when that is not an address: never the start's.
        fields["ip_address"] = _valid_ip(record.environment_info.ip_address)
    return fields


def _valid_ip(value: str | None) -> str | None:
    try:
        validate_ipv46_address(value or "")
    except ValidationError:
        return None
    return value


def receive_success(
    row: Identification, request: HttpRequest | None, *, purpose: str | None = None
) -> None:
    """Send ``identification_succeeded``; store a receiver's (late) rejection, free the person.

    ``purpose``: the signal's, when not the row's (``"signup"`` for a row just bound)."""
    rejection = send(signals.identification_succeeded, row, request, purpose=purpose)
    if rejection is None:
        return
    reason = fit(
        "error_message", rejection.reason or gettext("Your identification was not accepted.")
    )
    code = outcomes.RECEIVER_REJECTED
    with transaction.atomic():
        changed = Identification.objects.filter(pk=row.pk, status=Status.SUCCESS).update(
            status=Status.REJECTED, error_code=code, error_message=reason
        )
        if changed:
            row.status, row.error_code, row.error_message = Status.REJECTED, code, reason
            # The row no longer holds the identity, so neither does the account through it.
            claims.release(row)
            audit.write(row, audit.Kind.REJECTED)
    if changed:
        logger.info("Identification %s rejected by a receiver.", row.pk)
        send(signals.identification_failed, row, request)


def send(
    signal: Any, row: Identification, request: HttpRequest | None, *, purpose: str | None = None
) -> IdentificationRejected | None:
    """Send ``signal``; receivers' crashes are logged, a rejection is returned.

    ``purpose`` is the row's unless given (``"signup"`` when a row is bound to an account).
    """
    rejection: IdentificationRejected | None = None
    for receiver, result in signal.send_robust(
        sender=Identification,
        identification=row,
        user=row.user,
        request=request,
        purpose=purpose or row.purpose,
    ):
        if isinstance(result, IdentificationRejected):
            rejection = rejection or result
        elif isinstance(result, Exception):
            logger.error(
                "A receiver of a django-eid signal failed (identification %s, receiver %r): %s",
                row.pk,
                receiver,
                type(result).__name__,
            )
    return rejection
