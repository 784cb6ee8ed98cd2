"""National identity numbers through the real flow: what is stored for each country's number.

Each built-in sandbox person identifies (start, then the broker's Success URL) with
``GET_SOCIAL_SECURITY_NUMBER`` on; the row must hold the number in its canonical form, the
country and kind it is, and the person's declared date of birth, read from the number
(which carries the century) and cross-checked with the record's two-digit ``DateOfBirth``.
Records the sandbox would not send are answered with ``eid_broker.inject``: v1's records (the
default API; what each API's record maps to: ``tests/brokers/``).
"""

from __future__ import annotations

import datetime
import logging
from collections.abc import Callable
from io import StringIO
from typing import Any

import pytest
from django.core.management import call_command
from django.test import Client

from django_eid.models import Identification
from django_eid.sandbox.broker import record_of
from django_eid.sandbox.persons import Person
from django_eid.testing import EidBroker
from tests.privacy.helpers import everything_logged

pytestmark = pytest.mark.django_db

Status = Identification.Status
START = "/eid/start/"

#: person -> (country, kind, the start of the canonical number), worked out by hand from the
#: person's declared birth date (persons.py) and their country's format.
EXPECTED: dict[str, tuple[str, str, Callable[[datetime.date], str]]] = {
    "NORWEGIAN": ("NO", "fodselsnummer", lambda b: b.strftime("%d%m%y")),
    "SWEDISH": ("SE", "personnummer", lambda b: b.strftime("%Y%m%d")),
    "DANISH": ("DK", "cpr", lambda b: b.strftime("%d%m%y")),
    "FINNISH": ("FI", "henkilotunnus", lambda b: b.strftime("%d%m%y") + "-"),
    "NO_MIDDLE_NAME": ("NO", "fodselsnummer", lambda b: b.strftime("%d%m%y")),
    "MINOR": ("NO", "fodselsnummer", lambda b: b.strftime("%d%m%y")),
    # A D-number: the day plus 40.
    "D_NUMBER": ("NO", "d-number", lambda b: f"{b.day + 40}{b:%m%y}"),
    "CENTENARIAN": ("SE", "personnummer", lambda b: b.strftime("%Y%m%d")),
    # A samordningsnummer: the day plus 60.
    "SWEDISH_COORDINATION": ("SE", "samordningsnummer", lambda b: f"{b:%Y%m}{b.day + 60}"),
    # Born in the 2000s, with one of the 2023 reform's century letters.
    "FINNISH_2023": ("FI", "henkilotunnus", lambda b: b.strftime("%d%m%y") + "B"),
    "CHILD": ("NO", "fodselsnummer", lambda b: b.strftime("%d%m%y")),
}
LENGTHS = {"NO": 11, "SE": 12, "DK": 10, "FI": 11}


@pytest.fixture
def with_numbers(eid: Callable[..., None]) -> None:
    eid(GET_SOCIAL_SECURITY_NUMBER=True)


def identify(client: Client, eid_broker: EidBroker, person: Person) -> Identification:
    """Start as the start page's form does and come back from the broker as ``person``."""
    response = client.post(START)
    assert response.status_code == 302, response.content.decode()
    callback = client.get(eid_broker.complete(person))
    assert callback.status_code == 302, callback.content.decode()
    return Identification.objects.get()


def identify_with_record(
    client: Client,
    eid_broker: EidBroker,
    person: Person,
    change: Callable[[dict[str, Any]], None],
) -> Identification:
    """As :func:`identify`, the retrieved record being ``person``'s changed by ``change``."""
    response = client.post(START)
    assert response.status_code == 302, response.content.decode()
    url = eid_broker.complete(person)
    request_id = eid_broker.sessions[-1].request_id
    body = record_of(person, request_id)
    change(body)
    eid_broker.inject("retrieve", body=body, request_id=request_id)
    assert client.get(url).status_code == 302
    return Identification.objects.get()


# -- every built-in person ---------------------------------------------------------------------
@pytest.mark.usefixtures("with_numbers")
@pytest.mark.parametrize("key", sorted(EXPECTED))
def test_each_persons_number_country_kind_and_birth_date(
    alice_client: Client, eid_broker: EidBroker, key: str
) -> None:
    person = getattr(eid_broker.persons, key)
    assert_stored(identify(alice_client, eid_broker, person), person, key)


#: One person of each country: the OpenID presets name each country's number differently.
EACH_COUNTRY = ["NORWEGIAN", "SWEDISH", "DANISH", "FINNISH"]


@pytest.mark.usefixtures("with_numbers")
@pytest.mark.parametrize("key", EACH_COUNTRY)
def test_each_api_s_record_gives_the_same_number_country_kind_and_birth_date(
    broker_api: str, alice_client: Client, eid_broker: EidBroker, key: str
) -> None:
    # v1's SocialSecurityNumber, the successors' fields, each OpenID preset's claim for the
    # eID of each country (socialno, ssn, cprNumberIdentifier, hetu ...): stored the same.
    person = getattr(eid_broker.persons, key)
    assert_stored(identify(alice_client, eid_broker, person), person, key)


def assert_stored(row: Identification, person: Person, key: str) -> None:
    """``row`` holds the number of ``person`` (the built-in ``key``) as :data:`EXPECTED` says."""
    country, kind, prefix = EXPECTED[key]
    assert row.status == Status.SUCCESS
    assert (row.national_id_country, row.national_id_kind) == (country, kind)
    assert row.date_of_birth == person.birth_date
    number = row.social_security_number
    assert number == person.national_identity_number
    assert len(number) == LENGTHS[country]
    assert number.startswith(prefix(person.birth_date)), (key, prefix(person.birth_date))
    assert row.social_security_number_hash  # findable
    assert Identification.objects.with_social_security_number(number).get() == row
    assert "SocialSecurityNumber" not in row.raw


def test_every_built_in_person_is_covered(eid_broker: EidBroker) -> None:
    assert {person.key for person in eid_broker.persons} == set(EXPECTED)


@pytest.mark.usefixtures("with_numbers")
def test_the_centenarian_is_born_in_1924_not_2024(
    alice_client: Client, eid_broker: EidBroker, caplog: pytest.LogCaptureFixture
) -> None:
    person = eid_broker.persons.CENTENARIAN
    assert person.date_of_birth == "170524"  # the record's two digits would say 2024
    with caplog.at_level(logging.WARNING, logger="django_eid"):
        row = identify(alice_client, eid_broker, person)
    assert row.date_of_birth == datetime.date(1924, 5, 17)
    assert row.age is not None
    assert row.age >= 100
    # Only the century differs from DateOfBirth: not a disagreement.
    assert "disagrees" not in caplog.text


# -- canonical forms -------------------------------------------------------------------------
@pytest.mark.usefixtures("with_numbers")
@pytest.mark.parametrize(
    ("key", "as_sent", "canonical"),
    [
        # Swedish ten-digit forms get their century; the plus sign says "a hundred or more".
        ("SWEDISH", lambda n: f"{n[2:8]}-{n[8:]}", lambda n: n),
        ("SWEDISH", lambda n: n[2:], lambda n: n),
        ("CENTENARIAN", lambda n: f"{n[2:8]}+{n[8:]}", lambda n: n),
        # A Danish number loses its hyphen.
        ("DANISH", lambda n: f"{n[:6]}-{n[6:]}", lambda n: n),
        # Surrounding whitespace is not part of a number.
        ("NORWEGIAN", lambda n: f" {n} ", lambda n: n),
    ],
    ids=["swedish-hyphen", "swedish-ten-digits", "swedish-plus", "danish-hyphen", "spaces"],
)
def test_a_number_is_stored_in_its_canonical_form(
    alice_client: Client,
    eid_broker: EidBroker,
    key: str,
    as_sent: Callable[[str], str],
    canonical: Callable[[str], str],
) -> None:
    person = getattr(eid_broker.persons, key)
    number = person.national_identity_number
    sent = as_sent(number)
    assert sent != number

    def send(body: dict[str, Any]) -> None:
        body["SocialSecurityNumber"] = sent

    row = identify_with_record(alice_client, eid_broker, person, send)
    assert row.social_security_number == canonical(number)
    assert row.date_of_birth == person.birth_date
    # Both spellings find the row.
    assert Identification.objects.with_social_security_number(canonical(number)).get() == row


# -- DateOfBirth and the number --------------------------------------------------------------
@pytest.mark.usefixtures("with_numbers")
@pytest.mark.parametrize("key", ["NORWEGIAN", "CENTENARIAN", "D_NUMBER"])
@pytest.mark.parametrize("how", ["missing", "null"])
def test_without_date_of_birth_the_date_comes_from_the_number(
    alice_client: Client, eid_broker: EidBroker, key: str, how: str
) -> None:
    person = getattr(eid_broker.persons, key)

    def drop(body: dict[str, Any]) -> None:
        if how == "missing":
            del body["DateOfBirth"]
        else:
            body["DateOfBirth"] = None

    row = identify_with_record(alice_client, eid_broker, person, drop)
    assert row.status == Status.SUCCESS
    assert row.date_of_birth == person.birth_date
    assert row.national_id_country == EXPECTED[key][0]


@pytest.mark.usefixtures("with_numbers")
def test_a_date_of_birth_disagreeing_with_the_number_yields_to_it_and_is_logged(
    alice_client: Client, eid_broker: EidBroker, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    person = eid_broker.persons.NORWEGIAN  # born 14 March 1985
    number = person.national_identity_number

    def disagree(body: dict[str, Any]) -> None:
        body["DateOfBirth"] = "010190"

    row = identify_with_record(alice_client, eid_broker, person, disagree)
    assert row.status == Status.SUCCESS
    assert row.date_of_birth == datetime.date(1985, 3, 14)
    warnings = [
        r
        for r in caplog.records
        if r.levelno == logging.WARNING and r.name == "django_eid" and "disagrees" in r.getMessage()
    ]
    assert len(warnings) == 1
    logged = everything_logged(caplog)
    for secret in (
        number,
        number[:6],
        number[6:],
        "010190",
        "140385",
        "1985-03-14",
        "1990-01-01",
        "14.03.1985",
        "01.01.1990",
        "1985",
        "1990",
    ):
        assert secret not in logged, secret


@pytest.mark.usefixtures("with_numbers")
def test_an_agreeing_date_of_birth_logs_no_warning(
    alice_client: Client, eid_broker: EidBroker, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="django_eid"):
        row = identify(alice_client, eid_broker, eid_broker.persons.D_NUMBER)
    assert row.date_of_birth == datetime.date(1988, 4, 21)
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]


# -- numbers that are not valid --------------------------------------------------------------
def bad_check_digit(number: str) -> str:
    """``number`` with its check digit (or Finnish check character) changed."""
    last = number[-1]
    changed = str((int(last) + 1) % 10) if last.isdigit() else ("A" if last != "A" else "B")
    return number[:-1] + changed


@pytest.mark.usefixtures("with_numbers")
@pytest.mark.parametrize(
    ("key", "date_of_birth", "expected"),
    [
        # The Norwegian individual number (0-499) still tells DateOfBirth's century: 1900s.
        ("NORWEGIAN", "020386", datetime.date(1986, 3, 2)),
        ("SWEDISH", "020879", datetime.date(1979, 8, 2)),
        ("FINNISH", "090692", datetime.date(1992, 6, 9)),
    ],
)
def test_an_invalid_number_is_stored_as_received_without_country_or_kind(
    alice_client: Client,
    eid_broker: EidBroker,
    key: str,
    date_of_birth: str,
    expected: datetime.date,
) -> None:
    person = getattr(eid_broker.persons, key)
    invalid = bad_check_digit(person.national_identity_number)

    def break_it(body: dict[str, Any]) -> None:
        body["SocialSecurityNumber"] = invalid
        body["DateOfBirth"] = date_of_birth

    row = identify_with_record(alice_client, eid_broker, person, break_it)
    assert row.status == Status.SUCCESS
    assert row.social_security_number == invalid
    assert (row.national_id_country, row.national_id_kind) == ("", "")
    assert row.date_of_birth == expected
    assert Identification.objects.with_social_security_number(invalid).get() == row


# -- without the number --------------------------------------------------------------------
@pytest.mark.parametrize("key", ["NORWEGIAN", "SWEDISH", "DANISH", "FINNISH", "D_NUMBER"])
def test_without_get_social_security_number_nothing_of_the_number_is_stored(
    alice_client: Client, eid_broker: EidBroker, eid: Callable[..., None], key: str
) -> None:
    eid(GET_SOCIAL_SECURITY_NUMBER=False)
    person = getattr(eid_broker.persons, key)
    row = identify(alice_client, eid_broker, person)
    assert eid_broker.create_requests[-1]["GetSocialSecurityNumber"] is False
    assert row.status == Status.SUCCESS
    assert row.social_security_number is None
    assert row.social_security_number_hash is None
    assert (row.national_id_country, row.national_id_kind) == ("", "")
    assert row.masked_social_security_number == ""
    # The date of birth is still the record's.
    assert row.date_of_birth == person.birth_date
    assert not [k for k in row.raw if k.lower() == "socialsecuritynumber"]


def test_without_get_social_security_number_an_unasked_number_is_not_stored(
    alice_client: Client, eid_broker: EidBroker, eid: Callable[..., None]
) -> None:
    eid(GET_SOCIAL_SECURITY_NUMBER=False)
    person = eid_broker.persons.NORWEGIAN

    def add_number(body: dict[str, Any]) -> None:
        # A broker (or an agreement) that returns the number although it was not asked for.
        body["SocialSecurityNumber"] = person.national_identity_number

    row = identify_with_record(alice_client, eid_broker, person, add_number)
    assert eid_broker.create_requests[-1]["GetSocialSecurityNumber"] is False
    assert row.status == Status.SUCCESS
    assert row.date_of_birth == person.birth_date
    assert row.social_security_number is None
    assert row.social_security_number_hash is None
    assert (row.national_id_country, row.national_id_kind) == ("", "")


# -- retention ------------------------------------------------------------------------------
@pytest.mark.usefixtures("with_numbers")
def test_eid_purge_anonymize_blanks_the_country_and_kind(
    alice_client: Client, eid_broker: EidBroker
) -> None:
    row = identify(alice_client, eid_broker, eid_broker.persons.SWEDISH_COORDINATION)
    assert (row.national_id_country, row.national_id_kind) == ("SE", "samordningsnummer")
    call_command("eid_purge", "--older-than", "0", "--anonymize", "--force", stdout=StringIO())
    row.refresh_from_db()
    assert row.anonymized_at is not None
    assert (row.national_id_country, row.national_id_kind) == ("", "")
    assert row.social_security_number is None
    assert row.social_security_number_hash is None
    assert row.date_of_birth is None
    assert row.status == Status.SUCCESS  # kept for statistics
    assert row.identity_provider == "SWE_BANKID"
