"""The sandbox's built-in persons and the persons it makes up: names, dates of birth, and
national identity numbers valid in their country, whatever the day of the test."""

from __future__ import annotations

import datetime

import pytest

from django_eid import national_id
from django_eid.brokers.v1 import parse_record
from django_eid.records import parse_birth_date
from django_eid.sandbox.broker import record_of
from django_eid.sandbox.persons import (
    builtin_persons,
    custom_person,
    is_valid_national_identity_number,
    make_identity_number,
)


def test_builtin_persons_cover_the_cases_of_the_issue() -> None:
    persons = builtin_persons()
    providers = {p.identity_provider.split("_")[0] for p in persons}
    assert {"NO", "SWE", "DA", "FI"} <= providers
    assert persons.NO_MIDDLE_NAME.middle_name is None
    assert persons.NO_MIDDLE_NAME.name == "Nordmann, Ola"
    assert persons.MINOR.is_minor
    assert persons.CHILD.is_minor
    assert not any(p.is_minor for p in persons if p not in (persons.MINOR, persons.CHILD))
    assert int(persons.D_NUMBER.national_identity_number[0]) >= 4
    assert len({p.national_identity_number for p in persons}) == len(persons)
    assert all(p.identity_provider_unique_id for p in persons)
    assert persons.get("MINOR") is persons.MINOR
    assert persons.get("NOBODY") is None


#: Each built-in person's country and kind of number, in that country's real format.
KINDS = {
    "NORWEGIAN": ("NO", "fodselsnummer", 11),
    "SWEDISH": ("SE", "personnummer", 12),
    "DANISH": ("DK", "cpr", 10),
    "FINNISH": ("FI", "henkilotunnus", 11),
    "NO_MIDDLE_NAME": ("NO", "fodselsnummer", 11),
    "MINOR": ("NO", "fodselsnummer", 11),
    "D_NUMBER": ("NO", "d-number", 11),
    "CENTENARIAN": ("SE", "personnummer", 12),
    "SWEDISH_COORDINATION": ("SE", "samordningsnummer", 12),
    "FINNISH_2023": ("FI", "henkilotunnus", 11),
    "CHILD": ("NO", "fodselsnummer", 11),
}
TODAYS = [datetime.date(2024, 2, 29), datetime.date(2026, 1, 1), datetime.date(2039, 12, 31)]


@pytest.mark.parametrize("today", TODAYS)
def test_numbers_are_valid_in_their_country_and_carry_the_date_of_birth(
    today: datetime.date,
) -> None:
    persons = builtin_persons(today)
    assert {p.key for p in persons} == set(KINDS)
    for person in persons:
        country, kind, length = KINDS[person.key]
        number = person.national_identity_number
        read = national_id.parse(number, country=country, today=today)
        assert (read.country, read.kind, len(number)) == (country, kind, length), person.key
        assert read.birth_date == person.birth_date, person.key
    assert today.year - persons.CENTENARIAN.birth_date.year >= 100
    assert persons.FINNISH_2023.national_identity_number[6] == "B"  # a 2023 century sign


def test_the_centenarians_number_tells_what_her_date_of_birth_cannot() -> None:
    centenarian = builtin_persons().CENTENARIAN
    today = datetime.date(2026, 1, 1)
    # "170524" alone reads as 2024: a child of one.
    assert parse_birth_date(centenarian.date_of_birth, today=today) == datetime.date(2024, 5, 17)
    record = parse_record(record_of(centenarian, "r-1"))
    assert record.birth_date == datetime.date(1924, 5, 17)


@pytest.mark.parametrize("today", TODAYS)
def test_norwegian_numbers_give_the_app_the_century(today: datetime.date) -> None:
    for person in builtin_persons(today):
        country = KINDS[person.key][0]
        if country != "NO":
            continue
        number = person.national_identity_number
        day = int(number[:2]) - (40 if person.key == "D_NUMBER" else 0)
        assert f"{day:02d}{number[2:6]}" == person.date_of_birth
        # The app's century rule, from the individual digits, finds the same date.
        assert parse_birth_date(person.date_of_birth, number, today=today) == person.birth_date


def test_the_minor_is_born_relative_to_today() -> None:
    minor = builtin_persons(datetime.date(2024, 2, 29)).MINOR
    assert minor.birth_date == datetime.date(2009, 2, 28)
    assert 500 <= int(minor.national_identity_number[6:9]) <= 999  # born in the 2000s


def test_numbers_for_the_same_day_differ_by_start() -> None:
    day = datetime.date(1970, 5, 17)
    assert make_identity_number(day) != make_identity_number(day, start=300)
    assert not is_valid_national_identity_number("12345678901")
    assert not is_valid_national_identity_number("1234567890")


def test_custom_person_gets_a_number_when_none_is_typed() -> None:
    person = custom_person(
        first_name="Per", last_name="Hansen", birth_date=datetime.date(1950, 7, 1)
    )
    assert is_valid_national_identity_number(person.national_identity_number)
    assert person.date_of_birth == "010750"
    typed = custom_person(
        first_name="Per",
        last_name="Hansen",
        birth_date=datetime.date(1950, 7, 1),
        national_identity_number="01075012345",
    )
    assert typed.national_identity_number == "01075012345"


@pytest.mark.parametrize(
    ("provider", "country", "kind"),
    [
        ("NO_BANKID_WEB", "NO", "fodselsnummer"),
        ("SWE_BANKID", "SE", "personnummer"),
        ("DA_NEMID", "DK", "cpr"),
        ("FI_TUPAS", "FI", "henkilotunnus"),
    ],
)
def test_a_made_up_number_has_the_format_of_the_providers_country(
    provider: str, country: str, kind: str
) -> None:
    born = datetime.date(2003, 12, 31)
    person = custom_person(
        first_name="Per", last_name="Hansen", birth_date=born, identity_provider=provider
    )
    read = national_id.parse(person.national_identity_number, country=country)
    assert (read.kind, read.birth_date) == (kind, born)
