"""The sandbox broker's behaviour without HTTP (v1): tokens, sessions, records, return URLs,
stores."""

from __future__ import annotations

import base64
import datetime
import json
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

import pytest

from django_eid.brokers.v1 import parse_record
from django_eid.sandbox.broker import SandboxBroker, SessionFinished, UnknownSession, record_of
from django_eid.sandbox.persons import builtin_persons
from django_eid.sandbox.store import CacheStore, MemoryStore
from django_eid.sandbox.wire import Reply, fill_placeholders
from tests.sandbox.conftest import FORM, Clock

URLS = {
    "Success": "https://shop.example/ok?requestId=[1]&externalId=[2]",
    "Abort": "https://shop.example/abort?requestId=[1]&externalId=[2]",
    "Error": "https://shop.example/error?status=[0]",
}


@pytest.fixture
def sandbox(clock: Clock) -> SandboxBroker:
    """The sandbox broker without HTTP, on the test's clock, with a client of its own and
    tokens of ten minutes."""
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


def token_reply(sandbox: SandboxBroker, auth: str | None = None, **form: str) -> Reply:
    form = {"grant_type": "client_credentials", "scope": "identify", **form}
    return sandbox.token(authorization=auth, content_type=FORM, body=urlencode(form).encode())


def bearer(sandbox: SandboxBroker, scope: str = "identify") -> str:
    token: str = token_reply(sandbox, basic(), scope=scope).body["access_token"]
    return f"Bearer {token}"


#: Helpers' default: a fresh, valid bearer token.
AUTO = "auto"


def create(sandbox: SandboxBroker, auth: str | None = AUTO, **fields: Any) -> Reply:
    body = json.dumps({"ReturnUrls": URLS, "ExternalReference": "ext-1", **fields}).encode()
    auth = bearer(sandbox) if auth == AUTO else auth
    return sandbox.create_session(authorization=auth, body=body)


def retrieve(sandbox: SandboxBroker, request_id: str, auth: str | None = AUTO) -> Reply:
    query = urlencode({"requestId": request_id})
    auth = bearer(sandbox) if auth == AUTO else auth
    return sandbox.get_session(authorization=auth, query=query)


# -- tokens ---------------------------------------------------------------------------
def test_token_with_basic_authentication() -> None:
    sandbox = SandboxBroker(MemoryStore(), client_id="cid", client_secret="s3cret", login_url=str)
    reply = token_reply(sandbox, basic())
    assert reply.status == 200
    assert reply.body["token_type"] == "Bearer"
    assert reply.body["expires_in"] == 3600
    assert reply.headers["Cache-Control"] == "no-store"
    parts = reply.body["access_token"].split(".")
    assert len(parts) == 3
    claims = json.loads(base64.urlsafe_b64decode(parts[1] + "=="))
    assert claims["client_id"] == "cid"
    assert claims["scope"] == ["identify"]


def test_token_with_post_authentication(sandbox: SandboxBroker) -> None:
    reply = token_reply(sandbox, client_id="cid", client_secret="s3cret")
    assert reply.status == 200


def test_tokens_are_random(sandbox: SandboxBroker) -> None:
    assert bearer(sandbox) != bearer(sandbox)


def test_basic_credentials_may_be_form_encoded_first(sandbox: SandboxBroker) -> None:
    sandbox.client_secret = "s3cret:with%colon"
    assert token_reply(sandbox, basic(password="s3cret%3Awith%25colon")).status == 200


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
    sandbox: SandboxBroker, auth: str | None, form: dict[str, str], status: int, error: str
) -> None:
    reply = token_reply(sandbox, auth, **form)
    assert (reply.status, reply.body["error"]) == (status, error)
    assert reply.body["error_description"]
    assert ("WWW-Authenticate" in reply.headers) == (status == 401)


def test_all_five_scopes_of_the_interface_document_are_accepted(sandbox: SandboxBroker) -> None:
    scopes = "document_read document_write document_file event identify"
    assert token_reply(sandbox, basic(), scope=scopes).status == 200


def test_token_form_must_be_urlencoded_and_single_valued(sandbox: SandboxBroker) -> None:
    body = b"grant_type=client_credentials&scope=identify"
    reply = sandbox.token(authorization=basic(), content_type="application/json", body=body)
    assert reply.body["error"] == "invalid_request"
    twice = body + b"&scope=event"
    reply = sandbox.token(authorization=basic(), content_type=FORM, body=twice)
    assert reply.body["error"] == "invalid_request"


def test_an_unconfigured_sandbox_accepts_no_client(clock: Clock) -> None:
    sandbox = SandboxBroker(MemoryStore(), client_id="", client_secret="", login_url=str)
    assert token_reply(sandbox, basic("", "")).status == 401


# -- bearer tokens ------------------------------------------------------------------------
def test_api_calls_need_a_valid_unexpired_bearer_token(
    sandbox: SandboxBroker, clock: Clock
) -> None:
    auth = bearer(sandbox)
    for wrong in (None, "", "Bearer", "Bearer nope", "Basic abc", auth.replace("Bearer", "Token")):
        reply = create(sandbox, auth=wrong)
        assert reply.status == 401
        assert reply.body["code"] == "UNAUTHORIZED"
        assert reply.headers["WWW-Authenticate"].startswith("Bearer")
    assert create(sandbox, auth=auth).status == 200
    clock.now += 601
    assert create(sandbox, auth=auth).status == 401
    assert retrieve(sandbox, "x", auth=auth).status == 401


def test_api_calls_need_the_identify_scope(sandbox: SandboxBroker) -> None:
    reply = create(sandbox, auth=bearer(sandbox, scope="event"))
    assert reply.status == 403
    assert 'error="insufficient_scope"' in reply.headers["WWW-Authenticate"]


# -- creating sessions --------------------------------------------------------------------
def test_create_returns_the_login_url_and_a_long_request_id(sandbox: SandboxBroker) -> None:
    reply = create(sandbox)
    assert reply.status == 200
    request_id = reply.body["RequestId"]
    assert len(request_id) == 200
    assert request_id.isalnum()
    assert request_id[:19].isdigit()
    assert reply.body["Url"] == f"https://sandbox.test/login/{request_id}/"
    assert create(sandbox).body["RequestId"] != request_id


def test_create_reads_property_names_in_any_casing(sandbox: SandboxBroker) -> None:
    body = {
        "returnUrls": {"success": URLS["Success"], "ABORT": URLS["Abort"], "error": URLS["Error"]},
        "identityProvider": "NO_BANKID_WEB",
        "language": "NO",
        "getSocialSecurityNumber": True,
        "externalReference": "abc",
        "iframe": {"domain": "Shop.Example"},
        "SomethingNew": 1,
    }
    reply = sandbox.create_session(authorization=bearer(sandbox), body=json.dumps(body).encode())
    assert reply.status == 200, reply.body
    session = sandbox.session(reply.body["RequestId"])
    assert session is not None
    assert session.identity_provider == "NO_BANKID_WEB"
    assert (session.language, session.get_social_security_number) == ("NO", True)
    assert (session.external_reference, session.iframe_domain) == ("abc", "shop.example")


@pytest.mark.parametrize("iframe", [{}, {"WebMessaging": True}, {"Domain": None, "Height": 600}])
def test_an_iframe_without_its_domain_is_refused(
    sandbox: SandboxBroker, iframe: dict[str, Any]
) -> None:
    # The published schema requires iFrame.Domain inside iFrame; a top-level "domain"
    # (the interface document's) does not stand in for it there.
    reply = create(sandbox, iFrame=iframe, domain="shop.example")
    assert reply.status == 400
    assert [e["field"] for e in reply.body["errors"]] == ["iFrame.Domain"]


def test_top_level_domain_is_read_too(sandbox: SandboxBroker) -> None:
    session = sandbox.session(create(sandbox, domain="localhost:8000").body["RequestId"])
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
    sandbox: SandboxBroker, fields: dict[str, Any], field: str
) -> None:
    reply = create(sandbox, **fields)
    assert reply.status == 400
    assert reply.body["message"]
    assert field in [e["field"] for e in reply.body["errors"]]


@pytest.mark.parametrize("body", [b"", b"not json", b"[1, 2]", b"\xff\xfe"])
def test_a_body_that_is_not_a_json_object_is_refused(sandbox: SandboxBroker, body: bytes) -> None:
    reply = sandbox.create_session(authorization=bearer(sandbox), body=body)
    assert reply.status == 400
    assert reply.body["errors"] == []


# -- records and transitions -------------------------------------------------------------
def test_the_record_through_the_states(sandbox: SandboxBroker) -> None:
    request_id = create(sandbox, IdentityProvider="NO_BANKID_WEB").body["RequestId"]
    created = retrieve(sandbox, request_id).body
    assert created == {
        "RequestId": request_id,
        "Status": "CREATED",
        "IdentityProvider": "NO_BANKID_WEB",
        "Error": None,
        "MetaData": {},
    }
    sandbox.open(request_id)
    sandbox.open(request_id)  # reloading the page changes nothing more
    assert retrieve(sandbox, request_id).body["Status"] == "USERINITIATED"
    person = builtin_persons().NORWEGIAN
    sandbox.identify(request_id, person, user_agent="UA/1", ip_address="198.51.100.4")
    record = retrieve(sandbox, request_id).body
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


def test_the_number_is_in_the_record_only_when_requested(sandbox: SandboxBroker) -> None:
    request_id = create(sandbox, GetSocialSecurityNumber=True).body["RequestId"]
    person = builtin_persons().D_NUMBER
    sandbox.identify(request_id, person)
    record = retrieve(sandbox, request_id).body
    assert record["SocialSecurityNumber"] == person.national_identity_number
    assert record["IdentityProvider"] == "NO_BUYPASS"  # the person's own: none was asked for


def test_a_provider_nobody_chose_yet_is_unknown_not_null(sandbox: SandboxBroker) -> None:
    request_id = create(sandbox).body["RequestId"]
    assert retrieve(sandbox, request_id).body["IdentityProvider"] == "UNKNOWN"
    sandbox.fail(request_id, "LOGIN")
    assert retrieve(sandbox, request_id).body["IdentityProvider"] == "UNKNOWN"
    assert parse_record(retrieve(sandbox, request_id).body).identity_provider is None


@pytest.mark.parametrize("provider", ["SWE_BANKID", "SWE_BANKID_MOBILE"])
def test_swedish_bankid_gives_no_unique_id(sandbox: SandboxBroker, provider: str) -> None:
    norwegian = builtin_persons().NORWEGIAN  # whoever identifies with it
    request_id = create(sandbox).body["RequestId"]
    sandbox.identify(request_id, norwegian, provider=provider)
    record = retrieve(sandbox, request_id).body
    assert record["IdentityProvider"] == provider
    assert record["IdentityProviderUniqueId"] is None
    assert record["FirstName"] == "Kari"
    swede = builtin_persons().SWEDISH
    request_id = create(sandbox, IdentityProvider="NO_BANKID_WEB").body["RequestId"]
    sandbox.identify(request_id, swede)  # the session's provider, not the person's usual one
    assert retrieve(sandbox, request_id).body["IdentityProviderUniqueId"] == (
        swede.identity_provider_unique_id
    )
    assert record_of(swede, "r")["IdentityProviderUniqueId"] is None


@pytest.mark.parametrize(
    ("record_status", "code"), [("ERROR", "LOGIN"), ("TIMEOUT", "TIMEOUT"), ("UNKNOWN", "X1")]
)
def test_a_session_fails_with_each_published_status(
    sandbox: SandboxBroker, record_status: str, code: str
) -> None:
    request_id = create(sandbox).body["RequestId"]
    url = sandbox.fail(request_id, code, record_status=record_status)
    assert url == f"https://shop.example/error?status={code}"
    record = retrieve(sandbox, request_id).body
    assert record["Status"] == record_status
    assert record["Error"]["ErrorCode"] == code
    assert sandbox.session_status(
        authorization=bearer(sandbox), query=f"requestId={request_id}"
    ).body == {"Done": True}
    with pytest.raises(SessionFinished):
        sandbox.abort(request_id)  # over


def test_invalidated_by_the_client(sandbox: SandboxBroker) -> None:
    request_id = create(sandbox).body["RequestId"]
    sandbox.identify(request_id, builtin_persons().NORWEGIAN)
    body = json.dumps({"RequestId": request_id}).encode()
    assert sandbox.invalidate(authorization=bearer(sandbox), query="", body=body).status == 200
    record = retrieve(sandbox, request_id).body
    assert record["Status"] == "INVALIDATED"
    assert "FirstName" not in record


def test_a_status_the_session_cannot_fail_with_is_refused(sandbox: SandboxBroker) -> None:
    request_id = create(sandbox).body["RequestId"]
    for status in ("SUCCESS", "USERABORTED", "INVALIDATED", "CREATED", "NEW"):
        with pytest.raises(ValueError, match="fails with one of"):
            sandbox.fail(request_id, "LOGIN", record_status=status)
    assert retrieve(sandbox, request_id).body["Status"] == "CREATED"


def test_the_provider_chosen_at_the_broker_is_reported(sandbox: SandboxBroker) -> None:
    request_id = create(sandbox).body["RequestId"]
    sandbox.identify(request_id, builtin_persons().NORWEGIAN, provider="SWE_BANKID")
    assert retrieve(sandbox, request_id).body["IdentityProvider"] == "SWE_BANKID"


def test_success_and_abort_urls_carry_request_and_external_ids(sandbox: SandboxBroker) -> None:
    request_id = create(sandbox, ExternalReference="a b&c").body["RequestId"]
    url = sandbox.identify(request_id, builtin_persons().SWEDISH)
    assert url.startswith("https://shop.example/ok?")
    assert parse_qs(urlsplit(url).query) == {"requestId": [request_id], "externalId": ["a b&c"]}
    assert "a%20b%26c" in url
    request_id = create(sandbox).body["RequestId"]
    url = sandbox.abort(request_id)
    assert url == f"https://shop.example/abort?requestId={request_id}&externalId=ext-1"
    assert retrieve(sandbox, request_id).body["Status"] == "USERABORTED"


def test_fail_fills_the_status_and_records_the_error(sandbox: SandboxBroker) -> None:
    request_id = create(sandbox).body["RequestId"]
    assert sandbox.fail(request_id, "LOGIN") == "https://shop.example/error?status=LOGIN"
    record = retrieve(sandbox, request_id).body
    assert record["Status"] == "ERROR"
    assert record["Error"]["ErrorCode"] == "LOGIN"
    assert record["Error"]["ErrorMessage"]
    assert parse_record(record).error is not None
    request_id = create(sandbox).body["RequestId"]
    assert sandbox.fail(request_id, "A/B?").endswith("status=A%2FB%3F")
    with pytest.raises(ValueError, match="printable"):
        sandbox.fail(create(sandbox).body["RequestId"], "two words")


def test_a_finished_session_cannot_end_twice(sandbox: SandboxBroker) -> None:
    request_id = create(sandbox).body["RequestId"]
    sandbox.abort(request_id)
    with pytest.raises(SessionFinished):
        sandbox.identify(request_id, builtin_persons().NORWEGIAN)
    with pytest.raises(UnknownSession):
        sandbox.abort("nope")
    with pytest.raises(UnknownSession):
        sandbox.open("nope")


def test_retrieve_errors(sandbox: SandboxBroker) -> None:
    unknown = retrieve(sandbox, "0" * 200)
    assert unknown.status == 404
    assert set(unknown.body) == {"message", "code"}
    missing = sandbox.get_session(authorization=bearer(sandbox), query="")
    assert missing.status == 400
    assert missing.body["errors"][0]["field"] == "requestId"


def test_another_clients_session_is_not_found(sandbox: SandboxBroker) -> None:
    request_id = create(sandbox).body["RequestId"]
    other = SandboxBroker(sandbox.store, client_id="b", client_secret="b", login_url=str)
    auth = "Bearer " + token_reply(other, basic("b", "b")).body["access_token"]
    assert retrieve(other, request_id, auth=auth).status == 404
    assert retrieve(sandbox, request_id).status == 200


def test_sessions_expire_with_the_store(sandbox: SandboxBroker, clock: Clock) -> None:
    request_id = create(sandbox).body["RequestId"]
    clock.now += 3601
    assert sandbox.session(request_id) is None


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


# -- hooks for tests, and the record of a person ---------------------------------------
def test_request_ids_and_tokens_come_from_the_given_factories(clock: Clock) -> None:
    ids = iter(["first-id", "second-id"])
    sandbox = SandboxBroker(
        MemoryStore(clock),
        client_id="cid",
        client_secret="s3cret",
        login_url=lambda rid: f"https://sandbox.test/login/{rid}/",
        clock=clock,
        request_ids=lambda: next(ids),
        tokens=lambda: "known-token",
    )
    assert token_reply(sandbox, basic()).body["access_token"] == "known-token"
    assert create(sandbox).body["RequestId"] == "first-id"
    assert create(sandbox).body["RequestId"] == "second-id"
    assert retrieve(sandbox, "second-id", "Bearer known-token").body["Status"] == "CREATED"


def test_record_of_is_the_record_of_an_identified_session(sandbox: SandboxBroker) -> None:
    person = builtin_persons().SWEDISH
    request_id = create(sandbox, GetSocialSecurityNumber=True).body["RequestId"]
    sandbox.identify(request_id, person)
    assert record_of(person, request_id) == retrieve(sandbox, request_id).body
    without = record_of(person, request_id, "ERROR", with_number=False)
    assert "SocialSecurityNumber" not in without
    assert without["Status"] == "ERROR"
