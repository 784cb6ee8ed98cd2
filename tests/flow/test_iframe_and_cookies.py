"""Iframe display: the create request's parent domain, the page embedding the broker (Post/
Redirect/Get), the frame-exit page that moves the top window; and a return without the
session cookie (a SameSite=Strict cookie), which gets our own page that asks once more."""

from __future__ import annotations

import html
import json
import re
from collections.abc import Callable
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import pytest
from django.conf import settings
from django.test import Client

from django_eid.models import Identification
from tests.fixtures_broker import BROKER_PAGE, ScriptedBroker
from tests.fixtures_views import Signals, Started
from tests.flow.returns import aged

pytestmark = pytest.mark.django_db

Status = Identification.Status


# -- iframe display ---------------------------------------------------------------------


def test_iframe_display_embeds_the_broker(start: Callable[..., Started]) -> None:
    """v1's iFrame object (each API's frame: tests/brokers/test_contract.py)."""
    started = start(display="iframe")
    response = started.response
    assert response.templates[0].name == "django_eid/iframe.html"
    frames = re.findall(r'<iframe[^>]*\bsrc="([^"]*)"', response.content.decode())
    assert [html.unescape(src) for src in frames] == [BROKER_PAGE]
    assert response["X-Frame-Options"] == "DENY"
    assert started.row.display == Identification.Display.IFRAME
    assert started.sent["iFrame"] == {"Domain": "testserver", "WebMessaging": False}
    assert started.sent["domain"] == "testserver"


@pytest.mark.parametrize(
    ("host", "domain"),
    [
        ("localhost:8000", "localhost:8000"),
        ("localhost:443", "localhost"),
        ("localhost:80", "localhost"),
        ("[::1]", "[::1]"),
        ("[::1]:8000", "[::1]:8000"),
        ("Shop.Example", "shop.example"),
    ],
)
def test_iframe_domain_is_the_host_with_a_port_that_is_not_the_default(
    broker: ScriptedBroker, alice_client: Client, settings: Any, host: str, domain: str
) -> None:
    """The broker allows exactly this parent (its Content-Security-Policy): the port counts."""
    settings.ALLOWED_HOSTS = [*settings.ALLOWED_HOSTS, "[::1]", "shop.example"]
    broker.will_create()
    response = alice_client.post("/eid/start/", {"display": "iframe"}, HTTP_HOST=host)
    assert response.status_code == 303
    assert broker.sent()["iFrame"]["Domain"] == domain
    assert broker.sent()["domain"] == domain
    assert broker.sent()["ReturnUrls"]["Success"].startswith(f"http://{host}/eid/return/")


def test_iframe_domain_setting(start: Callable[..., Started], eid: Callable[..., None]) -> None:
    eid(IFRAME_DOMAIN="shop.example")
    sent = start(display="iframe").sent
    assert sent["iFrame"]["Domain"] == "shop.example"
    assert sent["domain"] == "shop.example"
    # Only the iframe display names a parent domain.
    assert "iFrame" not in start(display="redirect").sent


def frame_exit_target(response: Any) -> str:
    """The destination of a frame-exit page; checks the script and the plain link agree."""
    content = response.content.decode()
    (script,) = re.findall(r'window\.top\.location\.replace\("([^"]*)"\)', content)
    links = re.findall(r'<a href="([^"]*)" target="_top">', content)
    assert len(links) == 1
    target = html.unescape(links[0])
    assert json.loads(f'"{script}"') == target  # the script's string, JS escapes undone
    return target


def test_success_in_the_iframe_moves_the_top_window(
    start: Callable[..., Started], broker: ScriptedBroker, alice_client: Client, signals: Signals
) -> None:
    started = start(display="iframe", next="/account/")
    broker.will_return(started.request_id)
    response = alice_client.get(started.success_url())
    assert response.status_code == 200
    assert response.templates[0].name == "django_eid/frame_exit.html"
    assert response["X-Frame-Options"] == "SAMEORIGIN"
    assert frame_exit_target(response) == "/account/"
    assert started.refresh().status == Status.SUCCESS
    assert signals.names == ["identification_started", "identification_succeeded"]
    # A reload inside the frame gives the same page, nothing fetched again.
    again = alice_client.get(started.success_url())
    assert frame_exit_target(again) == "/account/"
    assert len(broker.get_calls) == 1


def test_abort_in_the_iframe_moves_the_top_window_to_the_start_page(
    start: Callable[..., Started], alice_client: Client
) -> None:
    started = start(display="iframe")
    response = alice_client.get(started.abort_url())
    assert response.status_code == 200
    assert response["X-Frame-Options"] == "SAMEORIGIN"
    assert frame_exit_target(response) == "/eid/start/"
    assert started.refresh().status == Status.ABORTED
    # The message waits for the top window's start page.
    assert "You cancelled the identification." in alice_client.get("/eid/start/").content.decode()


def test_error_in_the_iframe_moves_the_top_window_to_the_result_page(
    start: Callable[..., Started], broker: ScriptedBroker, alice_client: Client
) -> None:
    started = start(display="iframe")
    broker.will_return(started.request_id, "ERROR")
    response = alice_client.get(started.error_url())
    assert response.status_code == 200
    result = f"/eid/result/{started.row.reference}/"
    assert frame_exit_target(response) == result
    page = alice_client.get(result)
    assert page.status_code == 200
    assert page["X-Frame-Options"] == "DENY"
    assert "Identification failed" in page.content.decode()


# -- a callback without the session cookie ------------------------------------------------------


def retry_url_of(response: Any) -> str:
    content = response.content.decode()
    (refresh,) = re.findall(r'<meta http-equiv="refresh" content="0;url=([^"]*)">', content)
    (link,) = re.findall(r'<a href="([^"]*)">', content)
    assert refresh == link
    return html.unescape(link)


@pytest.mark.parametrize(
    ("callback", "final_status", "row_status"),
    [
        ("success", 302, Status.SUCCESS),
        ("abort", 302, Status.ABORTED),
        ("error", 200, Status.ERROR),
    ],
)
def test_a_callback_without_the_cookie_gets_an_interstitial_then_completes(
    start: Callable[..., Started],
    broker: ScriptedBroker,
    alice_client: Client,
    signals: Signals,
    callback: str,
    final_status: int,
    row_status: str,
) -> None:
    started = start()
    broker.will_return(started.request_id, "ERROR" if callback == "error" else "SUCCESS")
    url = getattr(started, f"{callback}_url")()
    cookieless = Client()
    response = cookieless.get(url)
    assert response.status_code == 200
    assert response.templates[0].name == "django_eid/interstitial.html"
    assert response["X-Frame-Options"] == "SAMEORIGIN"
    retry = urlsplit(retry_url_of(response))
    assert retry.path == urlsplit(url).path
    assert parse_qsl(retry.query) == [*parse_qsl(urlsplit(url).query), ("eid_retry", "1")]
    assert started.refresh().status == Status.PENDING
    assert len(broker.get_calls) == 0
    assert signals.names == ["identification_started"]
    # The browser re-requests from our own page, and now sends its cookie.
    name = settings.SESSION_COOKIE_NAME
    cookieless.cookies[name] = alice_client.cookies[name].value
    response = cookieless.get(retry_url_of(response))
    assert response.status_code == final_status
    assert started.refresh().status == row_status
    assert len(signals.names) == 2


# -- the page embedding the broker: Post/Redirect/Get --------------------------------------------
def test_reloading_the_iframe_page_shows_the_same_session_and_starts_none(
    start: Callable[..., Started], broker: ScriptedBroker, alice_client: Client
) -> None:
    started = start(display="iframe")
    frame = f"/eid/frame/{started.reference}/"
    creates = len(broker.create_requests)
    for _ in range(3):  # reload, back and forward
        again = alice_client.get(frame)
        assert again.status_code == 200
        assert again.content == started.response.content
        assert again["X-Frame-Options"] == "DENY"
    assert len(broker.create_requests) == creates
    assert Identification.objects.count() == 1


def test_the_iframe_page_of_a_finished_session_goes_where_it_went(
    start: Callable[..., Started], broker: ScriptedBroker, alice_client: Client
) -> None:
    started = start(display="iframe", next="/account/")
    broker.will_return(started.request_id)
    alice_client.get(started.success_url())
    assert started.refresh().status == Status.SUCCESS
    response = alice_client.get(f"/eid/frame/{started.reference}/")
    assert (response.status_code, response["Location"]) == (302, "/account/")


def test_the_iframe_page_of_an_expired_session_says_so(
    start: Callable[..., Started], alice_client: Client, eid: Callable[..., None], broker_api: str
) -> None:
    """Each API's way of settling a stale row first (OpenID Connect has nothing to ask)."""
    eid(SESSION_MAX_AGE=60)
    started = start(display="iframe")
    aged(started, 61)
    response = alice_client.get(f"/eid/frame/{started.reference}/")
    assert response.status_code == 410
    assert started.refresh().status == Identification.Status.EXPIRED


def test_the_iframe_page_is_only_for_the_user_and_browser_that_started_it(
    start: Callable[..., Started], alice: Any, bob_client: Client
) -> None:
    started = start(display="iframe")
    assert bob_client.get(f"/eid/frame/{started.reference}/").status_code == 404
    other_browser = Client()
    other_browser.force_login(alice)
    assert other_browser.get(f"/eid/frame/{started.reference}/").status_code == 403
    assert Client().get(f"/eid/frame/{started.reference}/").status_code == 302  # to login


def test_a_redirect_display_session_has_no_iframe_page(
    start: Callable[..., Started], alice_client: Client
) -> None:
    started = start()
    assert alice_client.get(f"/eid/frame/{started.reference}/").status_code == 403
