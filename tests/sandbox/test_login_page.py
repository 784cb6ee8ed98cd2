"""The sandbox's login page over HTTP (Django's test client): the person at the broker,
who identifies as a built-in or a typed-in person, cancels or fails the session there, in
a page of its own or in the site's frame."""

from __future__ import annotations

import json
import re
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
from django.test import Client

from django_eid.sandbox.persons import builtin_persons
from tests.sandbox.over_http import create, login_path, retrieve


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
