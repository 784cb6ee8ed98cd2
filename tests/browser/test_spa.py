"""The example site's single-page app in a real browser: a front end that runs the whole flow
through the JSON API alone (start, the broker, the return to the front end, status, identity).

Every answer of the API here is also checked against the OpenAPI document by the suite's
middleware (``tests/openapi_check.py``): a mismatch would be a 500 the page shows.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import pytest
from playwright.sync_api import Page, expect

from django_eid.models import Identification
from tests.browser.conftest import screenshot
from tests.browser.test_flow import SANDBOX_PAGE, choose_person, only_identification

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

SPA_PAGE = re.compile(r"/spa/$")


def open_the_app(page: Page, log_in: Callable[..., None]) -> None:
    log_in()
    page.get_by_role("link", name="Single-page app").click()
    expect(page).to_have_url(SPA_PAGE)
    expect(page.get_by_role("status")).to_have_text("Your identity is not verified yet.")


def test_the_app_verifies_through_the_broker_page(
    page: Page, log_in: Callable[..., None], user: Any
) -> None:
    open_the_app(page, log_in)
    page.get_by_role("button", name="Verify with the API").click()

    expect(page).to_have_url(SANDBOX_PAGE)
    choose_person(page, "Kari Marie Nordmann")
    page.get_by_role("button", name="Identify", exact=True).click()

    # The return URL finished it and sent the browser back to the app, which asked the API.
    expect(page).to_have_url(SPA_PAGE)
    expect(page.get_by_role("status")).to_have_text("Your identity is verified.")
    expect(page.locator('#identity [data-field="name"]')).to_have_text("Nordmann, Kari Marie")
    expect(page.locator('#identity [data-field="provider"]')).to_have_text("NO_BANKID_WEB")
    row = only_identification(user)
    assert (row.status, row.channel) == (Identification.Status.SUCCESS, "api")
    screenshot(page, "spa", docs=True)

    # A reload asks the API again: still verified, no second identification.
    page.reload()
    expect(page.get_by_role("status")).to_have_text("Your identity is verified.")
    assert Identification.objects.filter(user=user).count() == 1


def test_the_app_frames_the_broker_and_polls(
    page: Page, log_in: Callable[..., None], user: Any
) -> None:
    open_the_app(page, log_in)
    page.get_by_role("button", name="Verify in a frame").click()

    expect(page.get_by_role("status")).to_have_text("Identify yourself in the frame below.")
    frame = page.frame_locator("#framed iframe")
    choose_person(frame, "Astrid Linnéa Lindqvist")
    frame.get_by_role("button", name="Identify", exact=True).click()

    expect(page.locator('#identity [data-field="name"]')).to_have_text("Lindqvist, Astrid Linnéa")
    expect(page).to_have_url(SPA_PAGE)
    expect(page.locator("#framed")).to_be_hidden()
    row = only_identification(user)
    assert (row.status, row.display) == (Identification.Status.SUCCESS, "iframe")


def test_the_app_cancels_a_framed_identification(
    page: Page, log_in: Callable[..., None], user: Any
) -> None:
    open_the_app(page, log_in)
    page.get_by_role("button", name="Verify in a frame").click()
    frame = page.frame_locator("#framed iframe")
    expect(frame.get_by_role("heading", name="Identify yourself")).to_be_visible()

    page.get_by_role("button", name="Cancel the identification").click()

    expect(page.get_by_role("status")).to_have_text("You cancelled the identification.")
    expect(page.locator("#framed")).to_be_hidden()
    assert only_identification(user).status == Identification.Status.ABORTED


def test_the_app_offers_the_login_to_a_visitor(
    page: Page, expected_browser_errors: list[str]
) -> None:
    expected_browser_errors.append("status of 401 (Unauthorized) (http://localhost")
    page.goto("/spa/")
    # The API answers 401 with a message, never a redirect to the login page.
    expect(page.get_by_role("status")).to_have_text("Please log in to verify your identity.")
    expect(page.get_by_role("link", name="Log in", exact=True).last).to_be_visible()
