"""Nordic national identity numbers: validate one, read its date of birth, compose test numbers.

:func:`parse` reads a Norwegian fødselsnummer, D-number or H-number, a Swedish personnummer or
samordningsnummer, a Danish CPR number or a Finnish henkilötunnus. It checks the format, the
check digits and that the date of birth is a real date not in the future, and returns a
:class:`NationalId`. Anything else raises
:class:`~django_eid.exceptions.InvalidNationalIdentityNumber`, whose message names the country
and the fault and never contains a digit of the input (it may be a real person's number).

The ``compose_*`` functions build valid numbers from the same rules, for the sandbox and tests.

The rules, their sources and their pitfalls are described in
``docs/guides/national-identity-number.md`` ("Numbers by country").
"""

from __future__ import annotations

import datetime
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Final

from django_eid.exceptions import InvalidNationalIdentityNumber

__all__ = [
    "COUNTRIES",
    "CPR",
    "DENMARK",
    "D_NUMBER",
    "FINLAND",
    "FODSELSNUMMER",
    "HENKILOTUNNUS",
    "H_NUMBER",
    "NORWAY",
    "PERSONNUMMER",
    "SAMORDNINGSNUMMER",
    "SWEDEN",
    "NationalId",
    "compose_danish",
    "compose_finnish",
    "compose_norwegian",
    "compose_swedish",
    "format_swedish_10",
    "mask",
    "parse",
]

NORWAY: Final = "NO"
SWEDEN: Final = "SE"
DENMARK: Final = "DK"
FINLAND: Final = "FI"
#: The ISO 3166-1 alpha-2 codes :func:`parse` accepts as ``country``.
COUNTRIES: Final = (NORWAY, SWEDEN, DENMARK, FINLAND)

#: Norway: a birth number (residents).
FODSELSNUMMER: Final = "fodselsnummer"
#: Norway: first digit + 4 (day + 40), for persons not resident.
D_NUMBER: Final = "d-number"
#: Norway: third digit + 4 (month + 40), a health-sector help number for an unknown person.
H_NUMBER: Final = "h-number"
#: Sweden: a personal identity number.
PERSONNUMMER: Final = "personnummer"
#: Sweden: day + 60, for persons not registered in Sweden.
SAMORDNINGSNUMMER: Final = "samordningsnummer"
#: Denmark: a CPR number (personnummer).
CPR: Final = "cpr"
#: Finland: a personal identity code.
HENKILOTUNNUS: Final = "henkilotunnus"

_ADJECTIVE: Final = {NORWAY: "Norwegian", SWEDEN: "Swedish", DENMARK: "Danish", FINLAND: "Finnish"}
_DIGITS: Final = frozenset("0123456789")

# Norway. Weights of the two mod-11 check digits (Skatteetaten, "Nytt fødselsnummer fra 2032").
_NO_W1: Final = (3, 7, 6, 1, 8, 9, 4, 5, 2)
_NO_W2: Final = (5, 4, 3, 2, 7, 6, 5, 4, 3, 2)
# The remainder of (weighted digits 1-9 + K1) mod 11: today only 0; numbers issued from
# 1 January 2032 may have 0, 1, 2 or 3. K2 is unchanged: its remainder must be 0. The page
# also writes the rule as k1 = {11, 12, 13, 14} - (sum mod 11), which leaves open what a k1 of
# 11 to 14 becomes; the remainder test (the one in Skatteetaten's own validator,
# foedselsEllerDNummerValidator.js) is the tolerant reading: 11 to 14 count as 0 to 3.
_NO_OLD_K1: Final = (0,)
_NO_NEW_K1: Final = (1, 2, 3)
# From this day on the individual number no longer tells the century (Skatteetaten).
_NO_NEW_NUMBERS_FROM: Final = datetime.date(2032, 1, 1)
_NO_FIRST_YEAR: Final = 1854

# Finland: the check character of DDMMYYZZZ mod 31, and the century signs (the letters
# from the 2023 reform: Y X W V U for the 1900s, B C D E F for the 2000s).
_FI_CHECK: Final = "0123456789ABCDEFHJKLMNPRSTUVWXY"
_FI_SIGNS: Final[Mapping[int, str]] = {1800: "+", 1900: "-YXWVU", 2000: "ABCDEF"}
_FI_CENTURY: Final = {sign: century for century, signs in _FI_SIGNS.items() for sign in signs}


@dataclass(frozen=True, repr=False)
class NationalId:
    """A valid national identity number and what it says.

    ``number`` is the canonical form: Norway 11 digits; Sweden 12 digits ``YYYYMMDDNNNC``;
    Denmark 10 digits; Finland 11 upper-case characters with the century sign. ``repr()``
    shows the country, the kind and the last two characters only: the number is personal data.
    """

    number: str
    #: ISO 3166-1 alpha-2: ``"NO"``, ``"SE"``, ``"DK"`` or ``"FI"``.
    country: str
    #: One of the kind constants of this module (``FODSELSNUMMER`` ...).
    kind: str
    #: The date the number gives. It is usually, not always, the real date of birth: see the guide.
    birth_date: datetime.date
    #: Norway: the check digits are valid only under the calculation used from 2032.
    new_check_digits: bool = False
    #: Norway: a synthetic number of the test environment (Tenor; month + 80).
    synthetic: bool = False
    #: Finland: a temporary number (individual number 900-999), not in the population register.
    temporary: bool = False

    def __repr__(self) -> str:
        return (
            f"NationalId(country={self.country!r}, kind={self.kind!r}, "
            f"number='…{self.number[-2:]}')"
        )


#: How many leading characters of a canonical number tell its date of birth (and the century,
#: in Finland), and nothing else; its length.
_BIRTH_PART: Final = {NORWAY: (6, 11), SWEDEN: (8, 12), DENMARK: (6, 10), FINLAND: (7, 11)}
#: What hides a character in a masked number.
MASK: Final = "\u2022"


def mask(number: str, country: str | None) -> str:
    """``number`` with every character hidden but those that tell its date of birth.

    The individual digits and the check digits are hidden alike: with the date of birth,
    shown beside it, the last digits alone would leave a handful of candidates. A number
    whose country is not known, or not in its canonical form, is hidden whole.
    """
    keep, length = _BIRTH_PART.get(country or "", (0, 0))
    if len(number) != length:
        keep = 0
    return number[:keep] + MASK * (len(number) - keep)


class _Refused(Exception):
    """One country's rules refuse the value. ``reason`` contains no digit of it."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def parse(
    value: str, *, country: str | None = None, today: datetime.date | None = None
) -> NationalId:
    """Validate ``value`` and read it; raise ``InvalidNationalIdentityNumber`` when it is not valid.

    ``country`` (``"NO"``, ``"SE"``, ``"DK"``, ``"FI"``) says which rules apply. Without it only
    a shape that belongs to one country is read, or one that exactly one country's rules
    accept (a ten-digit number can be Swedish or Danish). ``today`` (default: the system date)
    decides what is "in the future" and, for a ten-digit Swedish number, the century.
    Surrounding whitespace is ignored; nothing else is repaired.
    """
    if today is None:
        today = datetime.date.today()
    elif isinstance(today, datetime.datetime):
        today = today.date()
    elif not isinstance(today, datetime.date):
        raise TypeError("today must be a datetime.date")
    if not isinstance(value, str):
        raise InvalidNationalIdentityNumber(
            f"National identity number: expected a string, got {type(value).__name__}."
        )
    text = value.strip()
    if country is not None:
        # The code is not echoed: a caller may have swapped the arguments.
        if not isinstance(country, str) or country not in _PARSERS:
            raise InvalidNationalIdentityNumber(
                "National identity number: unknown country code (use NO, SE, DK or FI)."
            )
        try:
            return _PARSERS[country](text, today)
        except _Refused as exc:
            raise InvalidNationalIdentityNumber(
                f"{_ADJECTIVE[country]} number: {exc.reason}"
            ) from None
    return _parse_any(text, today)


def _parse_any(text: str, today: datetime.date) -> NationalId:
    candidates = _candidates(text)
    if not candidates:
        raise InvalidNationalIdentityNumber(
            "National identity number: the format is not that of a Norwegian, Swedish, Danish "
            "or Finnish number."
        )
    found: list[NationalId] = []
    refusals: list[tuple[str, str]] = []
    for code in candidates:
        try:
            found.append(_PARSERS[code](text, today))
        except _Refused as exc:
            refusals.append((code, exc.reason))
    if len(found) == 1:
        return found[0]
    if found:
        adjectives = [_ADJECTIVE[nid.country] for nid in found]
        names = f"{', '.join(adjectives[:-1])} and {adjectives[-1]}"
        raise InvalidNationalIdentityNumber(
            f"National identity number: it is valid as a {names} number; the country must be given."
        )
    if len(refusals) == 1:
        code, reason = refusals[0]
        raise InvalidNationalIdentityNumber(f"{_ADJECTIVE[code]} number: {reason}")
    details = "; ".join(f"as {_ADJECTIVE[code]}, {reason.rstrip('.')}" for code, reason in refusals)
    raise InvalidNationalIdentityNumber(f"National identity number: not valid ({details}).")


def _candidates(text: str) -> tuple[str, ...]:
    """The countries whose format ``text`` has, when no country is given."""
    if _is_digits(text):
        return {11: (NORWAY,), 12: (SWEDEN,), 10: (SWEDEN, DENMARK)}.get(len(text), ())
    if len(text) == 13 and text[8] == "-" and _is_digits(text[:8] + text[9:]):
        return (SWEDEN,)
    if len(text) == 11 and _is_digits(text[:6]) and _is_digits(text[7:10]):
        sign, check = text[6], text[10]
        if check in _DIGITS and sign == "-":
            return (SWEDEN, DENMARK, FINLAND)
        if check in _DIGITS and sign == "+":
            # A Swedish centenarian's number has the same shape as a Finnish number of the 1800s.
            return (SWEDEN, FINLAND)
        if sign in _FI_CENTURY and check in _FI_CHECK:
            return (FINLAND,)
    return ()


# --- Norway -------------------------------------------------------------------------------


def _parse_norwegian(text: str, today: datetime.date) -> NationalId:
    if len(text) != 11 or not _is_digits(text):
        raise _Refused("it must be eleven digits (DDMMYYIIIKK).")
    day, month, yy, individual = int(text[:2]), int(text[2:4]), int(text[4:6]), int(text[6:9])
    kind, synthetic = FODSELSNUMMER, False
    if day > 40:
        kind, day = D_NUMBER, day - 40
    if month > 80:
        # Skatteetaten's test environment (Tenor) adds 80 to the month; the rule is published
        # in Skatteetaten's own validator (foedselsEllerDNummerValidator.js, "syntetisk").
        synthetic, month = True, month - 80
    elif month > 40:
        if kind == D_NUMBER:
            raise _Refused("a number cannot be both a D-number and an H-number.")
        kind, month = H_NUMBER, month - 40
    if not 1 <= month <= 12:
        raise _Refused("the month is not valid.")
    if not 1 <= day <= 31:
        raise _Refused("the day is not valid.")
    remainder = _norwegian_k1_remainder(text)
    if remainder not in _NO_OLD_K1 + _NO_NEW_K1 or _norwegian_k2_remainder(text) != 0:
        raise _Refused("the check digits do not match.")
    new_only = remainder in _NO_NEW_K1
    birth = _norwegian_birth(individual, yy, month, day, new_only=new_only, today=today)
    return NationalId(text, NORWAY, kind, birth, new_check_digits=new_only, synthetic=synthetic)


def _norwegian_birth(
    individual: int, yy: int, month: int, day: int, *, new_only: bool, today: datetime.date
) -> datetime.date:
    if not new_only:
        century = norwegian_century(individual, yy)
        birth = None if century is None else _date(century + yy, month, day)
        if birth is not None and birth <= today:
            return birth
        if today < _NO_NEW_NUMBERS_FROM:
            # Every number issued so far follows the individual-number table.
            if century is None:
                raise _Refused("the individual number does not fit the year of birth.")
            if birth is None:
                raise _Refused("the date of birth is not a real calendar date.")
            raise _Refused("the date of birth is in the future.")
    # Numbers issued from 1 January 2032 do not tell the century ("Individnummeret vil ikke
    # lenger angi århundre", Skatteetaten). A number valid only under the new check digits is
    # one of them; from 2032 on any number may be. Tolerant reading: the latest century that
    # gives a real date not in the future (the register's date of birth is the authority).
    return _latest_birth(yy, month, day, today, earliest=_NO_FIRST_YEAR)


def norwegian_century(individual: int, yy: int) -> int | None:
    """The century the individual number (digits 7-9) gives a two-digit year, or None."""
    if individual <= 499:
        return 1900
    if individual <= 749 and yy >= 54:
        return 1800
    if yy <= 39:
        return 2000
    if individual >= 900:
        return 1900
    return None


def _norwegian_k1_remainder(number: str) -> int:
    return (_weighted(number[:9], _NO_W1) + int(number[9])) % 11


def _norwegian_k2_remainder(number: str) -> int:
    return (_weighted(number[:10], _NO_W2) + int(number[10])) % 11


def _norwegian_check_digits(nine: str, remainders: Iterable[int]) -> str | None:
    """K1 and K2 for ``nine`` giving one of ``remainders`` for K1, or None if none is a digit."""
    s1 = _weighted(nine, _NO_W1)
    for remainder in remainders:
        k1 = (remainder - s1) % 11
        if k1 == 10:
            continue
        k2 = -_weighted(nine + str(k1), _NO_W2) % 11
        if k2 != 10:
            return f"{k1}{k2}"
    return None


def _norwegian_individuals(year: int) -> range:
    """The individual numbers of a birth year under today's rules, in the order tried."""
    if _NO_FIRST_YEAR <= year <= 1899:
        return range(500, 750)
    if 1900 <= year <= 1999:
        return range(0, 500)
    if 2000 <= year <= 2039:
        return range(500, 1000)
    raise ValueError(f"A Norwegian number cannot express the year {year} under today's rules.")


def compose_norwegian(
    birth_date: datetime.date,
    *,
    individual: int | None = None,
    kind: str = FODSELSNUMMER,
    new_check_digits: bool = False,
    synthetic: bool = False,
) -> str:
    """An 11-digit Norwegian number for ``birth_date`` with valid check digits.

    ``individual`` (0-999) is searched when not given: the first of the year's range under
    today's rules, or counting down from 999 for ``new_check_digits`` (Skatteetaten's plan).
    ``new_check_digits`` makes a number valid only under the calculation used from 2032.
    ``synthetic`` adds 80 to the month, as the test environment Tenor does. Raises
    ``ValueError`` when no such number exists.
    """
    if kind not in (FODSELSNUMMER, D_NUMBER, H_NUMBER):
        raise ValueError(f"Unknown Norwegian kind {kind!r}.")
    if synthetic and kind == H_NUMBER:
        raise ValueError("An H-number cannot also be synthetic (both change the month).")
    year, yy = birth_date.year, birth_date.year % 100
    if year < _NO_FIRST_YEAR:
        raise ValueError(f"Norwegian numbers start with the year {_NO_FIRST_YEAR}.")
    day = birth_date.day + (40 if kind == D_NUMBER else 0)
    month = birth_date.month + (40 if kind == H_NUMBER else 80 if synthetic else 0)
    candidates: Iterable[int]
    if individual is not None:
        if not 0 <= individual <= 999:
            raise ValueError("The individual number must be 0-999.")
        century = norwegian_century(individual, yy)
        if not new_check_digits and (century is None or century + yy != year):
            raise ValueError(f"The individual number {individual} does not fit the year {year}.")
        candidates = (individual,)
    elif new_check_digits:
        candidates = range(999, -1, -1)
    else:
        candidates = _norwegian_individuals(year)
    remainders = _NO_NEW_K1 if new_check_digits else _NO_OLD_K1
    for number in candidates:
        nine = f"{day:02d}{month:02d}{yy:02d}{number:03d}"
        checks = _norwegian_check_digits(nine, remainders)
        if checks is not None:
            return nine + checks
    raise ValueError(f"No valid check digits for {birth_date} with the individual number asked.")


# --- Sweden -------------------------------------------------------------------------------


def _parse_swedish(text: str, today: datetime.date) -> NationalId:
    sign = ""
    body = text
    if len(text) in (11, 13) and text[-5] in "-+":
        sign, body = text[-5], text[:-5] + text[-4:]
    if len(body) not in (10, 12) or not _is_digits(body):
        raise _Refused("it must be ten digits (YYMMDD-NNNC) or twelve (YYYYMMDDNNNC).")
    if len(body) == 12 and sign == "+":
        raise _Refused("a twelve-digit number carries its century and takes no plus sign.")
    short = body[-10:]
    if _luhn(short[:9]) != int(short[9]):
        raise _Refused("the check digit does not match.")
    month, day = int(short[2:4]), int(short[4:6])
    kind = PERSONNUMMER
    if day > 60:
        kind, day = SAMORDNINGSNUMMER, day - 60
    if not 1 <= month <= 12:
        raise _Refused("the month is not valid.")
    if not 1 <= day <= 31:
        raise _Refused("the day is not valid.")
    if short[6:9] == "000":
        # Skatteverket: the birth number is one of 001 to 999.
        raise _Refused("the birth number must not be zero.")
    if len(body) == 12:
        if body[:2] not in ("18", "19", "20"):
            # Skatteverket stores the century as 18, 19 or 20.
            raise _Refused("the year is outside the centuries the register uses.")
        birth = _date(int(body[:4]), month, day)
        if birth is None:
            raise _Refused("the date of birth is not a real calendar date.")
        if birth > today:
            raise _Refused("the date of birth is in the future.")
    else:
        birth = _swedish_birth(int(short[:2]), month, day, plus=sign == "+", today=today)
    canonical = f"{birth.year // 100:02d}{short}"
    return NationalId(canonical, SWEDEN, kind, birth)


def _swedish_birth(
    yy: int, month: int, day: int, *, plus: bool, today: datetime.date
) -> datetime.date:
    """The date of birth of a ten-digit number, whose century the sign tells."""
    # The latest year up to this one that ends in yy.
    latest = today.year - (today.year - yy) % 100
    if plus:
        # Folkbokföringslagen 18 §: the hyphen becomes a plus sign "det år en person fyller
        # 100 år", from the year (not the day) the person turns 100. So the year is at least
        # a hundred before this one: a century before ``latest``, birthday passed or not.
        birth = _date(latest - 100, month, day)
        if birth is None:
            raise _Refused("the date of birth is not a real calendar date.")
        return birth
    # A hyphen (or no sign): the latest century giving an age under 100 and no future date.
    # This also reads a number written with a hyphen until the hundredth birthday itself,
    # as many systems do, although the law asks for the plus sign from January of that year.
    real = False
    for year in (latest, latest - 100):
        birth = _date(year, month, day)
        if birth is None:
            continue
        real = True
        if birth <= today and _age(birth, today) < 100:
            return birth
    if not real:
        raise _Refused("the date of birth is not a real calendar date.")
    # Only when this year's date is still ahead and the earlier century has no such day.
    raise _Refused("the date of birth is in the future.")


def _luhn(digits: str) -> int:
    """The Luhn (modulus 10, weights 2 1 2 ...) check digit of ``digits``."""
    total = 0
    for i, digit in enumerate(digits):
        product = int(digit) * (2 - i % 2)
        total += product // 10 + product % 10
    return -total % 10


def compose_swedish(birth_date: datetime.date, *, serial: int, samordning: bool = False) -> str:
    """A 12-digit Swedish number ``YYYYMMDDNNNC`` with birth number ``serial`` (1-999).

    ``samordning`` adds 60 to the day (a samordningsnummer). Raises ``ValueError`` for a year
    outside 1800-2099 or a serial outside 1-999.
    """
    if not 1800 <= birth_date.year <= 2099:
        raise ValueError("A Swedish number's century is 18, 19 or 20.")
    if not 1 <= serial <= 999:
        raise ValueError("The Swedish birth number must be 1-999.")
    day = birth_date.day + (60 if samordning else 0)
    nine = f"{birth_date.year % 100:02d}{birth_date.month:02d}{day:02d}{serial:03d}"
    return f"{birth_date.year // 100:02d}{nine}{_luhn(nine)}"


def format_swedish_10(number: str, *, today: datetime.date | None = None) -> str:
    """The ten-digit form ``YYMMDD-NNNC`` of a Swedish number, ``+`` from the year of 100.

    Raises ``InvalidNationalIdentityNumber`` when ``number`` is not a valid Swedish number.
    """
    today = today or datetime.date.today()
    canonical = parse(number, country=SWEDEN, today=today).number
    sign = "+" if today.year - int(canonical[:4]) >= 100 else "-"
    return f"{canonical[2:8]}{sign}{canonical[8:]}"


# --- Denmark ------------------------------------------------------------------------------


def _parse_danish(text: str, today: datetime.date) -> NationalId:
    body = text[:6] + text[7:] if len(text) == 11 and text[6] == "-" else text
    if len(body) != 10 or not _is_digits(body):
        raise _Refused("it must be ten digits (DDMMYY-SSSS).")
    day, month, yy = int(body[:2]), int(body[2:4]), int(body[4:6])
    if not 1 <= month <= 12:
        raise _Refused("the month is not valid.")
    if not 1 <= day <= 31:
        raise _Refused("the day is not valid.")
    # No modulus-11 check: the CPR office has issued numbers without it since October 2007.
    birth = _date(_danish_century(int(body[6]), yy) + yy, month, day)
    if birth is None:
        raise _Refused("the date of birth is not a real calendar date.")
    if birth > today:
        raise _Refused("the date of birth is in the future.")
    return NationalId(body, DENMARK, CPR, birth)


def _danish_century(seventh: int, yy: int) -> int:
    """The century that the 7th digit gives a two-digit year (the CPR office's table)."""
    if seventh <= 3:
        return 1900
    if seventh in (4, 9):
        return 2000 if yy <= 36 else 1900
    return 2000 if yy <= 57 else 1800


def compose_danish(birth_date: datetime.date, *, serial: int) -> str:
    """A 10-digit CPR number for ``birth_date`` with the serial number ``serial`` (0-9999).

    The serial's first digit must give the year's century; ``ValueError`` otherwise (and for a
    year outside 1858-2057, which no CPR number expresses). No modulus-11 check digit is made.
    """
    if not 0 <= serial <= 9999:
        raise ValueError("The CPR serial number must be 0-9999.")
    yy = birth_date.year % 100
    if _danish_century(serial // 1000, yy) + yy != birth_date.year:
        raise ValueError(f"The serial {serial:04d} does not give the year {birth_date.year}.")
    return f"{birth_date.day:02d}{birth_date.month:02d}{yy:02d}{serial:04d}"


# --- Finland ------------------------------------------------------------------------------


def _parse_finnish(text: str, today: datetime.date) -> NationalId:
    if len(text) != 11:
        raise _Refused("it must be eleven characters (DDMMYYCZZZQ).")
    date_part, sign, individual, check = text[:6], text[6], text[7:10], text[10]
    if not _is_digits(date_part) or not _is_digits(individual):
        raise _Refused("the date and the individual number must be digits.")
    if sign not in _FI_CENTURY:
        raise _Refused("the century sign must be one of + - Y X W V U A B C D E F.")
    if check not in _FI_CHECK:
        raise _Refused("the check character is not one the format uses (letters are upper-case).")
    if _FI_CHECK[int(date_part + individual) % 31] != check:
        raise _Refused("the check character does not match.")
    number = int(individual)
    if number < 2:
        raise _Refused("individual numbers below two are not used.")
    day, month, yy = int(date_part[:2]), int(date_part[2:4]), int(date_part[4:])
    if not 1 <= month <= 12:
        raise _Refused("the month is not valid.")
    birth = _date(_FI_CENTURY[sign] + yy, month, day)
    if birth is None:
        raise _Refused("the date of birth is not a real calendar date.")
    if birth > today:
        raise _Refused("the date of birth is in the future.")
    # 900-999: temporary numbers (hospitals, tests), never in the population register.
    return NationalId(text, FINLAND, HENKILOTUNNUS, birth, temporary=number >= 900)


def compose_finnish(birth_date: datetime.date, *, serial: int, sign: str | None = None) -> str:
    """An 11-character henkilötunnus for ``birth_date`` with the individual number ``serial``.

    ``serial`` is 2-999 (900-999 are temporary numbers). ``sign`` defaults to the century's
    original sign (``+``, ``-`` or ``A``); a 2023 letter must belong to the century. Raises
    ``ValueError`` otherwise, and for a year outside 1800-2099.
    """
    century = birth_date.year // 100 * 100
    signs = _FI_SIGNS.get(century)
    if signs is None:
        raise ValueError("A Finnish number's year is 1800-2099.")
    if not 2 <= serial <= 999:
        raise ValueError("The Finnish individual number must be 2-999.")
    sign = signs[0] if sign is None else sign
    if len(sign) != 1 or sign not in signs:
        raise ValueError(f"The century sign {sign!r} is not one of {century}s ({signs}).")
    nine = f"{birth_date.day:02d}{birth_date.month:02d}{birth_date.year % 100:02d}{serial:03d}"
    return f"{nine[:6]}{sign}{nine[6:]}{_FI_CHECK[int(nine) % 31]}"


# --- Shared -------------------------------------------------------------------------------


_PARSERS: Final[Mapping[str, Callable[[str, datetime.date], NationalId]]] = {
    NORWAY: _parse_norwegian,
    SWEDEN: _parse_swedish,
    DENMARK: _parse_danish,
    FINLAND: _parse_finnish,
}


def _is_digits(text: str) -> bool:
    # Not str.isdigit(): that accepts "²" and other scripts' digits, which int() may then read.
    return bool(text) and all(c in _DIGITS for c in text)


def _weighted(digits: str, weights: tuple[int, ...]) -> int:
    return sum(int(d) * w for d, w in zip(digits, weights, strict=True))


def _date(year: int, month: int, day: int) -> datetime.date | None:
    """The date, or None when it is not on the calendar (31 April, 29 February 1900 ...)."""
    try:
        return datetime.date(year, month, day)
    except ValueError:
        return None


def _age(birth: datetime.date, today: datetime.date) -> int:
    return today.year - birth.year - ((today.month, today.day) < (birth.month, birth.day))


def _latest_birth(
    yy: int, month: int, day: int, today: datetime.date, *, earliest: int
) -> datetime.date:
    """The latest real date ``yy``-``month``-``day`` not after ``today`` and not before ``earliest``."""
    real = False
    year = today.year - (today.year - yy) % 100
    while year >= earliest:
        birth = _date(year, month, day)
        if birth is not None:
            real = True
            if birth <= today:
                return birth
        year -= 100
    if real:
        raise _Refused("the date of birth is in the future.")
    raise _Refused("the date of birth is not a real calendar date.")
