"""Identity at the door in a real browser: logging in and signing up with an eID on the
example site (its login page's "Log in with BankID", its "Sign up with eID" page), each
``SIGNUP`` mode, a second account refused the same person, a minor refused at sign-up,
and a link removed on the links page. Waits are explicit (``expect``), never sleeps.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from playwright.sync_api import Browser, Page, expect

from django_eid.models import Identification, LinkedIdentity
from tests.browser.conftest import browser_page, screenshot
from tests.browser.test_flow import ACCOUNT_PAGE, SANDBOX_PAGE, choose_person

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

SIGNUP_PAGE = re.compile(r"/eid/signup/$")
LINKS_PAGE = re.compile(r"/eid/links/$")
HOME_PAGE = re.compile(r"/$")
#: The built-in persons these tests identify as (the sandbox's page lists them).
KARI = "Kari Marie Nordmann"  # Norwegian BankID: of a high level
OLA = "Ola Nordmann"  # Buypass: of a high level
EMMA = "Emma Hansen"  # 15: old enough for the site's own rule (13), not for MIN_AGE=18


def identify(page: Page, name: str) -> None:
    """At the sandbox's page, identify as ``name``."""
    expect(page).to_have_url(SANDBOX_PAGE)
    choose_person(page, name)
    page.get_by_role("button", name="Identify", exact=True).click()


def log_in_with_bankid(page: Page, name: str, *, at: str = "/login/") -> None:
    """On the site's login page (``at``), press "Log in with BankID"; be ``name``."""
    page.goto(at)
    page.get_by_role("button", name="Log in with BankID").click()
    identify(page, name)


def sign_up_with_eid(page: Page, name: str) -> None:
    """From the home page, follow "Sign up with eID" in the menu, press the button; be ``name``."""
    page.goto("/")
    page.get_by_role("navigation").get_by_role("link", name="Sign up with eID").click()
    expect(page.get_by_role("heading", name="Sign up with eID")).to_be_visible()
    page.get_by_role("button", name="Sign up with eID").click()
    identify(page, name)


def expect_logged_in(page: Page, username: str) -> None:
    """The site's menu offers ``username`` to log out: this browser is logged in as them."""
    expect(page.get_by_role("button", name=f"Log out {username}", exact=True)).to_be_visible()


def log_out(page: Page, username: str) -> None:
    page.get_by_role("button", name=f"Log out {username}", exact=True).click()
    expect(page).to_have_url(HOME_PAGE)
    expect(page.get_by_role("navigation").get_by_role("link", name="Log in")).to_be_visible()


def verify_and_link(page: Page, log_in: Callable[..., None], user: Any, name: str) -> None:
    """``user`` logs in with their password and verifies as ``name``: their account is
    linked to the person, as django-eid links it (``LINK_ON_VERIFY``)."""
    log_in()
    page.get_by_role("button", name="Continue to identification").click()
    identify(page, name)
    expect(page).to_have_url(ACCOUNT_PAGE)
    expect(page.get_by_text("Verified with eID")).to_be_visible()
    assert LinkedIdentity.objects.filter(user=user).count() == 1


def sign_up_form(page: Page, username: str, email: str) -> None:
    """Fill in and send django-eid's sign-up form (``SIGNUP = "form"``)."""
    page.get_by_label("Username").fill(username)
    page.get_by_label("Email address").fill(email)
    page.get_by_role("button", name="Create my account").click()


@pytest.fixture
def signup_mode(settings: Any) -> Callable[[str], None]:
    """``signup_mode(mode)``: the example site's ``SIGNUP`` (``EID_SIGNUP``) for this test."""

    def run(mode: str) -> None:
        settings.DJANGO_EID = {**settings.DJANGO_EID, "SIGNUP": mode}

    return run


@pytest.fixture
def other_page(
    browser: Browser, site_url: str, page: Page, expected_browser_errors: list[str]
) -> Iterator[Page]:
    """A second browser (its own cookies) on the example site, closed before ``page``; as
    ``page``, its errors fail the test (but those named in ``expected_browser_errors``)."""
    with browser_page(browser, site_url, settle=False) as (other, problems):
        yield other
    unexpected = [p for p in problems if not any(e in p for e in expected_browser_errors)]
    assert not unexpected, unexpected


# -- logging in -------------------------------------------------------------------------------


def test_a_linked_user_logs_in_with_bankid(
    page: Page, log_in: Callable[..., None], user: Any
) -> None:
    verify_and_link(page, log_in, user, KARI)
    log_out(page, user.get_username())

    page.goto("/login/")
    screenshot(page, "login-with-eid", docs=True)
    log_in_with_bankid(page, KARI)

    # Logged in as Kari's account, on it (the login page's default next).
    expect(page).to_have_url(ACCOUNT_PAGE)
    expect_logged_in(page, user.get_username())
    expect(page.locator('dl.identity dd[data-field="name"]')).to_have_text("Nordmann, Kari Marie")
    login = Identification.objects.filter(user=user).latest("created_at")
    assert login.purpose == Identification.Purpose.LOGIN
    assert login.status == Identification.Status.SUCCESS
    assert LinkedIdentity.objects.get(user=user).last_used_at is not None
    assert get_user_model().objects.count() == 1  # no other account was made


def test_a_login_with_bankid_goes_on_to_the_page_asked_for(
    page: Page, log_in: Callable[..., None], user: Any
) -> None:
    verify_and_link(page, log_in, user, KARI)
    log_out(page, user.get_username())

    # The payout page wants the account's person, verified in the last five minutes: the
    # login's own identification is that, so no second one is asked.
    page.goto("/payout/")
    expect(page).to_have_url(re.compile(r"/login/\?next=/payout/$"))
    page.get_by_role("button", name="Log in with BankID").click()
    identify(page, KARI)

    expect(page).to_have_url(re.compile(r"/payout/$"))
    expect_logged_in(page, user.get_username())
    expect(page.get_by_label("Account number")).to_be_visible()
    assert Identification.objects.filter(user=user).count() == 2


# -- signing up, in each SIGNUP mode ----------------------------------------------------------


def test_sign_up_at_once(page: Page, signup_mode: Callable[[str], None]) -> None:
    signup_mode("auto")
    page.goto("/signup/")
    expect(page.get_by_text("Your account is created as soon as you come back")).to_be_visible()
    screenshot(page, "signup-page")
    sign_up_with_eid(page, OLA)

    # The account is made, linked and logged in at once; the sign-up page's next: the account.
    expect(page).to_have_url(ACCOUNT_PAGE)
    (account,) = get_user_model().objects.all()
    assert account.username.startswith("eid-")
    assert (account.first_name, account.last_name) == ("Ola", "Nordmann")
    assert not account.has_usable_password()
    expect_logged_in(page, account.username)
    expect(page.locator('dl.identity dd[data-field="name"]')).to_have_text("Nordmann, Ola")
    expect(page.get_by_text("Verified with eID")).to_be_visible()
    row = Identification.objects.get(user=account)
    assert (row.purpose, row.status) == ("signup", Identification.Status.SUCCESS)
    assert LinkedIdentity.objects.filter(user=account).count() == 1
    screenshot(page, "signup-auto")


def test_sign_up_with_the_form(page: Page, signup_mode: Callable[[str], None]) -> None:
    signup_mode("form")
    sign_up_with_eid(page, OLA)

    # django-eid's sign-up page, in the site's look, pre-filled with the verified name.
    expect(page).to_have_url(SIGNUP_PAGE)
    expect(page.get_by_role("heading", name="Create your account")).to_be_visible()
    expect(page.get_by_text("Your identity is verified as")).to_contain_text("Nordmann, Ola")
    expect(page.get_by_label("First name")).to_have_value("Ola")
    expect(page.get_by_label("Last name")).to_have_value("Nordmann")
    assert not get_user_model().objects.exists()
    screenshot(page, "signup-form", docs=True)
    sign_up_form(page, "ola", "ola@example.com")

    expect(page).to_have_url(ACCOUNT_PAGE)
    expect_logged_in(page, "ola")
    account = get_user_model().objects.get(username="ola")
    assert account.email == "ola@example.com"
    assert not account.has_usable_password()
    expect(page.locator('dl.identity dd[data-field="name"]')).to_have_text("Nordmann, Ola")
    assert LinkedIdentity.objects.filter(user=account).count() == 1

    # Ola's eID now logs him in, in any browser session.
    log_out(page, "ola")
    log_in_with_bankid(page, OLA)
    expect(page).to_have_url(ACCOUNT_PAGE)
    expect_logged_in(page, "ola")
    assert get_user_model().objects.count() == 1


def test_sign_up_closed_says_no_account_is_linked(
    page: Page, signup_mode: Callable[[str], None]
) -> None:
    signup_mode("closed")
    page.goto("/signup/")
    expect(page.get_by_role("status")).to_contain_text("does not open accounts with an eID")
    expect(page.get_by_role("button", name="Sign up with eID")).to_have_count(0)

    log_in_with_bankid(page, OLA)
    expect(page.get_by_role("heading", name="No account for this eID")).to_be_visible()
    expect(page.get_by_role("status")).to_have_text(
        "Your identity is verified, but no account here is linked to it."
    )
    screenshot(page, "signup-closed")
    assert not get_user_model().objects.exists()
    expect(page.get_by_role("navigation").get_by_role("link", name="Log in")).to_be_visible()
    page.get_by_role("link", name="Log in another way").click()
    expect(page).to_have_url(re.compile(r"/login/$"))


# -- what is refused --------------------------------------------------------------------------


def test_a_second_account_is_refused_the_same_person(
    page: Page,
    other_page: Page,
    signup_mode: Callable[[str], None],
    expected_browser_errors: list[str],
) -> None:
    """Two browsers verify the same new person and reach the sign-up form: the first makes
    the account, the second is refused, and makes none."""
    expected_browser_errors.append("status of 409 (Conflict) (http://localhost")
    signup_mode("form")
    for each in (page, other_page):
        sign_up_with_eid(each, OLA)
        expect(each).to_have_url(SIGNUP_PAGE)

    sign_up_form(page, "ola", "ola@example.com")
    expect(page).to_have_url(ACCOUNT_PAGE)
    expect_logged_in(page, "ola")

    sign_up_form(other_page, "ola2", "ola2@example.com")
    expect(other_page.get_by_role("heading", name="You already have an account")).to_be_visible()
    expect(other_page.get_by_role("alert")).to_have_text(
        "An account is already linked to this eID. Log in with it instead."
    )
    screenshot(other_page, "signup-person-has-account")
    assert list(get_user_model().objects.values_list("username", flat=True)) == ["ola"]
    expect(other_page.get_by_role("navigation").get_by_role("link", name="Log in")).to_be_visible()


def test_a_minor_is_refused_at_sign_up(
    page: Page, settings: Any, signup_mode: Callable[[str], None]
) -> None:
    signup_mode("auto")
    settings.DJANGO_EID = {**settings.DJANGO_EID, "MIN_AGE": 18}
    sign_up_with_eid(page, EMMA)

    expect(page.get_by_role("heading", name="Identification not accepted")).to_be_visible()
    expect(page.get_by_role("alert")).to_have_text(
        "You must be at least 18 years old to use this service."
    )
    screenshot(page, "signup-minor")
    assert not get_user_model().objects.exists()
    row = Identification.objects.get()
    assert (row.status, row.error_code, row.user) == (
        Identification.Status.REJECTED,
        "MIN_AGE",
        None,
    )
    assert not LinkedIdentity.objects.exists()


# -- the links page ---------------------------------------------------------------------------


def test_a_user_with_a_password_removes_a_link(
    page: Page, log_in: Callable[..., None], user: Any
) -> None:
    verify_and_link(page, log_in, user, KARI)
    page.get_by_role("link", name="Your linked eIDs").click()

    expect(page).to_have_url(LINKS_PAGE)
    rows = page.locator("table.eid-links tbody tr")
    expect(rows).to_have_count(1)
    expect(rows.first).to_contain_text("NO_BANKID_WEB")
    screenshot(page, "links", docs=True)
    rows.first.get_by_role("button", name="Remove").click()

    expect(page).to_have_url(LINKS_PAGE)
    expect(page.get_by_role("status")).to_have_text("The eID link was removed.")
    expect(page.get_by_text("No electronic ID is linked to your account.")).to_be_visible()
    assert not LinkedIdentity.objects.exists()

    # Kari's eID no longer opens the account: the site offers her a new one.
    log_out(page, user.get_username())
    log_in_with_bankid(page, KARI)
    expect(page).to_have_url(SIGNUP_PAGE)
    expect(page.get_by_role("navigation").get_by_role("link", name="Log in")).to_be_visible()


def test_the_only_way_to_log_in_is_kept(
    page: Page, signup_mode: Callable[[str], None], expected_browser_errors: list[str]
) -> None:
    """An account made by signing up has no password: its one link stays."""
    expected_browser_errors.append("status of 409 (Conflict) (http://localhost")
    signup_mode("auto")
    sign_up_with_eid(page, OLA)
    expect(page).to_have_url(ACCOUNT_PAGE)
    page.get_by_role("link", name="Your linked eIDs").click()
    page.get_by_role("button", name="Remove").click()

    expect(page.get_by_role("alert")).to_contain_text("Link kept")
    expect(page.get_by_role("alert")).to_contain_text("the only way you have to log in")
    expect(page.locator("table.eid-links tbody tr")).to_have_count(1)
    assert LinkedIdentity.objects.count() == 1
