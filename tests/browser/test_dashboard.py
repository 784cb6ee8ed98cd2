"""The admin's dashboard in Chromium, filled with a month of identifications by the
example project's ``eid_demo_fill``: the charts are drawn, and their tables carry the
figures (``make screenshots``: docs/img/dashboard.png)."""

from __future__ import annotations

import re
from io import StringIO

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command
from playwright.sync_api import Page, expect

from django_eid.dashboard import figures
from example_project.accounts.management.commands import eid_demo_fill
from tests.browser.conftest import PASSWORD, screenshot

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

DASHBOARD = "/admin/django_eid/auditevent/dashboard/"
CHARTS = (
    "Identifications per day by outcome, last 30 days",
    "Completion rate per provider",
    "Completion rate per display",
    "Broker errors per day, last 30 days",
    "Sessions created per month, last 12 months",
)


def test_the_dashboard_with_a_month_of_identifications(page: Page) -> None:
    # The command's class: the suite's command list may predate the example's app. A
    # quieter month than the command's default (40 starts a weekday) draws the same charts
    # in a third of the time.
    call_command(eid_demo_fill.Command(), "--seed", "1", "--per-day", "15", stdout=StringIO())
    get_user_model().objects.create_superuser("admin", "admin@example.com", PASSWORD)
    found = figures()

    page.goto(f"/admin/login/?next={DASHBOARD}")
    page.get_by_label("Username").fill("admin")
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Log in").click()
    expect(page).to_have_url(re.compile(f"{DASHBOARD}$"))
    expect(page.get_by_role("heading", name="Identifications dashboard")).to_be_visible()
    for title in CHARTS:
        chart = page.get_by_role("img", name=title, exact=True)
        expect(chart).to_be_visible()
        assert chart.bounding_box()["height"] > 60  # type: ignore[index]

    # The tables beside the charts carry the figures.
    providers = page.locator("#eid-providers-table tbody tr")
    expect(providers).to_have_count(len(found.by_provider))
    top = found.by_provider[0]
    expect(providers.first.locator("td")).to_have_text(
        [str(top.started), str(top.succeeded), f"{top.percent:.1f} %"]
    )
    sessions = page.locator("#eid-months-table tbody tr").last.locator("td")
    expect(sessions).to_have_text([str(found.months[-1].sessions)])
    # The per-day numbers are folded away under the chart, one click from it.
    days = page.locator("#eid-outcomes-table")
    expect(days).to_be_hidden()
    page.get_by_text("The numbers").first.click()
    expect(days).to_be_visible()
    expect(days.locator("tbody tr")).to_have_count(30)
    yesterday = found.days[-2]
    expect(days.locator("tbody tr").nth(28).locator("td")).to_have_text(
        [
            *(str(yesterday.outcomes[s]) for s in found.outcomes),
            str(yesterday.finished),
            str(yesterday.started),
        ]
    )
    page.get_by_text("The numbers").first.click()  # folded again, for the picture
    screenshot(page, "dashboard", docs=True)
