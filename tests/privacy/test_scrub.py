"""django_eid.scrub: every written form of a Nordic national identity number, tokens and
credentials are hidden from broker texts; ordinary ids, timestamps and words are not."""

from __future__ import annotations

import base64
import datetime
import json
from typing import Any
from urllib.parse import quote_plus

import pytest

from django_eid.national_id import (
    D_NUMBER,
    H_NUMBER,
    compose_danish,
    compose_finnish,
    compose_norwegian,
    compose_swedish,
    format_swedish_10,
    parse,
)
from django_eid.scrub import REDACTED, is_secret_key, scrub, scrub_json
from tests.fixtures_broker import ACCESS_TOKEN, SSN, new_request_id
from tests.fixtures_client import CLIENT_ID, SECRET

D = datetime.date
TODAY = D(2026, 11, 23)
SE_1985 = compose_swedish(D(1985, 7, 14), serial=238)
SE_OLD = compose_swedish(D(1920, 3, 5), serial=11)
FI_1985 = compose_finnish(D(1985, 7, 14), serial=238)

#: Every form of a number the brokers (and people typing them) write, by name.
NUMBERS: dict[str, str] = {
    "NO fodselsnummer": SSN,
    "NO 11 digits, 2000s": compose_norwegian(D(2005, 2, 1)),
    "NO D-number": compose_norwegian(D(1985, 7, 14), kind=D_NUMBER),
    "NO H-number": compose_norwegian(D(1985, 7, 14), kind=H_NUMBER),
    "NO synthetic (Tenor)": compose_norwegian(D(1985, 7, 14), synthetic=True),
    "NO check digits of 2032": compose_norwegian(D(1985, 7, 14), new_check_digits=True),
    "NO spaced DDMMYY NNNNN": f"{SSN[:6]} {SSN[6:]}",
    "NO spaced DDMMYY NNN NN": f"{SSN[:6]} {SSN[6:9]} {SSN[9:]}",
    "NO with a non-breaking space": f"{SSN[:6]}\u00a0{SSN[6:]}",
    "SE 12 digits": SE_1985,
    "SE 12 digits with -": f"{SE_1985[:8]}-{SE_1985[8:]}",
    "SE 12 digits spaced": f"{SE_1985[:8]} {SE_1985[8:]}",
    "SE 10 digits": SE_1985[2:],
    "SE 10 digits with -": format_swedish_10(SE_1985, today=TODAY),
    "SE 10 digits with + (100 or older)": format_swedish_10(SE_OLD, today=TODAY),
    "SE 10 digits spaced": f"{SE_1985[2:8]} {SE_1985[8:]}",
    "SE samordningsnummer": compose_swedish(D(1985, 7, 14), serial=238, samordning=True),
    "SE samordningsnummer, 10 digits": compose_swedish(D(1985, 7, 14), serial=238, samordning=True)[
        2:
    ],
    "DK 10 digits": compose_danish(D(1985, 7, 14), serial=1234),
    "DK with -": "140785-1234",
    "DK spaced": "140785 1234",
    "DK 2000s": compose_danish(D(2005, 2, 1), serial=4321),
    "FI with -": FI_1985,
    "FI with +": compose_finnish(D(1885, 7, 14), serial=238),
    "FI with A": compose_finnish(D(2005, 2, 1), serial=238),
    "FI temporary (900-999)": compose_finnish(D(1985, 7, 14), serial=938),
    **{
        f"FI with the 2023 sign {sign}": compose_finnish(D(1985, 7, 14), serial=238, sign=sign)
        for sign in "YXWVU"
    },
    **{
        f"FI with the 2023 sign {sign}": compose_finnish(D(2005, 2, 1), serial=238, sign=sign)
        for sign in "BCDEF"
    },
    "FI with a check letter": compose_finnish(D(1985, 7, 14), serial=244),
}


def test_the_numbers_are_what_their_names_say() -> None:
    """The table is made of valid numbers (and the check letter case is a letter)."""
    for name, number in NUMBERS.items():
        if "spaced" not in name and "space" not in name:
            parse(number, country=name[:2], today=TODAY)
    assert NUMBERS["FI with a check letter"][-1].isalpha()
    assert NUMBERS["SE 10 digits with + (100 or older)"][6] == "+"


@pytest.mark.parametrize("name", list(NUMBERS))
@pytest.mark.parametrize(
    "template",
    [
        "{}",
        "Identification failed for {} (BankID)",
        "ssn={}&x=1",
        '{{"nin": "{}"}}',
        "user:{}.",
        "<b>{}</b>",
    ],
)
def test_every_form_of_a_national_identity_number_is_hidden(name: str, template: str) -> None:
    number = NUMBERS[name]
    text = template.format(number)
    scrubbed = scrub(text, secrets=())
    assert scrubbed == template.format(REDACTED)
    digits = "".join(c for c in number if c.isdigit())
    assert digits not in "".join(c for c in scrubbed if c.isdigit())


@pytest.mark.parametrize("name", list(NUMBERS))
def test_a_number_anywhere_in_json_is_hidden_and_the_structure_kept(name: str) -> None:
    number = NUMBERS[name]
    value = {
        "MetaData": {"note": f"person {number}", number: "key"},
        "list": [number, 5, None, True, {"deep": [f"x {number} y"]}],
        "count": 3,
    }
    scrubbed = scrub_json(value, secrets=())
    assert scrubbed == {
        "MetaData": {"note": f"person {REDACTED}", REDACTED: "key"},
        "list": [REDACTED, 5, None, True, {"deep": [f"x {REDACTED} y"]}],
        "count": 3,
    }
    assert number not in json.dumps(scrubbed, ensure_ascii=False)
    assert value["list"][0] == number  # the input is left as it was


ORDINARY = [
    "3f2504e0-4f89-11d3-9a0c-0305e82c3301",
    # A UUID whose parts read like dates and serials.
    "19850714-2384-4abc-8def-140785123456",
    "2026-11-26T11:04:04Z",
    "2026-11-26T11:04:04.140785+01:00",
    "2026-11-26T11:04:04.140785+0100",
    "2026-11-26 11:04:04",
    "2026-11-26",
    "1764154800",  # a Unix time of November 2026
    "1764154800123",  # in milliseconds
    "20261126T110404Z",
    new_request_id(),
    "9578-6000-4-12345",
    "C307 PKI_BLOCKED",
    "NO_BANKID_WEB",
    "ab140785123456cd",  # a hex id
    "order 9999999999",
    "version 1.2.3, 42 attempts, 100%",
    "192.168.100.200",
    "Basic information is missing",
    "Bearer token expired",
    "The password reset failed",
    "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36",
]


@pytest.mark.parametrize("text", ORDINARY)
def test_ordinary_ids_timestamps_and_words_are_kept(text: str) -> None:
    assert scrub(text, secrets=()) == text
    assert scrub_json({"id": text, "n": 1764154800, "at": text}, secrets=()) == {
        "id": text,
        "n": 1764154800,
        "at": text,
    }


BASIC_VALUE = base64.b64encode(f"{CLIENT_ID}:{SECRET}".encode()).decode()


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            f"grant_type=client_credentials&client_id=x&client_secret={quote_plus('a+b/c')}",
            f"grant_type=client_credentials&client_id=x&client_secret={REDACTED}",
        ),
        ("password=hunter22&user=kari", f"password={REDACTED}&user=kari"),
        ('{"client_secret": "abc-123"}', f'{{"client_secret": "{REDACTED}"}}'),
        ("refresh_token=abcdef123&x", f"refresh_token={REDACTED}&x"),
        (f"Authorization: Basic {BASIC_VALUE}", f"Authorization: Basic {REDACTED}"),
        ("authorization: basic dXNlcjpwYXNzd29yZA==", f"authorization: basic {REDACTED}"),
        (f"Authorization: Bearer {ACCESS_TOKEN}", f"Authorization: Bearer {REDACTED}"),
        ("Bearer opaque-token-123", f"Bearer {REDACTED}"),
        (f"token {ACCESS_TOKEN} rejected", f"token {REDACTED} rejected"),
    ],
)
def test_credentials_are_hidden(text: str, expected: str) -> None:
    assert scrub(text, secrets=()) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # Unicode case folding: the long s and the Kelvin sign match "s" and "k".
        ("pa\u017fsword=hunter22&user=kari", f"pa\u017fsword={REDACTED}&user=kari"),
        ("api\u212aey: abcdef123", f"api\u212aey: {REDACTED}"),
        ("Authorization: Ba\u017fic dXNlcjpwYXNzd29yZA==", f"Authorization: Ba\u017fic {REDACTED}"),
        # Digits of other scripts are digits to the patterns too.
        (
            "nummer \u0661\u0664\u0660\u0663\u0668\u0665\u0661\u0662\u0663\u0662\u0664",
            f"nummer {REDACTED}",
        ),
        # Split over several strings of a JSON value, each one scrubbed whole.
        ('{"a": "client_secret=abc-123", "b": "eyJhbGciOi.eyJzdWIi.sig"}', None),
    ],
)
def test_texts_the_cheap_checks_must_not_skip(text: str, expected: str | None) -> None:
    """What :func:`scrub` skips by a cheap look first (no six digits in a row, no ``eyJ``,
    no credential word in an ASCII text) must never include what its patterns hide."""
    if expected is None:
        value = json.loads(text)
        assert scrub_json(value, secrets=()) == {
            "a": f"client_secret={REDACTED}",
            "b": REDACTED,
        }
    else:
        assert scrub(text, secrets=()) == expected


@pytest.mark.django_db
def test_the_configured_client_secret_is_hidden_in_each_of_its_forms() -> None:
    """Without ``secrets``, the settings' secret: as is, URL-encoded and as Basic credentials."""
    for form in (SECRET, quote_plus(SECRET), BASIC_VALUE):
        assert scrub(f"echo {form} end") == f"echo {REDACTED} end"
        assert scrub_json({"x": [f"echo {form}"]}) == {"x": [f"echo {REDACTED}"]}
    # With ``secrets`` given, those are hidden (and too short a one is not: "ab" everywhere).
    assert scrub("echo one-token", secrets=["one-token"]) == f"echo {REDACTED}"
    assert scrub("a tab", secrets=["ab"]) == "a tab"


@pytest.mark.parametrize(
    "key",
    [
        "SocialSecurityNumber",
        "socialSecurityNumber",
        "social_security_number",
        "ssn",
        "nin",
        "NationalIdentityNumber",
        "personalNumber",
        "personnummer",
        "fodselsnummer",
        "fødselsnummer",
        "CPR",
        "hetu",
        "henkilötunnus",
        "client_secret",
        "password",
        "access_token",
    ],
)
def test_the_value_of_a_property_named_like_a_number_is_hidden_whatever_its_shape(
    key: str,
) -> None:
    """A malformed number (or a JSON number) under such a name is still hidden."""
    assert is_secret_key(key)
    value: dict[str, Any] = {"a": {key: "not-a-number 12 34"}, "b": {key: 1234567}}
    assert scrub_json(value, secrets=()) == {"a": {key: REDACTED}, "b": {key: REDACTED}}
    # An object under such a name keeps its structure (the eID Hub's nin: country, type).
    assert scrub_json({key: {"issuingCountry": "NO"}}, secrets=()) == {
        key: {"issuingCountry": "NO"}
    }


@pytest.mark.parametrize("key", ["name", "status", "Nonce", "pin_verified", "ninja", "raw"])
def test_other_properties_are_not_hidden(key: str) -> None:
    assert not is_secret_key(key)
    assert scrub_json({key: "Kari"}, secrets=()) == {key: "Kari"}


def test_keys_that_scrub_to_the_same_text_are_all_kept() -> None:
    other = compose_danish(D(1985, 7, 14), serial=1234)
    scrubbed = scrub_json({SSN: "a", other: "b", REDACTED: "c"}, secrets=())
    assert scrubbed == {REDACTED: "a", f"{REDACTED}#2": "b", f"{REDACTED}#3": "c"}
