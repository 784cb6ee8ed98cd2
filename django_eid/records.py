"""Typed views of what the broker sends back, parsed tolerantly.

Property names are matched case-insensitively (the public reference disagrees
with itself on casing); unknown properties are kept; no field is required
except where the flow cannot go on without it. Anything that is not the JSON
the contract promises becomes :class:`~django_eid.exceptions.EidProtocolError`.
"""

from __future__ import annotations

import datetime
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Final, TypeGuard
from urllib.parse import urlsplit

from django_eid import national_id, vocabulary
from django_eid.exceptions import EidProtocolError, InvalidNationalIdentityNumber
from django_eid.national_id import NationalId

#: Record property that holds the national identity number (lower-cased).
SSN_KEY: Final = "socialsecuritynumber"

_STRING_FIELDS: Final = {
    "requestid": "request_id",
    "status": "status",
    "identityprovider": "identity_provider",
    "identityprovideruniqueid": "identity_provider_unique_id",
    "name": "name",
    "firstname": "first_name",
    "middlename": "middle_name",
    "lastname": "last_name",
    "dateofbirth": "date_of_birth",
    SSN_KEY: "social_security_number",
}
_KNOWN: Final = frozenset(_STRING_FIELDS) | {"environmentinfo", "error", "metadata"}


#: Record statuses that mean "the user is still at the broker" (the vocabulary's, re-exported).
IN_PROGRESS: Final = vocabulary.IN_PROGRESS


def lower_keys(obj: Mapping[str, Any]) -> dict[str, Any]:
    """Property names lower-cased (the wire's casing is not reliable).

    The first spelling wins when a body carries a property twice in two casings.
    """
    out: dict[str, Any] = {}
    for key, value in obj.items():
        out.setdefault(str(key).lower(), value)
    return out


def _opt_str(obj: Mapping[str, Any], key: str, what: str) -> str | None:
    value = obj.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, str | int):
        raise EidProtocolError(f"{what}: property {key!r} is {type(value).__name__}, not a string")
    if isinstance(value, int):
        # Digits sent as a JSON number lose leading zeros; refuse rather than guess.
        raise EidProtocolError(f"{what}: property {key!r} is a number, not a string")
    return value


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
    status: str | None = None
    identity_provider: str | None = None
    identity_provider_unique_id: str | None = None
    name: str | None = None
    first_name: str | None = None
    middle_name: str | None = None
    last_name: str | None = None
    date_of_birth: str | None = None
    social_security_number: str | None = field(default=None, repr=False)
    environment_info: EnvironmentInfo = field(default_factory=EnvironmentInfo)
    error: RecordError | None = None
    metadata: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    extra: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))
    received: Mapping[str, Any] = field(
        default_factory=lambda: MappingProxyType({}), repr=False, compare=False
    )

    @property
    def is_success(self) -> bool:
        return self.status == vocabulary.SUCCESS

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
        hint = country or vocabulary.provider_country(self.identity_provider)
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
        """The record as received, without the national identity number."""
        return {k: v for k, v in self.received.items() if str(k).lower() != SSN_KEY}


#: Deeper nesting is not an answer of this API (and would not survive storing it as JSON).
MAX_DEPTH: Final = 32


def _refuse_unstorable(body: Any, what: str) -> None:
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


def is_http_url(value: object) -> TypeGuard[str]:
    """An absolute http(s) URL with a host."""
    if not isinstance(value, str):
        return False
    try:
        parts = urlsplit(value)
    except ValueError:
        return False
    return parts.scheme in ("http", "https") and bool(parts.hostname)


def parse_created(body: Any, *, what: str = "create_session") -> CreatedSession:
    """Parse the answer to creating a session; raise :class:`EidProtocolError` for anything else.

    Both ``Url`` (absolute) and ``RequestId`` are required: without them the flow cannot go on.
    """
    if not isinstance(body, Mapping):
        raise EidProtocolError(f"{what}: expected a JSON object, got {type(body).__name__}")
    _refuse_unstorable(body, what)
    obj = lower_keys(body)
    url = _opt_str(obj, "url", what)
    request_id = _opt_str(obj, "requestid", what)
    if not is_http_url(url):
        raise EidProtocolError(f"{what}: the answer has no absolute 'Url'")
    if not request_id:
        raise EidProtocolError(f"{what}: the answer has no 'RequestId'")
    return CreatedSession(url=url, request_id=request_id)


def parse_done(body: Any, *, what: str = "get_session_status") -> bool:
    """Parse the status answer ``{"Done": true|false}``; :class:`EidProtocolError` otherwise."""
    if not isinstance(body, Mapping):
        raise EidProtocolError(f"{what}: expected a JSON object, got {type(body).__name__}")
    done = lower_keys(body).get(vocabulary.DONE.lower())
    if not isinstance(done, bool):
        raise EidProtocolError(f"{what}: the answer has no boolean 'Done'")
    return done


def parse_record(body: Any, *, what: str = "get_session") -> IdentificationRecord:
    """Parse a retrieved record; raise :class:`EidProtocolError` for anything else."""
    if not isinstance(body, Mapping):
        raise EidProtocolError(f"{what}: expected a JSON object, got {type(body).__name__}")
    _refuse_unstorable(body, what)
    obj = lower_keys(body)
    values: dict[str, Any] = {
        attr: _opt_str(obj, key, what) for key, attr in _STRING_FIELDS.items()
    }

    env = obj.get("environmentinfo")
    if env is None:
        values["environment_info"] = EnvironmentInfo()
    elif isinstance(env, Mapping):
        env_l = lower_keys(env)
        values["environment_info"] = EnvironmentInfo(
            user_agent=_opt_str(env_l, "useragent", what),
            ip_address=_opt_str(env_l, "ipaddress", what),
        )
    else:
        raise EidProtocolError(f"{what}: 'EnvironmentInfo' is {type(env).__name__}, not an object")

    err = obj.get("error")
    if err is None:
        values["error"] = None
    elif isinstance(err, Mapping):
        err_l = lower_keys(err)
        values["error"] = RecordError(
            native_error_code=_opt_str(err_l, "nativeerrorcode", what),
            error_code=_opt_str(err_l, "errorcode", what),
            error_message=_opt_str(err_l, "errormessage", what),
        )
    else:
        raise EidProtocolError(f"{what}: 'Error' is {type(err).__name__}, not an object")

    meta = obj.get("metadata")
    if meta is None:
        meta = {}
    if not isinstance(meta, Mapping) or not all(
        isinstance(v, str) or v is None for v in meta.values()
    ):
        raise EidProtocolError(f"{what}: 'MetaData' is not a string-to-string object")
    values["metadata"] = MappingProxyType({str(k): v for k, v in meta.items()})
    values["extra"] = MappingProxyType(
        {k: v for k, v in body.items() if str(k).lower() not in _KNOWN}
    )
    values["received"] = MappingProxyType(dict(body))
    return IdentificationRecord(**values)


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
