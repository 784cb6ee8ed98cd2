"""The sandbox's built-in test persons, with national identity numbers of their own country.

Each person's number is in the real format of their country (a Norwegian fødselsnummer or
D-number, a Swedish personnummer or samordningsnummer, a Danish CPR number, a Finnish
henkilötunnus), composed by :mod:`django_eid.national_id` from the person's date of birth:
the numbers pass their country's checks, and the date in them is the person's. They are
made up, not real. The minor and the child are born relative to today, so they stay under
18 (and 13) whatever day the tests run; the centenarian stays over 100.
"""

from __future__ import annotations

import dataclasses
import datetime
from typing import NamedTuple

from django_eid import national_id, vocabulary
from django_eid.exceptions import InvalidNationalIdentityNumber

#: What the sandbox reports as the user's environment when no browser is involved.
DEFAULT_USER_AGENT = "Mozilla/5.0 (X11; Linux x86_64) django-eid-sandbox"


def make_identity_number(birth: datetime.date, *, start: int = 0, d_number: bool = False) -> str:
    """An 11-digit Norwegian number for ``birth`` with valid check digits.

    ``start`` picks where to look in the century's individual-number range, so two persons
    born the same day get different numbers. A D-number adds 4 to the first digit
    (foreigners without a birth number).
    """
    kind = national_id.D_NUMBER if d_number else national_id.FODSELSNUMMER
    first = 0 if birth.year < 2000 else 500
    size = 500
    for offset in range(size):
        individual = first + (start + offset) % size
        try:
            return national_id.compose_norwegian(birth, individual=individual, kind=kind)
        except ValueError:
            continue
    raise ValueError(f"no valid number for {birth}")  # pragma: no cover (never for real dates)


def make_number_for(birth: datetime.date, provider: str | None, *, serial: int = 0) -> str:
    """A valid number for ``birth`` in the format of ``provider``'s country (Norway's if none)."""
    country = vocabulary.provider_country(provider) or national_id.NORWAY
    if country == national_id.SWEDEN:
        return national_id.compose_swedish(birth, serial=serial % 999 + 1)
    if country == national_id.DENMARK:
        # The first digit of the serial tells the century: 0-3 for the 1900s, 4 for the 2000s.
        first = 0 if birth.year < 2000 else 4
        return national_id.compose_danish(birth, serial=first * 1000 + serial % 1000)
    if country == national_id.FINLAND:
        return national_id.compose_finnish(birth, serial=serial % 898 + 2)
    return make_identity_number(birth, start=serial)


def is_valid_national_identity_number(value: str) -> bool:
    """Whether ``value`` is a valid Norwegian, Swedish, Danish or Finnish number.

    A ten-digit number is valid when it is valid in Sweden or in Denmark.
    """
    for country in (None, national_id.SWEDEN, national_id.DENMARK, national_id.FINLAND):
        try:
            national_id.parse(value, country=country)
        except InvalidNationalIdentityNumber:
            continue
        return True
    return False


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
    CENTENARIAN: Person
    SWEDISH_COORDINATION: Person
    FINNISH_2023: Person
    CHILD: Person

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
    number: str,
    *,
    ip: str,
) -> Person:
    return Person(key, first, middle, last, birth, number, provider, unique_id, ip_address=ip)


def builtin_persons(today: datetime.date | None = None) -> Persons:
    """The built-in persons as of ``today`` (the minor's and the child's birth dates depend on it)."""
    today = today or datetime.date.today()
    d = datetime.date
    nid = national_id
    minor, child = _years_ago(today, 15), _years_ago(today, 10)
    return Persons(
        NORWEGIAN=_person(
            "NORWEGIAN", "Kari", "Marie", "Nordmann", d(1985, 3, 14), "NO_BANKID_WEB",
            "9578-6000-4-112233", make_identity_number(d(1985, 3, 14), start=123),
            ip="203.0.113.10",
        ),
        SWEDISH=_person(
            "SWEDISH", "Astrid", "Linnéa", "Lindqvist", d(1979, 8, 2), "SWE_BANKID",
            "SE-197908020000", nid.compose_swedish(d(1979, 8, 2), serial=211),
            ip="203.0.113.11",
        ),
        DANISH=_person(
            "DANISH", "Søren", "Aabye", "Kjærgaard", d(1966, 11, 25), "DA_NEMID",
            "PID:9208-2002-2-741852", nid.compose_danish(d(1966, 11, 25), serial=3057),
            ip="203.0.113.12",
        ),
        FINNISH=_person(
            "FINNISH", "Aino", "Helmi", "Virtanen", d(1992, 6, 9), "FI_TUPAS",
            "FI-TUPAS-090692-77", nid.compose_finnish(d(1992, 6, 9), serial=412),
            ip="203.0.113.13",
        ),
        NO_MIDDLE_NAME=_person(
            "NO_MIDDLE_NAME", "Ola", None, "Nordmann", d(1990, 1, 5), "NO_BUYPASS",
            "9578-6000-4-445566", make_identity_number(d(1990, 1, 5), start=77),
            ip="203.0.113.14",
        ),
        MINOR=_person(
            "MINOR", "Emma", None, "Hansen", minor, "NO_BANKID_MOBILE",
            "9578-6000-4-778899", make_identity_number(minor, start=140), ip="203.0.113.15",
        ),
        D_NUMBER=_person(
            "D_NUMBER", "Jan", "Piotr", "Kowalski", d(1988, 4, 21), "NO_BUYPASS",
            "9578-6000-4-990011", make_identity_number(d(1988, 4, 21), start=250, d_number=True),
            ip="203.0.113.16",
        ),
        # Born 1924: a two-digit year alone would make her a child; the number says 1924.
        CENTENARIAN=_person(
            "CENTENARIAN", "Märta", None, "Karlsson", d(1924, 5, 17), "SWE_BANKID",
            "SE-192405170000", nid.compose_swedish(d(1924, 5, 17), serial=318),
            ip="203.0.113.17",
        ),
        # A samordningsnummer: the day of birth plus 60.
        SWEDISH_COORDINATION=_person(
            "SWEDISH_COORDINATION", "Tomas", None, "Novak", d(1991, 2, 11), "SWE_BANKID",
            "SE-199102110000",
            nid.compose_swedish(d(1991, 2, 11), serial=427, samordning=True),
            ip="203.0.113.18",
        ),
        # A number issued after the 2023 reform, with one of its new century signs.
        FINNISH_2023=_person(
            "FINNISH_2023", "Liisa", "Maria", "Korhonen", d(2001, 9, 30), "FI_MOBIILIVARMENNE",
            "FI-MOBIILI-300901-21", nid.compose_finnish(d(2001, 9, 30), serial=215, sign="B"),
            ip="203.0.113.19",
        ),
        CHILD=_person(
            "CHILD", "Noah", None, "Berg", child, "NO_BANKID_MOBILE",
            "9578-6000-4-121212", make_identity_number(child, start=321), ip="203.0.113.20",
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
    """A person typed in on the login page; a number in the provider's country's format is
    made up when none is given."""
    number = national_identity_number or make_number_for(birth_date, identity_provider)
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
