"""The start view: the form on GET, validation, the create request, the redirect."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

import pytest
from django.test import Client
from django.urls import reverse

from django_eid.models import Identification
from tests.flow.conftest import BROKER_PAGE, Broker, Started

pytestmark = pytest.mark.django_db

START = "/eid/start/"


def test_the_start_url_is_namespaced() -> None:
    assert reverse("django_eid:start") == START


# -- GET ------------------------------------------------------------------


def test_get_renders_a_csrf_protected_form_that_posts_back(
    alice_client: Client, broker: Broker
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


def test_get_never_starts_a_session(alice_client: Client, broker: Broker) -> None:
    broker.will_create()
    response = alice_client.get(START, {"provider": "NO_BANKID_WEB", "display": "iframe"})
    assert response.status_code == 200
    assert len(broker.mock.calls) == 0
    assert not Identification.objects.exists()


def test_get_prefills_next_and_provider(alice_client: Client) -> None:
    response = alice_client.get(START, {"next": "/account/?tab=2", "provider": "NO_BANKID_WEB"})
    form = response.context["form"]
    assert form.initial == {"next": "/account/?tab=2", "provider": "NO_BANKID_WEB"}
    html = response.content.decode()
    assert 'name="next" value="/account/?tab=2"' in html
    assert 'name="provider" value="NO_BANKID_WEB"' in html


def test_get_does_not_prefill_an_unsafe_next(alice_client: Client) -> None:
    response = alice_client.get(START, {"next": "https://evil.example/phish"})
    assert response.context["form"].initial["next"] == ""
    assert "evil.example" not in response.content.decode()


def test_get_prefills_the_provider_choice(alice_client: Client, eid: Callable[..., None]) -> None:
    eid(ALLOWED_PROVIDERS=["NO_BANKID_WEB", "NO_BUYPASS"])
    response = alice_client.get(START, {"provider": "NO_BUYPASS"})
    html = response.content.decode()
    assert '<select name="provider"' in html
    assert re.search(r'<option value="NO_BUYPASS" selected>', html)
    assert not re.search(r'<option value="NO_BANKID_WEB" selected>', html)


@pytest.mark.parametrize("method", ["get", "post"])
def test_login_is_required(client: Client, broker: Broker, method: str) -> None:
    broker.will_create()
    response = getattr(client, method)(START, {"provider": "NO_BANKID_WEB"})
    assert response.status_code == 302
    assert response["Location"].startswith("/login/?next=/eid/start/")
    assert len(broker.mock.calls) == 0
    assert not Identification.objects.exists()


def test_start_page_may_not_be_framed(alice_client: Client) -> None:
    assert alice_client.get(START)["X-Frame-Options"] == "DENY"


# -- POST: validation ---------------------------------------------------------

BAD_PROVIDERS = [
    ("no_bankid_web", "is not a provider name"),
    ("NO BANKID", "is not a provider name"),
    ("NO__BANKID", "is not a provider name"),
    ("_NO_BANKID", "is not a provider name"),
    ("NO-BANKID", "is not a provider name"),
    ("A" * 65, "at most 64 characters"),
]


@pytest.mark.apis("v1", reason="provider names are v1's")
@pytest.mark.parametrize(("provider", "says"), BAD_PROVIDERS)
def test_a_malformed_provider_is_refused(
    alice_client: Client, broker: Broker, provider: str, says: str
) -> None:
    broker.will_create()
    response = alice_client.post(START, {"provider": provider})
    assert response.status_code == 400
    assert says in response.content.decode()
    assert "The identification could not be started" in response.content.decode()
    assert len(broker.mock.calls) == 0
    assert not Identification.objects.exists()


def test_a_provider_outside_allowed_providers_is_refused(
    alice_client: Client, broker: Broker, eid: Callable[..., None]
) -> None:
    eid(ALLOWED_PROVIDERS=["NO_BANKID_WEB", "NO_BUYPASS"])
    broker.will_create()
    response = alice_client.post(START, {"provider": "SWE_BANKID"})
    assert response.status_code == 400
    assert "SWE_BANKID" in response.content.decode()
    assert len(broker.mock.calls) == 0
    assert not Identification.objects.exists()


@pytest.mark.apis("v1", reason="provider names are v1's")
def test_a_provider_other_than_the_single_allowed_one_is_refused(
    alice_client: Client, broker: Broker, eid: Callable[..., None]
) -> None:
    eid(ALLOWED_PROVIDERS=["FI_TUPAS"])
    broker.will_create()
    response = alice_client.post(START, {"provider": "NO_BANKID_WEB"})
    assert response.status_code == 400
    assert "The provider NO_BANKID_WEB is not offered here." in response.content.decode()
    assert len(broker.mock.calls) == 0


@pytest.mark.apis("v1", reason="provider names are v1's")
def test_a_provider_other_than_identity_provider_is_refused(
    alice_client: Client, broker: Broker, eid: Callable[..., None]
) -> None:
    eid(IDENTITY_PROVIDER="NO_BANKID_WEB")
    broker.will_create()
    response = alice_client.post(START, {"provider": "NO_BUYPASS"})
    assert response.status_code == 400
    assert "The provider NO_BUYPASS is not offered here." in response.content.decode()
    assert len(broker.mock.calls) == 0


def test_several_allowed_providers_need_a_choice(
    alice_client: Client, broker: Broker, eid: Callable[..., None]
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


def test_an_unknown_display_is_refused(alice_client: Client, broker: Broker) -> None:
    broker.will_create()
    response = alice_client.post(START, {"display": "popup"})
    assert response.status_code == 400
    assert "popup" in response.content.decode()
    assert len(broker.mock.calls) == 0


@pytest.mark.apis("v1", reason="v1's create request")
@pytest.mark.parametrize(
    ("settings_", "posted", "sent"),
    [
        ({}, "", None),
        ({}, "SWE_BANKID", "SWE_BANKID"),
        ({"IDENTITY_PROVIDER": "NO_BANKID_WEB"}, "", "NO_BANKID_WEB"),
        ({"IDENTITY_PROVIDER": "NO_BANKID_WEB"}, "NO_BANKID_WEB", "NO_BANKID_WEB"),
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
    eid(**settings_)
    started = start(provider=posted)
    assert started.sent.get("IdentityProvider") == sent
    assert started.row.identity_provider == (sent or "")


@pytest.mark.parametrize(
    ("next_url", "stored"),
    [
        ("/account/?tab=2", "/account/?tab=2"),
        ("http://testserver/account/", "http://testserver/account/"),
        ("https://evil.example/", ""),
        ("//evil.example/", ""),
        ("javascript:alert(1)", ""),
        ("/\\evil.example", ""),
        (" /account/", ""),
        ("/a\x00b", ""),
        ("/a\tb", ""),
        ("/a\x7fb", ""),
        ("/" + "a" * 2000, ""),
    ],
)
def test_an_unsafe_next_is_dropped_silently(
    start: Callable[..., Started], next_url: str, stored: str
) -> None:
    started = start(next=next_url)
    assert started.row.next_url == stored


# -- POST: the create request -------------------------------------------------


def test_post_redirects_to_the_broker_and_stores_a_pending_row(
    start: Callable[..., Started], alice: Any, broker: Broker
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


@pytest.mark.apis("v1", reason="v1's create request")
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


@pytest.mark.apis("v1", reason="v1's create request")
def test_the_return_urls_carry_the_reference_and_the_placeholders_unencoded(
    start: Callable[..., Started], broker: Broker
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


@pytest.mark.apis("v1", reason="v1's create request")
def test_the_return_urls_follow_the_request_scheme(broker: Broker, alice_client: Client) -> None:
    broker.will_create()
    response = alice_client.post(START, {}, secure=True)
    assert response.status_code == 302
    assert broker.sent()["ReturnUrls"]["Success"].startswith("https://testserver/eid/return/")


@pytest.mark.apis("v1", reason="v1's create request")
def test_get_social_security_number_follows_the_setting(
    start: Callable[..., Started], eid: Callable[..., None]
) -> None:
    assert start().sent["GetSocialSecurityNumber"] is False
    eid(GET_SOCIAL_SECURITY_NUMBER=True)
    assert start().sent["GetSocialSecurityNumber"] is True


@pytest.mark.apis("v1", reason="v1's create request")
@pytest.mark.parametrize(
    ("accept_language", "expected"),
    [("nb", "NO"), ("sv", "SV"), ("da", "DA"), ("fi", "FI"), ("en", "EN"), ("de", "EN")],
)
def test_the_language_follows_the_active_language(
    broker: Broker, alice_client: Client, accept_language: str, expected: str
) -> None:
    broker.will_create()
    response = alice_client.post(START, {}, headers={"accept-language": accept_language})
    assert response.status_code == 302
    assert broker.sent()["Language"] == expected


@pytest.mark.apis("v1", reason="v1's create request")
def test_the_language_setting_wins(
    broker: Broker, alice_client: Client, eid: Callable[..., None]
) -> None:
    eid(LANGUAGE="sv")
    broker.will_create()
    alice_client.post(START, {}, headers={"accept-language": "nb"})
    assert broker.sent()["Language"] == "SV"


def test_redirect_display_sends_no_iframe_domain(start: Callable[..., Started]) -> None:
    sent = start(display="redirect").sent
    assert "iFrame" not in sent
    assert "domain" not in sent


def test_the_start_remembers_the_reference_in_the_session(
    start: Callable[..., Started], alice_client: Client
) -> None:
    first, second = start(), start()
    pending = alice_client.session["django_eid_pending"]
    assert set(pending) == {first.row.reference, second.row.reference}


def test_started_signal(start: Callable[..., Started], signal_log: Any, alice: Any) -> None:
    started = start()
    assert signal_log.names == ["identification_started"]
    (kwargs,) = signal_log.of("identification_started")
    assert kwargs["sender"] is Identification
    assert kwargs["identification"].pk == started.row.pk
    assert kwargs["user"] == alice
    assert kwargs["request"].path == START
    assert kwargs["status"] == Identification.Status.PENDING


def test_post_without_a_csrf_token_is_refused(alice: Any, broker: Broker) -> None:
    client = Client(enforce_csrf_checks=True)
    client.force_login(alice)
    broker.will_create()
    assert client.post(START, {"provider": "NO_BANKID_WEB"}).status_code == 403
    assert len(broker.mock.calls) == 0
    assert not Identification.objects.exists()
    # With the token of the form, it starts.
    client.get(START)
    token = client.cookies["csrftoken"].value
    assert client.post(START, {"csrfmiddlewaretoken": token}).status_code == 302
    assert len(broker.create_calls) == 1
