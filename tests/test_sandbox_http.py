"""The sandbox app over HTTP (Django test client): token endpoint, session API, login page, gate."""

from __future__ import annotations

import base64
import json
import re
import time
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
from django.core import checks
from django.test import Client

from django_eid.sandbox.broker import CLIENT_ID, CLIENT_SECRET
from django_eid.sandbox.checks import check_sandbox
from django_eid.sandbox.persons import builtin_persons
from tests.fixtures_client import SANDBOX_URL, SettingsWrapper, eid_settings_with, sandbox_settings

TOKEN = "/eid-sandbox/oauth/connect/token"
SESSION = "/eid-sandbox/identification/session"
FORM = "application/x-www-form-urlencoded"
BASIC = "Basic " + base64.b64encode(f"{CLIENT_ID}:{CLIENT_SECRET}".encode()).decode()
URLS = {
    "Success": "http://shop.test/eid/ok/?requestId=[1]&externalId=[2]",
    "Abort": "http://shop.test/eid/abort/?requestId=[1]&externalId=[2]",
    "Error": "http://shop.test/eid/error/?status=[0]&requestId=[1]&externalId=[2]",
}
STATUS = SESSION + "/status"


@pytest.fixture(autouse=True)
def sandbox_allowed(settings: SettingsWrapper) -> None:
    # The site's broker is the sandbox; tests/settings.py has DEBUG False, as production would.
    settings.DJANGO_EID = sandbox_settings()


def token(client: Client, scope: str = "identify", auth: str | None = BASIC) -> Any:
    headers = {"Authorization": auth} if auth else {}
    body = f"grant_type=client_credentials&scope={scope}"
    return client.post(TOKEN, body, content_type=FORM, headers=headers)


def bearer(client: Client) -> dict[str, str]:
    return {"Authorization": "Bearer " + token(client).json()["access_token"]}


def create(client: Client, headers: dict[str, str] | None = None, **fields: Any) -> Any:
    body = json.dumps({"ReturnUrls": URLS, "ExternalReference": "ext-1", **fields})
    if headers is None:
        headers = bearer(client)
    return client.post(SESSION, body, content_type="application/json", headers=headers)


def retrieve(client: Client, request_id: str, headers: dict[str, str] | None = None) -> Any:
    if headers is None:
        headers = bearer(client)
    return client.get(SESSION, {"requestId": request_id}, headers=headers)


def login_path(client: Client, **fields: Any) -> tuple[str, str]:
    """Create a session; return the login page's path and the request id."""
    body = create(client, **fields).json()
    return urlsplit(body["Url"]).path, body["RequestId"]


# -- token endpoint ------------------------------------------------------------------------------
def test_token_with_basic_authentication(client: Client) -> None:
    response = token(client)
    assert response.status_code == 200
    assert response["Content-Type"] == "application/json"
    assert response["Cache-Control"] == "no-store"
    body = response.json()
    assert body["token_type"] == "Bearer"
    assert body["expires_in"] == 3600
    assert body["access_token"].count(".") == 2


def test_token_with_client_secret_post(client: Client) -> None:
    body = (
        "grant_type=client_credentials&scope=identify"
        f"&client_id={CLIENT_ID}&client_secret={CLIENT_SECRET}"
    )
    response = client.post(TOKEN, body, content_type=FORM)
    assert response.status_code == 200


def test_token_lifetime_is_a_setting(client: Client, settings: SettingsWrapper) -> None:
    settings.DJANGO_EID = {**settings.DJANGO_EID, "SANDBOX_TOKEN_LIFETIME": 120}
    assert token(client).json()["expires_in"] == 120


@pytest.mark.parametrize(
    ("scope", "auth", "status", "error"),
    [
        ("identify%20admin", BASIC, 400, "invalid_scope"),
        (
            "identify",
            "Basic " + base64.b64encode(f"{CLIENT_ID}:wrong".encode()).decode(),
            401,
            "invalid_client",
        ),
        ("identify", None, 401, "invalid_client"),
    ],
)
def test_token_errors(
    client: Client, scope: str, auth: str | None, status: int, error: str
) -> None:
    response = token(client, scope=scope, auth=auth)
    assert response.status_code == status
    assert response.json()["error"] == error


def test_unsupported_grant_type(client: Client) -> None:
    body = "grant_type=password&scope=identify&username=a&password=b"
    response = client.post(TOKEN, body, content_type=FORM, headers={"Authorization": BASIC})
    assert response.status_code == 400
    assert response.json()["error"] == "unsupported_grant_type"


def test_token_endpoint_allows_only_post(client: Client) -> None:
    assert client.get(TOKEN).status_code == 405


# -- session API ---------------------------------------------------------------------------------
def test_create_and_retrieve(client: Client) -> None:
    response = create(client, IdentityProvider="NO_BANKID_WEB")
    assert response.status_code == 200
    body = response.json()
    assert body["Url"].startswith("http://testserver/eid-sandbox/login/")
    assert len(body["RequestId"]) == 200
    record = retrieve(client, body["RequestId"]).json()
    assert record["Status"] == "CREATED"
    assert record["IdentityProvider"] == "NO_BANKID_WEB"


def test_create_validation_errors(client: Client) -> None:
    response = create(client, ReturnUrls={"Success": "/relative"}, Language="DE")
    assert response.status_code == 400
    fields = {e["field"] for e in response.json()["errors"]}
    assert {"ReturnUrls.Success", "ReturnUrls.Abort", "ReturnUrls.Error", "Language"} <= fields


def test_unknown_session_is_404_json(client: Client) -> None:
    response = retrieve(client, "0" * 200)
    assert response.status_code == 404
    assert set(response.json()) == {"message", "code"}


@pytest.mark.parametrize("auth", [None, "Bearer", "Bearer not-a-token", BASIC])
def test_missing_or_wrong_bearer_is_401(client: Client, auth: str | None) -> None:
    headers = {"Authorization": auth} if auth else {}
    assert create(client, headers=headers).status_code == 401
    response = retrieve(client, "x", headers=headers)
    assert response.status_code == 401
    assert response["WWW-Authenticate"].startswith("Bearer")


def test_expired_bearer_is_401(client: Client, monkeypatch: pytest.MonkeyPatch) -> None:
    headers = bearer(client)
    request_id = create(client, headers=headers).json()["RequestId"]
    assert retrieve(client, request_id, headers=headers).status_code == 200
    later = time.time() + 3601
    monkeypatch.setattr(time, "time", lambda: later)
    assert retrieve(client, request_id, headers=headers).status_code == 401


def test_a_token_without_identify_is_403(client: Client) -> None:
    headers = {"Authorization": "Bearer " + token(client, scope="event").json()["access_token"]}
    assert create(client, headers=headers).status_code == 403


def test_latency_is_simulated(
    client: Client, settings: SettingsWrapper, monkeypatch: pytest.MonkeyPatch
) -> None:
    slept: list[float] = []
    monkeypatch.setattr("django_eid.sandbox.views.time.sleep", slept.append)
    settings.DJANGO_EID = {**settings.DJANGO_EID, "SANDBOX_LATENCY": 0.25}
    create(client)
    assert slept == [0.25, 0.25]  # the token request, then the create request


# -- the login page ------------------------------------------------------------------------------
def test_login_page_starts_the_session_and_offers_persons(client: Client) -> None:
    path, request_id = login_path(client, IdentityProvider="NO_BUYPASS")
    response = client.get(path)
    assert response.status_code == 200
    html = response.content.decode()
    assert "SANDBOX — not a real identification" in html
    # The return URL must not get the session id in a Referer; the page itself needs its Origin.
    assert '<meta name="referrer" content="same-origin">' in html
    assert "NO_BUYPASS" in html
    assert 'name="provider"' not in html  # the site chose the provider
    for person in builtin_persons():
        assert f'value="{person.key}"' in html
    assert 'value="CUSTOM"' in html
    assert 'value="TIMEOUT"' in html
    assert 'value="LOGIN"' in html
    assert response["Cache-Control"].startswith("max-age=0")
    assert retrieve(client, request_id).json()["Status"] == "USERINITIATED"


def test_login_page_offers_a_provider_choice_when_none_was_given(client: Client) -> None:
    path, _ = login_path(client)
    assert 'name="provider"' in client.get(path).content.decode()


def test_identify_redirects_to_success_with_placeholders(client: Client) -> None:
    path, request_id = login_path(client)
    response = client.post(
        path,
        {"action": "identify", "person": "FINNISH", "provider": "FI_TUPAS"},
        REMOTE_ADDR="198.51.100.9",
    )
    assert response.status_code == 302
    location = urlsplit(response["Location"])
    assert location.netloc == "shop.test"
    assert parse_qs(location.query) == {"requestId": [request_id], "externalId": ["ext-1"]}
    record = retrieve(client, request_id).json()
    assert (record["Status"], record["IdentityProvider"]) == ("SUCCESS", "FI_TUPAS")
    assert record["LastName"] == "Virtanen"
    assert record["EnvironmentInfo"]["IPAddress"] == "198.51.100.9"
    assert "SocialSecurityNumber" not in record


def test_someone_else_typed_in(client: Client) -> None:
    path, request_id = login_path(client, GetSocialSecurityNumber=True)
    data = {"action": "identify", "person": "CUSTOM", "first_name": "Per", "last_name": "Olsen"}
    response = client.post(path, data)
    assert response.status_code == 400
    assert "Required for someone else." in response.content.decode()
    # A valid Norwegian number for 29 February 1960 (individual number 124; check digits 2, 0).
    data.update(date_of_birth="1960-02-29", national_identity_number="29026012420")
    assert client.post(path, data).status_code == 302
    record = retrieve(client, request_id).json()
    assert (record["Name"], record["DateOfBirth"]) == ("Olsen, Per", "290260")
    assert record["SocialSecurityNumber"] == "29026012420"


@pytest.mark.parametrize(
    ("data", "field"),
    [
        ({"action": "dance"}, "action"),
        ({"action": "fail", "error_status": "NOT_A_STATUS"}, "error_status"),
        ({"action": "identify", "person": "NORWEGIAN", "provider": "NO_SUCH_ID"}, "provider"),
    ],
    ids=["action", "error_status", "provider"],
)
def test_a_tampered_form_says_what_was_wrong(
    client: Client, data: dict[str, str], field: str
) -> None:
    path, request_id = login_path(client)
    response = client.post(path, data)
    assert response.status_code == 400
    # The field's own error is on the page, not only "Please correct the details below".
    assert "Select a valid choice." in response.content.decode(), field
    assert retrieve(client, request_id).json()["Status"] != "SUCCESS"


def test_abort_and_fail_redirect_to_their_urls(client: Client) -> None:
    path, request_id = login_path(client)
    response = client.post(path, {"action": "abort"})
    assert (
        response["Location"]
        == f"http://shop.test/eid/abort/?requestId={request_id}&externalId=ext-1"
    )
    path, request_id = login_path(client)
    response = client.post(path, {"action": "fail", "error_status": "LOGIN"})
    # [1] and [2] too, as the deployed service fills them in the Error URL.
    assert response["Location"] == (
        f"http://shop.test/eid/error/?status=LOGIN&requestId={request_id}&externalId=ext-1"
    )
    assert retrieve(client, request_id).json()["Error"]["ErrorCode"] == "LOGIN"


@pytest.mark.parametrize("record_status", ["ERROR", "TIMEOUT", "UNKNOWN"])
def test_the_page_fails_a_session_with_each_published_status(
    client: Client, record_status: str
) -> None:
    path, request_id = login_path(client)
    page = client.get(path).content.decode()
    assert f'<option value="{record_status}">' in page
    form = {"action": "fail", "error_status": "TIMEOUT", "record_status": record_status}
    response = client.post(path, form)
    assert response["Location"].startswith("http://shop.test/eid/error/?status=TIMEOUT&")
    record = retrieve(client, request_id).json()
    assert record["Status"] == record_status
    assert record["IdentityProvider"] == "UNKNOWN"  # nobody chose one


def test_the_status_call_says_done_without_personal_data(client: Client) -> None:
    path, request_id = login_path(client)
    headers = bearer(client)
    answer = client.get(STATUS, {"requestId": request_id}, headers=headers)
    assert (answer.status_code, answer.json()) == (200, {"Done": False})
    client.get(path)  # the person opens the page: USERINITIATED, still not done
    assert client.get(STATUS, {"requestId": request_id}, headers=headers).json() == {"Done": False}
    client.post(path, {"action": "identify", "person": "NORWEGIAN"})
    answer = client.get(STATUS, {"requestId": request_id}, headers=headers)
    assert answer.json() == {"Done": True}
    assert "Nordmann" not in answer.content.decode()
    assert client.get(STATUS, {"requestId": "nope"}, headers=headers).status_code == 404
    assert client.get(STATUS, {"requestId": request_id}).status_code == 401


def test_an_iframe_session_ends_by_moving_the_parent_page(client: Client) -> None:
    path, request_id = login_path(client, iFrame={"Domain": "shop.test"})
    response = client.post(path, {"action": "identify", "person": "NORWEGIAN"})
    assert response.status_code == 200  # a page inside the frame, not a redirect
    page = response.content.decode()
    found = re.search(r'var url = "([^"]*)";', page)
    assert found is not None
    success = f"http://shop.test/eid/ok/?requestId={request_id}&externalId=ext-1"
    assert json.loads(f'"{found.group(1)}"') == success  # escapejs writes \u0026 for &
    assert "window.parent.location.href = url;" in page
    assert "postMessage" not in page
    assert 'target="_parent"' in page  # and a link, for a browser that refuses the script
    assert "frame-ancestors 'self' shop.test" in response["Content-Security-Policy"]


def test_with_web_messaging_it_posts_a_message_to_the_sites_origin_only(client: Client) -> None:
    path, _ = login_path(client, iFrame={"Domain": "shop.test", "WebMessaging": True})
    page = client.post(path, {"action": "abort"}).content.decode()
    assert "window.parent.postMessage(" in page
    assert '"http://shop.test");' in page  # the target origin: the return URL's
    assert "window.parent.location.href" not in page


def test_the_web_messaging_script_follows_only_its_own_messages(client: Client) -> None:
    response = client.get("/eid-sandbox/web-messaging.js")
    assert response["Content-Type"].startswith("text/javascript")
    script = response.content.decode()
    assert 'var sandboxOrigin = "http://testserver";' in script
    assert "if (event.origin !== sandboxOrigin) { return; }" in script
    assert "if (target.origin !== window.location.origin) { return; }" in script


def test_a_prefilled_number_is_a_hint_kept_out_of_the_record(client: Client) -> None:
    number = builtin_persons().NORWEGIAN.national_identity_number
    path, request_id = login_path(client, PreFilledSocialSecurityNumber=number)
    client.post(path, {"action": "identify", "person": "SWEDISH"})
    record = retrieve(client, request_id).json()
    assert record["FirstName"] == "Astrid"  # the person who identified decides
    assert number not in json.dumps(record)
    assert create(client, PreFilledSocialSecurityNumber=12345).status_code == 400


def test_an_ended_or_unknown_session_has_no_login_page(client: Client) -> None:
    path, _ = login_path(client)
    client.post(path, {"action": "abort"})
    assert client.get(path).status_code == 410
    assert client.post(path, {"action": "identify", "person": "NORWEGIAN"}).status_code == 410
    assert client.get("/eid-sandbox/login/nope/").status_code == 404
    assert client.post("/eid-sandbox/login/nope/", {"action": "abort"}).status_code == 404


def test_the_login_form_works_without_a_csrf_cookie() -> None:
    # Inside a third-party iframe the browser never gets Django's CSRF cookie; as at the
    # real broker, the unguessable session id in the URL authorises the POST.
    strict = Client(enforce_csrf_checks=True)
    path, _ = login_path(strict)
    assert strict.post(path, {"action": "abort"}).status_code == 302
    # ... once: the session has ended.
    assert strict.post(path, {"action": "abort"}).status_code == 410


@pytest.mark.parametrize(
    ("language", "django"), [("NO", "nb"), ("SV", "sv"), ("DA", "da"), ("FI", "fi"), ("EN", "en")]
)
def test_login_page_in_the_requested_language(client: Client, language: str, django: str) -> None:
    path, _ = login_path(client, Language=language)
    response = client.get(path)
    assert response["Content-Language"] == django
    assert f'<html lang="{django}">' in response.content.decode()


def test_login_page_may_not_be_framed_by_default(client: Client) -> None:
    path, _ = login_path(client)
    response = client.get(path)
    assert response["X-Frame-Options"] == "DENY"
    assert response["Content-Security-Policy"] == "frame-ancestors 'none'"


@pytest.mark.parametrize("field", ["iFrame", "domain"])
def test_login_page_may_be_framed_by_the_parent_domain(client: Client, field: str) -> None:
    value: Any = {"Domain": "shop.example"} if field == "iFrame" else "shop.example"
    path, _ = login_path(client, **{field: value})
    response = client.get(path)
    assert "X-Frame-Options" not in response
    policy = response["Content-Security-Policy"]
    assert policy == (
        "frame-ancestors 'self' shop.example https://shop.example http://shop.example "
        "shop.example:* https://shop.example:* http://shop.example:*"
    )


# -- the DEBUG gate and the system checks ---------------------------------------------------------
def test_refused_without_debug_unless_allowed(client: Client, settings: SettingsWrapper) -> None:
    path, _ = login_path(client)
    settings.DJANGO_EID = sandbox_settings(SANDBOX_ALLOW_WITHOUT_DEBUG=None)
    assert token(client).status_code == 404
    assert client.post(SESSION, "{}", content_type="application/json").status_code == 404
    assert client.get(path).status_code == 404
    settings.DEBUG = True
    assert token(client).status_code == 200
    assert client.get(path).status_code == 200


# -- only the sandbox's own client, only for a site whose broker it is ------------------------------
REAL = {"CLIENT_ID": "real-client", "CLIENT_SECRET": "real-secret-from-the-broker"}


def test_the_token_endpoint_never_confirms_the_sites_credentials(
    client: Client, settings: SettingsWrapper
) -> None:
    # Real credentials next to SANDBOX_ALLOW_WITHOUT_DEBUG: a right guess of the real secret
    # must look exactly like a wrong one.
    settings.DJANGO_EID = sandbox_settings(**REAL)
    real = base64.b64encode(f"{REAL['CLIENT_ID']}:{REAL['CLIENT_SECRET']}".encode()).decode()
    wrong = base64.b64encode(f"{REAL['CLIENT_ID']}:a-wrong-guess".encode()).decode()
    answers = [token(client, auth=f"Basic {basic}") for basic in (real, wrong)]
    assert [a.status_code for a in answers] == [401, 401]
    assert answers[0].json() == answers[1].json()
    form = f"grant_type=client_credentials&scope=identify&client_id={REAL['CLIENT_ID']}"
    posted = client.post(TOKEN, f"{form}&client_secret={REAL['CLIENT_SECRET']}", content_type=FORM)
    assert posted.status_code == 401
    assert token(client).status_code == 200  # the sandbox's own client


@pytest.mark.parametrize(
    "elsewhere",
    [
        {"BASE_URL": "https://api.broker.test", "AUTH_URL": "https://auth.broker.test"},
        {"BASE_URL": "https://api.broker.test"},
        {"AUTH_URL": "https://auth.broker.test"},
        {"BASE_URL": "http://other.test/eid-sandbox"},  # another host's sandbox
        {"AUTH_URL": "http://testserver:8000/eid-sandbox"},  # another port
        {"BASE_URL": "http://testserver/elsewhere"},  # another path
        {"BASE_URL": None},  # v1 has no default
    ],
)
def test_no_answer_unless_the_sites_broker_is_this_sandbox(
    client: Client, settings: SettingsWrapper, elsewhere: dict[str, Any]
) -> None:
    path, _ = login_path(client)
    settings.DJANGO_EID = sandbox_settings(**elsewhere)
    assert token(client).status_code == 404
    assert client.post(SESSION, "{}", content_type="application/json").status_code == 404
    assert client.get(path).status_code == 404
    assert client.get("/eid-sandbox/web-messaging.js").status_code == 404


@pytest.mark.parametrize(
    "url",
    [
        SANDBOX_URL,
        SANDBOX_URL + "/",
        "HTTP://TestServer/eid-sandbox",
        "https://testserver/eid-sandbox",
        "http://testserver:80/eid-sandbox",
    ],
)
def test_the_sandbox_is_recognised_however_its_url_is_written(
    client: Client, settings: SettingsWrapper, url: str
) -> None:
    # A proxy in front may change the scheme the sandbox sees, not where the calls go.
    settings.DJANGO_EID = sandbox_settings(url)
    assert token(client).status_code == 200


def test_checks_of_the_sites_broker(settings: SettingsWrapper) -> None:
    settings.DEBUG = True

    def found(**values: Any) -> set[str | None]:
        settings.DJANGO_EID = sandbox_settings(**values)
        return {m.id for m in checks.run_checks(tags=["django_eid_sandbox"])}

    assert found() == set()
    assert found(BASE_URL="https://api.broker.test") == {"django_eid.W101"}
    assert found(AUTH_URL="http://127.0.0.1:8000/elsewhere") == {"django_eid.W101"}
    assert found(**REAL) == {"django_eid.W102"}
    settings.DJANGO_EID = sandbox_settings(**REAL)
    (message,) = checks.run_checks(tags=["django_eid_sandbox"])
    assert REAL["CLIENT_SECRET"] not in f"{message.msg} {message.hint}"
    # Against a real broker with its credentials: W101 says it all.
    assert found(BASE_URL="https://api.broker.test", **REAL) == {"django_eid.W101"}


def run_checks(settings: SettingsWrapper, *, debug: bool, allow: bool | None) -> set[str | None]:
    settings.DEBUG = debug
    settings.DJANGO_EID = sandbox_settings(SANDBOX_ALLOW_WITHOUT_DEBUG=allow)
    return {m.id for m in checks.run_checks(tags=["django_eid_sandbox"])}


def test_checks(settings: SettingsWrapper) -> None:
    assert run_checks(settings, debug=True, allow=None) == set()
    assert run_checks(settings, debug=False, allow=None) == {"django_eid.E100"}
    assert run_checks(settings, debug=False, allow=True) == {"django_eid.W100"}
    assert run_checks(settings, debug=True, allow=True) == set()


def test_the_checks_are_registered_apart_from_the_apps_settings_checks(
    settings: SettingsWrapper,
) -> None:
    assert check_sandbox in checks.registry.registry.get_checks()
    settings.DEBUG = False
    settings.DJANGO_EID = eid_settings_with(SANDBOX_ALLOW_WITHOUT_DEBUG=None)
    assert "django_eid.E100" not in {m.id for m in checks.run_checks(tags=["django_eid"])}
    assert "django_eid.E100" in {m.id for m in checks.run_checks()}


def test_check_of_the_sandbox_cache(settings: SettingsWrapper) -> None:
    settings.DJANGO_EID = sandbox_settings(SANDBOX_CACHE="nope")
    settings.DEBUG = True
    assert {m.id for m in check_sandbox()} == {"django_eid.E101"}


def test_a_double_click_that_loses_the_race_gets_the_ended_page(
    client: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    from django_eid.sandbox.broker import SandboxBroker

    path, _ = login_path(client)
    real_abort = SandboxBroker.abort

    def abort_after_the_other_click(self: SandboxBroker, request_id: str) -> str:
        real_abort(self, request_id)  # the first click wins between check and act ...
        return real_abort(self, request_id)  # ... so this one finds the session ended

    monkeypatch.setattr(SandboxBroker, "abort", abort_after_the_other_click)
    response = client.post(path, {"action": "abort"})
    assert response.status_code == 410
    assert "already ended" in response.content.decode()
