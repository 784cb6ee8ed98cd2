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
from dataclasses import dataclass
from typing import TYPE_CHECKING
from urllib.parse import urlencode

from django.shortcuts import resolve_url
from django.urls import NoReverseMatch, reverse
from django.utils.functional import Promise
from django.utils.translation import gettext_lazy as _
from django.utils.translation import ngettext

from django_eid.conf import eid_settings

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
    _("“%(provider)s” is not a provider name (upper-case words joined by underscores)."),
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

# -- the outcome of a finished identification ---------------------------------------------------
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
#: A receiver of ``identification_verifying`` or ``identification_succeeded`` said no.
RECEIVER_REJECTED = "REJECTED"
#: A receiver of ``identification_verifying`` crashed: the rules could not be applied.
RULES_FAILED = "RULES_FAILED"

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
}


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


# -- why a gate turns a user away (``django_eid.requirements``) --------------------------------
NOT_VERIFIED = "not_verified"
TOO_OLD = "too_old"
WRONG_PROVIDER = "wrong_provider"
TOO_YOUNG = "too_young"
AGE_NOT_KNOWN = "age_not_known"
OTHER_PERSON = "other_person"


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
        OTHER_PERSON: _(
            "Please verify your identity again, as the person already verified on this account."
        ),
    }
    return str(messages.get(code, messages[NOT_VERIFIED]))


# -- finished identifications --------------------------------------------------------------------
def of(identification: Identification) -> Outcome:
    """The outcome of a finished identification, its message in the active language.

    A rejection says django-eid's own reason in the reader's language, and a receiver's
    reason as it was stored.
    """
    from django_eid.models import Identification

    Status = Identification.Status
    status = identification.status
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


def destination(identification: Identification) -> tuple[str, bool]:
    """Where a finished identification sends its user: ``(url, is_result_page)``.

    Success goes to the checked ``next`` of the start (or ``SUCCESS_URL``); a cancel back to
    the start page (or ``ABORT_URL``); a failure to ``ERROR_URL`` when set; everything else
    to django-eid's result page, which shows :func:`of`.
    """
    from django_eid.models import Identification

    Status = Identification.Status
    status = identification.status
    if status == Status.SUCCESS:
        return identification.next_url or configured_url("SUCCESS_URL"), False
    if status == Status.ABORTED:
        if eid_settings.ABORT_URL:
            return configured_url("ABORT_URL"), False
        start = reverse("django_eid:start")
        if identification.next_url:
            return f"{start}?{urlencode({'next': identification.next_url})}", False
        return start, False
    if status == Status.ERROR and eid_settings.ERROR_URL:
        return configured_url("ERROR_URL"), False
    return reverse("django_eid:result", args=[identification.reference]), True
