"""The sandbox's built-in test persons, and valid-looking national identity numbers.

Every person gets an 11-digit number in the Norwegian format (the one the wire
format describes): ``ddMMyy``, three individual digits that fix the century, and
two mod-11 check digits. The numbers are computed, not real: they pass the
checksum, and the date in them is the person's date of birth. The minor is
born relative to today, so they stay under 18 whatever day the tests run.
"""

from __future__ import annotations

import dataclasses
import datetime
from typing import NamedTuple

_W1 = (3, 7, 6, 1, 8, 9, 4, 5, 2)
_W2 = (5, 4, 3, 2, 7, 6, 5, 4, 3, 2)
#: What the sandbox reports as the user's environment when no browser is involved.
DEFAULT_USER_AGENT = "Mozilla/5.0 (X11; Linux x86_64) django-eid-sandbox"


def _check_digit(digits: str, weights: tuple[int, ...]) -> int | None:
    remainder = sum(int(d) * w for d, w in zip(digits, weights, strict=True)) % 11
    check = (11 - remainder) % 11
    return None if check == 10 else check


def _individual_range(year: int) -> range:
    # The individual digits (positions 7-9) tell the century of a two-digit year.
    if 1900 <= year <= 1999:
        return range(0, 500)
    if 2000 <= year <= 2039:
        return range(500, 1000)
    raise ValueError(f"no Norwegian individual-number range for year {year}")


def make_identity_number(birth: datetime.date, *, start: int = 0, d_number: bool = False) -> str:
    """An 11-digit number for ``birth`` with valid check digits.

    ``start`` picks where to look in the century's individual-number range, so
    two persons born the same day get different numbers. A D-number adds 4 to
    the first digit (foreigners without a birth number).
    """
    day = birth.day + (40 if d_number else 0)
    date_part = f"{day:02d}{birth.month:02d}{birth.year % 100:02d}"
    candidates = _individual_range(birth.year)
    size = len(candidates)
    for offset in range(size):
        individual = candidates[(start + offset) % size]
        base = f"{date_part}{individual:03d}"
        k1 = _check_digit(base, _W1)
        if k1 is None:
            continue
        k2 = _check_digit(base + str(k1), _W2)
        if k2 is not None:
            return f"{base}{k1}{k2}"
    raise ValueError(f"no valid number for {birth}")  # pragma: no cover (never for real dates)


def is_valid_national_identity_number(value: str) -> bool:
    """Eleven digits whose two check digits are right (birth and D-numbers alike)."""
    if len(value) != 11 or not value.isascii() or not value.isdigit():
        return False
    first_ok = _check_digit(value[:9], _W1) == int(value[9])
    return first_ok and _check_digit(value[:10], _W2) == int(value[10])


@dataclasses.dataclass(frozen=True)
class Person:
    """Someone who can identify at the sandbox; the fields of the retrieved record."""

    key: str
    first_name: str
    middle_name: str | None
    last_name: str
    birth_date: datetime.date
    national_identity_number: str
    #: The provider this person uses when the session leaves the choice open.
    identity_provider: str
    identity_provider_unique_id: str | None
    user_agent: str = DEFAULT_USER_AGENT
    ip_address: str = "203.0.113.7"

    @property
    def name(self) -> str:
        """``"<last>, <first> <middle>"``, as the broker writes it."""
        given = " ".join(p for p in (self.first_name, self.middle_name) if p)
        return f"{self.last_name}, {given}"

    @property
    def date_of_birth(self) -> str:
        """``ddMMyy``."""
        return self.birth_date.strftime("%d%m%y")

    @property
    def is_minor(self) -> bool:
        today = datetime.date.today()
        born = self.birth_date
        return today.year - born.year - ((today.month, today.day) < (born.month, born.day)) < 18


class Persons(NamedTuple):
    """The built-in persons, by attribute (``persons.NORWEGIAN``) or in order."""

    NORWEGIAN: Person
    SWEDISH: Person
    DANISH: Person
    FINNISH: Person
    NO_MIDDLE_NAME: Person
    MINOR: Person
    D_NUMBER: Person

    def get(self, key: str) -> Person | None:
        """The person whose ``key`` is ``key``, or ``None``."""
        return next((p for p in self if p.key == key), None)


def _years_ago(today: datetime.date, years: int) -> datetime.date:
    try:
        return today.replace(year=today.year - years)
    except ValueError:  # 29 February in a year without one
        return today.replace(year=today.year - years, day=28)


def _person(
    key: str,
    first: str,
    middle: str | None,
    last: str,
    birth: datetime.date,
    provider: str,
    unique_id: str,
    *,
    start: int,
    d_number: bool = False,
    ip: str,
) -> Person:
    number = make_identity_number(birth, start=start, d_number=d_number)
    return Person(key, first, middle, last, birth, number, provider, unique_id, ip_address=ip)


def builtin_persons(today: datetime.date | None = None) -> Persons:
    """The built-in persons as of ``today`` (the minor's birth date depends on it)."""
    today = today or datetime.date.today()
    d = datetime.date
    return Persons(
        NORWEGIAN=_person(
            "NORWEGIAN", "Kari", "Marie", "Nordmann", d(1985, 3, 14), "NO_BANKID_WEB",
            "9578-6000-4-112233", start=123, ip="203.0.113.10",
        ),
        SWEDISH=_person(
            "SWEDISH", "Astrid", "Linnéa", "Lindqvist", d(1979, 8, 2), "SWE_BANKID",
            "SE-197908020000", start=211, ip="203.0.113.11",
        ),
        DANISH=_person(
            "DANISH", "Søren", "Aabye", "Kjærgaard", d(1966, 11, 25), "DA_NEMID",
            "PID:9208-2002-2-741852", start=305, ip="203.0.113.12",
        ),
        FINNISH=_person(
            "FINNISH", "Aino", "Helmi", "Virtanen", d(1992, 6, 9), "FI_TUPAS",
            "FI-TUPAS-090692-77", start=412, ip="203.0.113.13",
        ),
        NO_MIDDLE_NAME=_person(
            "NO_MIDDLE_NAME", "Ola", None, "Nordmann", d(1990, 1, 5), "NO_BUYPASS",
            "9578-6000-4-445566", start=77, ip="203.0.113.14",
        ),
        MINOR=_person(
            "MINOR", "Emma", None, "Hansen", _years_ago(today, 15), "NO_BANKID_MOBILE",
            "9578-6000-4-778899", start=640, ip="203.0.113.15",
        ),
        D_NUMBER=_person(
            "D_NUMBER", "Jan", "Piotr", "Kowalski", d(1988, 4, 21), "NO_BUYPASS",
            "9578-6000-4-990011", start=250, d_number=True, ip="203.0.113.16",
        ),
    )  # fmt: skip


def custom_person(
    *,
    first_name: str,
    last_name: str,
    birth_date: datetime.date,
    middle_name: str | None = None,
    national_identity_number: str | None = None,
    identity_provider: str = "NO_BANKID_WEB",
) -> Person:
    """A person typed in on the login page; a number is made up when none is given."""
    number = national_identity_number or make_identity_number(birth_date)
    return Person(
        key="CUSTOM",
        first_name=first_name,
        middle_name=middle_name or None,
        last_name=last_name,
        birth_date=birth_date,
        national_identity_number=number,
        identity_provider=identity_provider,
        identity_provider_unique_id=f"SANDBOX-{number}",
    )
