"""Parsing what the broker sends back: tolerant of casing and nulls, strict about types."""

from __future__ import annotations

import contextlib
import dataclasses
import datetime
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from django_eid.brokers.v1 import parse_created, parse_record
from django_eid.exceptions import EidProtocolError
from django_eid.records import (
    CreatedSession,
    EnvironmentInfo,
    IdentificationRecord,
    Progress,
    RecordError,
    is_http_url,
    parse_birth_date,
)
from tests.fixtures_client import RECORD

SSN = "31127112345"
TODAY = datetime.date(2025, 6, 1)


def test_the_sample_record() -> None:
    record = parse_record(RECORD)
    assert record == IdentificationRecord(
        request_id=RECORD["RequestId"],
        status="SUCCESS",
        progress=Progress.SUCCESS,
        identity_provider="NO_BANKID_WEB",
        identity_provider_unique_id="9578-6000-4-12345",
        name="Nordmann, Kari Marie",
        first_name="Kari",
        middle_name="Marie",
        last_name="Nordmann",
        date_of_birth="311271",
        social_security_number=SSN,
        national_id_country="NO",  # the provider's country: v1 does not say it
        environment_info=EnvironmentInfo("Mozilla/5.0 (X11; Linux x86_64)", "203.0.113.7"),
        error=None,
    )
    assert record.is_success
    assert record.birth_date == datetime.date(1971, 12, 31)
    assert dict(record.extra) == {}


def test_property_names_are_matched_case_insensitively() -> None:
    body = {
        "requestId": "r1",
        "STATUS": "SUCCESS",
        "firstname": "Kari",
        "environmentInfo": {"userAgent": "UA", "ipaddress": "203.0.113.7"},
        "error": {"nativeErrorCode": "C1", "ERRORCODE": "X", "errorMessage": "m"},
        "metadata": {"Key": "Value"},
    }
    record = parse_record(body)
    assert (record.request_id, record.status, record.first_name) == ("r1", "SUCCESS", "Kari")
    assert record.environment_info == EnvironmentInfo("UA", "203.0.113.7")
    assert record.error == RecordError("C1", "X", "m")
    assert dict(record.metadata) == {"Key": "Value"}
    assert dict(record.extra) == {}


@pytest.mark.parametrize(
    ("meta", "read"),
    [
        (
            {"a": 1, "b": True, "c": {"d": [1, "x"]}},
            {"a": "1", "b": "true", "c": '{"d": [1, "x"]}'},
        ),
        ({"certificate": "MII...", "level": 3}, {"certificate": "MII...", "level": "3"}),
        (["a"], {}),
        ("x", {}),
        (7, {}),
    ],
)
def test_metadata_of_another_type_leaves_the_record_readable(meta: Any, read: Any) -> None:
    body = {**RECORD, "MetaData": meta}
    record = parse_record(body)
    assert record.is_success
    assert record.first_name == "Kari"
    assert dict(record.metadata) == read
    assert record.redacted()["MetaData"] == meta  # as received


def test_an_unknown_provider_is_no_provider() -> None:
    record = parse_record({**RECORD, "Status": "ERROR", "IdentityProvider": "UNKNOWN"})
    assert record.identity_provider is None
    assert record.national_id_country is None
    assert record.redacted()["IdentityProvider"] == "UNKNOWN"


def test_unknown_properties_are_kept_in_raw() -> None:
    record = parse_record({"RequestId": "r", "NewThing": {"a": [1]}, "Score": 3})
    assert dict(record.extra) == {"NewThing": {"a": [1]}, "Score": 3}


def test_nulls_everywhere() -> None:
    keys = [*RECORD, "EnvironmentInfo", "Error", "MetaData"]
    record = parse_record(dict.fromkeys(keys))
    assert record == IdentificationRecord()
    assert record.environment_info == EnvironmentInfo()
    assert record.birth_date is None
    assert not record.is_success


def test_an_empty_object_and_nested_nulls() -> None:
    assert parse_record({}) == IdentificationRecord()
    record = parse_record(
        {"EnvironmentInfo": {"UserAgent": None}, "Error": {}, "MetaData": {"a": None}}
    )
    assert record.environment_info == EnvironmentInfo()
    assert record.error == RecordError()


def test_a_failed_session() -> None:
    record = parse_record(
        {
            "RequestId": "r",
            "Status": "ERROR",
            "IdentityProvider": "NO_BANKID_MOBILE",
            "Error": {"NativeErrorCode": "C307", "ErrorCode": "PKI_BLOCKED", "ErrorMessage": "m"},
        }
    )
    assert not record.is_success
    assert record.error == RecordError("C307", "PKI_BLOCKED", "m")


@pytest.mark.parametrize(
    "status", ["UNKNOWN", "USERABORTED", "TIMEOUT", "SOMETHING_NEW", "success"]
)
def test_only_success_is_success(status: str) -> None:
    record = parse_record({"Status": status})
    assert record.status == status
    assert not record.is_success


@pytest.mark.parametrize(
    "body",
    [
        [RECORD],
        "SUCCESS",
        None,
        42,
        {"Status": 1},
        {"Status": True},
        {"FirstName": ["Kari"]},
        {"DateOfBirth": 311271},
        {"SocialSecurityNumber": 31127112345},
        {"RequestId": {"id": "r"}},
        {"EnvironmentInfo": "Mozilla"},
        {"EnvironmentInfo": {"IPAddress": 7}},
        {"Error": "boom"},
        {"Error": {"ErrorCode": 12}},
    ],
)
def test_wrong_types_are_protocol_errors(body: Any) -> None:
    with pytest.raises(EidProtocolError) as info:
        parse_record(body, what="GET https://api.broker.test/identification/session")
    assert str(info.value).startswith("GET https://api.broker.test/identification/session")
    assert SSN not in str(info.value)


def test_the_record_is_immutable() -> None:
    record = parse_record({**RECORD, "Extra": 1, "MetaData": {"k": "v"}})
    with pytest.raises(dataclasses.FrozenInstanceError):
        record.status = "SUCCESS"  # type: ignore[misc]
    with pytest.raises(TypeError):
        record.extra["Extra"] = 2  # type: ignore[index]
    with pytest.raises(TypeError):
        record.metadata["k"] = "w"  # type: ignore[index]


def test_the_national_identity_number_stays_out_of_repr_and_redacted() -> None:
    body = {**RECORD, "Extra": "kept"}
    record = parse_record(body)
    assert SSN not in repr(record)
    assert SSN not in str(record)
    redacted = record.redacted()
    assert SSN not in repr(redacted)
    assert "SocialSecurityNumber" not in redacted
    assert redacted["FirstName"] == "Kari"
    assert redacted["Extra"] == "kept"
    assert record.social_security_number == SSN


def test_redacted_drops_the_number_in_any_casing() -> None:
    record = parse_record({"socialSecurityNumber": SSN, "Status": "SUCCESS"})
    assert record.social_security_number == SSN
    assert record.redacted() == {"Status": "SUCCESS"}


# -- DateOfBirth ---------------------------------------------------------------


def test_sample_date_of_birth() -> None:
    assert parse_birth_date("311271", today=TODAY) == datetime.date(1971, 12, 31)
    assert parse_birth_date("311271", SSN, today=TODAY) == datetime.date(1971, 12, 31)


def nin(dob: str, individual: int) -> str:
    """An 11-digit Norwegian number with the given individual digits (check digits not real)."""
    return f"{dob}{individual:03d}00"


@pytest.mark.parametrize(
    ("dob", "individual", "year"),
    [
        ("010110", 0, 1910),  # 000-499: 1900s, although 2010 is in the past
        ("010110", 499, 1910),
        ("010199", 499, 1999),
        ("010154", 500, 1854),  # 500-749 with yy >= 54: 1800s
        ("010199", 749, 1899),
        ("010160", 600, 1860),
        ("010105", 500, 2005),  # 500-999 with yy <= 39: 2000s
        ("010100", 749, 2000),
        ("010139", 999, 2039),  # the rule wins even over "not in the future"
        ("010110", 800, 2010),
        ("010140", 900, 1940),  # 900-999 with yy >= 40: 1900s
        ("010199", 999, 1999),
    ],
)
def test_norwegian_century_from_the_individual_digits(dob: str, individual: int, year: int) -> None:
    assert parse_birth_date(dob, nin(dob, individual), today=TODAY) == datetime.date(year, 1, 1)


@pytest.mark.parametrize(
    ("dob", "individual", "year"),
    [
        ("010150", 800, 1950),  # 750-899 with yy >= 40: no century, fall back
        ("010145", 600, 1945),  # 500-749 with yy 40-53: no century, fall back
        ("010120", 800, 2020),
    ],
)
def test_impossible_individual_digits_fall_back(dob: str, individual: int, year: int) -> None:
    assert parse_birth_date(dob, nin(dob, individual), today=TODAY) == datetime.date(year, 1, 1)


@pytest.mark.parametrize("ssn", [None, "", "1234", "3112711234", "311271123456", "3112711234X"])
def test_no_usable_number_uses_the_latest_past_century(ssn: str | None) -> None:
    assert parse_birth_date("010110", ssn, today=TODAY) == datetime.date(2010, 1, 1)


@pytest.mark.parametrize(
    ("dob", "expected"),
    [
        ("010125", datetime.date(2025, 1, 1)),
        ("010625", datetime.date(2025, 6, 1)),  # today: not in the future
        ("020625", datetime.date(1925, 6, 2)),  # tomorrow would be the future
        ("311299", datetime.date(1999, 12, 31)),
        ("290200", datetime.date(2000, 2, 29)),
        ("010100", datetime.date(2000, 1, 1)),
    ],
)
def test_latest_century_not_in_the_future(dob: str, expected: datetime.date) -> None:
    assert parse_birth_date(dob, today=TODAY) == expected


@pytest.mark.parametrize(
    "dob",
    [None, "", "abc", "320299", "311371", "000199", "010001x", "31127", "3112711", "290223",
     "٣١١٢٧١", " 11271", "31-12-71"],
)  # fmt: skip
def test_unusable_dates_give_none(dob: str | None) -> None:
    assert parse_birth_date(dob, today=TODAY) is None
    assert parse_birth_date(dob, SSN, today=TODAY) is None


def test_birth_date_of_a_record_uses_its_number() -> None:
    record = parse_record({"DateOfBirth": "010110", "SocialSecurityNumber": nin("010110", 100)})
    assert record.birth_date == datetime.date(1910, 1, 1)
    assert parse_record({"DateOfBirth": "320299"}).birth_date is None


# -- create response -------------------------------------------------------------


@pytest.mark.parametrize(
    "body",
    [
        {"Url": "https://id.broker.test/start?s=1", "RequestId": "abc"},
        {"url": "https://id.broker.test/start?s=1", "requestId": "abc", "Other": 1},
        {"URL": "https://id.broker.test/start?s=1", "REQUESTID": "abc"},
    ],
)
def test_created_session(body: dict[str, Any]) -> None:
    assert parse_created(body) == CreatedSession("https://id.broker.test/start?s=1", "abc")


@pytest.mark.parametrize(
    "body",
    [
        None,
        [],
        "https://id.broker.test",
        {},
        {"Url": "https://id.broker.test/start"},
        {"RequestId": "abc"},
        {"Url": "/relative", "RequestId": "abc"},
        {"Url": "javascript:alert(1)", "RequestId": "abc"},
        {"Url": "https://id.broker.test/start", "RequestId": ""},
        {"Url": "https://id.broker.test/start", "RequestId": 123},
        {"Url": ["https://id.broker.test/start"], "RequestId": "abc"},
    ],
)
def test_created_session_protocol_errors(body: Any) -> None:
    with pytest.raises(EidProtocolError):
        parse_created(body)


# -- property test -----------------------------------------------------------------

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=20,
)
known_keys = st.sampled_from(
    [
        "RequestId", "Status", "IdentityProvider", "IdentityProviderUniqueId", "Name",
        "FirstName", "MiddleName", "LastName", "DateOfBirth", "SocialSecurityNumber",
        "EnvironmentInfo", "Error", "MetaData", "UserAgent", "IPAddress", "ErrorCode",
    ]
)  # fmt: skip
cased_keys = st.tuples(known_keys, st.sampled_from([str, str.lower, str.upper])).map(
    lambda kv: kv[1](kv[0])
)
record_like = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(alphabet="0123456789abc", max_size=12),
    lambda children: (
        st.dictionaries(cased_keys | st.text(max_size=4), children, max_size=8)
        | st.lists(children, max_size=3)
    ),
    max_leaves=30,
)


@given(st.one_of(json_values, record_like))
def test_any_json_value_parses_or_is_a_protocol_error(body: Any) -> None:
    try:
        record = parse_record(body)
    except EidProtocolError:
        return
    assert isinstance(record, IdentificationRecord)
    # Derived values never raise either.
    record.birth_date  # noqa: B018
    record.redacted()
    repr(record)


@given(st.text(max_size=8), st.one_of(st.none(), st.text(max_size=12)), st.dates())
def test_parse_birth_date_never_raises(dob: str, ssn: str | None, today: datetime.date) -> None:
    result = parse_birth_date(dob, ssn, today=today)
    assert result is None or isinstance(result, datetime.date)


@given(json_values)
def test_any_json_value_is_a_created_session_or_a_protocol_error(body: Any) -> None:
    with contextlib.suppress(EidProtocolError):
        assert isinstance(parse_created(body), CreatedSession)


# -- the create answer's URL ---------------------------------------------------------------

#: URLs whose host is not one: each would add to the frame page's Content-Security-Policy
#: (``frame-src <origin>``), or send the user elsewhere than the host it seems to name.
HOSTILE_URLS = [
    "https://id.broker.test;script-src *;/start",
    "https://id.broker.test; script-src 'unsafe-inline'/",
    "https://id.broker.test,evil.test/",
    "https://id.broker.test evil.test/",
    'https://id.broker.test"/start',
    "https://id.broker.test'/start",
    "https:///start",
    "https://:443/start",
    "https://user@id.broker.test/start",
    "https://id.broker.test@evil.test/start",
    "https://id.broker.test:pw@evil.test/",
    "https://id.broker.test\\@evil.test/",
    "https://id.broker.test:/start",
    "https://id.broker.test:0/start",
    "https://id.broker.test:65536/start",
    "https://id.broker.test:443x/start",
    "https://id.broker.test:443:80/start",
    "https://[::1/start",
    "https://[not-ipv6]/start",
    "https://[::1]x/start",
    "https://-broker.test/",
    "https://broker-.test/",
    "https://a..test/",
    "https://%69d.broker.test/",
    "https://id.bröker.test/",
    "https://id.broker.test/\tstart",
    "https://id.broker.test/start\r\nX-Injected: 1",
    " https://id.broker.test/",
    "https://id.broker.test/ ",
]
WELL_FORMED_URLS = [
    "https://id.broker.test/start?s=1&a=b;c",
    "https://id.broker.test:8443/start",
    "https://id.broker.test./start",
    "http://localhost:8000/sandbox/login",
    "http://127.0.0.1:8000/",
    "http://[::1]:8000/",
    "https://[2001:db8::1]/",
    "http://eid_sandbox:8000/",  # a container's name
    "https://ID.Broker.TEST/start#frag",
]


@pytest.mark.parametrize("url", HOSTILE_URLS)
def test_a_url_without_a_well_formed_host_is_refused(url: str) -> None:
    assert not is_http_url(url)
    with pytest.raises(EidProtocolError):
        parse_created({"Url": url, "RequestId": "abc"})


@pytest.mark.parametrize("url", WELL_FORMED_URLS)
def test_a_url_with_a_well_formed_host_is_accepted(url: str) -> None:
    assert is_http_url(url)
    assert parse_created({"Url": url, "RequestId": "abc"}).url == url
