"""Typed views of what the broker sends back, the same whatever its API.

Each API of :mod:`django_eid.brokers` parses its answers into these types, tolerantly:
unknown properties are kept, no field is required except where the flow cannot go on
without it, and anything that is not the JSON its contract promises becomes
:class:`~django_eid.exceptions.EidProtocolError`. The helpers below are shared by those
parsers.
"""

from __future__ import annotations

import datetime
import enum
import ipaddress
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Final, TypeGuard
from urllib.parse import urlsplit

from django_eid import national_id
from django_eid.exceptions import EidProtocolError, InvalidNationalIdentityNumber
from django_eid.national_id import NationalId
from django_eid.scrub import scrub_json


class Progress(enum.Enum):
    """Where a session stands by its record, in django-eid's terms (each API maps its own
    statuses, in whichever casing, onto these)."""

    #: The user identified: the record carries the identity.
    SUCCESS = "success"
    #: The user is still at the broker (or has not opened its page yet).
    IN_PROGRESS = "in_progress"
    #: The user cancelled.
    ABORTED = "aborted"
    #: The session's time ran out at the broker.
    TIMED_OUT = "timed_out"
    #: The session failed, was invalidated or cancelled by the site, or ended in a state
    #: this version does not know.
    FAILED = "failed"
    #: The record says nothing of its status: treated as still in progress.
    UNKNOWN = "unknown"


def lower_keys(obj: Mapping[str, Any]) -> dict[str, Any]:
    """Property names lower-cased (the wire's casing is not reliable).

    The first spelling wins when a body carries a property twice in two casings.
    """
    out: dict[str, Any] = {}
    for key, value in obj.items():
        out.setdefault(str(key).lower(), value)
    return out


def opt_str(obj: Mapping[str, Any], key: str, what: str) -> str | None:
    value = obj.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, str | int):
        raise EidProtocolError(f"{what}: property {key!r} is {type(value).__name__}, not a string")
    if isinstance(value, int):
        # Digits sent as a JSON number lose leading zeros; refuse rather than guess.
        raise EidProtocolError(f"{what}: property {key!r} is a number, not a string")
    return value


def opt_object(obj: Mapping[str, Any], key: str, what: str) -> Mapping[str, Any]:
    """The object at ``key``, or an empty one when absent; :class:`EidProtocolError` for
    anything else."""
    value = obj.get(key)
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise EidProtocolError(f"{what}: {key!r} is {type(value).__name__}, not an object")
    return value


#: :attr:`IdentificationRecord.refusal` codes (rejection codes: ``django_eid.outcomes``
#: words them). The provider did not grant every scope the site asked for.
SCOPE_NOT_GRANTED: Final = "SCOPE_NOT_GRANTED"
#: The site asked for the national identity number (``GET_SOCIAL_SECURITY_NUMBER``), and the
#: identity came without it.
NUMBER_MISSING: Final = "NUMBER_MISSING"


@dataclass(frozen=True)
class CreatedSession:
    """What ``create_session`` returns: where to send the user, and the session id."""

    url: str
    request_id: str


@dataclass(frozen=True)
class EnvironmentInfo:
    """The ``EnvironmentInfo`` object of a record: the user's browser, as the broker saw it."""

    user_agent: str | None = None
    ip_address: str | None = None


@dataclass(frozen=True)
class RecordError:
    """The ``Error`` object of a failed session's record."""

    native_error_code: str | None = None
    error_code: str | None = None
    error_message: str | None = None


@dataclass(frozen=True)
class IdentificationRecord:
    """A retrieved identification session. Every field may be ``None``.

    ``extra`` holds the properties this version does not know. The national
    identity number is kept out of ``repr()``.
    """

    request_id: str | None = None
    #: The status as the API spells it (stored as ``error_status`` of a failure).
    status: str | None = None
    progress: Progress = Progress.UNKNOWN
    identity_provider: str | None = None
    identity_provider_unique_id: str | None = None
    name: str | None = None
    first_name: str | None = None
    middle_name: str | None = None
    last_name: str | None = None
    date_of_birth: str | None = None
    social_security_number: str | None = field(default=None, repr=False)
    #: The number's issuing country (ISO 3166-1 alpha-2) and type, when the API says them.
    national_id_country: str | None = None
    national_id_type: str | None = None
    #: The level of assurance of the identification (``low``, ``substantial``, ``high``),
    #: when the API gives one.
    level_of_assurance: str | None = None
    environment_info: EnvironmentInfo = field(default_factory=EnvironmentInfo)
    error: RecordError | None = None
    #: A rejection code when the identity is not what the site asked for, as only the API
    #: can tell (an OpenID provider that did not grant a scope asked for): the flow then
    #: stores the identification ``REJECTED`` with it.
    refusal: str | None = None
    metadata: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    # Out of repr(): a broker may put personal data anywhere it likes.
    extra: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}), repr=False)
    #: The answer as received, without the national identity number (its API removed it).
    received: Mapping[str, Any] = field(
        default_factory=lambda: MappingProxyType({}), repr=False, compare=False
    )
    #: An OpenID provider's signed ``id_token`` and the keys it was verified with, as the
    #: JSON :func:`django_eid.evidence.kept` makes (``KEEP_EVIDENCE``); ``None`` otherwise.
    #: Never in ``received`` (so never in ``raw``) nor in ``repr()``.
    evidence: str | None = field(default=None, repr=False, compare=False)

    @property
    def is_success(self) -> bool:
        return self.progress is Progress.SUCCESS

    @property
    def in_progress(self) -> bool:
        """The session is not over (a record without a status counts as not over)."""
        return self.progress in (Progress.IN_PROGRESS, Progress.UNKNOWN)

    @property
    def stated_birth_date(self) -> datetime.date | None:
        """``DateOfBirth`` as a date, with the wire format's century rule; ``None`` if unusable."""
        return parse_birth_date(self.date_of_birth, self.social_security_number)

    def national_id(self, *, country: str | None = None) -> NationalId | None:
        """The national identity number read by its country's rules, or ``None``.

        ``country`` (or else the provider's country) decides between shapes that several
        countries use; ``None`` when the record has no number or it is not a valid one.
        """
        number = self.social_security_number
        if not number:
            return None
        hint = country or self.national_id_country
        for attempt in dict.fromkeys((hint, None)):
            try:
                return national_id.parse(number, country=attempt)
            except InvalidNationalIdentityNumber:
                continue
        return None

    @property
    def birth_date(self) -> datetime.date | None:
        """The date of birth: the national identity number's when it has a valid one (it
        carries the century), else ``DateOfBirth``'s; ``None`` when neither is usable."""
        found = self.national_id()
        return found.birth_date if found else self.stated_birth_date

    def redacted(self) -> dict[str, Any]:
        """The record as received, without the national identity number, and scrubbed
        (:func:`~django_eid.scrub.scrub_json`) of any number or credential elsewhere in it."""
        return dict(scrub_json(dict(self.received)))


#: Deeper nesting is not an answer of this API (and would not survive storing it as JSON).
MAX_DEPTH: Final = 32


def storable_object(body: Any, what: str) -> Mapping[str, Any]:
    """``body`` if it is a JSON object a database can store; :class:`EidProtocolError`
    (naming ``what``) for anything else. Where every parser of an answer starts."""
    if not isinstance(body, Mapping):
        raise EidProtocolError(f"{what}: expected a JSON object, got {type(body).__name__}")
    refuse_unstorable(body, what)
    return body


def refuse_unstorable(body: Any, what: str) -> None:
    """Refuse what no database column holds: NUL characters, NaN/infinities, deep nesting.

    Python's JSON parser accepts ``NaN``, ``Infinity`` and ``\\u0000``; PostgreSQL's text and
    jsonb columns (and SQLite's JSON check) do not, so storing them would fail every retry.
    """
    stack: list[tuple[Any, int]] = [(body, 0)]
    while stack:
        value, depth = stack.pop()
        if depth > MAX_DEPTH:
            raise EidProtocolError(f"{what}: the answer is nested more than {MAX_DEPTH} deep")
        if isinstance(value, str) and "\x00" in value:
            raise EidProtocolError(f"{what}: the answer contains a NUL character")
        if isinstance(value, float) and not math.isfinite(value):
            raise EidProtocolError(f"{what}: the answer contains NaN or an infinity")
        if isinstance(value, Mapping):
            stack.extend((item, depth + 1) for pair in value.items() for item in pair)
        elif isinstance(value, list | tuple):
            stack.extend((item, depth + 1) for item in value)


#: A host name's label: letters, digits, hyphens (not at either end) and the underscores
#: that container and service names use. Nothing a Content-Security-Policy or a header
#: would read as syntax (``;``, ``,``, spaces, quotes).
_LABEL: Final = r"(?!-)[A-Za-z0-9_-]{1,63}(?<!-)"
_HOST_NAME_RE: Final = re.compile(rf"{_LABEL}(?:\.{_LABEL})*\.?")


def is_http_url(value: object) -> TypeGuard[str]:
    """An absolute http(s) URL whose host is well formed: a host name, an IPv4 address or a
    bracketed IPv6 address, with an optional port; no user information, no whitespace or
    control character anywhere.

    The broker's create answer is framed and redirected to, and its origin goes into the
    frame page's Content-Security-Policy: a host with ``;``, ``,`` or a space would add
    directives to it.
    """
    if not isinstance(value, str) or not value.isascii():
        return False
    if any(c <= " " or c == "\x7f" for c in value):
        # urlsplit() silently drops tabs and newlines: the text would not be what was checked.
        return False
    try:
        parts = urlsplit(value)
    except ValueError:
        return False
    return parts.scheme in ("http", "https") and _is_host_and_port(parts.netloc)


def _is_host_and_port(netloc: str) -> bool:
    if netloc.startswith("["):
        host, bracket, rest = netloc[1:].partition("]")
        try:
            ipaddress.IPv6Address(host)
        except ValueError:
            return False
        return bool(bracket) and (not rest or (rest[0] == ":" and _is_port(rest[1:])))
    host, colon, port = netloc.partition(":")
    return bool(_HOST_NAME_RE.fullmatch(host)) and (not colon or _is_port(port))


def _is_port(text: str) -> bool:
    return text.isdigit() and 0 < int(text) <= 65535


_ISO_DATE_RE: Final = re.compile(r"^[0-9]{4}-[0-9]{2}-[0-9]{2}\Z")


def parse_birth_date(
    value: str | None, ssn: str | None = None, *, today: datetime.date | None = None
) -> datetime.date | None:
    """``ddMMyy`` (or ISO ``YYYY-MM-DD``) to a date; ``None`` when absent, not a real date,
    or in the future (nobody verified is born tomorrow)."""
    if value and _ISO_DATE_RE.match(value):
        try:
            born = datetime.date.fromisoformat(value)
        except ValueError:
            return None
        # A day of slack: the broker's "today" may already be tomorrow somewhere.
        latest = (today or datetime.date.today()) + datetime.timedelta(days=1)
        return born if born <= latest else None
    if not value or len(value) != 6 or not value.isascii() or not value.isdigit():
        return None
    day, month, yy = int(value[:2]), int(value[2:4]), int(value[4:])
    today = today or datetime.date.today()
    century: int | None = None
    if ssn and len(ssn) == 11 and ssn.isascii() and ssn.isdigit():
        century = national_id.norwegian_century(int(ssn[6:9]), yy)
    if century is None:
        # The latest century that does not put the birth in the future.
        century = today.year // 100 * 100
        if (century + yy, month, day) > (today.year, today.month, today.day):
            century -= 100
    try:
        return datetime.date(century + yy, month, day)
    except ValueError:
        return None
