"""The whole flow in a real browser: the example site, django-eid and the sandbox broker.

Each test logs in, starts an identification, acts as the person at the sandbox's
login page and checks where the browser ends up. Waits are explicit
(``expect``), never sleeps.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import pytest
from playwright.sync_api import FrameLocator, Page, expect

from django_eid.models import Identification
from tests.browser.conftest import screenshot

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

SANDBOX_PAGE = re.compile(r"/eid-sandbox/login/[^/]+/$")
ACCOUNT_PAGE = re.compile(r"/account/$")
START_PAGE = re.compile(r"/eid/start/$")
FRAME_PAGE = re.compile(r"/eid/frame/[\w-]+/$")


def choose_person(at: Page | FrameLocator, name: str) -> None:
    """Pick a built-in test person on the sandbox page by their full name."""
    expect(at.get_by_role("heading", name="Identify yourself")).to_be_visible()
    person = at.get_by_role("radio", name=re.compile(rf"^{re.escape(name)}\b"))
    person.check()
    expect(person).to_be_checked()


def expect_identity(page: Page, **fields: str) -> None:
    """The account page shows these values in its "Verified identity" list."""
    expect(page).to_have_url(ACCOUNT_PAGE)
    for field, value in fields.items():
        expect(page.locator(f'dl.identity dd[data-field="{field}"]')).to_have_text(value)


def only_identification(user: Any) -> Identification:
    (row,) = Identification.objects.filter(user=user)
    return row


def test_identify_on_the_broker_page(page: Page, log_in: Callable[..., None], user: Any) -> None:
    log_in()
    expect(page.get_by_role("heading", name="Verify my identity")).to_be_visible()
    screenshot(page, "verify")
    page.get_by_role("button", name="Continue to identification").click()

    expect(page).to_have_url(SANDBOX_PAGE)
    choose_person(page, "Kari Marie Nordmann")
    screenshot(page, "sandbox", docs=True)
    page.get_by_role("button", name="Identify", exact=True).click()

    expect_identity(
        page,
        name="Nordmann, Kari Marie",
        date_of_birth="1985-03-14",
        provider="NO_BANKID_WEB",
    )
    row = only_identification(user)
    assert row.status == Identification.Status.SUCCESS
    assert row.display == Identification.Display.REDIRECT
    ssn = page.locator('dd[data-field="ssn"]')
    expect(ssn).to_have_text(row.masked_social_security_number)
    expect(ssn).to_have_text(re.compile(r"^\d{6}•{5}$"))
    expect(page.get_by_text("Verified with eID")).to_be_visible()
    expect(page.locator("table tbody tr")).to_have_count(1)
    expect(page.locator("table tbody tr").first).to_contain_text("Identified")
    screenshot(page, "account", docs=True)


def test_identify_inside_the_iframe(page: Page, log_in: Callable[..., None], user: Any) -> None:
    log_in()
    page.get_by_role("button", name="Identify in a frame").click()

    # The top window stays on the site; the sandbox is inside the frame.
    expect(page).to_have_url(FRAME_PAGE)
    frame = page.frame_locator("iframe.eid-frame")
    expect(frame.get_by_role("heading", name="Identify yourself")).to_be_visible()
    page.reload()  # a reload shows the same session again, and starts no other
    choose_person(frame, "Astrid Linnéa Lindqvist")
    expect(frame.get_by_text("Shown in a frame of")).to_be_visible()
    screenshot(page, "iframe", docs=True)
    frame.get_by_role("button", name="Identify", exact=True).click()

    # The callback page inside the frame moves the top window to the account page.
    expect_identity(page, name="Lindqvist, Astrid Linnéa", provider="SWE_BANKID")
    expect(page.locator("iframe")).to_have_count(0)
    row = only_identification(user)
    assert row.status == Identification.Status.SUCCESS
    assert row.display == Identification.Display.IFRAME
    expect(page.locator("table tbody tr").first).to_contain_text("Iframe")
    screenshot(page, "iframe-account")


def test_abort_returns_to_the_start_page(
    page: Page, log_in: Callable[..., None], user: Any
) -> None:
    log_in()
    # "Verify my identity" is the app's start page with the site's template.
    expect(page).to_have_url(START_PAGE)
    screenshot(page, "start", docs=True)
    page.get_by_role("button", name="Continue to identification").click()

    expect(page).to_have_url(SANDBOX_PAGE)
    page.get_by_role("button", name="Abort").click()

    # Back on the very page the user started from, with the site's two buttons.
    expect(page).to_have_url(START_PAGE)
    expect(page.get_by_role("status")).to_have_text("You cancelled the identification.")
    expect(page.get_by_role("button", name="Continue to identification")).to_be_visible()
    assert only_identification(user).status == Identification.Status.ABORTED
    screenshot(page, "aborted")


def test_abort_inside_the_iframe(page: Page, log_in: Callable[..., None], user: Any) -> None:
    log_in()
    page.get_by_role("button", name="Identify in a frame").click()
    frame = page.frame_locator("iframe.eid-frame")
    expect(frame.get_by_role("heading", name="Identify yourself")).to_be_visible()
    frame.get_by_role("button", name="Abort").click()

    expect(page.get_by_role("status")).to_have_text("You cancelled the identification.")
    expect(page.locator("iframe")).to_have_count(0)
    expect(page).to_have_url(START_PAGE)
    assert only_identification(user).status == Identification.Status.ABORTED
    screenshot(page, "iframe-aborted")


def test_error_at_the_broker_shows_the_error_page(
    page: Page, log_in: Callable[..., None], user: Any
) -> None:
    log_in()
    page.get_by_role("button", name="Continue to identification").click()
    expect(page).to_have_url(SANDBOX_PAGE)
    page.get_by_label("Error status").select_option("PKI_BLOCKED")
    page.get_by_role("button", name="Fail").click()

    expect(page.get_by_role("heading", name="Identification failed")).to_be_visible()
    expect(page.get_by_role("alert")).to_have_text(
        "The identification did not succeed. Please try again."
    )
    expect(page.get_by_text("Reference for support:")).to_contain_text("PKI_BLOCKED")
    expect(page.get_by_role("link", name="Try again")).to_be_visible()
    row = only_identification(user)
    assert row.status == Identification.Status.ERROR
    assert row.error_status == "PKI_BLOCKED"
    screenshot(page, "error")


def test_a_child_is_rejected_by_the_sites_rule(
    page: Page, log_in: Callable[..., None], user: Any
) -> None:
    log_in()
    page.get_by_role("button", name="Continue to identification").click()
    expect(page).to_have_url(SANDBOX_PAGE)
    choose_person(page, "Noah Berg")
    page.get_by_role("button", name="Identify", exact=True).click()

    expect(page.get_by_role("heading", name="Identification not accepted")).to_be_visible()
    expect(page.get_by_role("alert")).to_have_text("You must be 13 or older to use this service.")
    row = only_identification(user)
    assert row.status == Identification.Status.REJECTED
    screenshot(page, "rejected")

    page.goto("/account/")
    expect(page.get_by_text("You have not verified your identity yet.")).to_be_visible()
    expect(page.get_by_text("Not verified", exact=True)).to_be_visible()
    expect(page.locator("table tbody tr").first).to_contain_text("Rejected")


def test_identify_inside_an_iframe_of_another_site(
    page: Page, log_in: Callable[..., None], site_url: str
) -> None:
    """A real broker is always another site: its page in the frame is a third-party context.

    Here the site is browsed at 127.0.0.1 while the sandbox answers at localhost
    (as in the demo when one opens http://localhost:8000 instead of the address
    the server printed).
    """
    other_site = site_url.replace("//localhost:", "//127.0.0.1:")
    assert other_site != site_url
    log_in(other_site)
    page.get_by_role("button", name="Identify in a frame").click()

    frame = page.frame_locator("iframe.eid-frame")
    choose_person(frame, "Søren Aabye Kjærgaard")
    frame.get_by_role("button", name="Identify", exact=True).click()

    # Shorter than the default wait while this fails (the flow needs well under a second).
    expect(page).to_have_url(f"{other_site}/account/", timeout=5_000)
    expect_identity(page, name="Kjærgaard, Søren Aabye", provider="DA_NEMID")


def identify_through(page: Page, log_in: Callable[..., None], user: Any, provider: str) -> Any:
    """Log in, identify as Kari at the sandbox; the account shows her identity; the row."""
    log_in()
    page.get_by_role("button", name="Continue to identification").click()
    expect(page).to_have_url(SANDBOX_PAGE)
    choose_person(page, "Kari Marie Nordmann")
    page.get_by_role("button", name="Identify", exact=True).click()
    expect_identity(page, date_of_birth="1985-03-14", provider=provider)
    expect(page.locator('dl.identity dd[data-field="name"]')).to_contain_text("Kari")
    row = only_identification(user)
    assert row.status == Identification.Status.SUCCESS
    assert row.national_id_country == "NO"
    return row


@pytest.mark.parametrize(("api", "provider"), [("v2", "no_bankid_netcentric"), ("eid-hub", "nbid")])
def test_identify_with_each_successor_api(
    page: Page,
    log_in: Callable[..., None],
    user: Any,
    settings: Any,
    api: str,
    provider: str,
) -> None:
    """The demo, the site speaking v2 or the eID Hub to the sandbox speaking it too: the
    broker appends ``sessionId`` to the return URL, and the identity lands the same."""
    settings.DJANGO_EID = {
        **settings.DJANGO_EID,
        "BROKER_API": api,
        "ACCOUNT_ID": "a-spge-demo",
        "SCOPES": None,
    }
    row = identify_through(page, log_in, user, provider)
    assert bool(row.level_of_assurance) is (api == "eid-hub")


@pytest.mark.parametrize(
    ("preset", "provider", "level"),
    [
        ("idura", "no-bankid", "high"),
        ("bankid-no", "bid", "high"),
        ("signicat", "nbid", "high"),
        ("vipps", "vipps", "substantial"),
    ],
)
def test_identify_with_an_openid_provider(
    page: Page,
    log_in: Callable[..., None],
    user: Any,
    settings: Any,
    site_url: str,
    preset: str,
    provider: str,
    level: str,
) -> None:
    """The demo with ``BROKER_API = "oidc"``: the sandbox's local OpenID provider of each
    preset, over real HTTP (discovery, PAR, the person picker, the redirect back with a
    code, the token exchange, the id_token's signature, userinfo where the preset has it)."""
    settings.DJANGO_EID = {
        **settings.DJANGO_EID,
        "BROKER_API": "oidc",
        "OIDC_PRESET": preset,
        "OIDC_ISSUER": f"{site_url}/eid-sandbox/oidc/{preset}",
        "IDENTITY_PROVIDER": provider,
        "SCOPES": None,
    }
    row = identify_through(page, log_in, user, provider)
    assert row.level_of_assurance == level
    assert row.request_id.startswith("oidc-")
