"""The example site's gated pages in a real browser: the wine shop (``min_age=18``) and the
payout account (``max_age=300, same_person=True``), with a form resumed after verifying."""

from __future__ import annotations

import datetime
import re
from collections.abc import Callable
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
from django.utils import timezone
from playwright.sync_api import Page, expect

from django_eid.models import Identification
from tests.browser.conftest import screenshot
from tests.browser.test_flow import SANDBOX_PAGE, choose_person

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

WINE_PAGE = re.compile(r"/wine/$")
PAYOUT_PAGE = re.compile(r"/payout/$")


def identify_from_the_start_page(page: Page, name: str) -> None:
    """On django-eid's start page (the site's "Verify my identity"): press the button, be
    ``name`` at the sandbox."""
    expect(page).to_have_url(re.compile(r"/eid/start/\?next="))
    page.get_by_role("button", name="Continue to identification").click()
    expect(page).to_have_url(SANDBOX_PAGE)
    choose_person(page, name)
    page.get_by_role("button", name="Identify", exact=True).click()


def verify_for_the_payout_page(page: Page, log_in: Callable[..., None]) -> None:
    """Logged in, the user follows "Payout account" and verifies as Kari: on the payout page."""
    log_in()
    page.get_by_role("link", name="Payout account").click()
    identify_from_the_start_page(page, "Kari Marie Nordmann")
    expect(page).to_have_url(PAYOUT_PAGE)


def make_old(user: Any) -> None:
    """Every verification of ``user`` was an hour ago."""
    an_hour_ago = timezone.now() - datetime.timedelta(hours=1)
    Identification.objects.filter(user=user).update(completed_at=an_hour_ago)


def test_an_adult_is_let_into_the_wine_shop_after_verifying(
    page: Page, log_in: Callable[..., None], user: Any
) -> None:
    log_in()
    page.get_by_role("link", name="Wine shop (18+)").click()
    expect(page.get_by_role("status")).to_contain_text("Please verify your identity to continue.")
    identify_from_the_start_page(page, "Kari Marie Nordmann")

    expect(page).to_have_url(WINE_PAGE)
    expect(page.get_by_role("heading", name="Wine shop")).to_be_visible()
    expect(page.get_by_text("your verified identity shows you are")).to_be_visible()


def test_a_minor_is_refused_by_the_wine_shop(
    page: Page, log_in: Callable[..., None], user: Any
) -> None:
    log_in()
    page.get_by_role("button", name="Continue to identification").click()
    choose_person(page, "Emma Hansen")  # 15: old enough for the site, not for wine
    page.get_by_role("button", name="Identify", exact=True).click()
    expect(page.get_by_text("Verified with eID")).to_be_visible()

    page.get_by_role("link", name="Wine shop (18+)").click()
    expect(page).to_have_url(re.compile(r"/eid/start/\?next=%2Fwine%2F$"))
    expect(page.get_by_role("status")).to_have_text(
        "This page is only for persons aged 18 years or older."
    )
    screenshot(page, "gate-minor")
    assert Identification.objects.get(user=user).status == Identification.Status.SUCCESS


def test_a_stale_verification_is_asked_again_and_a_sent_form_is_resumed(
    page: Page, log_in: Callable[..., None], user: Any
) -> None:
    verify_for_the_payout_page(page, log_in)

    # Later: the verification is an hour old when the form is sent.
    make_old(user)
    page.get_by_label("Account number").fill("1234.56.78903")
    page.get_by_role("button", name="Change payout account").click()
    expect(page.get_by_role("status")).to_contain_text("this page needs a recent verification")
    screenshot(page, "gate-stale")
    # The form is kept: after the verification the user goes to django-eid's resume page.
    resume_url = parse_qs(urlsplit(page.url).query)["next"][0]
    assert re.fullmatch(r"/eid/resume/[\w-]+/", resume_url)
    identify_from_the_start_page(page, "Kari Marie Nordmann")

    # The kept form was sent again by itself, once.
    expect(page).to_have_url(PAYOUT_PAGE)
    expect(page.get_by_text("Payout account changed.")).to_be_visible()
    expect(page.locator('[data-field="payout_account"]')).to_have_text("1234.56.78903")
    from example_project.accounts.models import Profile

    assert Profile.objects.get(user=user).payout_account == "1234.56.78903"
    assert Identification.objects.filter(user=user).count() == 2


def test_someone_else_cannot_pass_the_payout_gate(
    page: Page, log_in: Callable[..., None], user: Any
) -> None:
    verify_for_the_payout_page(page, log_in)
    make_old(user)

    page.reload()
    identify_from_the_start_page(page, "Ola Nordmann")
    expect(page.get_by_role("heading", name="Identification not accepted")).to_be_visible()
    expect(page.get_by_role("alert")).to_have_text(
        "This is not the person verified on this account."
    )
    screenshot(page, "gate-other-person")
    latest = Identification.objects.filter(user=user).latest("created_at")
    assert (latest.status, latest.error_code) == (Identification.Status.REJECTED, "NOT_SAME_PERSON")
    page.goto("/payout/")
    expect(page).to_have_url(re.compile(r"/eid/start/\?next=%2Fpayout%2F$"))
    # Kari's own verification is still the only one of this account, and an hour old.
    expect(page.get_by_role("status")).to_contain_text("this page needs a recent verification")
