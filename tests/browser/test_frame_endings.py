"""How an iframe identification ends, in a real Chromium.

The broker's page inside the frame moves the page embedding it to the return URL (as the
deployed service does), or, with ``IFRAME_WEB_MESSAGING``, tells it by ``postMessage``; the
frame page also polls ``django_eid:status`` and moves on by itself. Each test takes one of
the ways away, to show the others carry the user on alone.
"""

from __future__ import annotations

import datetime
import re
from collections.abc import Callable
from typing import Any

import pytest
from playwright.sync_api import Page, Route, expect

from django_eid.models import Identification
from django_eid.views import STATUS_POLL_INTERVAL
from tests.browser.test_flow import ACCOUNT_PAGE, FRAME_PAGE, choose_person

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

STATUS_CALLS = "**/eid/status/**"
#: The frame page's poll interval, in ms.
POLL_MS = int(STATUS_POLL_INTERVAL * 1000)


def identify_in_the_frame(page: Page, name: str = "Kari Marie Nordmann") -> None:
    page.get_by_role("button", name="Identify in a frame").click()
    expect(page).to_have_url(FRAME_PAGE)
    frame = page.frame_locator("iframe.eid-frame")
    choose_person(frame, name)
    frame.get_by_role("button", name="Identify", exact=True).click()


def test_the_brokers_page_moves_the_page_on(
    page: Page, log_in: Callable[..., None], user: Any, expected_browser_errors: list[str]
) -> None:
    """No polling at all: the script inside the frame alone ends the flow."""
    page.route(STATUS_CALLS, lambda route: route.abort())
    expected_browser_errors.append("net::ERR_FAILED")
    log_in()
    identify_in_the_frame(page)
    expect(page).to_have_url(ACCOUNT_PAGE)
    assert Identification.objects.get(user=user).status == Identification.Status.SUCCESS


def test_polling_moves_the_page_on_when_the_broker_cannot(
    page: Page, log_in: Callable[..., None], user: Any
) -> None:
    """A browser refusing the frame's navigation of its parent: the status polling ends it."""
    navigations: list[str] = []

    def without_the_parent_navigation(route: Route) -> None:
        response = route.fetch()
        body = response.text()
        if "window.parent.location.href = url;" in body:
            navigations.append(route.request.url)
            body = body.replace("window.parent.location.href = url;", "/* refused */")
        route.fulfill(response=response, body=body)

    page.route("**/eid-sandbox/login/**", without_the_parent_navigation)
    page.clock.install()
    log_in()
    # The frame page's polls wait for the test: its clock stands still from before the page
    # loads (a busy machine took longer than one poll interval to identify in the frame, and
    # the poll had moved the page on before the broker's ending page could be seen).
    page.clock.pause_at(datetime.datetime.now() + datetime.timedelta(minutes=1))
    identify_in_the_frame(page)
    frame = page.frame_locator("iframe.eid-frame")
    expect(frame.get_by_text("Done. Taking you back to the site")).to_be_visible()
    expect(page).to_have_url(FRAME_PAGE)  # the broker's ending page did nothing
    page.clock.run_for(POLL_MS)
    expect(page).to_have_url(ACCOUNT_PAGE)
    assert len(navigations) == 1  # the broker's ending page was there, and did nothing
    row = Identification.objects.get(user=user)
    assert row.status == Identification.Status.SUCCESS
    assert row.display == Identification.Display.IFRAME


def test_web_messaging_moves_the_page_on(
    page: Page,
    log_in: Callable[..., None],
    user: Any,
    settings: Any,
    site_url: str,
    expected_browser_errors: list[str],
) -> None:
    """The broker's message, through its own script, alone ends the flow (no polling)."""
    settings.DJANGO_EID = {
        **settings.DJANGO_EID,
        "IFRAME_WEB_MESSAGING": True,
        "IFRAME_WEB_MESSAGING_SCRIPT": f"{site_url}/eid-sandbox/web-messaging.js",
    }
    page.route(STATUS_CALLS, lambda route: route.abort())
    expected_browser_errors.append("net::ERR_FAILED")
    log_in()
    identify_in_the_frame(page, "Astrid Linnéa Lindqvist")
    expect(page).to_have_url(ACCOUNT_PAGE)
    row = Identification.objects.get(user=user)
    assert row.status == Identification.Status.SUCCESS
    assert row.identity_provider == "SWE_BANKID"


def test_a_frame_of_another_site_ends_whatever_the_browser_allows(
    page: Page, log_in: Callable[..., None], site_url: str, expected_browser_errors: list[str]
) -> None:
    """A real broker is another site. Chromium lets its frame move the page on after the
    person's click in it (at the time of writing); should it refuse (logging the error
    expected here), the polling carries on: the user lands on the account page either way."""
    expected_browser_errors.append("Unsafe attempt to initiate navigation")
    other_site = site_url.replace("//localhost:", "//127.0.0.1:")
    log_in(other_site)
    identify_in_the_frame(page, "Søren Aabye Kjærgaard")
    expect(page).to_have_url(re.compile(rf"^{re.escape(other_site)}/account/$"))


def start_in_the_frame(page: Page) -> None:
    page.get_by_role("button", name="Identify in a frame").click()
    expect(page).to_have_url(FRAME_PAGE)


STOPPED = "This page no longer follows the identification by itself."


@pytest.mark.parametrize("status", [401, 403, 404])
def test_the_frame_page_stops_asking_on_a_refusal(
    page: Page, log_in: Callable[..., None], expected_browser_errors: list[str], status: int
) -> None:
    """Logged out, another browser, an unknown identification: asking again changes nothing."""
    asked: list[str] = []

    def refuse(route: Route) -> None:
        asked.append(route.request.url)
        route.fulfill(status=status, content_type="application/json", body='{"code": "no"}')

    page.route(STATUS_CALLS, refuse)
    expected_browser_errors.append(f"status of {status}")
    page.clock.install()  # the page's timers run when the test says
    log_in()
    start_in_the_frame(page)
    page.clock.run_for(POLL_MS)  # the first question
    expect(page.get_by_text(STOPPED)).to_be_visible()
    page.clock.run_for(2 * POLL_MS)  # two more poll intervals
    assert len(asked) == 1
    expect(page).to_have_url(FRAME_PAGE)


def test_the_frame_page_stops_asking_after_session_max_age(
    page: Page,
    log_in: Callable[..., None],
    settings: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from django_eid import views

    settings.DJANGO_EID = {**settings.DJANGO_EID, "SESSION_MAX_AGE": 4}
    monkeypatch.setattr(views, "FRAME_POLL_GRACE", 0)
    asked: list[str] = []

    def pending(route: Route) -> None:  # the server would settle the stale row: not here
        asked.append(route.request.url)
        route.fulfill(content_type="application/json", body='{"finished": false}')

    page.route(STATUS_CALLS, pending)
    page.clock.install()
    log_in()
    start_in_the_frame(page)
    page.clock.run_for(4_000 + POLL_MS)  # past the four seconds it follows the row for
    expect(page.get_by_text(STOPPED)).to_be_visible()
    count = len(asked)
    assert 1 <= count <= 2  # every two seconds, for four
    page.clock.run_for(2 * POLL_MS)
    assert len(asked) == count
