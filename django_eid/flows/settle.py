"""Settling an identification without the callback of the browser that started it.

For the user who identified on a phone and came back in another browser, or closed the
tab, for the frame page that cannot be told, and for ``eid_reconcile``: :func:`settle`
asks the broker and finishes the row under the same-device rule;
:func:`settle_if_due` does so at most every :data:`SETTLE_INTERVAL` seconds, for what
anyone can trigger.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from django.core.cache import caches
from django.views.decorators.debug import sensitive_variables

from django_eid import crypto
from django_eid.brokers import broker_api
from django_eid.client import get_client
from django_eid.conf import eid_settings
from django_eid.exceptions import EidConfigurationError, EidError
from django_eid.flows import finish
from django_eid.models import Identification, fit
from django_eid.records import Progress

if TYPE_CHECKING:
    from django.http import HttpRequest

logger = logging.getLogger("django_eid")

Status = Identification.Status


@dataclass(frozen=True)
class Settled:
    """What :func:`settle` did: the row as it is now, and ``outcome``, one of
    ``succeeded``, ``rejected``, ``aborted``, ``failed``, ``expired`` (finished now),
    ``finished`` (before), ``pending`` (still at the broker), ``other_device``
    (identified, but not in the browser that started: left for its callback) or ``restart``
    (a return in another browser of an API whose identity only that return carries: the
    user starts again where they started)."""

    identification: Identification
    outcome: str


#: :attr:`Settled.outcome` of a row this call finished, by its new status.
_SETTLED = {
    Status.SUCCESS: "succeeded",
    Status.REJECTED: "rejected",
    Status.ABORTED: "aborted",
    Status.ERROR: "failed",
    Status.EXPIRED: "expired",
}


# Every local may hold personal data: hidden from error reports (technical 500, e-mails).
@sensitive_variables()
def settle(row: Identification, *, request: HttpRequest | None = None) -> Settled:
    """Finish ``row`` from the broker's record, without the callback of its browser.

    For the user who identified on a phone and came back in another browser, or closed the
    tab, and for the frame page that cannot be told. Asks the broker's status call first
    (no personal data), and the record only once the session is done. A ``SUCCESS`` is
    stored only under ``COMPLETE_WITHOUT_CALLBACK = "same_device"`` and only when the
    record's ``EnvironmentInfo`` is the browser that started (its IP address, normalised,
    and user agent, compared through the row's ``device_key``; a start or a record without
    a valid address or a user agent never matches): else somebody who started a session on
    their own account and got another person to identify at its URL would receive that
    person's identity. Such a row is logged and left for its callback, or expiry. This
    tells devices apart only by public address and a user agent the sender chooses: see
    docs/security.md, residual risks. A cancelled, failed or timed-out session reveals no
    identity and is finished as it ended; a session still at the broker (or a record
    without a ``Status``) past ``SESSION_MAX_AGE`` expires, as does a row this call cannot
    complete.

    Raises :class:`~django_eid.exceptions.EidError` when the broker cannot answer, and
    :class:`~django_eid.exceptions.EidConfigurationError` when django-eid is not set up.
    """
    if row.is_finished:
        return Settled(row, "finished")
    stale = finish.is_expired(row)
    if (
        eid_settings.COMPLETE_WITHOUT_CALLBACK == "never"
        or not row.request_id
        or not broker_api().settles_without_return
    ):
        # Nothing to ask the broker (an OpenID provider's identity comes only with the
        # return's single-use code): the row waits for its return, or expires.
        return _expired_or(row, stale, "pending")
    if _seen_on_other_device(row):
        # The record will not change: do not fetch another person's identity again.
        return _expired_or(row, stale, "other_device")
    client = get_client()
    if client.session_done(row.request_id) is False:
        # The API's call without personal data says it is not over (an API without such a
        # call answers None: its record is asked instead).
        return _expired_or(row, stale, "pending")
    record = client.get_session(row.request_id)
    if finish.undecided(row, record):
        # Done, says the status call, but the record cannot tell how (yet): ask again later.
        return _expired_or(row, stale, "pending")
    if record.is_success and row.at_the_door:
        # A login opens an account: only the browser that started may receive it, through
        # its own return (a relayed session would otherwise log its sender in as the
        # person who identified). The row waits for that return, or expires.
        _remember_other_device(row)
        return _expired_or(row, stale, "other_device")
    env = record.environment_info
    if record.is_success and not crypto.same_device(
        row.device_key, env.ip_address, fit("user_agent", env.user_agent or "")
    ):
        logger.warning(
            "Identification %s was identified on another device than the one that started it "
            "(a relayed session?); it is not completed without its own callback.",
            row.pk,
        )
        _remember_other_device(row)
        return _expired_or(row, stale, "other_device")
    if record.is_success:
        acted = finish.complete(row, record, request=request)
    elif record.progress is Progress.ABORTED:
        acted = finish.abort(row, request)
    elif record.progress is Progress.TIMED_OUT:
        acted = finish.transition(
            row,
            status=Status.EXPIRED,
            error_status=fit("error_status", record.status or ""),
            **finish.error_fields(record),
        )
    else:
        acted = finish.fail(row, request, record.status or "UNKNOWN", record=record)
    return Settled(row, _SETTLED.get(Status(row.status), "finished") if acted else "finished")


#: :func:`settle_if_due` asks the broker about one row at most this often, in seconds.
SETTLE_INTERVAL: Final = 5


def _cache() -> Any:
    return caches[eid_settings.TOKEN_CACHE]


def settle_if_due(row: Identification, *, request: HttpRequest | None = None) -> Settled | None:
    """:func:`settle` a pending ``row``, at most once every :data:`SETTLE_INTERVAL` seconds
    (twice that with an API without a status call, whose record is asked instead) however
    many pages, browsers and clients ask; ``None`` when it was not due.

    For what anyone can trigger (a polling page, a return in another browser): the count is
    kept in ``TOKEN_CACHE``, so it holds for all workers when that cache is shared (check
    ``W003``). Without a working cache nothing is asked (``eid_reconcile`` still settles
    the row); a broker that cannot answer now is logged and asked again later.
    """
    if row.is_finished:
        return Settled(row, "finished")
    # Without a status call the whole record is asked: less often.
    interval = SETTLE_INTERVAL if broker_api().status_call else 2 * SETTLE_INTERVAL
    try:
        due = bool(_cache().add(f"django_eid:settle:{row.pk}", 1, interval))
    except Exception:
        logger.warning("TOKEN_CACHE failed; identification %s is left to eid_reconcile.", row.pk)
        return None
    if not due:
        return None
    try:
        return settle(row, request=request)
    except (EidError, EidConfigurationError) as err:
        logger.warning("Checking identification %s at the broker: %s", row.pk, err)
        return None


def _other_device_key(row: Identification) -> str:
    return f"django_eid:other-device:{row.pk}"


def _seen_on_other_device(row: Identification) -> bool:
    try:
        return bool(_cache().get(_other_device_key(row)))
    except Exception:
        return False


def _remember_other_device(row: Identification) -> None:
    try:
        _cache().set(_other_device_key(row), 1, eid_settings.SESSION_MAX_AGE)
    except Exception:
        logger.warning("TOKEN_CACHE failed; identification %s may be fetched again.", row.pk)


def _expired_or(row: Identification, stale: bool, outcome: str) -> Settled:
    if stale and finish.expire(row):
        return Settled(row, "expired")
    return Settled(row, outcome)
