"""The sandbox broker's behaviour, without HTTP: tokens, sessions, records, return URLs, persons."""

from __future__ import annotations

import base64
import datetime
import json
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

import pytest

from django_eid import national_id
from django_eid.brokers.v1 import parse_record
from django_eid.records import parse_birth_date
from django_eid.sandbox.broker import SandboxBroker, SessionFinished, UnknownSession, record_of
from django_eid.sandbox.persons import (
    builtin_persons,
    custom_person,
    is_valid_national_identity_number,
    make_identity_number,
)
from django_eid.sandbox.store import CacheStore, MemoryStore
from django_eid.sandbox.wire import Reply, fill_placeholders

FORM = "application/x-www-form-urlencoded"
URLS = {
    "Success": "https://shop.example/ok?requestId=[1]&externalId=[2]",
    "Abort": "https://shop.example/abort?requestId=[1]&externalId=[2]",
    "Error": "https://shop.example/error?status=[0]",
}


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def broker(clock: Clock) -> SandboxBroker:
    return SandboxBroker(
        MemoryStore(clock),
        client_id="cid",
        client_secret="s3cret",
        login_url=lambda rid: f"https://sandbox.test/login/{rid}/",
        token_lifetime=600,
        clock=clock,
    )


def basic(user: str = "cid", password: str = "s3cret") -> str:
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()


def token_reply(broker: SandboxBroker, auth: str | None = None, **form: str) -> Reply:
    form = {"grant_type": "client_credentials", "scope": "identify", **form}
    return broker.token(authorization=auth, content_type=FORM, body=urlencode(form).encode())


def bearer(broker: SandboxBroker, scope: str = "identify") -> str:
    token: str = token_reply(broker, basic(), scope=scope).body["access_token"]
    return f"Bearer {token}"


#: Helpers' default: a fresh, valid bearer token.
AUTO = "auto"


def create(broker: SandboxBroker, auth: str | None = AUTO, **fields: Any) -> Reply:
    body = json.dumps({"ReturnUrls": URLS, "ExternalReference": "ext-1", **fields}).encode()
    auth = bearer(broker) if auth == AUTO else auth
    return broker.create_session(authorization=auth, body=body)


def retrieve(broker: SandboxBroker, request_id: str, auth: str | None = AUTO) -> Reply:
    query = urlencode({"requestId": request_id})
    auth = bearer(broker) if auth == AUTO else auth
    return broker.get_session(authorization=auth, query=query)


# -- tokens ---------------------------------------------------------------------------
def test_token_with_basic_authentication() -> None:
    broker = SandboxBroker(MemoryStore(), client_id="cid", client_secret="s3cret", login_url=str)
    reply = token_reply(broker, basic())
    assert reply.status == 200
    assert reply.body["token_type"] == "Bearer"
    assert reply.body["expires_in"] == 3600
    assert reply.headers["Cache-Control"] == "no-store"
    parts = reply.body["access_token"].split(".")
    assert len(parts) == 3
    claims = json.loads(base64.urlsafe_b64decode(parts[1] + "=="))
    assert claims["client_id"] == "cid"
    assert claims["scope"] == ["identify"]


def test_token_with_post_authentication(broker: SandboxBroker) -> None:
    reply = token_reply(broker, client_id="cid", client_secret="s3cret")
    assert reply.status == 200


def test_tokens_are_random(broker: SandboxBroker) -> None:
    assert bearer(broker) != bearer(broker)


def test_basic_credentials_may_be_form_encoded_first(broker: SandboxBroker) -> None:
    broker.client_secret = "s3cret:with%colon"
    assert token_reply(broker, basic(password="s3cret%3Awith%25colon")).status == 200


@pytest.mark.parametrize(
    ("auth", "form", "status", "error"),
    [
        (basic(password="wrong"), {}, 401, "invalid_client"),
        (basic(user="other"), {}, 401, "invalid_client"),
        (None, {}, 401, "invalid_client"),
        ("Basic !!notbase64", {}, 401, "invalid_client"),
        (None, {"client_id": "cid", "client_secret": "nope"}, 401, "invalid_client"),
        (basic(), {"client_id": "cid", "client_secret": "s3cret"}, 400, "invalid_request"),
        (basic(), {"grant_type": "password"}, 400, "unsupported_grant_type"),
        (basic(), {"grant_type": ""}, 400, "invalid_request"),
        (basic(), {"scope": ""}, 400, "invalid_request"),
        (basic(), {"scope": "identify openid"}, 400, "invalid_scope"),
        (basic(), {"scope": "admin"}, 400, "invalid_scope"),
    ],
)
def test_token_errors_follow_rfc6749(
    broker: SandboxBroker, auth: str | None, form: dict[str, str], status: int, error: str
) -> None:
    reply = token_reply(broker, auth, **form)
    assert (reply.status, reply.body["error"]) == (status, error)
    assert reply.body["error_description"]
    assert ("WWW-Authenticate" in reply.headers) == (status == 401)


def test_all_five_scopes_of_the_interface_document_are_accepted(broker: SandboxBroker) -> None:
    scopes = "document_read document_write document_file event identify"
    assert token_reply(broker, basic(), scope=scopes).status == 200


def test_token_form_must_be_urlencoded_and_single_valued(broker: SandboxBroker) -> None:
    body = b"grant_type=client_credentials&scope=identify"
    reply = broker.token(authorization=basic(), content_type="application/json", body=body)
    assert reply.body["error"] == "invalid_request"
    twice = body + b"&scope=event"
    reply = broker.token(authorization=basic(), content_type=FORM, body=twice)
    assert reply.body["error"] == "invalid_request"


def test_an_unconfigured_sandbox_accepts_no_client(clock: Clock) -> None:
    broker = SandboxBroker(MemoryStore(), client_id="", client_secret="", login_url=str)
    assert token_reply(broker, basic("", "")).status == 401


# -- bearer tokens ------------------------------------------------------------------------
def test_api_calls_need_a_valid_unexpired_bearer_token(broker: SandboxBroker, clock: Clock) -> None:
    auth = bearer(broker)
    for wrong in (None, "", "Bearer", "Bearer nope", "Basic abc", auth.replace("Bearer", "Token")):
        reply = create(broker, auth=wrong)
        assert reply.status == 401
        assert reply.body["code"] == "UNAUTHORIZED"
        assert reply.headers["WWW-Authenticate"].startswith("Bearer")
    assert create(broker, auth=auth).status == 200
    clock.now += 601
    assert create(broker, auth=auth).status == 401
    assert retrieve(broker, "x", auth=auth).status == 401


def test_api_calls_need_the_identify_scope(broker: SandboxBroker) -> None:
    reply = create(broker, auth=bearer(broker, scope="event"))
    assert reply.status == 403
    assert 'error="insufficient_scope"' in reply.headers["WWW-Authenticate"]


# -- creating sessions --------------------------------------------------------------------
def test_create_returns_the_login_url_and_a_long_request_id(broker: SandboxBroker) -> None:
    reply = create(broker)
    assert reply.status == 200
    request_id = reply.body["RequestId"]
    assert len(request_id) == 200
    assert request_id.isalnum()
    assert request_id[:19].isdigit()
    assert reply.body["Url"] == f"https://sandbox.test/login/{request_id}/"
    assert create(broker).body["RequestId"] != request_id


def test_create_reads_property_names_in_any_casing(broker: SandboxBroker) -> None:
    body = {
        "returnUrls": {"success": URLS["Success"], "ABORT": URLS["Abort"], "error": URLS["Error"]},
        "identityProvider": "NO_BANKID_WEB",
        "language": "NO",
        "getSocialSecurityNumber": True,
        "externalReference": "abc",
        "iframe": {"domain": "Shop.Example"},
        "SomethingNew": 1,
    }
    reply = broker.create_session(authorization=bearer(broker), body=json.dumps(body).encode())
    assert reply.status == 200, reply.body
    session = broker.session(reply.body["RequestId"])
    assert session is not None
    assert session.identity_provider == "NO_BANKID_WEB"
    assert (session.language, session.get_social_security_number) == ("NO", True)
    assert (session.external_reference, session.iframe_domain) == ("abc", "shop.example")


@pytest.mark.parametrize("iframe", [{}, {"WebMessaging": True}, {"Domain": None, "Height": 600}])
def test_an_iframe_without_its_domain_is_refused(
    broker: SandboxBroker, iframe: dict[str, Any]
) -> None:
    # The published schema requires iFrame.Domain inside iFrame; a top-level "domain"
    # (the interface document's) does not stand in for it there.
    reply = create(broker, iFrame=iframe, domain="shop.example")
    assert reply.status == 400
    assert [e["field"] for e in reply.body["errors"]] == ["iFrame.Domain"]


def test_top_level_domain_is_read_too(broker: SandboxBroker) -> None:
    session = broker.session(create(broker, domain="localhost:8000").body["RequestId"])
    assert session is not None
    assert session.iframe_domain == "localhost:8000"


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"ReturnUrls": None}, "ReturnUrls"),
        ({"ReturnUrls": {"Success": URLS["Success"], "Abort": URLS["Abort"]}}, "ReturnUrls.Error"),
        ({"ReturnUrls": {**URLS, "Success": "/relative"}}, "ReturnUrls.Success"),
        ({"ReturnUrls": {**URLS, "Abort": "ftp://x/"}}, "ReturnUrls.Abort"),
        ({"IdentityProvider": "no-bankid"}, "IdentityProvider"),
        ({"IdentityProvider": 3}, "IdentityProvider"),
        ({"Language": "DE"}, "Language"),
        ({"Language": "no"}, "Language"),
        ({"GetSocialSecurityNumber": "yes"}, "GetSocialSecurityNumber"),
        ({"ExternalReference": 42}, "ExternalReference"),
        ({"iFrame": {"Domain": "https://shop.example"}}, "iFrame.Domain"),
        ({"iFrame": "shop.example"}, "iFrame"),
        ({"domain": "shop.example; script-src *"}, "domain"),
    ],
)
def test_invalid_create_requests_name_the_field(
    broker: SandboxBroker, fields: dict[str, Any], field: str
) -> None:
    reply = create(broker, **fields)
    assert reply.status == 400
    assert reply.body["message"]
    assert field in [e["field"] for e in reply.body["errors"]]


@pytest.mark.parametrize("body", [b"", b"not json", b"[1, 2]", b"\xff\xfe"])
def test_a_body_that_is_not_a_json_object_is_refused(broker: SandboxBroker, body: bytes) -> None:
    reply = broker.create_session(authorization=bearer(broker), body=body)
    assert reply.status == 400
    assert reply.body["errors"] == []


# -- records and transitions -------------------------------------------------------------
def test_the_record_through_the_states(broker: SandboxBroker) -> None:
    request_id = create(broker, IdentityProvider="NO_BANKID_WEB").body["RequestId"]
    created = retrieve(broker, request_id).body
    assert created == {
        "RequestId": request_id,
        "Status": "CREATED",
        "IdentityProvider": "NO_BANKID_WEB",
        "Error": None,
        "MetaData": {},
    }
    broker.open(request_id)
    broker.open(request_id)  # reloading the page changes nothing more
    assert retrieve(broker, request_id).body["Status"] == "USERINITIATED"
    person = builtin_persons().NORWEGIAN
    broker.identify(request_id, person, user_agent="UA/1", ip_address="198.51.100.4")
    record = retrieve(broker, request_id).body
    assert record["Status"] == "SUCCESS"
    assert record["Name"] == "Nordmann, Kari Marie"
    assert (record["FirstName"], record["MiddleName"], record["LastName"]) == (
        "Kari",
        "Marie",
        "Nordmann",
    )
    assert record["DateOfBirth"] == "140385"
    assert record["IdentityProviderUniqueId"] == person.identity_provider_unique_id
    assert record["EnvironmentInfo"] == {"UserAgent": "UA/1", "IPAddress": "198.51.100.4"}
    assert "SocialSecurityNumber" not in record
    parsed = parse_record(record)
    assert parsed.is_success
    assert parsed.birth_date == datetime.date(1985, 3, 14)


def test_the_number_is_in_the_record_only_when_requested(broker: SandboxBroker) -> None:
    request_id = create(broker, GetSocialSecurityNumber=True).body["RequestId"]
    person = builtin_persons().D_NUMBER
    broker.identify(request_id, person)
    record = retrieve(broker, request_id).body
    assert record["SocialSecurityNumber"] == person.national_identity_number
    assert record["IdentityProvider"] == "NO_BUYPASS"  # the person's own: none was asked for


def test_a_provider_nobody_chose_yet_is_unknown_not_null(broker: SandboxBroker) -> None:
    request_id = create(broker).body["RequestId"]
    assert retrieve(broker, request_id).body["IdentityProvider"] == "UNKNOWN"
    broker.fail(request_id, "LOGIN")
    assert retrieve(broker, request_id).body["IdentityProvider"] == "UNKNOWN"
    assert parse_record(retrieve(broker, request_id).body).identity_provider is None


@pytest.mark.parametrize("provider", ["SWE_BANKID", "SWE_BANKID_MOBILE"])
def test_swedish_bankid_gives_no_unique_id(broker: SandboxBroker, provider: str) -> None:
    norwegian = builtin_persons().NORWEGIAN  # whoever identifies with it
    request_id = create(broker).body["RequestId"]
    broker.identify(request_id, norwegian, provider=provider)
    record = retrieve(broker, request_id).body
    assert record["IdentityProvider"] == provider
    assert record["IdentityProviderUniqueId"] is None
    assert record["FirstName"] == "Kari"
    swede = builtin_persons().SWEDISH
    request_id = create(broker, IdentityProvider="NO_BANKID_WEB").body["RequestId"]
    broker.identify(request_id, swede)  # the session's provider, not the person's usual one
    assert retrieve(broker, request_id).body["IdentityProviderUniqueId"] == (
        swede.identity_provider_unique_id
    )
    assert record_of(swede, "r")["IdentityProviderUniqueId"] is None


@pytest.mark.parametrize(
    ("record_status", "code"), [("ERROR", "LOGIN"), ("TIMEOUT", "TIMEOUT"), ("UNKNOWN", "X1")]
)
def test_a_session_fails_with_each_published_status(
    broker: SandboxBroker, record_status: str, code: str
) -> None:
    request_id = create(broker).body["RequestId"]
    url = broker.fail(request_id, code, record_status=record_status)
    assert url == f"https://shop.example/error?status={code}"
    record = retrieve(broker, request_id).body
    assert record["Status"] == record_status
    assert record["Error"]["ErrorCode"] == code
    assert broker.session_status(
        authorization=bearer(broker), query=f"requestId={request_id}"
    ).body == {"Done": True}
    with pytest.raises(SessionFinished):
        broker.abort(request_id)  # over


def test_invalidated_by_the_client(broker: SandboxBroker) -> None:
    request_id = create(broker).body["RequestId"]
    broker.identify(request_id, builtin_persons().NORWEGIAN)
    body = json.dumps({"RequestId": request_id}).encode()
    assert broker.invalidate(authorization=bearer(broker), query="", body=body).status == 200
    record = retrieve(broker, request_id).body
    assert record["Status"] == "INVALIDATED"
    assert "FirstName" not in record


def test_a_status_the_session_cannot_fail_with_is_refused(broker: SandboxBroker) -> None:
    request_id = create(broker).body["RequestId"]
    for status in ("SUCCESS", "USERABORTED", "INVALIDATED", "CREATED", "NEW"):
        with pytest.raises(ValueError, match="fails with one of"):
            broker.fail(request_id, "LOGIN", record_status=status)
    assert retrieve(broker, request_id).body["Status"] == "CREATED"


def test_the_provider_chosen_at_the_broker_is_reported(broker: SandboxBroker) -> None:
    request_id = create(broker).body["RequestId"]
    broker.identify(request_id, builtin_persons().NORWEGIAN, provider="SWE_BANKID")
    assert retrieve(broker, request_id).body["IdentityProvider"] == "SWE_BANKID"


def test_success_and_abort_urls_carry_request_and_external_ids(broker: SandboxBroker) -> None:
    request_id = create(broker, ExternalReference="a b&c").body["RequestId"]
    url = broker.identify(request_id, builtin_persons().SWEDISH)
    assert url.startswith("https://shop.example/ok?")
    assert parse_qs(urlsplit(url).query) == {"requestId": [request_id], "externalId": ["a b&c"]}
    assert "a%20b%26c" in url
    request_id = create(broker).body["RequestId"]
    url = broker.abort(request_id)
    assert url == f"https://shop.example/abort?requestId={request_id}&externalId=ext-1"
    assert retrieve(broker, request_id).body["Status"] == "USERABORTED"


def test_fail_fills_the_status_and_records_the_error(broker: SandboxBroker) -> None:
    request_id = create(broker).body["RequestId"]
    assert broker.fail(request_id, "LOGIN") == "https://shop.example/error?status=LOGIN"
    record = retrieve(broker, request_id).body
    assert record["Status"] == "ERROR"
    assert record["Error"]["ErrorCode"] == "LOGIN"
    assert record["Error"]["ErrorMessage"]
    assert parse_record(record).error is not None
    request_id = create(broker).body["RequestId"]
    assert broker.fail(request_id, "A/B?").endswith("status=A%2FB%3F")
    with pytest.raises(ValueError, match="printable"):
        broker.fail(create(broker).body["RequestId"], "two words")


def test_a_finished_session_cannot_end_twice(broker: SandboxBroker) -> None:
    request_id = create(broker).body["RequestId"]
    broker.abort(request_id)
    with pytest.raises(SessionFinished):
        broker.identify(request_id, builtin_persons().NORWEGIAN)
    with pytest.raises(UnknownSession):
        broker.abort("nope")
    with pytest.raises(UnknownSession):
        broker.open("nope")


def test_retrieve_errors(broker: SandboxBroker) -> None:
    unknown = retrieve(broker, "0" * 200)
    assert unknown.status == 404
    assert set(unknown.body) == {"message", "code"}
    missing = broker.get_session(authorization=bearer(broker), query="")
    assert missing.status == 400
    assert missing.body["errors"][0]["field"] == "requestId"


def test_another_clients_session_is_not_found(broker: SandboxBroker) -> None:
    request_id = create(broker).body["RequestId"]
    other = SandboxBroker(broker.store, client_id="b", client_secret="b", login_url=str)
    auth = "Bearer " + token_reply(other, basic("b", "b")).body["access_token"]
    assert retrieve(other, request_id, auth=auth).status == 404
    assert retrieve(broker, request_id).status == 200


def test_sessions_expire_with_the_store(broker: SandboxBroker, clock: Clock) -> None:
    request_id = create(broker).body["RequestId"]
    clock.now += 3601
    assert broker.session(request_id) is None


def test_fill_placeholders_encodes_whole_values() -> None:
    url = fill_placeholders("https://x/?a=[1]&b=[2]", {"[1]": "1+1=2", "[2]": "ø"})
    assert url == "https://x/?a=1%2B1%3D2&b=%C3%B8"


# -- stores ------------------------------------------------------------------------------------
def test_memory_store_copies_and_expires(clock: Clock) -> None:
    store = MemoryStore(clock)
    value = {"a": [1]}
    store.set("k", value, 10)
    value["a"].append(2)
    assert store.get("k") == {"a": [1]}
    assert store.keys("k") == ["k"]
    clock.now += 10
    assert store.get("k") is None


def test_cache_store_prefixes_its_keys() -> None:
    from django.core.cache import cache

    store = CacheStore("default")
    store.set("session:x", {"a": 1}, 0.5)
    assert cache.get("django_eid_sandbox:session:x") == {"a": 1}
    assert store.get("session:x") == {"a": 1}
    store.delete("session:x")
    assert store.get("session:x") is None


# -- persons ------------------------------------------------------------------------------------
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


# -- hooks for tests, and the record of a person ---------------------------------------
def test_request_ids_and_tokens_come_from_the_given_factories(clock: Clock) -> None:
    ids = iter(["first-id", "second-id"])
    broker = SandboxBroker(
        MemoryStore(clock),
        client_id="cid",
        client_secret="s3cret",
        login_url=lambda rid: f"https://sandbox.test/login/{rid}/",
        clock=clock,
        request_ids=lambda: next(ids),
        tokens=lambda: "known-token",
    )
    assert token_reply(broker, basic()).body["access_token"] == "known-token"
    assert create(broker).body["RequestId"] == "first-id"
    assert create(broker).body["RequestId"] == "second-id"
    assert retrieve(broker, "second-id", "Bearer known-token").body["Status"] == "CREATED"


def test_record_of_is_the_record_of_an_identified_session(broker: SandboxBroker) -> None:
    person = builtin_persons().SWEDISH
    request_id = create(broker, GetSocialSecurityNumber=True).body["RequestId"]
    broker.identify(request_id, person)
    assert record_of(person, request_id) == retrieve(broker, request_id).body
    without = record_of(person, request_id, "ERROR", with_number=False)
    assert "SocialSecurityNumber" not in without
    assert without["Status"] == "ERROR"
