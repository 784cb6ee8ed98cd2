"""Everything a user is told, in one place: each outcome's code, title, message and HTTP
status, the reasons django-eid rejects an identity or a gate turns a user away, and where a
finished identification sends its user.

The flow raises or returns these; the HTML views render them as pages, a JSON front end as
``{"code", "message"}``. Codes are stable and machine-readable. Titles and messages are lazy
translations, so a page shows them in the language of whoever reads it, whenever that is.
"""

from __future__ import annotations

import dataclasses
import logging
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final
from urllib.parse import urlencode, urlsplit, urlunsplit

from django.shortcuts import resolve_url
from django.urls import NoReverseMatch, reverse
from django.utils.functional import Promise
from django.utils.http import url_has_allowed_host_and_scheme
from django.utils.translation import gettext_lazy as _
from django.utils.translation import ngettext

from django_eid import records
from django_eid.brokers import broker_api
from django_eid.conf import eid_settings
from django_eid.reasons import (
    AGE_NOT_KNOWN,
    LEVEL_TOO_LOW,
    NOT_VERIFIED,
    OTHER_PERSON,
    TOO_OLD,
    TOO_YOUNG,
    WRONG_PROVIDER,
)

if TYPE_CHECKING:
    from django_eid.models import Identification

logger = logging.getLogger("django_eid")


@dataclass(frozen=True)
class Outcome:
    """What a user is told: a stable ``code``, an HTTP ``status``, a ``title`` and a ``message``."""

    code: str
    status: int
    title: str | Promise
    message: str | Promise

    def with_message(self, message: str | Promise) -> Outcome:
        return dataclasses.replace(self, message=message)


_FAILED = _("Identification failed")
_INVALID_LINK = _("This identification link is not valid.")

# -- refusals of a request: nothing was stored, or the row is as it was ----------------------
#: No identification of this user has this reference (another user's looks the same).
INVALID_LINK = Outcome("invalid_link", 404, _FAILED, _INVALID_LINK)
#: The callback URL itself is broken (too many parameters): never one of the broker's.
MALFORMED_LINK = Outcome("malformed_link", 400, _FAILED, _INVALID_LINK)
#: The callback came to a browser that did not start the identification (or used it already).
NOT_THIS_BROWSER = Outcome(
    "not_this_browser",
    403,
    _FAILED,
    _("This identification was not started in this browser. Please start again."),
)
#: The callback arrived without the session cookie, even after the interstitial.
SESSION_LOST = Outcome(
    "session_lost",
    403,
    _("Session expired"),
    _(
        "Your session was lost on the way back from the identification service. "
        "Please log in and start again."
    ),
)
#: The callback's request id or external id is not the identification's.
ANSWER_MISMATCH = Outcome(
    "answer_mismatch", 400, _FAILED, _("The answer from the identification service did not match.")
)
#: django-eid is not configured, or the site lacks the session middleware.
NOT_AVAILABLE = Outcome(
    "not_available", 503, _FAILED, _("Identification is not available at the moment.")
)
#: The start's choice of provider is missing where one of several must be made.
PROVIDER_REQUIRED = Outcome("provider_required", 400, _FAILED, _("Choose an identity provider."))
#: No provider is both allowed by the settings and accepted by the gate that sent the user.
PROVIDER_NONE_OFFERED = Outcome(
    "provider_none_offered", 400, _FAILED, _("No identity provider is offered for this page.")
)
#: The provider's name is not of the broker's shape (``%(provider)s`` is filled in).
PROVIDER_MALFORMED = Outcome(
    "provider_malformed",
    400,
    _FAILED,
    _("“%(provider)s” is not a provider name."),
)
#: A provider the site does not offer (``%(provider)s`` is filled in).
PROVIDER_NOT_OFFERED = Outcome(
    "provider_not_offered", 400, _FAILED, _("The provider %(provider)s is not offered here.")
)
#: A display other than ``redirect`` and ``iframe``.
DISPLAY_INVALID = Outcome(
    "display_invalid", 400, _FAILED, _("Choose how to show the identification service.")
)
#: ``MAX_PENDING_PER_USER`` unfinished identifications already.
TOO_MANY_PENDING = Outcome(
    "too_many_pending",
    429,
    _("Too many identifications in progress"),
    _(
        "You have started too many identifications that are not finished. "
        "Finish one of them, or wait a while and try again."
    ),
)
#: Creating the session: the broker could not be reached (timeout, connection, 5xx).
BROKER_UNREACHABLE = Outcome(
    "broker_unreachable",
    503,
    _FAILED,
    _("The identification service could not be reached. Please try again in a moment."),
)
#: Creating the session: the broker answered with an error or nonsense.
BROKER_REFUSED = Outcome(
    "broker_refused",
    502,
    _FAILED,
    _("The identification service refused to start. Please try again later."),
)
#: Fetching the record: the broker could not be reached; the row stays pending.
RETRIEVE_UNREACHABLE = Outcome(
    "retrieve_unreachable",
    503,
    _FAILED,
    _("The identification service could not be reached. Reload this page to try again."),
)
#: Fetching the record: the broker answered with an error; the row stays pending.
RETRIEVE_REFUSED = Outcome("retrieve_refused", 502, _FAILED, RETRIEVE_UNREACHABLE.message)
#: Fetching the record: the answer is not what the contract says; the row stays pending.
RETRIEVE_UNEXPECTED = Outcome(
    "retrieve_unexpected",
    502,
    _FAILED,
    _("The identification service sent an unexpected answer. Reload this page to try again."),
)
#: The user came back before finishing at the eID provider; the row stays pending.
IN_PROGRESS = Outcome(
    "in_progress",
    409,
    _("Identification in progress"),
    _(
        "Your identification is not finished yet. Please complete it at your eID provider, "
        "then reload this page."
    ),
)
#: A form kept for after the verification is gone: used, expired, or another user's.
RESUME_INVALID = Outcome(
    "resume_invalid",
    404,
    _("Form not kept"),
    _("The form you sent before verifying your identity is no longer kept. Please send it again."),
)

# -- refusals of the JSON API (django_eid.api) -----------------------------------------------
_REFUSED = _("Request refused")
#: No user is logged in, or the credentials were not accepted.
LOGIN_REQUIRED = Outcome(
    "login_required", 401, _("Login required"), _("Please log in to verify your identity.")
)
#: A session-authenticated unsafe request without a valid CSRF token.
CSRF_FAILED = Outcome(
    "csrf_failed",
    403,
    _REFUSED,
    _("The request was refused: its CSRF token is missing or not valid. Reload and try again."),
)
#: The endpoint does not take this HTTP method.
METHOD_NOT_ALLOWED = Outcome(
    "method_not_allowed", 405, _REFUSED, _("This method is not allowed here.")
)
#: The body is not a JSON object (or too large to read).
INVALID_BODY = Outcome("invalid_body", 400, _REFUSED, _("The request body must be a JSON object."))
#: Several fields are not valid; ``errors`` names each.
INVALID_REQUEST = Outcome("invalid_request", 400, _REFUSED, _("The request is not valid."))
#: A field the endpoint does not know (a typo would otherwise be ignored silently).
UNKNOWN_FIELD = Outcome("unknown_field", 400, _REFUSED, _("This field is not known."))
#: A field of the wrong JSON type.
NOT_A_STRING = Outcome("not_a_string", 400, _REFUSED, _("This field must be a string."))
#: A ``next`` that is neither a path of the site nor a URL of an allowed front end.
NEXT_NOT_ALLOWED = Outcome(
    "next_not_allowed",
    400,
    _REFUSED,
    _("This is neither a page of this site nor of an allowed front end."),
)
#: A ``max_age`` that is not a number of seconds from 1 to 100 years.
MAX_AGE_INVALID = Outcome(
    "max_age_invalid",
    400,
    _REFUSED,
    _("Give the age of the verification as a whole number of seconds, at most 100 years."),
)
#: A ``min_age`` that is not a whole number of years below 150.
MIN_AGE_INVALID = Outcome(
    "min_age_invalid", 400, _REFUSED, _("Give the age as a whole number of years below 150.")
)
#: A ``min_loa`` that is not a level of assurance (``low``, ``substantial``, ``high``).
MIN_LOA_INVALID = Outcome(
    "min_loa_invalid",
    400,
    _REFUSED,
    _("Give the level of assurance as low, substantial or high."),
)
#: Cancelling an identification that already ended otherwise.
ALREADY_FINISHED = Outcome(
    "already_finished",
    409,
    _("Identification finished"),
    _("This identification has already ended."),
)

# -- the outcome of an identification -----------------------------------------------------------
#: Still at the broker (what a JSON front end polling a pending identification is told).
PENDING = Outcome(
    "pending",
    200,
    _("Identification in progress"),
    _("The identification is not finished yet."),
)
SUCCEEDED = Outcome("succeeded", 200, _("Identity verified"), _("Your identity is verified."))
ABORTED = Outcome(
    "aborted", 200, _("Identification cancelled"), _("You cancelled the identification.")
)
FAILED = Outcome("failed", 200, _FAILED, _("The identification did not succeed. Please try again."))
#: An expired identification is a refusal; the others are outcomes the user asked for.
EXPIRED = Outcome(
    "expired",
    410,
    _("Identification expired"),
    _("The identification took too long and has expired. Please start again."),
)
REJECTED = Outcome(
    "rejected", 200, _("Identification not accepted"), _("Your identification was not accepted.")
)

# -- why django-eid itself rejects an identity (the row's ``error_code``) -------------------------
PROVIDER_NOT_ALLOWED = "PROVIDER_NOT_ALLOWED"
ONE_ACCOUNT_PER_PERSON = "ONE_ACCOUNT_PER_PERSON"
NOT_SAME_PERSON = "NOT_SAME_PERSON"
MIN_AGE = "MIN_AGE"
AGE_UNKNOWN = "AGE_UNKNOWN"
#: The identification's level of assurance is below ``MIN_LOA`` (or not stated).
LOA_TOO_LOW = "LOA_TOO_LOW"
#: The account linked to the person may not log in (inactive: ``user_can_authenticate``).
ACCOUNT_INACTIVE = "ACCOUNT_INACTIVE"
#: A receiver of ``identification_verifying`` or ``identification_succeeded`` said no.
RECEIVER_REJECTED = "REJECTED"
#: A receiver of ``identification_verifying`` crashed: the rules could not be applied.
RULES_FAILED = "RULES_FAILED"
#: The identity is not what the site asked for (the broker API's ``refusal``): a scope the
#: OpenID provider did not grant, the national identity number missing.
SCOPE_NOT_GRANTED = records.SCOPE_NOT_GRANTED
NUMBER_MISSING = records.NUMBER_MISSING

_REJECTIONS: dict[str, Promise] = {
    PROVIDER_NOT_ALLOWED: _(
        "You identified with an eID that is not accepted here. Please try again."
    ),
    ONE_ACCOUNT_PER_PERSON: _("This person is already verified on another account."),
    NOT_SAME_PERSON: _("This is not the person verified on this account."),
    AGE_UNKNOWN: _(
        "Your identification did not tell your date of birth, which this service needs to "
        "check your age."
    ),
    LOA_TOO_LOW: _(
        "Your eID does not give the level of assurance this service needs. Please identify "
        "with another eID."
    ),
    ACCOUNT_INACTIVE: _("The account linked to your eID cannot log in."),
    SCOPE_NOT_GRANTED: _(
        "Your identification did not share everything this service asked for. Please try "
        "again and allow it."
    ),
    NUMBER_MISSING: _(
        "Your identification did not include your national identity number, which this "
        "service needs."
    ),
}


#: django-eid's own reasons for a rejection (``error_code`` of a ``REJECTED`` row), which a
#: front end may act on; a site's own rejection is ``RECEIVER_REJECTED``.
REJECTION_CODES: Final = frozenset({*_REJECTIONS, MIN_AGE, RECEIVER_REJECTED})


def rejection_message(code: str, stored: str = "") -> str | None:
    """django-eid's own reason for rejecting with ``code``, in the active language; else ``None``.

    ``stored`` is the reason as stored with the row: a ``MIN_AGE`` refusal names the age
    that applied then (its number is read back from it), not today's setting.
    """
    if code == MIN_AGE:
        applied = re.search(r"[0-9]+", stored)
        age = int(applied.group()) if applied else eid_settings.MIN_AGE
        if age is None:
            return None
        return ngettext(
            "You must be at least %(age)d year old to use this service.",
            "You must be at least %(age)d years old to use this service.",
            age,
        ) % {"age": age}
    message = _REJECTIONS.get(code)
    return None if message is None else str(message)


# -- why a gate turns a user away (the codes: ``django_eid.reasons``) ---------------------------


def gate_reason(code: str, *, min_age: int | None = None) -> str:
    """The start page's explanation of a gate's failed condition ``code``, translated."""
    if code == TOO_YOUNG:
        age = min_age or 0
        return ngettext(
            "This page is only for persons aged %(age)d year or older.",
            "This page is only for persons aged %(age)d years or older.",
            age,
        ) % {"age": age}
    messages: dict[str, Promise] = {
        NOT_VERIFIED: _("Please verify your identity to continue."),
        TOO_OLD: _("Please verify your identity again: this page needs a recent verification."),
        WRONG_PROVIDER: _("This page needs a verification with another electronic ID."),
        AGE_NOT_KNOWN: _(
            "This page needs your age, and your verified identity does not tell your date of birth."
        ),
        LEVEL_TOO_LOW: _(
            "Please verify your identity again with an eID of a higher level of assurance."
        ),
        OTHER_PERSON: _(
            "Please verify your identity again, as the person already verified on this account."
        ),
    }
    return str(messages.get(code, messages[NOT_VERIFIED]))


# -- linked identities (django_eid.flows.link) ---------------------------------------------------
#: A link to remove that is not the user's (or does not exist).
LINK_NOT_FOUND = Outcome(
    "link_not_found", 404, _("Link not found"), _("This eID link does not exist on your account.")
)
#: The only link of an account without a usable password: it could no longer log in.
LAST_LOGIN_METHOD = Outcome(
    "last_login_method",
    409,
    _("Link kept"),
    _(
        "This eID link is the only way you have to log in. Set a password or link another "
        "eID before you remove it."
    ),
)
#: Told after a verification whose person is linked to another account.
LINKED_ELSEWHERE: Final = _(
    "Your identity is verified, but it was not linked to this account for logging in: this "
    "person's eID is already linked to another account."
)


# -- identity at the door: logging in and signing up (django_eid.flows.login, .signup) ----------
#: A start's ``purpose`` other than ``verify``, ``login`` and ``signup`` (the JSON API).
PURPOSE_INVALID = Outcome(
    "purpose_invalid",
    400,
    _("Request refused"),
    _("The purpose must be “verify”, “login” or “signup”."),
)
#: ``LOGIN_MAX_PENDING_PER_SESSION`` or ``LOGIN_RATE`` reached by starts at the door.
TOO_MANY_STARTS = Outcome(
    "too_many_starts",
    429,
    _("Too many identifications started"),
    _("Too many identifications were started from here. Please wait a while and try again."),
)
#: A verified person without an account, where sign-up is closed (``SIGNUP = "closed"``).
NO_ACCOUNT = Outcome(
    "no_account",
    200,
    _("No account for this eID"),
    _("Your identity is verified, but no account here is linked to it."),
)
#: A sign-up, or a bind, of a person whose eID is linked to an account already.
PERSON_HAS_ACCOUNT = Outcome(
    "person_has_account",
    409,
    _("You already have an account"),
    _("An account is already linked to this eID. Log in with it instead."),
)
#: Nothing to sign up or bind: no identification verified in this browser without an
#: account, or it was used (bound, signed up) already, or it is too old.
NOTHING_TO_BIND = Outcome(
    "nothing_to_bind",
    403,
    _("Identify first"),
    _("Please identify with your eID first: no verified identity is waiting here."),
)
#: A sign-up whose username or e-mail address another account took meanwhile.
SIGNUP_TAKEN = Outcome(
    "signup_taken",
    409,
    _("Please choose again"),
    _("Another account took this name or address a moment ago. Please choose another."),
)
#: A sign-up by an eID that names no person to link (no unique id at the provider): the
#: account could never log in.
CANNOT_LINK = Outcome(
    "cannot_link",
    409,
    _("Cannot sign up with this eID"),
    _("This eID cannot be used to log in here. Please sign up with another eID."),
)
#: Signing up is closed, or the adapter refused this person's sign-up.
SIGNUP_CLOSED = Outcome(
    "signup_closed", 403, _("Sign-up closed"), _("New accounts cannot be created here.")
)
#: The login could not be completed: django-eid's backend is not installed, or refused it.
LOGIN_FAILED = Outcome(
    "login_failed",
    403,
    _("Login failed"),
    _("You could not be logged in with this identification. Please try again."),
)


# -- finished identifications --------------------------------------------------------------------
def of(identification: Identification) -> Outcome:
    """The outcome of an identification, its message in the active language.

    A rejection says django-eid's own reason in the reader's language, and a receiver's
    reason as it was stored.
    """
    from django_eid.models import Identification

    Status = Identification.Status
    status = identification.status
    if status == Status.PENDING:
        return PENDING
    if status == Status.SUCCESS:
        return SUCCEEDED
    if status == Status.ABORTED:
        return ABORTED
    if status == Status.EXPIRED:
        return EXPIRED
    if status == Status.REJECTED:
        stored = identification.error_message
        reason = rejection_message(identification.error_code, stored) or stored
        return REJECTED.with_message(reason) if reason else REJECTED
    return FAILED


def configured_url(key: str) -> str:
    """``SUCCESS_URL``/``ABORT_URL``/``ERROR_URL`` resolved.

    A name that does not reverse (check ``E018``) must not turn a stored identification
    into a 500 on every reload: the user goes to the site's root instead.
    """
    value = getattr(eid_settings, key)
    try:
        return resolve_url(value)
    except NoReverseMatch:
        logger.error("DJANGO_EID[%r] does not resolve (system check E018); sent to /.", key)
        return "/"


#: ``FRONTEND_URLS`` keys, and the placeholder their URLs may contain.
FRONTEND_KINDS = ("success", "abort", "error")
REFERENCE_PLACEHOLDER = "{reference}"


def frontend_url(kind: str, reference: str) -> str | None:
    """``FRONTEND_URLS[kind]`` with ``{reference}`` filled, or ``None`` when it is not set
    or not a path or a URL of ``FRONTEND_ALLOWED_HOSTS`` (check ``E024`` says so)."""
    template = (eid_settings.FRONTEND_URLS or {}).get(kind)
    if not template:
        return None
    url = template.replace(REFERENCE_PLACEHOLDER, reference)
    if not url_has_allowed_host_and_scheme(
        url, allowed_hosts=set(eid_settings.FRONTEND_ALLOWED_HOSTS)
    ):
        logger.error(
            "DJANGO_EID['FRONTEND_URLS'][%r] is not on FRONTEND_ALLOWED_HOSTS (system check "
            "E024); the HTML destination is used.",
            kind,
        )
        return None
    return url


#: The query parameter naming the return (``success``, ``abort``, ``error``) in a return
#: forwarded to the front end; the broker's ids travel beside it.
RETURN_PARAM = "eid_return"


def forwarded_return(kind: str, reference: str, params: Mapping[str, Sequence[str]]) -> str | None:
    """``FRONTEND_URLS[kind]`` carrying the return ``kind`` and the broker's ids of
    ``params``: a front end authenticated as the owner finishes the identification with
    them (``api-return``). ``None`` without such a URL."""
    url = frontend_url(kind, reference)
    if url is None:
        return None
    carried = {RETURN_PARAM: kind}
    for name in broker_api().return_params:
        values = list(params.get(name, ()))
        if len(values) == 1:
            carried[name] = values[0]
    parts = urlsplit(url)
    query = "&".join(q for q in (parts.query, urlencode(carried)) if q)
    return urlunsplit(parts._replace(query=query))


def frontend_kind(identification: Identification) -> str:
    """The ``FRONTEND_URLS`` key of a finished identification's outcome."""
    from django_eid.models import Identification

    status = identification.status
    if status == Identification.Status.SUCCESS:
        return "success"
    return "abort" if status == Identification.Status.ABORTED else "error"


def destination(identification: Identification) -> tuple[str, bool]:
    """Where a finished identification sends its user: ``(url, is_result_page)``.

    Success goes to the checked ``next`` of the start (or ``SUCCESS_URL``); a cancel back to
    the start page (or ``ABORT_URL``); a failure to ``ERROR_URL`` when set; everything else
    to django-eid's result page, which shows :func:`of`. An identification started through
    the JSON API goes to the front end instead (``FRONTEND_URLS``), when it is set: the
    front end asks the API what happened.
    """
    from django_eid.models import Identification

    Status = Identification.Status
    status = identification.status
    if identification.channel == Identification.Channel.API:
        if status == Status.SUCCESS and identification.next_url:
            return identification.next_url, False
        url = frontend_url(frontend_kind(identification), identification.reference)
        if url is not None:
            return url, False
    if status == Status.SUCCESS:
        return identification.next_url or configured_url("SUCCESS_URL"), False
    if status == Status.ABORTED:
        if eid_settings.ABORT_URL:
            return configured_url("ABORT_URL"), False
        door = identification.purpose != Identification.Purpose.VERIFY
        start = reverse("django_eid:login" if door else "django_eid:start")
        query = {"next": identification.next_url} if identification.next_url else {}
        if identification.purpose == Identification.Purpose.SIGNUP:
            query["purpose"] = identification.purpose  # back to signing up
        return (f"{start}?{urlencode(query)}" if query else start), False
    if status == Status.ERROR and eid_settings.ERROR_URL:
        return configured_url("ERROR_URL"), False
    return reverse("django_eid:result", args=[identification.reference]), True
