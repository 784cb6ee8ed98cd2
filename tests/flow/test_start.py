"""The start view: the form on GET, validation, the create request, the redirect.

Nothing reaches the broker unless the input is valid (a bad display or provider, no CSRF
token, no login, a GET); an unsafe ``next`` is dropped silently, and the user lands on
``SUCCESS_URL``.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from html import escape
from typing import Any
from urllib.parse import urlsplit

import pytest
from django.contrib.auth.models import AbstractBaseUser
from django.test import Client
from django.urls import reverse

from django_eid.models import Identification
from tests.fixtures_broker import BROKER_PAGE, ScriptedBroker
from tests.fixtures_views import Signals, Started, logged_in, snapshot
from tests.flow.returns import START

pytestmark = pytest.mark.django_db

Status = Identification.Status


def assert_nothing_started(
    response: Any, status: int, broker: ScriptedBroker, signals: Signals
) -> None:
    assert response.status_code == status
    assert snapshot() == {}
    assert dict(broker.counts) == {}
    assert signals.names == []


def test_the_start_url_is_namespaced() -> None:
    assert reverse("django_eid:start") == START


# -- GET ------------------------------------------------------------------
def test_get_renders_a_csrf_protected_form_that_posts_back(
    alice_client: Client, broker: ScriptedBroker
) -> None:
    response = alice_client.get(START)
    assert response.status_code == 200
    assert response.templates[0].name == "django_eid/start.html"
    html = response.content.decode()
    assert re.search(r'<form method="post" action="/eid/start/">', html)
    assert 'name="csrfmiddlewaretoken"' in html
    assert 'name="display" value="redirect"' in html
    assert 'name="display" value="iframe"' in html
    assert len(broker.mock.calls) == 0
    assert not Identification.objects.exists()


@pytest.mark.parametrize(
    "query",
    ["provider=NO_BANKID_WEB", "display=iframe", "next=/account/&display=redirect", ""],
)
def test_a_get_never_starts_a_session(
    alice_client: Client, broker: ScriptedBroker, signals: Signals, query: str
) -> None:
    """Only a POST with the form's CSRF token starts (a GET would be a login CSRF)."""
    response = alice_client.get(f"{START}?{query}")
    assert_nothing_started(response, 200, broker, signals)
    assert response["X-Frame-Options"] == "DENY"


def test_get_prefills_next_and_provider(alice_client: Client) -> None:
    response = alice_client.get(START, {"next": "/account/?tab=2", "provider": "NO_BANKID_WEB"})
    form = response.context["form"]
    assert form.initial == {"next": "/account/?tab=2", "provider": "NO_BANKID_WEB"}
    html = response.content.decode()
    assert 'name="next" value="/account/?tab=2"' in html
    assert 'name="provider" value="NO_BANKID_WEB"' in html


def test_get_prefills_the_provider_choice(alice_client: Client, eid: Callable[..., None]) -> None:
    eid(ALLOWED_PROVIDERS=["NO_BANKID_WEB", "NO_BUYPASS"])
    response = alice_client.get(START, {"provider": "NO_BUYPASS"})
    html = response.content.decode()
    assert '<select name="provider"' in html
    assert re.search(r'<option value="NO_BUYPASS" selected>', html)
    assert not re.search(r'<option value="NO_BANKID_WEB" selected>', html)


@pytest.mark.parametrize("method", ["get", "post"])
def test_an_anonymous_user_is_sent_to_log_in_and_nothing_is_sent(
    broker: ScriptedBroker, signals: Signals, method: str
) -> None:
    response = getattr(Client(), method)(START, {"next": "/account/", "display": "redirect"})
    assert_nothing_started(response, 302, broker, signals)
    assert response["Location"].startswith("/login/?next=/eid/start/")


# -- POST: validation ---------------------------------------------------------
@pytest.mark.parametrize(
    "display", ["popup", "IFRAME", "Redirect", "redirect\x00", "1", "<script>x</script>", "i" * 65]
)
def test_an_unknown_display_is_a_400_and_nothing_is_sent(
    alice_client: Client, broker: ScriptedBroker, signals: Signals, display: str
) -> None:
    response = alice_client.post(START, {"display": display})
    assert_nothing_started(response, 400, broker, signals)
    page = response.content.decode()
    assert f"Select a valid choice. {escape(display, quote=False)} is not one of" in page
    assert "<script>x" not in page


#: A provider name that is not one, and what the page says of it.
MALFORMED_PROVIDERS = [
    ("no_bankid_web", "is not a provider name"),
    ("NO-BANKID", "is not a provider name"),
    ("NO BANKID", "is not a provider name"),
    ("_NO_BANKID", "is not a provider name"),
    ("NO_BANKID_", "is not a provider name"),
    ("NO__BANKID", "is not a provider name"),
    ("NØ_BANKID", "is not a provider name"),
    ("NO_BANKID\x00", "Null characters are not allowed"),
    ("A" * 65, "at most 64 characters"),
    ("NO_BANKID'--", "is not a provider name"),
    ("<script>alert(1)</script>", "is not a provider name"),
    ("NO_BANKID%0AX", "is not a provider name"),
    ("../NO_BANKID", "is not a provider name"),
]


@pytest.mark.parametrize(("provider", "says"), MALFORMED_PROVIDERS)
def test_a_malformed_provider_is_a_400_and_nothing_is_sent(
    alice_client: Client, broker: ScriptedBroker, signals: Signals, provider: str, says: str
) -> None:
    response = alice_client.post(START, {"provider": provider})
    assert_nothing_started(response, 400, broker, signals)
    page = response.content.decode()
    assert "The identification could not be started" in page
    assert says in page
    assert "<script>alert" not in page


RESTRICTIONS = {
    "one allowed": {"ALLOWED_PROVIDERS": ["NO_BANKID_WEB"]},
    "two allowed": {"ALLOWED_PROVIDERS": ["NO_BANKID_WEB", "NO_BUYPASS"]},
    "fixed provider": {"IDENTITY_PROVIDER": "NO_BANKID_WEB"},
    "another one allowed": {"ALLOWED_PROVIDERS": ["FI_TUPAS"]},
}


@pytest.mark.parametrize("restriction", list(RESTRICTIONS))
@pytest.mark.parametrize("provider", ["SWE_BANKID", "NO_BANKID_MOBILE", "UNKNOWN"])
def test_a_provider_outside_the_allowed_ones_is_a_400_and_nothing_is_sent(
    alice_client: Client,
    broker: ScriptedBroker,
    signals: Signals,
    eid: Callable[..., None],
    restriction: str,
    provider: str,
) -> None:
    eid(**RESTRICTIONS[restriction])
    response = alice_client.post(START, {"provider": provider})
    assert_nothing_started(response, 400, broker, signals)
    page = response.content.decode()
    if restriction == "two allowed":  # a choice on the form: not one of its options
        assert f"Select a valid choice. {provider} is not one of the available" in page
    else:
        assert f"The provider {provider} is not offered here." in page


def test_several_allowed_providers_need_a_choice(
    alice_client: Client, broker: ScriptedBroker, eid: Callable[..., None]
) -> None:
    # Leaving the choice to the broker would offer every provider of the account.
    eid(ALLOWED_PROVIDERS=["NO_BANKID_WEB", "DA_NEMID"])
    broker.will_create()
    page = alice_client.get(START).content.decode()
    assert "Let me choose" not in page
    response = alice_client.post(START, {"provider": ""})
    assert response.status_code == 400
    assert "Choose an identity provider." in response.content.decode()
    assert len(broker.mock.calls) == 0


@pytest.mark.parametrize(
    ("settings_", "posted", "sent"),
    [
        ({}, "", None),
        ({}, "SWE_BANKID", "SWE_BANKID"),
        ({"IDENTITY_PROVIDER": "NO_BANKID_WEB"}, "", "NO_BANKID_WEB"),
        ({"IDENTITY_PROVIDER": "NO_BANKID_WEB"}, "NO_BANKID_WEB", "NO_BANKID_WEB"),
        ({"ALLOWED_PROVIDERS": ["NO_BANKID_WEB"]}, "NO_BANKID_WEB", "NO_BANKID_WEB"),
        ({"ALLOWED_PROVIDERS": ["NO_BANKID_WEB", "NO_BUYPASS"]}, "NO_BANKID_WEB", "NO_BANKID_WEB"),
        ({"ALLOWED_PROVIDERS": ["NO_BANKID_WEB", "DA_NEMID"]}, "DA_NEMID", "DA_NEMID"),
        ({"ALLOWED_PROVIDERS": ["FI_TUPAS"]}, "", "FI_TUPAS"),
        (
            {
                "ALLOWED_PROVIDERS": ["NO_BANKID_WEB", "NO_BUYPASS"],
                "IDENTITY_PROVIDER": "NO_BUYPASS",
            },
            "",
            "NO_BUYPASS",
        ),
    ],
)
def test_the_provider_sent_to_the_broker(
    start: Callable[..., Started],
    eid: Callable[..., None],
    settings_: dict[str, Any],
    posted: str,
    sent: str | None,
) -> None:
    """v1's create request (the other APIs' ask for a provider: tests/brokers)."""
    eid(**settings_)
    started = start(provider=posted)
    assert started.sent.get("IdentityProvider") == sent
    assert started.row.identity_provider == (sent or "")


# -- next: open-redirect bypasses -----------------------------------------------------------
OPEN_REDIRECTS = [
    "//evil.example",
    "//evil.example/",
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
    "/a\x00b",
    "/a\tb",
    "/a\x7fb",
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
    broker: ScriptedBroker,
    eid: Callable[..., None],
    next_url: str,
) -> None:
    eid(SUCCESS_URL="/welcome/")
    started = start(next=next_url, ends="success")
    assert started.row.next_url == ""
    for sent in started.sent["ReturnUrls"].values():
        assert "evil" not in sent
    response = alice_client.get(started.success_url())
    assert (response.status_code, response["Location"]) == (302, "/welcome/")
    assert started.row.status == Status.SUCCESS


@pytest.mark.parametrize("next_url", OPEN_REDIRECTS, ids=range(len(OPEN_REDIRECTS)))
def test_an_unsafe_next_never_reaches_the_start_form(
    alice_client: Client, broker: ScriptedBroker, signals: Signals, next_url: str
) -> None:
    response = alice_client.get(START, {"next": next_url, "provider": "NO_BANKID_WEB"})
    assert response.context["form"].initial["next"] == ""
    assert response.context["form"]["next"].value() == ""
    assert b"evil" not in response.content
    assert_nothing_started(response, 200, broker, signals)


@pytest.mark.parametrize("next_url", ["/account/?tab=eid&x=1#top", "http://testserver/account/"])
def test_a_safe_next_is_kept_to_the_end(
    start: Callable[..., Started], alice_client: Client, next_url: str
) -> None:
    started = start(next=next_url, ends="success")
    assert started.row.next_url == next_url
    assert alice_client.get(started.success_url())["Location"] == next_url


def test_an_http_next_is_dropped_on_an_https_site_whose_return_urls_are_https(
    broker: ScriptedBroker, alice: AbstractBaseUser
) -> None:
    """The return URLs follow the request's scheme (v1's create request)."""
    client = logged_in(alice)
    response = client.post(START, {"next": "http://testserver/account/"}, secure=True)
    assert response.status_code == 302
    row = snapshot().popitem()[1]
    assert row["next_url"] == ""
    success = broker.create_requests[0]["ReturnUrls"]["Success"]
    assert success.startswith("https://testserver/eid/return/")


# -- POST: the create request -------------------------------------------------
def test_post_redirects_to_the_broker_and_stores_a_pending_row(
    start: Callable[..., Started], alice: Any, broker: ScriptedBroker, broker_api: str
) -> None:
    started = start(next="/account/")
    if not started.is_oidc:  # OIDC: the authorization endpoint (checked by start())
        assert started.response["Location"] == BROKER_PAGE
    row = started.row
    assert row.user == alice
    assert row.request_id == started.request_id
    assert row.display == Identification.Display.REDIRECT
    assert row.next_url == "/account/"
    assert row.completed_at is None
    assert Identification.objects.count() == 1
    # One token request, one create request, nothing else (OIDC: the provider's discovery
    # document, then the pushed authorization request).
    methods = ["GET", "POST"] if started.is_oidc else ["POST", "POST"]
    assert [c.request.method for c in broker.mock.calls] == methods


def test_the_external_reference_is_random_hex_unique_and_stored(
    start: Callable[..., Started],
) -> None:
    first, second = start(), start()
    for started in (first, second):
        reference = started.sent["ExternalReference"]
        assert re.fullmatch(r"[0-9a-f]{32,}", reference), reference
        assert reference == started.row.external_id
        assert "alice" not in reference
    assert first.sent["ExternalReference"] != second.sent["ExternalReference"]


def test_the_return_urls_carry_the_reference_and_the_placeholders_unencoded(
    start: Callable[..., Started], broker: ScriptedBroker
) -> None:
    started = start()
    urls = started.return_urls
    assert set(urls) == {"Success", "Abort", "Error"}
    ref = started.row.reference
    assert urls["Success"] == (f"http://testserver/eid/return/{ref}/success/?externalId=[2]")
    assert urls["Abort"] == f"http://testserver/eid/return/{ref}/abort/?externalId=[2]"
    assert urls["Error"] == (f"http://testserver/eid/return/{ref}/error/?status=[0]&externalId=[2]")
    raw = broker.create_calls[-1].request.body
    raw = raw.decode() if isinstance(raw, bytes) else raw
    assert "%5B" not in raw
    assert "\\u005b" not in raw.lower()
    assert urlsplit(urls["Success"]).path.count(ref) == 1


def test_get_social_security_number_follows_the_setting(
    start: Callable[..., Started], eid: Callable[..., None]
) -> None:
    assert start().sent["GetSocialSecurityNumber"] is False
    eid(GET_SOCIAL_SECURITY_NUMBER=True)
    assert start().sent["GetSocialSecurityNumber"] is True


@pytest.mark.parametrize(
    ("accept_language", "expected"),
    [("nb", "NO"), ("sv", "SV"), ("da", "DA"), ("fi", "FI"), ("en", "EN"), ("de", "EN")],
)
def test_the_language_follows_the_active_language(
    broker: ScriptedBroker, alice_client: Client, accept_language: str, expected: str
) -> None:
    broker.will_create()
    response = alice_client.post(START, {}, headers={"accept-language": accept_language})
    assert response.status_code == 302
    assert broker.sent()["Language"] == expected


def test_the_language_setting_wins(
    broker: ScriptedBroker, alice_client: Client, eid: Callable[..., None]
) -> None:
    eid(LANGUAGE="sv")
    broker.will_create()
    alice_client.post(START, {}, headers={"accept-language": "nb"})
    assert broker.sent()["Language"] == "SV"


def test_redirect_display_sends_no_iframe_domain(
    start: Callable[..., Started], broker_api: str
) -> None:
    sent = start(display="redirect").sent
    assert "iFrame" not in sent
    assert "domain" not in sent


def test_the_start_remembers_the_reference_in_the_session(
    start: Callable[..., Started], alice_client: Client
) -> None:
    first, second = start(), start()
    pending = alice_client.session["django_eid_pending"]
    assert set(pending) == {first.row.reference, second.row.reference}


def test_started_signal(start: Callable[..., Started], signals: Signals, alice: Any) -> None:
    started = start()
    assert signals.names == ["identification_started"]
    (kwargs,) = signals.of("identification_started")
    assert kwargs["sender"] is Identification
    assert kwargs["identification"].pk == started.row.pk
    assert kwargs["user"] == alice
    assert kwargs["request"].path == START
    assert kwargs["status"] == Identification.Status.PENDING


# -- CSRF -----------------------------------------------------------------------------------
@pytest.mark.parametrize("token", ["no cookie either", "wrong", "only in the cookie"])
def test_a_start_without_a_valid_csrf_token_is_403_and_nothing_is_sent(
    alice: AbstractBaseUser, broker: ScriptedBroker, signals: Signals, token: str
) -> None:
    client = logged_in(alice, enforce_csrf_checks=True)
    if token != "no cookie either":
        client.get(START)  # sets the CSRF cookie, as a browser would
    data = {"display": "redirect"}
    if token == "wrong":
        data["csrfmiddlewaretoken"] = "x" * 64
    response = client.post(START, data)
    assert_nothing_started(response, 403, broker, signals)


def test_a_start_with_the_csrf_token_goes_to_the_broker(
    alice: AbstractBaseUser, broker: ScriptedBroker
) -> None:
    client = logged_in(alice, enforce_csrf_checks=True)
    token = client.get(START).context["csrf_token"]
    response = client.post(START, {"csrfmiddlewaretoken": str(token)})
    assert response.status_code == 302
    assert broker.counts["create"] == 1
