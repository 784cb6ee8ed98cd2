"""The identification flow, without HTTP: the whole lifecycle of an identification.

1. :func:`start` applies the rules of a start (provider, display, destination, the pending
   limit, the iframe's parent domain, the expected person), creates the session at the
   broker and stores the ``PENDING`` row.
2. The user identifies at the broker and comes back to one of the return URLs.
   :func:`return_to` checks that the return belongs to this user (the row's owner) and to
   this browser (the front end says whether it holds the one-time reference), and that the
   ids the broker filled in are the row's.
3. It then finishes the row once, late or not (past ``SESSION_MAX_AGE`` only a session the
   broker says is unfinished expires): Success fetches the record (:func:`retrieve`) and
   :func:`complete`\\s it, Abort :func:`abort`\\s, Error :func:`fail`\\s. A record that says
   ``SUCCESS`` passes the site's rules (the provider, the same person, one account per
   person, ``MIN_AGE``, the ``identification_verifying`` receivers) *inside* the
   transaction that records it, so a rejected identity is never visible as ``SUCCESS``.

Every transition out of ``PENDING`` is one conditional ``UPDATE ... WHERE status =
'PENDING'``: whoever changes the row acts (sends the signal), anyone else sees the finished
row. Signals are sent after the row is committed, except ``identification_verifying``.

Front ends (the HTML views, a JSON API, a management command) call these functions and
map what they return, or the :class:`Refused` they raise, to their own answers. Nothing
here needs an ``HttpRequest``; one is passed through to the signals when there is one.
"""

from __future__ import annotations

import datetime
import hmac
import logging
import re
from collections.abc import Callable, Collection, Mapping, Sequence
from contextlib import nullcontext
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Final

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.cache import caches
from django.core.exceptions import ValidationError
from django.core.validators import validate_ipv46_address
from django.db import IntegrityError, connections, router, transaction
from django.http.request import split_domain_port
from django.urls import reverse
from django.utils import timezone
from django.utils.http import url_has_allowed_host_and_scheme
from django.utils.translation import gettext
from django.views.decorators.debug import sensitive_variables

from django_eid import claims, crypto, outcomes, signals
from django_eid.brokers import ReturnUrls, broker_api
from django_eid.brokers.oidc_presets import level_rank
from django_eid.client import get_client
from django_eid.conf import eid_settings
from django_eid.exceptions import (
    EidConfigurationError,
    EidError,
    EidProtocolError,
    EidUnavailable,
    IdentificationRejected,
)
from django_eid.models import (
    Identification,
    fit,
    fit_json,
    max_length,
    new_external_id,
    new_reference,
)
from django_eid.outcomes import Outcome
from django_eid.records import IdentificationRecord, Progress
from django_eid.scrub import scrub, scrub_json

if TYPE_CHECKING:
    from django.db.backends.base.base import BaseDatabaseWrapper
    from django.http import HttpRequest

logger = logging.getLogger("django_eid")

Status = Identification.Status
Display = Identification.Display
REQUEST_ID_MAX: Final = max_length("request_id") or 0
NEXT_MAX_LENGTH: Final = max_length("next_url") or 0
#: Shape of a reference made by ``models.new_reference`` (url-safe base64).
REFERENCE_RE: Final = re.compile(r"^[A-Za-z0-9_-]{16,64}\Z")
#: Placeholder values longer than this cannot be ours.
PLACEHOLDER_MAX: Final = 512
#: The three return URLs.
SUCCESS, ABORT, ERROR = "success", "abort", "error"
#: Seconds a start that failed at the broker, or an identification the user cancelled,
#: counts toward ``MAX_PENDING_PER_USER``. Only to stop a client hammering a failing broker,
#: or starting and cancelling in a loop (each start is a billed session), not to ration a
#: user: once the broker is back, or after a cancel, the user may start again within a minute.
FAILED_START_WINDOW: Final = 60


class Refused(Exception):
    """The flow refused what was asked; ``outcome`` says what to tell the user.

    Nothing was changed, except where ``identification`` is set: then that row records
    the failure. ``field`` names the input at fault, when one is; ``params`` fill the
    message's placeholders.
    """

    def __init__(
        self,
        outcome: Outcome,
        *,
        identification: Identification | None = None,
        field: str | None = None,
        params: Mapping[str, Any] | None = None,
    ) -> None:
        super().__init__(outcome.code)
        self.outcome = outcome
        self.identification = identification
        self.field = field
        self.params = dict(params or {})

    @property
    def message(self) -> str:
        """The outcome's message in the active language, placeholders filled."""
        message = str(self.outcome.message)
        return message % self.params if self.params else message


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


@dataclass(frozen=True)
class Returned:
    """A return handled: the row is finished (``acted``: by this call, else before it)."""

    identification: Identification
    acted: bool


# -- rules of a start ---------------------------------------------------------------------------
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


def _valid_ip(value: str | None) -> str | None:
    try:
        validate_ipv46_address(value or "")
    except ValidationError:
        return None
    return value


def unfinished_count(user: Any, *, using: str | None = None) -> int:
    """What ``MAX_PENDING_PER_USER`` limits: the user's pending identifications younger than
    ``SESSION_MAX_AGE``, and the starts that failed at the broker and the identifications
    cancelled in the last :data:`FAILED_START_WINDOW` seconds.

    ``user`` is a user or its primary key; ``using`` the database (by default the one
    Identification is written to: the count decides a write, and a replica may lag).
    """
    db = connections[using or router.db_for_write(Identification)]
    return _StartSql.of(db).count_unfinished(db, getattr(user, "pk", user))


class _StartSql:
    """The statements every start runs, in SQL: the pending limit's lock and count, and the
    broker's session id stored on the reserved row.

    Not through the ORM: building and compiling these querysets cost more than the
    database's work for them (docs/benchmarks.md, benchmark 3). Names come from the models'
    ``_meta``, quoted by the connection; every value is a parameter, prepared by its model
    field as the ORM would (a UUID key, say). Made once per database backend and user model.
    """

    _made: ClassVar[dict[tuple[type[BaseDatabaseWrapper], str], _StartSql]] = {}

    @classmethod
    def of(cls, db: BaseDatabaseWrapper) -> _StartSql:
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

    def set_request_id(self, db: BaseDatabaseWrapper, row: Identification, value: str) -> None:
        ident = Identification._meta
        params = [
            ident.get_field("request_id").get_db_prep_value(value, db),
            ident.pk.get_db_prep_value(row.pk, db),
        ]
        with db.cursor() as cursor:
            cursor.execute(self.request_id_sql, params)


def return_urls(reference: str, absolute: Callable[[str], str]) -> ReturnUrls:
    """The three return URLs of ``reference``, made absolute by ``absolute``.

    Without a query: the broker API adds what brings the session's ids back
    (:meth:`~django_eid.brokers.BrokerApi.return_urls`).
    """

    def url(name: str) -> str:
        return absolute(reverse(f"django_eid:{name}", args=[reference]))

    return ReturnUrls(
        success=url(SUCCESS),
        abort=url(ABORT),
        error=url(ERROR),
        callback=absolute(reverse("django_eid:oidc-callback")),
    )


# -- 1. start -----------------------------------------------------------------------------------
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
) -> Started:
    """Start an identification of ``user``: the broker session, then the ``PENDING`` row.

    ``return_urls`` is called with the new reference. ``host`` is the site's host as the
    browser sees it, ``secure`` whether it is served over https. ``provider`` is the user's
    choice (see :func:`choose_provider`; ``providers`` narrows what is offered),
    ``next_url`` where success leads (dropped unless :func:`safe_next` accepts it, on
    ``host`` or ``next_hosts``). ``same_person``: the identity must be the person already
    verified on the account (:mod:`django_eid.claims`); with ``PREFILL_SAME_PERSON`` the
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
        user=user,
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
        same_person=same_person,
    )
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
                _expected_number(user) if same_person and eid_settings.PREFILL_SAME_PERSON else None
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
    _send(signals.identification_started, row, request)
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
    sql = _StartSql.of(db)
    with transaction.atomic(using=alias):
        sql.lock(db, row.user_id)
        if sql.count_unfinished(db, row.user_id) >= eid_settings.MAX_PENDING_PER_USER:
            raise Refused(outcomes.TOO_MANY_PENDING)
        row.save(force_insert=True, using=alias)


def _store_request_id(row: Identification, request_id: str) -> None:
    """The broker's session id on the reserved ``row``; :class:`IntegrityError` when another
    row has it (the unique index, not a query per start, catches a reused id)."""
    db = connections[row._state.db or router.db_for_write(Identification, instance=row)]
    # Inside a caller's transaction a failed UPDATE must not break it: savepoint.
    savepoint = transaction.atomic(using=db.alias) if db.in_atomic_block else nullcontext()
    with savepoint:
        _StartSql.of(db).set_request_id(db, row, request_id)
    row.request_id = request_id


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
    _transition(
        row,
        status=Status.ERROR,
        request_id=None,
        error_code=type(err).__name__,
        error_message=fit("error_message", message),
    )
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
        _transition(
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


# -- 2. the return --------------------------------------------------------------------------------
def find(user: Any, reference: str) -> Identification | None:
    """``user``'s identification ``reference``; another user's is ``None`` too."""
    if not REFERENCE_RE.match(reference) or not getattr(user, "is_authenticated", False):
        return None
    # The number is decrypted only if read: a row under a removed key still answers.
    rows = Identification.objects.filter(reference=reference, user=user)
    row = rows.defer("social_security_number").first()
    if row is not None:
        row.user = user  # spares a query for the signals' ``user``
    return row


def is_expired(row: Identification) -> bool:
    """Pending for longer than ``SESSION_MAX_AGE``."""
    age = (timezone.now() - row.created_at).total_seconds()
    return age > eid_settings.SESSION_MAX_AGE


def expire_if_stale(row: Identification) -> bool:
    """A pending row older than ``SESSION_MAX_AGE`` becomes ``EXPIRED``; True if this did it.

    Without asking the broker: for a row that cannot be asked (no ``request_id``), or a
    front end that must not call the broker. A row that is about to be finished is decided
    by the broker's record instead (:func:`return_to`, :func:`settle`): it may have
    succeeded, paid for, however late it is looked at.
    """
    return not row.is_finished and is_expired(row) and expire(row)


def _undecided(row: Identification, record: IdentificationRecord) -> bool:
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


# Every local may hold personal data: hidden from error reports (technical 500, e-mails).
@sensitive_variables()
def return_to(
    kind: str,
    *,
    user: Any,
    reference: str,
    params: Mapping[str, Sequence[str]],
    browser_holds: bool,
    request: HttpRequest | None = None,
    return_url: str = "",
) -> Returned:
    """The user came back to the ``kind`` return URL (``success``, ``abort`` or ``error``).

    ``params`` are the URL's query parameters (each a list of values); ``browser_holds``
    says whether this browser started the identification and has not used it yet (the
    front end's one-time state); ``return_url`` the absolute URL the user came back to,
    without its query (OpenID Connect sends it to the token endpoint again). A row already
    finished (a reload, the back button, a
    second tab, expiry) is returned as it is, nothing fetched or sent again.

    A late return (the row is older than ``SESSION_MAX_AGE``) is decided by the broker's
    record like any other: a ``SUCCESS`` is stored (the identification was paid for), a
    final failure stored as such, and only a session still at the broker (or a record
    without a status) expires the row. A late Abort return, for which no record is
    fetched, expires it.

    Raises :class:`Refused` when the return is not this user's or this browser's, when
    the broker's ids do not match, or when the record cannot be had yet (the row then
    stays pending: the user may reload).
    """
    row = find(user, reference)
    if row is None:
        raise Refused(outcomes.INVALID_LINK)
    if row.is_finished:
        return Returned(row, acted=False)
    if not browser_holds:
        raise Refused(outcomes.NOT_THIS_BROWSER)
    problem = _ids_problem(row, params)
    if problem:
        logger.warning("Refused a callback of identification %s: %s", row.pk, problem)
        raise Refused(outcomes.ANSWER_MISMATCH)
    if kind == ABORT:
        if is_expired(row):
            expire(row)
            return Returned(row, acted=False)
        return Returned(row, acted=abort(row, request))
    # Late or not: the broker's record decides (a stale SUCCESS is still the user's).
    record = retrieve(row, params=params, return_url=return_url)
    if _undecided(row, record):
        if (is_expired(row) and expire(row)) or row.is_finished:
            return Returned(row, acted=False)
        raise Refused(outcomes.IN_PROGRESS)
    if record.progress is Progress.ABORTED:
        # The user cancelled, says the record, whichever URL they came back to (an
        # embedded eID Hub frame has one return URL for every outcome).
        return Returned(row, acted=abort(row, request))
    if kind == ERROR and not record.is_success:
        # Only the broker's record ends the row: a browser alone cannot (it could otherwise
        # end any pending row, and start new ones past the pending limit).
        return Returned(row, acted=fail(row, request, _error_status(params, record), record=record))
    # The Success URL, or an Error URL whose record says SUCCESS after all.
    return Returned(row, acted=complete(row, record, request=request))


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
    stale = is_expired(row)
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
    if _undecided(row, record):
        # Done, says the status call, but the record cannot tell how (yet): ask again later.
        return _expired_or(row, stale, "pending")
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
        acted = complete(row, record, request=request)
    elif record.progress is Progress.ABORTED:
        acted = abort(row, request)
    elif record.progress is Progress.TIMED_OUT:
        acted = _transition(
            row,
            status=Status.EXPIRED,
            error_status=fit("error_status", record.status or ""),
            **_error_fields(record),
        )
    else:
        acted = fail(row, request, record.status or "UNKNOWN", record=record)
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
    if stale and expire(row):
        return Settled(row, "expired")
    return Settled(row, outcome)


# Every local may hold personal data: hidden from error reports (technical 500, e-mails).
@sensitive_variables()
def return_elsewhere(
    kind: str,
    *,
    reference: str,
    params: Mapping[str, Sequence[str]],
    request: HttpRequest | None = None,
) -> Settled | None:
    """A return that reached a browser without the one-time state: the app switch.

    The user identified in the broker's app and came back in another browser (or is not
    logged in there). When the broker's ids in the URL are the row's, the row is settled
    as without any browser (:func:`settle_if_due`: the same-device rule included, and at
    most every :data:`SETTLE_INTERVAL` seconds, however often the URL is loaded); ``None`` when
    the return does not name a session, which the front end refuses as before. The
    browser that started shows the outcome the next time it loads the start or frame page.
    """
    if not REFERENCE_RE.match(reference):
        return None
    row = Identification.objects.filter(reference=reference).first()
    if row is None or _ids_problem(row, params):
        return None
    if not row.is_finished and not broker_api().settles_without_return:
        # The identity comes only with this return's single-use code, which must be
        # exchanged by the browser that started: nothing here or there can finish it now.
        return Settled(row, "restart")
    return settle_if_due(row, request=request) or Settled(row, "pending")


def finished_elsewhere(
    user: Any, references: Sequence[str], *, next_url: str | None = None
) -> Identification | None:
    """The latest of ``references`` (held by this browser) that finished without it.

    Only what the user is still waiting for: a row finished within the last
    ``SESSION_MAX_AGE``, never an ``EXPIRED`` one (nothing happened that the start page
    should replace its form with), and, when the page was asked for a destination
    (``next_url`` is not ``None``; ``""`` when the one asked for was not safe), only a row
    started for that same destination.
    """
    if not references or not getattr(user, "is_authenticated", False):
        return None
    since = timezone.now() - datetime.timedelta(seconds=eid_settings.SESSION_MAX_AGE)
    rows = (
        Identification.objects.finished()
        .exclude(status=Status.EXPIRED)
        .filter(user=user, reference__in=list(references), completed_at__gte=since)
    )
    if next_url is not None:
        rows = rows.filter(next_url=next_url)
    return rows.defer("social_security_number").order_by("-completed_at", "-pk").first()


def callback_return(params: Mapping[str, Sequence[str]]) -> tuple[str, str] | None:
    """Which return, of which identification, a return to the one callback URL is (an API
    whose broker sends every user back to one registered redirect URI: OpenID Connect):
    ``(kind, reference)``, or ``None`` when it names no identification of this API.

    The row is found by the return's ``state`` (its ``external_id``); :func:`return_to`
    then checks it like any return: this user's, this browser's, ids matching.
    """
    api = broker_api()
    kind = api.return_kind(params)
    states = api.returned_ids(params).external_id
    if kind is None or len(states) != 1 or not states[0] or len(states[0]) > PLACEHOLDER_MAX:
        return None
    row = Identification.objects.filter(external_id=states[0]).only("reference").first()
    return (kind, row.reference) if row is not None else None


def _ids_problem(row: Identification, params: Mapping[str, Sequence[str]]) -> str | None:
    """Why a return's ids do not name ``row``, or ``None``.

    The external id (django-eid's own, 128 bits, in the URLs it builds) must be there and
    match. The broker's session id is kept out of those URLs, but the successor APIs
    append it (and rows started before v1's URLs dropped it carry it): when given, it must
    match too. Either given more than once is refused.
    """
    api = broker_api()
    returned = api.returned_ids(params)
    return _id_problem(
        api.external_id_param, row.external_id, returned.external_id, required=True
    ) or _id_problem(api.request_id_param, row.request_id or "", returned.request_id)


def _id_problem(
    param: str, expected: str, values: Sequence[str], *, required: bool = False
) -> str | None:
    if len(values) > 1:
        return f"{param} given {len(values)} times"
    value = values[0] if values else ""
    if not value:
        return f"{param} missing" if required else None
    if len(value) > PLACEHOLDER_MAX:
        return f"{param} too long"
    # A broker that substitutes without percent-encoding turns a "+" of the id
    # into a space on the way through the query string; accept that spelling too.
    spellings = {value, value.replace(" ", "+")}
    if not any(hmac.compare_digest(v.encode(), expected.encode()) for v in spellings):
        return f"{param} does not match"
    return None


def _error_status(params: Mapping[str, Sequence[str]], record: IdentificationRecord) -> str:
    """The code an Error URL carries (v1's ``[0]``), else the record's status (the successor
    APIs carry none): opaque, short, printable ASCII only."""
    value = broker_api().returned_ids(params).error_status or record.status or ""
    return fit("error_status", "".join(c for c in value if 32 < ord(c) < 127)) or "UNKNOWN"


def retrieve(
    row: Identification,
    *,
    params: Mapping[str, Sequence[str]] | None = None,
    return_url: str = "",
) -> IdentificationRecord:
    """The broker's record of ``row``'s session, with its return's query ``params`` and
    URL when the user came back; :class:`Refused` (row unchanged) if unavailable."""
    assert row.request_id is not None
    try:
        if params is None:
            return get_client().get_session(row.request_id)
        return get_client().record_of_return(
            row.request_id, external_id=row.external_id, params=params, return_url=return_url
        )
    except EidConfigurationError as err:
        logger.error("django-eid is not configured; see the system checks: %s", err)
        raise Refused(outcomes.NOT_AVAILABLE) from err
    except EidError as err:
        logger.warning("Retrieving identification %s failed: %s", row.pk, err)
        if isinstance(err, EidUnavailable):
            raise Refused(outcomes.RETRIEVE_UNREACHABLE) from err
        if isinstance(err, EidProtocolError):  # answered, but not what the contract says
            raise Refused(outcomes.RETRIEVE_UNEXPECTED) from err
        raise Refused(outcomes.RETRIEVE_REFUSED) from err


# -- 3. finishing ---------------------------------------------------------------------------------
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


def expire(row: Identification) -> bool:
    """Mark ``row`` expired; False if it had finished otherwise."""
    return _transition(row, status=Status.EXPIRED)


def abort(row: Identification, request: HttpRequest | None = None) -> bool:
    """Mark ``row`` aborted; False if it had already finished otherwise (a race lost)."""
    if not _transition(row, status=Status.ABORTED):
        return False
    logger.info("Identification %s aborted by the user.", row.pk)
    _send(signals.identification_aborted, row, request)
    return True


def cancel(row: Identification, request: HttpRequest | None = None) -> bool:
    """The user gave up before returning: ``row`` ends ``ABORTED`` and its broker session
    is invalidated, so it can no longer end otherwise; False if ``row`` had finished.

    The broker's answer does not decide: the row is aborted first (a callback arriving
    meanwhile then finds it finished), and a broker that cannot invalidate is logged.
    """
    if not abort(row, request):
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
        fields.update(_error_fields(record))
    if not _transition(row, **fields):
        return False
    logger.info("Identification %s failed at the broker (status %s).", row.pk, row.error_status)
    _send(signals.identification_failed, row, request)
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
    if _undecided(row, record):
        raise Refused(outcomes.IN_PROGRESS)
    fields = _identity_fields(row, record)
    if not record.is_success:
        fields.update(
            status=Status.ERROR,
            error_status=fit("error_status", record.status or ""),
            **_error_fields(record),
        )
        if not _transition(row, **fields):
            return False
        logger.info("Identification %s ended with record status %s.", row.pk, record.status)
        _send(signals.identification_failed, row, request)
        return True
    code = _provider_refusal(row, record)
    if code is not None:
        fields.update(
            status=Status.REJECTED,
            error_code=code,
            error_message=fit("error_message", outcomes.rejection_message(code) or ""),
        )
        if not _transition(row, **fields):
            return False
        logger.info("Identification %s rejected (%s).", row.pk, code)
        _send(signals.identification_failed, row, request)
        return True
    return _succeed(row, fields, request)


class _Refusal(Exception):
    """A site rule refused the identity: roll back the ``SUCCESS``, store ``status``."""

    def __init__(self, status: str, code: str, message: str) -> None:
        super().__init__(code)
        self.status = status
        self.code = code
        self.message = message


def _has_rules(row: Identification) -> bool:
    """Whether any site rule applies; without one the SUCCESS is a single UPDATE."""
    return bool(
        row.same_person
        or eid_settings.ONE_ACCOUNT_PER_PERSON
        or eid_settings.MIN_AGE is not None
        or eid_settings.MIN_LOA is not None
        or signals.identification_verifying.has_listeners(Identification)
    )


def _succeed(row: Identification, fields: dict[str, Any], request: HttpRequest | None) -> bool:
    """``SUCCESS``, with the site's rules applied before it commits.

    One transaction holds the row from ``PENDING`` to its outcome: the rules run in a
    savepoint after the ``SUCCESS`` update, and a refusal rolls back to it (the claims and
    the receivers' own writes with it) and stores the refusal instead. A concurrent request
    sees ``PENDING``, then the outcome, and a second callback waits for the row's lock and
    then finds it finished: the rules run once.
    """
    if not _has_rules(row):
        if not _transition(row, status=Status.SUCCESS, **fields):
            return False
    else:
        refused: _Refusal | None = None
        with transaction.atomic():
            if not _transition(row, status=Status.SUCCESS, **fields):
                return False
            try:
                with transaction.atomic():
                    _apply_rules(row, request)
            except _Refusal as refusal:
                refused = refusal
                outcome = {
                    "status": refusal.status,
                    "error_code": refusal.code,
                    "error_message": fit("error_message", refusal.message),
                }
                Identification.objects.filter(pk=row.pk).update(**outcome)
                for name, value in outcome.items():
                    setattr(row, name, value)
        if refused is not None:
            logger.info("Identification %s refused by the site's rules (%s).", row.pk, refused.code)
            _send(signals.identification_failed, row, request)
            return True
    logger.info("Identification %s succeeded (provider %s).", row.pk, row.identity_provider)
    _receive_success(row, request)
    return True


def _apply_rules(row: Identification, request: HttpRequest | None) -> None:
    """The site's rules, on the uncommitted ``SUCCESS`` row; raise :class:`_Refusal`."""

    def reject(code: str) -> _Refusal:
        return _Refusal(Status.REJECTED, code, outcomes.rejection_message(code) or "")

    if row.same_person:
        person = claims.account_person(row.user_id, before=row)
        if person is not None and not claims.same_person(row, person):
            raise reject(outcomes.NOT_SAME_PERSON)
    if eid_settings.ONE_ACCOUNT_PER_PERSON:
        try:
            claims.claim(row)
        except claims.PersonTaken:
            raise reject(outcomes.ONE_ACCOUNT_PER_PERSON) from None
    min_loa = eid_settings.MIN_LOA
    if min_loa is not None and level_rank(row.level_of_assurance) < level_rank(min_loa):
        # A level the broker did not state is not high enough either.
        raise reject(outcomes.LOA_TOO_LOW)
    min_age = eid_settings.MIN_AGE
    if min_age is not None:
        age = row.age
        if age is None:
            raise reject(outcomes.AGE_UNKNOWN)
        if age < min_age:
            raise reject(outcomes.MIN_AGE)
    try:
        # send(), not send_robust(): the first receiver that says no stops the others.
        signals.identification_verifying.send(
            sender=Identification, identification=row, user=row.user, request=request
        )
    except IdentificationRejected as rejection:
        reason = rejection.reason or gettext("Your identification was not accepted.")
        raise _Refusal(Status.REJECTED, outcomes.RECEIVER_REJECTED, reason) from None
    except Exception as err:
        # A rule that cannot run lets nobody through. Its message may describe the person:
        # only the type is logged.
        logger.error(
            "A receiver of identification_verifying failed (identification %s): %s; "
            "the identification is refused.",
            row.pk,
            type(err).__name__,
        )
        raise _Refusal(Status.ERROR, outcomes.RULES_FAILED, "") from None


def _provider_refusal(row: Identification, record: IdentificationRecord) -> str | None:
    """``PROVIDER_NOT_ALLOWED`` when the broker let the user pick a provider not accepted."""
    used = record.identity_provider
    allowed = eid_settings.ALLOWED_PROVIDERS
    if used and (
        (row.identity_provider and used != row.identity_provider)
        or (allowed is not None and used not in allowed)
    ):
        return outcomes.PROVIDER_NOT_ALLOWED
    return None


def _error_fields(record: IdentificationRecord) -> dict[str, Any]:
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


def _receive_success(row: Identification, request: HttpRequest | None) -> None:
    """Send ``identification_succeeded``; store a receiver's (late) rejection, free the person."""
    rejection = _send(signals.identification_succeeded, row, request)
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
            # The row no longer holds the identity, so neither does the account through it.
            claims.release(row)
    if changed:
        row.status, row.error_code, row.error_message = Status.REJECTED, code, reason
        logger.info("Identification %s rejected by a receiver.", row.pk)
        _send(signals.identification_failed, row, request)


def _send(
    signal: Any, row: Identification, request: HttpRequest | None
) -> IdentificationRejected | None:
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
