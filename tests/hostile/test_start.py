"""Hostile starts: bad display and provider, open-redirect ``next`` values, no CSRF token,
no login, GET instead of POST. Nothing reaches the broker unless the input is valid, and an
unsafe ``next`` is dropped silently: the user lands on ``SUCCESS_URL``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from django.contrib.auth.models import AbstractBaseUser
from django.test import Client

from tests.hostile.conftest import FakeBroker, Fired, Started, Status, logged_in, snapshot

pytestmark = pytest.mark.django_db

START = "/eid/start/"


def assert_nothing_started(response: Any, status: int, broker: FakeBroker, fired: Fired) -> None:
    assert response.status_code == status
    assert snapshot() == {}
    assert dict(broker.counts) == {}
    assert fired.names == []


# -- display and provider ----------------------------------------------------------------
@pytest.mark.parametrize(
    "display", ["popup", "IFRAME", "Redirect", "redirect\x00", "1", "<script>x</script>", "i" * 65]
)
def test_an_unknown_display_is_a_400_and_nothing_is_sent(
    alice_client: Client, broker: FakeBroker, fired: Fired, display: str
) -> None:
    response = alice_client.post(START, {"display": display})
    assert_nothing_started(response, 400, broker, fired)
    assert b"Select a valid choice" in response.content
    assert b"<script>x" not in response.content


MALFORMED_PROVIDERS = [
    "no_bankid_web",
    "NO-BANKID",
    "NO BANKID",
    "_NO_BANKID",
    "NO_BANKID_",
    "NO__BANKID",
    "NØ_BANKID",
    "NO_BANKID\x00",
    "A" * 65,
    "NO_BANKID'--",
    "<script>alert(1)</script>",
    "NO_BANKID%0AX",
    "../NO_BANKID",
]


@pytest.mark.parametrize("provider", MALFORMED_PROVIDERS)
def test_a_malformed_provider_is_a_400_and_nothing_is_sent(
    alice_client: Client, broker: FakeBroker, fired: Fired, provider: str
) -> None:
    response = alice_client.post(START, {"provider": provider})
    assert_nothing_started(response, 400, broker, fired)
    assert b"could not be started" in response.content
    assert b"<script>alert" not in response.content


RESTRICTIONS = {
    "one allowed": {"ALLOWED_PROVIDERS": ["NO_BANKID_WEB"]},
    "two allowed": {"ALLOWED_PROVIDERS": ["NO_BANKID_WEB", "NO_BUYPASS"]},
    "fixed provider": {"IDENTITY_PROVIDER": "NO_BANKID_WEB"},
}


@pytest.mark.parametrize("restriction", list(RESTRICTIONS))
@pytest.mark.parametrize("provider", ["SWE_BANKID", "NO_BANKID_MOBILE", "UNKNOWN"])
def test_a_provider_outside_the_allowed_ones_is_a_400_and_nothing_is_sent(
    alice_client: Client,
    broker: FakeBroker,
    fired: Fired,
    eid: Callable[..., None],
    restriction: str,
    provider: str,
) -> None:
    eid(**RESTRICTIONS[restriction])
    response = alice_client.post(START, {"provider": provider})
    assert_nothing_started(response, 400, broker, fired)


@pytest.mark.parametrize("restriction", list(RESTRICTIONS))
def test_an_allowed_provider_is_sent_as_chosen(
    start: Callable[..., Started], eid: Callable[..., None], restriction: str
) -> None:
    eid(**RESTRICTIONS[restriction])
    assert start(provider="NO_BANKID_WEB").sent["IdentityProvider"] == "NO_BANKID_WEB"


# -- next: open-redirect bypasses -----------------------------------------------------------
OPEN_REDIRECTS = [
    "//evil.example",
    "///evil.example",
    "////evil.example",
    "\\\\evil.example",
    "/\\evil.example",
    "\\/evil.example",
    "/\\/evil.example",
    "https:evil.example",
    "https:/evil.example",
    "https:///evil.example",
    "http:\\\\evil.example",
    "javascript:alert(1)",
    "JavaScript:alert(1)",
    "javascript://testserver/%0Aalert(1)",
    "data:text/html,<script>alert(1)</script>",
    "vbscript:msgbox(1)",
    "http://good@evil.example",
    "http://testserver@evil.example/",
    "http://testserver:80@evil.example/",
    "//testserver@evil.example",
    "https://evil.example/",
    "https://testserver.evil.example/",
    "https://evil.example/testserver",
    "ftp://testserver/account/",
    " /account/",
    " //evil.example",
    "\t//evil.example",
    "\n//evil.example",
    "\x00//evil.example",
    "\x01/account/",
    "/\t/evil.example",
    "/\r\n/evil.example",
    "/account/\r\nSet-Cookie: x=1",
    "\u00a0//evil.example",
    "\u3000//evil.example",
    "//evil\u3002example",
    "/account/\x7f",
    "/" + "a" * 2000,
]


@pytest.mark.parametrize("next_url", OPEN_REDIRECTS, ids=range(len(OPEN_REDIRECTS)))
def test_an_unsafe_next_is_dropped_and_the_user_lands_on_success_url(
    start: Callable[..., Started],
    alice_client: Client,
    broker: FakeBroker,
    eid: Callable[..., None],
    next_url: str,
) -> None:
    eid(SUCCESS_URL="/welcome/")
    started = start(next=next_url)
    assert started.row.next_url == ""
    for sent in started.sent["ReturnUrls"].values():
        assert "evil" not in sent
    response = alice_client.get(started.success_url())
    assert (response.status_code, response["Location"]) == (302, "/welcome/")
    assert started.row.status == Status.SUCCESS


@pytest.mark.parametrize("next_url", OPEN_REDIRECTS, ids=range(len(OPEN_REDIRECTS)))
def test_an_unsafe_next_never_reaches_the_start_form(
    alice_client: Client, broker: FakeBroker, fired: Fired, next_url: str
) -> None:
    response = alice_client.get(START, {"next": next_url, "provider": "NO_BANKID_WEB"})
    assert response.status_code == 200
    assert response.context["form"]["next"].value() == ""
    assert b"evil" not in response.content
    assert_nothing_started(response, 200, broker, fired)  # GET never starts (login-CSRF)


@pytest.mark.parametrize("next_url", ["/account/?tab=eid&x=1#top", "http://testserver/account/"])
def test_a_safe_next_is_kept_to_the_end(
    start: Callable[..., Started], alice_client: Client, next_url: str
) -> None:
    started = start(next=next_url)
    assert started.row.next_url == next_url
    assert alice_client.get(started.success_url())["Location"] == next_url


def test_http_next_is_dropped_on_an_https_site(broker: FakeBroker, alice: AbstractBaseUser) -> None:
    client = logged_in(alice)
    response = client.post(START, {"next": "http://testserver/account/"}, secure=True)
    assert response.status_code == 302
    row = snapshot().popitem()[1]
    assert row["next_url"] == ""
    assert broker.create_requests[0]["ReturnUrls"]["Success"].startswith("https://testserver/")


# -- CSRF, login, GET -----------------------------------------------------------------------
@pytest.mark.parametrize("token", ["missing", "wrong", "only in the cookie"])
def test_a_start_without_a_valid_csrf_token_is_403_and_nothing_is_sent(
    alice: AbstractBaseUser, broker: FakeBroker, fired: Fired, token: str
) -> None:
    client = logged_in(alice, enforce_csrf_checks=True)
    client.get(START)  # sets the CSRF cookie, as a browser would
    data = {"display": "redirect"}
    if token == "wrong":
        data["csrfmiddlewaretoken"] = "x" * 64
    response = client.post(START, data)
    assert_nothing_started(response, 403, broker, fired)


def test_a_start_with_the_csrf_token_goes_to_the_broker(
    alice: AbstractBaseUser, broker: FakeBroker
) -> None:
    client = logged_in(alice, enforce_csrf_checks=True)
    token = client.get(START).context["csrf_token"]
    response = client.post(START, {"csrfmiddlewaretoken": str(token)})
    assert response.status_code == 302
    assert broker.counts["create"] == 1


@pytest.mark.parametrize("method", ["get", "post"])
def test_an_anonymous_user_is_sent_to_log_in_and_nothing_is_sent(
    broker: FakeBroker, fired: Fired, method: str
) -> None:
    response = getattr(Client(), method)(START, {"next": "/account/", "display": "redirect"})
    assert_nothing_started(response, 302, broker, fired)
    assert response["Location"].startswith("/login/?next=/eid/start/")


@pytest.mark.parametrize(
    "query",
    ["provider=NO_BANKID_WEB", "display=iframe", "next=/account/&display=redirect", ""],
)
def test_a_get_never_starts_a_session(
    alice_client: Client, broker: FakeBroker, fired: Fired, query: str
) -> None:
    response = alice_client.get(f"{START}?{query}")
    assert_nothing_started(response, 200, broker, fired)
    assert response["X-Frame-Options"] == "DENY"
