"""The identification flow, without HTTP: start a session, finish it once.

Every transition out of ``PENDING`` is one conditional ``UPDATE ... WHERE
status = 'PENDING'``; whoever changes the row acts (sends the signal), anyone
else sees the finished row. Signals are sent after the row is committed.
"""

from __future__ import annotations

import datetime
import logging
from contextlib import nullcontext
from dataclasses import dataclass
from typing import Any

from django.core.exceptions import ValidationError
from django.core.validators import validate_ipv46_address
from django.db import IntegrityError, connection, transaction
from django.db.models import Q
from django.http import HttpRequest
from django.utils import timezone
from django.utils.translation import gettext, gettext_lazy

from django_eid import crypto, signals
from django_eid.client import ReturnUrls, get_client
from django_eid.conf import eid_settings
from django_eid.exceptions import EidError, EidProtocolError, IdentificationRejected
from django_eid.models import (
    Identification,
    PersonClaim,
    fit,
    max_length,
    new_external_id,
    new_reference,
)
from django_eid.records import IdentificationRecord

logger = logging.getLogger("django_eid")

Status = Identification.Status
REQUEST_ID_MAX = max_length("request_id") or 0


@dataclass(frozen=True)
class Started:
    identification: Identification
    url: str


class BrokerFailed(Exception):
    """Creating the session at the broker failed; ``identification`` is stored as ERROR."""

    def __init__(self, identification: Identification, error: EidError) -> None:
        super().__init__(str(error))
        self.identification = identification
        self.error = error


def _valid_ip(value: str) -> str | None:
    try:
        validate_ipv46_address(value)
    except ValidationError:
        return None
    return value


def client_ip(request: HttpRequest) -> str | None:
    """The client's address as the web server saw it (proxies: see docs/deployment.md)."""
    return _valid_ip(request.META.get("REMOTE_ADDR") or "")


def start(
    request: HttpRequest,
    *,
    return_urls: Any,
    provider: str | None,
    next_url: str,
    display: str,
    iframe_domain: str | None,
) -> Started:
    """Create the broker session, then the pending row (one INSERT on the happy path).

    ``return_urls`` is called with the new reference and returns :class:`ReturnUrls`.
    """
    reference, external_id = new_reference(), new_external_id()
    row = Identification(
        user=request.user,  # type: ignore[misc]  # views require login
        reference=reference,
        external_id=external_id,
        display=display,
        next_url=next_url,
        identity_provider=provider or "",
        user_agent=fit("user_agent", request.META.get("HTTP_USER_AGENT", "")),
        ip_address=client_ip(request),
    )
    urls: ReturnUrls = return_urls(reference)
    try:
        created = get_client().create_session(
            return_urls=urls,
            external_reference=external_id,
            identity_provider=provider,
            language=eid_settings.broker_language(),
            get_social_security_number=eid_settings.GET_SOCIAL_SECURITY_NUMBER,
            iframe_domain=iframe_domain,
        )
        _check_request_id(created.request_id)
    except EidError as err:
        _store_failure(row, err)
        raise BrokerFailed(row, err) from err
    row.request_id = created.request_id
    try:
        # Inside a caller's transaction a failed INSERT must not break it: savepoint.
        with transaction.atomic() if connection.in_atomic_block else nullcontext():
            row.save(force_insert=True)
    except IntegrityError as err:
        # The unique index, not a query per start, catches a RequestId seen before.
        error = EidProtocolError("create_session answered the RequestId of an earlier session")
        row.request_id = None
        _store_failure(row, error)
        raise BrokerFailed(row, error) from err
    logger.info("Identification %s started (provider %s).", row.pk, provider or "any")
    _send(signals.identification_started, row, request)
    return Started(row, created.url)


def _check_request_id(request_id: str) -> None:
    """A RequestId that cannot be stored does not name a session we can finish."""
    if len(request_id) > REQUEST_ID_MAX:
        raise EidProtocolError(
            f"create_session answered a RequestId of {len(request_id)} characters "
            f"(at most {REQUEST_ID_MAX} are stored)"
        )


def _store_failure(row: Identification, err: EidError) -> None:
    row.status = Status.ERROR
    row.error_code = type(err).__name__
    row.error_message = fit("error_message", str(err))
    row.completed_at = timezone.now()
    row.save(force_insert=True)
    logger.warning("Creating identification session %s failed: %s", row.pk, err)


def pending_count(user: Any) -> int:
    since = timezone.now() - datetime.timedelta(seconds=eid_settings.SESSION_MAX_AGE)
    return Identification.objects.filter(
        user=user, status=Status.PENDING, created_at__gte=since
    ).count()


def is_expired(row: Identification) -> bool:
    age = (timezone.now() - row.created_at).total_seconds()
    return age > eid_settings.SESSION_MAX_AGE


def _transition(row: Identification, **fields: Any) -> bool:
    """Move ``row`` out of PENDING with ``fields``; False if someone else did first."""
    fields.setdefault("completed_at", timezone.now())
    # One statement is atomic on its own: no BEGIN/COMMIT (or SAVEPOINT) round trips.
    changed = Identification.objects.filter(pk=row.pk, status=Status.PENDING).update(**fields)
    if changed:
        for name, value in fields.items():
            setattr(row, name, value)
    else:
        row.refresh_from_db()
    return bool(changed)


#: What the user is told when django-eid itself refuses a successful record, by
#: ``error_code``. The stored ``error_message`` is in the language of the callback;
#: the result page translates these again in the language of whoever reads it.
REFUSALS = {
    "PROVIDER_NOT_ALLOWED": gettext_lazy(
        "You identified with an eID that is not accepted here. Please try again."
    ),
    "ONE_ACCOUNT_PER_PERSON": gettext_lazy("This person is already verified on another account."),
}


def expire(row: Identification) -> bool:
    return _transition(row, status=Status.EXPIRED)


def abort(row: Identification, request: HttpRequest) -> bool:
    """Mark ``row`` aborted; False if it had already finished otherwise (a race lost)."""
    if not _transition(row, status=Status.ABORTED):
        return False
    logger.info("Identification %s aborted by the user.", row.pk)
    _send(signals.identification_aborted, row, request)
    return True


def fail(row: Identification, request: HttpRequest, error_status: str) -> None:
    """The broker sent the user to the Error URL with ``[0]`` = ``error_status``."""
    fields: dict[str, Any] = {
        "status": Status.ERROR,
        "error_status": fit("error_status", error_status),
    }
    if row.request_id:
        try:
            record = get_client().get_session(row.request_id)
        except EidError as err:
            # The details are a nicety; the failure itself is what the broker said.
            logger.warning("Fetching the record of failed identification %s: %s", row.pk, err)
        else:
            fields.update(_error_fields(record))
    if _transition(row, **fields):
        logger.info("Identification %s failed at the broker (status %s).", row.pk, row.error_status)
        _send(signals.identification_failed, row, request)


def _error_fields(record: IdentificationRecord) -> dict[str, Any]:
    err = record.error
    if err is None:
        return {}
    code = err.error_code or err.native_error_code or ""
    return {
        "error_code": fit("error_code", code),
        "error_message": fit("error_message", err.error_message or ""),
    }


def _identity_fields(record: IdentificationRecord) -> dict[str, Any]:
    # Masked in repr(): a traceback through the store shows no national identity number.
    ssn = crypto.SensitiveText(record.social_security_number or "") or None
    ip = record.environment_info.ip_address
    fields: dict[str, Any] = {
        "identity_provider_unique_id": fit(
            "identity_provider_unique_id", record.identity_provider_unique_id or ""
        ),
        "name": fit("name", record.name or ""),
        "first_name": fit("first_name", record.first_name or ""),
        "middle_name": fit("middle_name", record.middle_name or ""),
        "last_name": fit("last_name", record.last_name or ""),
        "date_of_birth": record.birth_date,
        "social_security_number": ssn,
        "social_security_number_hash": crypto.lookup_hash(ssn) if ssn else None,
        "metadata": dict(record.metadata),
        "raw": record.redacted(),
    }
    if record.identity_provider:
        # A record without a provider keeps the one that was asked for.
        fields["identity_provider"] = fit("identity_provider", record.identity_provider)
    if record.environment_info.user_agent:
        fields["user_agent"] = fit("user_agent", record.environment_info.user_agent)
    if ip:
        fields["ip_address"] = _valid_ip(ip)
    return fields


def _same_person_elsewhere(row: Identification) -> bool:
    """Another account holds a successful identification of the person ``row`` stores.

    Matches what is stored (truncated values), and the number's lookup hash under every
    configured key, so rows from before a key rotation count.
    """
    match = Q()
    if row.identity_provider and row.identity_provider_unique_id:
        match |= Q(
            identity_provider=row.identity_provider,
            identity_provider_unique_id=row.identity_provider_unique_id,
        )
    if row.social_security_number:
        hashes = crypto.lookup_hashes(row.social_security_number)
        match |= Q(social_security_number_hash__in=hashes)
    if not match:
        return False
    return (
        Identification.objects.filter(match, status=Status.SUCCESS)
        .exclude(user_id=row.user_id)
        .exists()
    )


def _refusal(row: Identification, record: IdentificationRecord) -> tuple[str, str] | None:
    """Why the app itself refuses a successful record: ``(code, message)``, or ``None``.

    ``ONE_ACCOUNT_PER_PERSON`` is not decided here but in :func:`_transition_claiming`,
    inside the transaction of the SUCCESS transition.
    """
    used = record.identity_provider
    allowed = eid_settings.ALLOWED_PROVIDERS
    if used and (
        (row.identity_provider and used != row.identity_provider)
        or (allowed is not None and used not in allowed)
    ):
        # The broker let the user pick a provider this site does not accept.
        return "PROVIDER_NOT_ALLOWED", str(REFUSALS["PROVIDER_NOT_ALLOWED"])
    return None


class _PersonTaken(Exception):
    """Rolls back a SUCCESS transition: the person is verified on another account."""


def _transition_claiming(row: Identification, fields: dict[str, Any]) -> bool:
    """The SUCCESS transition and the person's claims, in one transaction.

    Raises :class:`_PersonTaken` (after rolling both back) when another account holds a
    successful identification of the person. The claims' unique key makes this hold for
    two accounts finishing at once: the second INSERT waits for the first transaction and,
    once it committed, the query below sees its row. The query itself finds what has no
    claim of the current key: rows from before the setting was on, or from before a key
    rotation. Claiming a key this account already holds moves it to the new row.
    """
    with transaction.atomic():
        if not _transition(row, **fields):
            return False
        keys = PersonClaim.keys_for(row)
        if not keys:
            return True
        features = connection.features
        PersonClaim.objects.bulk_create(
            [PersonClaim(key=key, identification=row) for key in keys],
            update_conflicts=True,
            update_fields=["identification"],
            # MySQL's ON DUPLICATE KEY UPDATE takes no conflict target.
            unique_fields=["key"] if features.supports_update_conflicts_with_target else None,
        )
        if _same_person_elsewhere(row):
            # Another account's claim was overwritten above: the rollback restores it.
            raise _PersonTaken
    return True


def succeed(row: Identification, request: HttpRequest, record: IdentificationRecord) -> None:
    """Store a record whose RequestId matched; act on its Status.

    Raises nothing for in-progress records: the caller checks ``record.status``
    against :data:`django_eid.records.IN_PROGRESS` first.
    """
    fields = _identity_fields(record)
    if not record.is_success:
        fields.update(
            status=Status.ERROR,
            error_status=fit("error_status", record.status or ""),
            **_error_fields(record),
        )
        if _transition(row, **fields):
            logger.info("Identification %s ended with record status %s.", row.pk, record.status)
            _send(signals.identification_failed, row, request)
        return
    refusal = _refusal(row, record)
    if refusal is None:
        fields["status"] = Status.SUCCESS
        try:
            if eid_settings.ONE_ACCOUNT_PER_PERSON:
                changed = _transition_claiming(row, dict(fields))
            else:
                changed = _transition(row, **fields)
        except _PersonTaken:
            refusal = "ONE_ACCOUNT_PER_PERSON", str(REFUSALS["ONE_ACCOUNT_PER_PERSON"])
        else:
            if changed:
                logger.info(
                    "Identification %s succeeded (provider %s).", row.pk, row.identity_provider
                )
                _receive_success(row, request)
            return
    code, message = refusal
    fields.update(status=Status.REJECTED, error_code=code, error_message=message)
    if _transition(row, **fields):
        logger.info("Identification %s rejected (%s).", row.pk, code)
        _send(signals.identification_failed, row, request)


def _receive_success(row: Identification, request: HttpRequest) -> None:
    """Send ``identification_succeeded``; store a receiver's rejection and free the person."""
    rejection = _send(signals.identification_succeeded, row, request)
    if rejection is None:
        return
    reason = fit(
        "error_message", rejection.reason or gettext("Your identification was not accepted.")
    )
    with transaction.atomic():
        changed = Identification.objects.filter(pk=row.pk, status=Status.SUCCESS).update(
            status=Status.REJECTED, error_code="REJECTED", error_message=reason
        )
        if changed:
            # The row no longer holds the identity, so neither does the account through it.
            PersonClaim.objects.filter(identification=row).delete()
    if changed:
        row.status, row.error_code, row.error_message = Status.REJECTED, "REJECTED", reason
        logger.info("Identification %s rejected by a receiver.", row.pk)
        _send(signals.identification_failed, row, request)


def _send(signal: Any, row: Identification, request: HttpRequest) -> IdentificationRejected | None:
    """Send ``signal``; receivers' crashes are logged, a rejection is returned."""
    rejection: IdentificationRejected | None = None
    for receiver, result in signal.send_robust(
        sender=Identification, identification=row, user=row.user, request=request
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
