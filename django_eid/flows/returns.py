"""The user's return from the broker: whose it is, and what it says.

:func:`return_urls` makes the three return URLs of a start; :func:`return_to` checks that a
return belongs to this user and this browser and that the broker's ids are the row's,
fetches the record (:func:`retrieve`) and finishes the row
(:mod:`django_eid.flows.finish`). A return that reached another browser is settled as
without any (:func:`return_elsewhere`); :func:`callback_return` finds the row of an API
with one callback URL (OpenID Connect).
"""

from __future__ import annotations

import datetime
import hmac
import logging
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from django.conf import settings
from django.db import connections, router
from django.urls import get_script_prefix, get_urlconf, reverse
from django.utils import timezone
from django.views.decorators.debug import sensitive_variables

from django_eid import audit, outcomes
from django_eid.brokers import ReturnUrls, broker_api
from django_eid.client import get_client
from django_eid.conf import eid_settings
from django_eid.exceptions import EidConfigurationError, EidError, EidProtocolError, EidUnavailable
from django_eid.flows import finish, settle
from django_eid.flows.pending import RowReader
from django_eid.flows.refused import Refused
from django_eid.models import ENCRYPTED_FIELDS, Identification, fit
from django_eid.records import IdentificationRecord, Progress

if TYPE_CHECKING:
    from django.http import HttpRequest

logger = logging.getLogger("django_eid")

Status = Identification.Status

#: Shape of a reference made by ``models.new_reference`` (url-safe base64).
REFERENCE_RE: Final = re.compile(r"^[A-Za-z0-9_-]{16,64}\Z")

#: Placeholder values longer than this cannot be ours.
PLACEHOLDER_MAX: Final = 512

#: The three return URLs.
SUCCESS, ABORT, ERROR = "success", "abort", "error"


@dataclass(frozen=True)
class Returned:
    """A return handled: the row is finished (``acted``: by this call, else before it)."""

    identification: Identification
    acted: bool


def return_urls(reference: str, absolute: Callable[[str], str]) -> ReturnUrls:
    """The three return URLs of ``reference``, made absolute by ``absolute``.

    Without a query: the broker API adds what brings the session's ids back
    (:meth:`~django_eid.brokers.BrokerApi.return_urls`).
    """

    def url(name: str) -> str:
        return absolute(_reversed(name).replace(_PLACEHOLDER, reference))

    return ReturnUrls(
        success=url(SUCCESS),
        abort=url(ABORT),
        error=url(ERROR),
        callback=absolute(_reversed("oidc-callback")),
    )


#: Stands for the reference in a reversed return URL (a reference is url-safe base64, as
#: this is: both are the same in the path, unquoted).
_PLACEHOLDER: Final = "Reference0Placeholder0"


def _reversed(name: str) -> str:
    """``django_eid:<name>``'s path with :data:`_PLACEHOLDER` for the reference, reversed
    once per URL configuration and script prefix: every start builds three."""
    key = (name, get_script_prefix(), get_urlconf() or settings.ROOT_URLCONF)
    path = _REVERSED.get(key)
    if path is None:
        args = [] if name == "oidc-callback" else [_PLACEHOLDER]
        path = _REVERSED[key] = reverse(f"django_eid:{name}", args=args)
    return path


_REVERSED: dict[tuple[str, str, Any], str] = {}


def find(user: Any, reference: str) -> Identification | None:
    """``user``'s identification ``reference``; another user's is ``None`` too.

    For a visitor who is not logged in (``user`` anonymous or ``None``): the identification
    at the door ``reference``, whoever's browser started it (:func:`return_to` then asks
    that it was this one's).
    """
    if not REFERENCE_RE.match(reference):
        return None
    row = by_reference(reference)
    if row is None:
        return None
    if not getattr(user, "is_authenticated", False):
        return row if row.at_the_door else None
    if row.user_id != user.pk:
        return None
    row.user = user  # spares a query for the signals' ``user``
    return row


def by_reference(reference: str) -> Identification | None:
    """The row ``reference``, its number not read (decrypted only if read: a row under a
    removed key still answers).

    Raw SQL, read by the ORM (its converters, the number deferred): the query of every
    return, compiled once per backend instead of per request (docs/benchmarks.md).
    """
    # The primary: the row is read to be finished, and a replica may lag behind its start.
    db = connections[router.db_for_write(Identification)]
    meta = Identification._meta
    names = _ROW_FIELDS
    sql = _BY_REFERENCE.get(db.vendor)
    if sql is None:
        q = db.ops.quote_name
        column = {f.name: q(f.column or f.name) for f in meta.concrete_fields}
        columns = ", ".join(column[name] for name in names)
        reference_column = column["reference"]
        # Names from the model's _meta, never input.
        sql = _BY_REFERENCE[db.vendor] = (
            f"SELECT {columns} FROM {q(meta.db_table)} WHERE {reference_column} = %s"  # noqa: S608
        )
    with db.cursor() as cursor:
        cursor.execute(sql, [reference])
        values = cursor.fetchone()
    return None if values is None else RowReader.of(db, Identification, names).read(db, values)


_BY_REFERENCE: dict[str, str] = {}
#: The columns a return reads: all but the encrypted ones (decrypted only if read).
_ROW_FIELDS: Final = tuple(
    f.name
    for f in Identification._meta.concrete_fields
    if f.column and f.name not in ENCRYPTED_FIELDS
)


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

    ``user`` is the logged-in user, or an anonymous one for an identification at the door
    (log in, sign up). ``params`` are the URL's query parameters (each a list of values); ``browser_holds``
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
    with audit.finishing_as(audit.Kind.RETURNED):
        return _return_to(
            kind,
            user=user,
            reference=reference,
            params=params,
            browser_holds=browser_holds,
            request=request,
            return_url=return_url,
        )


def _return_to(
    kind: str,
    *,
    user: Any,
    reference: str,
    params: Mapping[str, Sequence[str]],
    browser_holds: bool,
    request: HttpRequest | None,
    return_url: str,
) -> Returned:
    row = find(user, reference)
    if row is None:
        raise Refused(outcomes.INVALID_LINK)
    if not browser_holds and not getattr(user, "is_authenticated", False):
        # At the door the browser is all there is: finished or not, only the one that
        # started hears of it (the next step logs it in).
        raise Refused(outcomes.NOT_THIS_BROWSER)
    if row.is_finished:
        return Returned(row, acted=False)
    if not browser_holds:
        raise Refused(outcomes.NOT_THIS_BROWSER)
    problem = _ids_problem(row, params)
    if problem:
        logger.warning("Refused a callback of identification %s: %s", row.pk, problem)
        raise Refused(outcomes.ANSWER_MISMATCH)
    if kind == ABORT:
        if finish.is_expired(row):
            finish.expire(row)
            return Returned(row, acted=False)
        return Returned(row, acted=finish.abort(row, request))
    # Late or not: the broker's record decides (a stale SUCCESS is still the user's).
    record = retrieve(row, params=params, return_url=return_url)
    if finish.undecided(row, record):
        if (finish.is_expired(row) and finish.expire(row)) or row.is_finished:
            return Returned(row, acted=False)
        raise Refused(outcomes.IN_PROGRESS)
    if record.progress is Progress.ABORTED:
        # The user cancelled, says the record, whichever URL they came back to (an
        # embedded eID Hub frame has one return URL for every outcome).
        return Returned(row, acted=finish.abort(row, request))
    if kind == ERROR and not record.is_success:
        # Only the broker's record ends the row: a browser alone cannot (it could otherwise
        # end any pending row, and start new ones past the pending limit).
        return Returned(
            row, acted=finish.fail(row, request, _error_status(params, record), record=record)
        )
    # The Success URL, or an Error URL whose record says SUCCESS after all.
    return Returned(row, acted=finish.complete(row, record, request=request))


# Every local may hold personal data: hidden from error reports (technical 500, e-mails).
@sensitive_variables()
def return_elsewhere(
    kind: str,
    *,
    reference: str,
    params: Mapping[str, Sequence[str]],
    request: HttpRequest | None = None,
) -> settle.Settled | None:
    """A return that reached a browser without the one-time state: the app switch.

    The user identified in the broker's app and came back in another browser (or is not
    logged in there). When the broker's ids in the URL are the row's, the row is settled
    as without any browser (:func:`~django_eid.flows.settle.settle_if_due`: the same-device
    rule included, and at most every :data:`~django_eid.flows.settle.SETTLE_INTERVAL` seconds, however often the URL is loaded); ``None`` when
    the return does not name a session, which the front end refuses as before. The
    browser that started shows the outcome the next time it loads the start or frame page.
    """
    if not REFERENCE_RE.match(reference):
        return None
    row = Identification.objects.filter(reference=reference).first()
    if row is None or _ids_problem(row, params):
        return None
    if not row.is_finished and (row.at_the_door or not broker_api().settles_without_return):
        # At the door only the browser that started may finish a login (see settle()).
        # The identity comes only with this return's single-use code, which must be
        # exchanged by the browser that started: nothing here or there can finish it now.
        return settle.Settled(row, "restart")
    return settle.settle_if_due(row, request=request) or settle.Settled(row, "pending")


def finished_elsewhere(
    user: Any, references: Sequence[str], *, next_url: str | None = None
) -> Identification | None:
    """The latest of ``references`` (held by this browser) that finished without it: of
    ``user``'s, or, for a visitor who is not logged in, of those started at the door.

    Only what the user is still waiting for: a row finished within the last
    ``SESSION_MAX_AGE``, never an ``EXPIRED`` one (nothing happened that the start page
    should replace its form with), and, when the page was asked for a destination
    (``next_url`` is not ``None``; ``""`` when the one asked for was not safe), only a row
    started for that same destination.
    """
    if not references:
        return None
    since = timezone.now() - datetime.timedelta(seconds=eid_settings.SESSION_MAX_AGE)
    rows = (
        Identification.objects.finished()
        .exclude(status=Status.EXPIRED)
        .filter(reference__in=list(references), completed_at__gte=since)
    )
    if getattr(user, "is_authenticated", False):
        rows = rows.filter(user=user)
    else:
        # A visitor who is not logged in: what they started at the door.
        rows = rows.exclude(purpose=Identification.Purpose.VERIFY)
    if next_url is not None:
        rows = rows.filter(next_url=next_url)
    return rows.defer(*ENCRYPTED_FIELDS).order_by("-completed_at", "-pk").first()


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
        audit.write(row, audit.Kind.BROKER_ERROR, outcome=type(err).__name__)
        if isinstance(err, EidUnavailable):
            raise Refused(outcomes.RETRIEVE_UNREACHABLE) from err
        if isinstance(err, EidProtocolError):  # answered, but not what the contract says
            raise Refused(outcomes.RETRIEVE_UNEXPECTED) from err
        raise Refused(outcomes.RETRIEVE_REFUSED) from err
