"""The one scrubber of broker texts: what django-eid logs, stores or shows of a broker's words.

A broker may echo anything in its free texts (an error's ``ErrorMessage``, an OAuth
``error_description``, a ``MetaData`` value, a property this version does not know): the
national identity number, the client secret, an access token. :func:`scrub` hides those in
a text; :func:`scrub_json` walks a JSON value and scrubs every string in it (keys too),
keeping its structure. Every broker text goes through one of them before it is logged
(:mod:`django_eid.client`'s error messages), stored (``error_message``, ``raw``,
``metadata``) or shown (the admin).

What is hidden:

* Nordic national identity numbers, in every written form: Norway 11 digits (also
  ``DDMMYY NNNNN``), Sweden 10 or 12 digits with or without ``-``/``+``, Denmark 10 digits
  with or without ``-``, Finland ``DDMMYYCZZZQ`` with any century sign (``+ - A``-``F``
  ``U``-``Y``) and a check letter; a space may stand for the separator. Only digits whose
  leading part reads as a date of birth (with the D-, H- and samordningsnummer offsets)
  count, so that order numbers and the like stay readable; UUIDs and ISO 8601 timestamps
  are never touched.
* JWTs (the broker's access tokens), ``Bearer``/``Basic`` credentials, and the value of a
  ``client_secret=``, ``password=``, ``access_token=`` ... pair, form-encoded, in a query
  or in JSON.
* The configured client secret itself (also URL-encoded, and as Basic credentials).
* In JSON, the whole value of a property whose name says it is a national identity number
  (``ssn``, ``nin``, ``personalNumber``, ``cpr``, ``hetu`` ...) or a credential, whatever
  its shape.

A JSON number is left as it is: no broker sends a national identity number as one (the
leading zero would be lost), and numbers are where timestamps and counters live.
"""

from __future__ import annotations

import base64
import re
from collections.abc import Iterable, Mapping
from typing import Any, Final
from urllib.parse import quote_plus

from django.core.exceptions import ImproperlyConfigured

from django_eid.conf import eid_settings

__all__ = ["REDACTED", "scrub", "scrub_json", "secrets_of"]

#: What stands in for a hidden part.
REDACTED: Final = "***"

# Alternatives that are read first and kept as they are: their digits are not a number.
_UUID: Final = r"[0-9A-Fa-f]{8}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{12}"
_ISO_TIME: Final = (
    r"\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(?::\d{2}(?:[.,]\d+)?)?(?:Z|[+-]\d{2}(?::?\d{2})?)?"
)
# A separator between the date and the rest of a number: Sweden's and Denmark's hyphen,
# Sweden's plus (a centenarian), or a (non-breaking) space where a person typed one.
_SEP: Final = r"[-+\u00a0 ]"
_NIN: Final = (
    # Sweden, twelve digits: YYYYMMDD NNNN.
    rf"(?P<d8>\d{{8}}){_SEP}?\d{{4}}"
    # Norway (eleven: DDMMYY IIIKK, or IIIKK written as III KK), Sweden and Denmark (ten).
    rf"|(?P<d6>\d{{6}}){_SEP}?(?:\d{{3}}[\u00a0 ]?\d{{2}}|\d{{4}})"
    # Finland: DDMMYY, the century sign, three digits and the check character.
    r"|(?P<fi>\d{6})[-+A-FU-Ya-fu-y]\d{3}[0-9A-Za-z]"
)
_PATTERN: Final = re.compile(
    rf"(?P<keep>(?<![0-9A-Za-z])(?:{_UUID}|{_ISO_TIME}))"
    rf"|(?<![0-9A-Za-z])(?:{_NIN})(?![0-9A-Za-z])"
)

#: A JWT: three base64url parts, the first a JSON object (``eyJ`` is ``{"``).
_JWT_RE: Final = re.compile(r"eyJ[\w-]*\.[\w-]+\.[\w-]*")
#: The credentials of an HTTP ``Authorization`` value: what follows the scheme when it
#: looks like a credential (a digit or a base64/token sign in it, or long), not a word
#: ("Basic information").
_AUTH_RE: Final = re.compile(
    r"(?i)\b(bearer|basic|digest)(\s+)"
    r"(?:(?=[\w.~+/=-]*[0-9.~+/=_-])[\w.~+/=-]{8,}|[\w.~+/=-]{20,})"
)
#: A credential named by its key: ``client_secret=...``, ``"password": "..."``, ...
_NAMED_SECRET_RE: Final = re.compile(
    r"(?i)(?<![0-9a-z])"
    r"((?:client_)?secret|password|passwd|pwd|(?:access|refresh|id)_token|api[_-]?key"
    r"|client_assertion)"
    r"""(["']?\s*[=:]\s*["']?)"""
    r"""([^\s&"',;<>{}\[\]]+)"""
)

#: Property names (lower-cased, without ``_``/``-``/spaces) whose value is a national identity
#: number or a credential: hidden whole, whatever it looks like.
_SECRET_KEYS: Final = frozenset(
    {
        # National identity numbers, in the brokers' and the countries' words.
        "ssn",
        "socialsecuritynumber",
        "prefilledsocialsecuritynumber",
        "nin",
        "nationalidentitynumber",
        "nationalidnumber",
        "nationalid",
        "personalnumber",
        "personalidentitynumber",
        "personalidentitycode",
        "personalcode",
        "personnummer",
        "personnr",
        "pnr",
        "fodselsnummer",
        "fødselsnummer",
        "fnr",
        "cpr",
        "cprnumber",
        "cprnummer",
        "hetu",
        "henkilotunnus",
        "henkilötunnus",
        "samordningsnummer",
        "dnummer",
        # Credentials.
        "clientsecret",
        "secret",
        "password",
        "accesstoken",
        "refreshtoken",
        "idtoken",
        "authorization",
        "apikey",
    }
)
_KEY_NOISE: Final = re.compile(r"[\s_\-.]")
#: Shorter literals are not hidden: replacing every "ab" would leave no text to read.
_MIN_LITERAL: Final = 4


def _plausible_date(match: re.Match[str]) -> bool:
    """Whether the leading digits of a number-shaped match read as a date of birth.

    Generous on purpose (a hidden order number costs less than a number in clear): a
    six-digit date counts if it reads as DDMMYY (Norway, Denmark, Finland; Norway's D- and
    H-numbers and test numbers add 40 to the day, 40 or 80 to the month) or as YYMMDD
    (Sweden; a samordningsnummer adds 60 to the day).
    """
    d8 = match.group("d8")
    if d8 is not None:
        return d8[:2] in ("18", "19", "20") and _swedish_month_day(d8[4:6], d8[6:8])
    d6 = match.group("d6") or match.group("fi")
    day, month = int(d6[:2]), int(d6[2:4])
    ddmmyy = (1 <= day <= 31 or 41 <= day <= 71) and (
        1 <= month <= 12 or 41 <= month <= 52 or 81 <= month <= 92
    )
    return ddmmyy or _swedish_month_day(d6[2:4], d6[4:6])


def _swedish_month_day(month: str, day: str) -> bool:
    d = int(day)
    return 1 <= int(month) <= 12 and (1 <= d <= 31 or 61 <= d <= 91)


def _hide_number(match: re.Match[str]) -> str:
    if match.group("keep") is not None or not _plausible_date(match):
        return match.group(0)
    return REDACTED


def secrets_of(client_id: str, client_secret: str) -> tuple[str, ...]:
    """The forms in which the client's secret may be echoed: as configured, URL-encoded,
    and as the value of the Basic ``Authorization`` header (RFC 6749 2.3.1)."""
    if not client_secret:
        return ()
    encoded = quote_plus(client_secret, safe="")
    basic = f"{quote_plus(client_id, safe='')}:{encoded}"
    return (
        client_secret,
        encoded,
        base64.b64encode(basic.encode()).decode(),
        base64.b64encode(f"{client_id}:{client_secret}".encode()).decode(),
    )


def _configured_secrets() -> tuple[str, ...]:
    try:
        return secrets_of(eid_settings.CLIENT_ID, eid_settings.CLIENT_SECRET)
    except ImproperlyConfigured:  # no Django settings at all: nothing configured to hide
        return ()


def scrub(text: str, *, secrets: Iterable[str] | None = None) -> str:
    """``text`` without national identity numbers, tokens or credentials.

    ``secrets`` are literal values to hide as well (an access token); the configured client
    secret is always among them unless ``secrets`` is given (then give it there).
    """
    literals = _configured_secrets() if secrets is None else tuple(secrets)
    return _scrub(text, _longest_first(literals))


def _longest_first(literals: Iterable[str]) -> tuple[str, ...]:
    # Longest first: a secret inside its own Basic credentials is hidden with them.
    return tuple(sorted({s for s in literals if len(s) >= _MIN_LITERAL}, key=len, reverse=True))


#: What each pattern cannot match without: texts lacking it skip the pattern (a record's
#: names, dates and ids mostly do). ``\d`` is the patterns' own (any Unicode digit).
_SIX_DIGITS: Final = re.compile(r"\d{6}")
_AUTH_WORDS: Final = re.compile("bearer|basic|digest")
_SECRET_WORDS: Final = re.compile("secret|passw|pwd|_token|api|client_assertion")


def _scrub(text: str, literals: tuple[str, ...]) -> str:
    for literal in literals:
        if literal in text:
            text = text.replace(literal, REDACTED)
    if "eyJ" in text:
        text = _JWT_RE.sub(REDACTED, text)
    # The two case-insensitive patterns: Unicode case folding matches more than
    # ``lower()`` finds (the long s for ``s``, the Kelvin sign for ``k``), so only an ASCII text
    # is ruled out by its lower case.
    lower = text.lower() if text.isascii() else None
    if lower is None or _AUTH_WORDS.search(lower):
        text = _AUTH_RE.sub(rf"\1\2{REDACTED}", text)
    if lower is None or _SECRET_WORDS.search(lower):
        text = _NAMED_SECRET_RE.sub(rf"\1\2{REDACTED}", text)
    if _SIX_DIGITS.search(text) is None:
        return text  # every number form starts with six digits in a row
    return _PATTERN.sub(_hide_number, text)


def is_secret_key(key: str) -> bool:
    """Whether a JSON property called ``key`` holds a national identity number or a credential."""
    return _KEY_NOISE.sub("", key).lower() in _SECRET_KEYS


def scrub_json(value: Any, *, secrets: Iterable[str] | None = None) -> Any:
    """A copy of the JSON ``value`` with every string scrubbed (:func:`scrub`), keys included,
    and the scalar value of every property named like a number or a credential hidden.

    Objects stay objects and lists stay lists (a tuple becomes a list), so the result has the
    shape of what the broker sent. Two keys that become the same once scrubbed both stay,
    the later ones numbered.
    """
    literals = _configured_secrets() if secrets is None else tuple(secrets)
    return _walk(value, _longest_first(literals))


def _walk(value: Any, literals: tuple[str, ...]) -> Any:
    if isinstance(value, str):
        return _scrub(value, literals)
    if isinstance(value, Mapping):
        out: dict[str, Any] = {}
        for key, item in value.items():
            name = _scrub(str(key), literals)
            if name in out:
                name = next(
                    f"{name}#{n}" for n in range(2, len(out) + 3) if f"{name}#{n}" not in out
                )
            if (
                is_secret_key(str(key))
                and isinstance(item, str | int)
                and not isinstance(item, bool)
            ):
                out[name] = REDACTED
            else:
                out[name] = _walk(item, literals)
        return out
    if isinstance(value, list | tuple):
        return [_walk(item, literals) for item in value]
    return value
