"""Starting an identification: the rules of a start, the broker session, the ``PENDING`` row.

:func:`start` checks the provider (:func:`choose_provider`), the display and the
destination (:func:`safe_next`), reserves the row within the pending limit
(:mod:`django_eid.flows.pending`), creates the session at the broker and stores its id.
A start that fails at the broker leaves an ``ERROR`` row (:class:`BrokerFailed`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection, Sequence
from contextlib import nullcontext
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from django.db import IntegrityError, connections, router, transaction
from django.http.request import split_domain_port
from django.utils import timezone
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.debug import sensitive_variables

from django_eid import audit, backends, claims, crypto, outcomes, signals, telemetry
from django_eid.brokers import ReturnUrls, broker_api
from django_eid.client import get_client
from django_eid.conf import eid_settings
from django_eid.exceptions import EidConfigurationError, EidError, EidProtocolError, EidUnavailable
from django_eid.flows import caps, finish, pending
from django_eid.flows.refused import Refused
from django_eid.models import Identification, fit, max_length, new_external_id, new_reference
from django_eid.scrub import scrub

if TYPE_CHECKING:
    from django.http import HttpRequest

logger = logging.getLogger("django_eid")

Status = Identification.Status
Display = Identification.Display

REQUEST_ID_MAX: Final = max_length("request_id") or 0

NEXT_MAX_LENGTH: Final = max_length("next_url") or 0


class BrokerFailed(Refused):
    """Creating the session at the broker failed; ``identification`` is stored as ERROR."""

    def __init__(self, identification: Identification, error: EidError) -> None:
        unavailable = isinstance(error, EidUnavailable)
        outcome = outcomes.BROKER_UNREACHABLE if unavailable else outcomes.BROKER_REFUSED
        super().__init__(outcome, identification=identification)
        self.error = error


@dataclass(frozen=True)
class Started:
    """A session created at the broker: the ``PENDING`` row, and where to send the user."""

    identification: Identification
    url: str


def offered_providers(restrict: Sequence[str] | None = None) -> tuple[str, ...] | None:
    """The providers a start may ask for, or ``None`` for any (the broker offers a choice).

    ``ALLOWED_PROVIDERS`` when set, else ``IDENTITY_PROVIDER`` alone when set, else any;
    narrowed to ``restrict`` (a gate's ``providers``) when given.
    """
    offered = eid_settings.ALLOWED_PROVIDERS
    if offered is None and eid_settings.IDENTITY_PROVIDER:
        offered = (eid_settings.IDENTITY_PROVIDER,)
    if restrict is not None:
        base = offered if offered is not None else tuple(restrict)
        offered = tuple(p for p in base if p in restrict)
    return offered


def choose_provider(value: str | None, *, restrict: Sequence[str] | None = None) -> str | None:
    """The provider to ask the broker for, given the user's choice ``value`` (may be empty).

    ``None`` lets the user choose at the broker. Raises :class:`Refused` (field
    ``provider``) for a choice that is malformed, not offered, or missing where one of
    several must be made: the broker would otherwise offer every provider of the account.
    """
    offered = offered_providers(restrict)
    if not value:
        default = eid_settings.IDENTITY_PROVIDER
        if offered is None or default in offered:
            return default
        if len(offered) == 1:
            return _configured(offered[0])
        raise Refused(
            outcomes.PROVIDER_REQUIRED if offered else outcomes.PROVIDER_NONE_OFFERED,
            field="provider",
        )
    if not broker_api().provider_re.match(value):
        params = {"provider": fit("identity_provider", value)}
        raise Refused(outcomes.PROVIDER_MALFORMED, field="provider", params=params)
    if offered is not None and value not in offered:
        raise Refused(outcomes.PROVIDER_NOT_OFFERED, field="provider", params={"provider": value})
    return value


def _configured(provider: str) -> str:
    """A provider the site's settings or a gate name, checked as a choice would be: a name
    of another broker API (left from before a change of ``BROKER_API``) would be refused
    by the broker after a billed call, or never match a stored row."""
    api = broker_api()
    if not api.provider_re.match(provider):
        logger.error(
            "The provider %r offered here is not a provider name of BROKER_API %r (for "
            "instance %r); the gate or setting naming it cannot be passed.",
            provider[:64],
            api.name,
            api.provider_example,
        )
        params = {"provider": fit("identity_provider", provider)}
        raise Refused(outcomes.PROVIDER_MALFORMED, field="provider", params=params)
    return provider


def safe_next(value: str | None, *, host: str, secure: bool, also: Collection[str] = ()) -> str:
    """``value`` if it is a safe place to send the user afterwards, else ``""``.

    Safe: a path, or a URL on ``host`` or on one of the hosts ``also`` (a JSON front end's
    ``FRONTEND_ALLOWED_HOSTS``), over https when ``secure``.
    """
    if not value or len(value) > NEXT_MAX_LENGTH or value != value.strip():
        return ""
    if any(ord(c) < 32 or ord(c) == 127 for c in value):
        return ""
    hosts = {host, *also}
    ok = url_has_allowed_host_and_scheme(value, allowed_hosts=hosts, require_https=secure)
    return value if ok else ""


# Every local may hold personal data: hidden from error reports (technical 500, e-mails).
@sensitive_variables()
def start(
    user: Any,
    *,
    return_urls: Callable[[str], ReturnUrls],
    host: str,
    provider: str | None = None,
    display: str = Display.REDIRECT,
    secure: bool = False,
    next_url: str = "",
    user_agent: str = "",
    client_ip: str | None = None,
    same_person: bool = False,
    providers: Sequence[str] | None = None,
    channel: str = Identification.Channel.HTML,
    next_hosts: Collection[str] = (),
    parent_host: str | None = None,
    return_key: str = "",
    request: HttpRequest | None = None,
    purpose: str = Identification.Purpose.VERIFY,
    browser_key: str | None = None,
) -> Started:
    """Start an identification of ``user``: the broker session, then the ``PENDING`` row.

    ``purpose``: ``"verify"`` (the account's identity), or at the door ``"login"`` or
    ``"signup"`` for a visitor who is not logged in (``user`` is then ``None`` or anonymous,
    the row has no user until it finishes, and the providers are ``LOGIN_PROVIDERS``'s). A
    logged-in ``user`` starting at the door gets a verification instead: no switching
    accounts through the back door. A start at the door is counted against the anonymous
    caps (:mod:`django_eid.flows.caps`) by its browser's ``browser_key``
    (:func:`django_eid.state.browser_key`) and ``client_ip``.

    ``return_urls`` is called with the new reference. ``host`` is the site's host as the
    browser sees it, ``secure`` whether it is served over https. ``provider`` is the user's
    choice (see :func:`choose_provider`; ``providers`` narrows what is offered),
    ``next_url`` where success leads (dropped unless :func:`safe_next` accepts it, on
    ``host`` or ``next_hosts``). ``same_person``: the identity must be the person already
    verified on the account (:func:`django_eid.person_keys.same_person`); with ``PREFILL_SAME_PERSON`` the
    broker is asked to pre-fill that person's number. ``channel``: the front end that
    starts it, which decides where its returns lead (:func:`django_eid.outcomes.destination`).
    ``parent_host``: the host of the page that frames the broker, when not ``host``.
    ``return_key``: the hash of a secret the front end keeps (:func:`crypto.secret_hash`),
    which then shows a return reached it (``api-return``).

    Raises :class:`Refused` before anything is sent (a bad choice, too many pending,
    no configuration), or :class:`BrokerFailed` once an ``ERROR`` row records the failure.
    Any other exception once the row is reserved (a bug in ``return_urls``, say) is raised
    as it is, after the row is stored ``ERROR`` too, so it never lingers ``PENDING`` without
    a broker session. One INSERT on the happy path.

    The pending row is reserved under a lock on the user's row (``SELECT ... FOR UPDATE``).
    Called inside an open transaction (``ATOMIC_REQUESTS`` on the calling view, a
    ``transaction.atomic()`` block), that lock is held until the transaction ends, so through
    the broker call: the same user's other starts wait for it. django-eid's own views opt
    out of ``ATOMIC_REQUESTS``.
    """
    if purpose not in Identification.Purpose.values:
        raise ValueError(f"purpose must be one of {Identification.Purpose.values}")
    logged_in = bool(getattr(user, "is_authenticated", False))
    at_the_door = purpose != Identification.Purpose.VERIFY and not logged_in
    if not at_the_door:
        purpose = Identification.Purpose.VERIFY
        if not logged_in:
            raise Refused(outcomes.LOGIN_REQUIRED)
    else:
        if not backends.door_open():
            logger.error(
                "A start at the door was refused: django_eid.backends.EidBackend is not in "
                "AUTHENTICATION_BACKENDS, so nobody could be logged in."
            )
            raise Refused(outcomes.NOT_AVAILABLE)
        if providers is None:
            providers = eid_settings.LOGIN_PROVIDERS
    chosen = choose_provider(provider, restrict=providers)
    next_url = safe_next(next_url, host=host, secure=secure, also=next_hosts)
    if display not in Display.values:
        raise Refused(outcomes.DISPLAY_INVALID, field="display")
    if channel not in Identification.Channel.values:
        raise ValueError(f"channel must be one of {Identification.Channel.values}")
    try:
        client = get_client()
    except EidConfigurationError as err:
        logger.error("django-eid is not configured; see the system checks: %s", err)
        raise Refused(outcomes.NOT_AVAILABLE) from err
    row = Identification(
        user=None if at_the_door else user,
        purpose=purpose,
        reference=new_reference(),
        external_id=new_external_id(),
        display=display,
        next_url=next_url,
        channel=channel,
        return_key=return_key,
        identity_provider=chosen or "",
        # The starting browser, for completion without its callback; not the values. Empty
        # when it cannot be recognised (no valid address, no user agent): never matched.
        device_key=crypto.device_key(client_ip, fit("user_agent", user_agent)),
        start_address_hash=crypto.address_hash(client_ip),
        same_person=same_person,
    )
    if at_the_door:
        # Counted, not reserved: there is no user's limit to hold a place in, so the row is
        # written once, with the broker's session id (or its failure), after the call.
        caps.spend(browser_key, client_ip)
    else:
        _reserve(row)
    try:
        created = client.create_session(
            return_urls=return_urls(row.reference),
            external_reference=row.external_id,
            identity_provider=chosen,
            language=eid_settings.broker_language(),
            get_social_security_number=eid_settings.GET_SOCIAL_SECURITY_NUMBER,
            iframe_domain=iframe_domain(parent_host or host) if display == Display.IFRAME else None,
            iframe_web_messaging=eid_settings.IFRAME_WEB_MESSAGING,
            prefilled_social_security_number=(
                _expected_number(user)
                if same_person and eid_settings.PREFILL_SAME_PERSON and not at_the_door
                else None
            ),
        )
        if len(created.request_id) > REQUEST_ID_MAX:
            # A RequestId that cannot be stored does not name a session we can finish.
            raise EidProtocolError(
                f"create_session answered a RequestId of {len(created.request_id)} characters "
                f"(at most {REQUEST_ID_MAX} are stored)"
            )
    except EidError as err:
        _store_failure(row, err)
        raise BrokerFailed(row, err) from err
    except Exception as err:
        # Not the broker's doing (a bug in return_urls, in a setting): the reserved row must
        # not stay PENDING without a session, counting toward the limit.
        _store_unexpected_failure(row, err)
        raise
    try:
        _store_request_id(row, created.request_id)
    except IntegrityError as err:
        error = EidProtocolError("create_session answered the RequestId of an earlier session")
        _store_failure(row, error)
        raise BrokerFailed(row, error) from err
    except Exception as err:
        _store_unexpected_failure(row, err)
        raise
    logger.info("Identification %s started (provider %s).", row.pk, chosen or "any")
    finish.send(signals.identification_started, row, request)
    return Started(row, created.url)


def _reserve(row: Identification) -> None:
    """Store ``row`` as ``PENDING`` before the broker is called, within the user's limit.

    The count and the new row are one decision, under a lock on the user's row: of two
    starts at the same instant the second waits, then counts the first. So no more than
    ``MAX_PENDING_PER_USER`` broker sessions are ever created for one user at a time, and
    recently failed starts count too, so a client cannot hammer a failing broker either.
    The count is a statement of its own, after the lock: at READ COMMITTED a statement sees
    the rows committed when it began, so a count in the locking statement itself would miss
    the row of the start it waited for.
    """
    alias = router.db_for_write(Identification, instance=row)
    db = connections[alias]
    sql = pending.StartSql.of(db)
    with transaction.atomic(using=alias):
        sql.lock(db, row.user_id)
        if sql.count_unfinished(db, row.user_id) >= eid_settings.MAX_PENDING_PER_USER:
            telemetry.refused(outcomes.TOO_MANY_PENDING.code)
            raise Refused(outcomes.TOO_MANY_PENDING)
        # Its "started" event comes with the broker's session (set_request_id), or with
        # the failure (_end): a reservation is no session yet.
        sql.insert(db, row, event=False)


def _store_request_id(row: Identification, request_id: str) -> None:
    """The broker's session id on the reserved ``row`` (a row at the door: the new row,
    with it); :class:`IntegrityError` when another row has it (the unique index, not a query
    per start, catches a reused id)."""
    db = connections[row._state.db or router.db_for_write(Identification, instance=row)]
    # Inside a caller's transaction a failed statement must not break it: savepoint.
    savepoint = transaction.atomic(using=db.alias) if db.in_atomic_block else nullcontext()
    sql = pending.StartSql.of(db)
    with savepoint:
        if row._state.adding:
            row.request_id = request_id
            try:
                sql.insert(db, row)
            except IntegrityError:
                row.request_id = None
                raise
            return
        sql.set_request_id(db, row, request_id)
    row.request_id = request_id


def _end(row: Identification, **fields: Any) -> None:
    """A start that failed: the reserved ``row`` leaves ``PENDING`` with ``fields``; a row at
    the door, not written yet, is written so."""
    if not row._state.adding:
        # A start that never got a session: its one "started" event says it failed (as a
        # row at the door written failed).
        finish.transition(row, audit.Kind.STARTED, **fields)
        return
    fields.setdefault("completed_at", timezone.now())
    for name, value in fields.items():
        setattr(row, name, value)
    db = connections[router.db_for_write(Identification, instance=row)]
    savepoint = transaction.atomic(using=db.alias) if db.in_atomic_block else nullcontext()
    with savepoint:
        pending.StartSql.of(db).insert(db, row)


def iframe_domain(host: str) -> str:
    """``iFrame.Domain`` for a page served at ``host``: ``IFRAME_DOMAIN``, else the host,
    with its port unless it is a default one (the broker allows exactly this parent)."""
    if eid_settings.IFRAME_DOMAIN:
        return eid_settings.IFRAME_DOMAIN
    domain, port = split_domain_port(host)
    if not domain:
        domain, port = host, ""
    return f"{domain}:{port}" if port and port not in ("80", "443") else domain


# Every local may hold personal data: hidden from error reports (technical 500, e-mails).
@sensitive_variables()
def _expected_number(user: Any) -> str | None:
    """The national identity number of the person verified on ``user``'s account, if known.

    Only a hint for the broker's form (``PreFilledSocialSecurityNumber``): the comparison
    after the identification decides.
    """
    person = claims.account_person(user)
    if person is None:
        return None
    return person.social_security_number or None  # None too when it cannot be decrypted


def _store_failure(row: Identification, err: EidError) -> None:
    """The reserved row of a start that failed at the broker becomes ``ERROR``."""
    message = scrub(str(err))
    _end(
        row,
        status=Status.ERROR,
        request_id=None,
        error_code=type(err).__name__,
        error_message=fit("error_message", message),
    )
    audit.write(row, audit.Kind.BROKER_ERROR, outcome=type(err).__name__)
    logger.warning("Creating identification session %s failed: %s", row.pk, message)


def _store_unexpected_failure(row: Identification, err: Exception) -> None:
    """The reserved row of a start that failed otherwise becomes ``ERROR``, if it still can.

    Only the exception's type is stored and logged: its message may carry anything (the
    caller re-raises it, so it still reaches the site's error reporting).
    """
    logger.error(
        "Starting identification %s failed: %s; the row is stored as ERROR.",
        row.pk,
        type(err).__name__,
    )
    try:
        _end(
            row,
            status=Status.ERROR,
            request_id=None,
            error_code=fit("error_code", type(err).__name__),
            error_message="",
        )
    except Exception as store_err:  # the database itself failed (a broken transaction)
        logger.error(
            "Storing the failure of identification %s failed too: %s",
            row.pk,
            type(store_err).__name__,
        )
