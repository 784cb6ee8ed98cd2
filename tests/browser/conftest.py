"""Fixtures of the real-browser tests: one headless Chromium, the example site, screenshots.

The example project is served by pytest-django's ``live_server`` with the
sandbox broker mounted in it, and django-eid pointed at that sandbox over real
HTTP. Chromium comes from the OS package (``apt-get install chromium``); it is
never downloaded at test time. ``tests/conftest.py`` skips these tests when it
is missing (and fails them in CI).
"""

from __future__ import annotations

import contextlib
import gc
import os
import re
import shutil
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from playwright.sync_api import (
    Browser,
    ConsoleMessage,
    Page,
    ViewportSize,
    expect,
    sync_playwright,
)
from pytest_django.live_server_helper import LiveServer

from django_eid.client import reset_client
from tests.browser.example_site import example_site

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
ROOT = Path(__file__).resolve().parents[2]
#: Every end state, for humans looking at a failed run (build/ is git-ignored).
SCREENSHOTS = ROOT / "build" / "screenshots"
#: Where the pictures of the documentation are copied to: only when this names a
#: directory (``make screenshots`` sets it to docs/img), so that an ordinary run
#: of the tests leaves the committed pictures alone.
DOCS_IMG_ENV = "EID_DOCS_IMG"
#: Seconds any single wait may take; the flow needs well under one.
TIMEOUT_MS = 15_000
VIEWPORT: ViewportSize = {"width": 1200, "height": 900}
PASSWORD = "browser-test-pw-1"


@contextlib.contextmanager
def orm_beside_playwright() -> Iterator[None]:
    """Playwright's sync API keeps an event loop running in this thread.

    Django then takes every ORM call of the test (creating users, flushing the
    database) for one made from async code and refuses it. These calls are
    sync calls; say so while the browser lives.
    """
    previous = os.environ.get("DJANGO_ALLOW_ASYNC_UNSAFE")
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
    try:
        yield
    finally:
        if previous is None:
            del os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"]
        else:
            os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = previous


@pytest.fixture(scope="package")
def _allow_orm_beside_playwright() -> Iterator[None]:
    with orm_beside_playwright():
        yield


@pytest.fixture(scope="package")
def site_url(
    live_server: LiveServer,
    django_db_setup: None,
    django_db_blocker: Any,
    _allow_orm_beside_playwright: None,
) -> Iterator[str]:
    """The example project, live, with django-eid talking to its mounted sandbox."""
    url: str = live_server.url
    site = example_site(broker_url=f"{url}/eid-sandbox")
    with django_db_blocker.unblock():
        site.__enter__()
    try:
        yield url
    finally:
        with django_db_blocker.unblock():
            site.__exit__(None, None, None)


@pytest.fixture(scope="package")
def browser(site_url: str) -> Iterator[Browser]:
    """One Chromium for all the browser tests (each test gets a fresh context).

    Started after the site is set up and closed before it is torn down: while
    Playwright's event loop runs in this thread, Django (through asgiref) keeps
    this thread's database connections apart from the ones pytest-django opened,
    and the site's schema changes must use pytest-django's, or a connection is
    left open and PostgreSQL refuses to drop the test database.
    """
    expect.set_options(timeout=TIMEOUT_MS)
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS
        )
        try:
            yield browser
        finally:
            browser.close()


#: Whether the call phase of a test failed, for the fixtures' teardown.
CALL_FAILED = pytest.StashKey[bool]()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    report = yield
    if report.when == "call":
        item.stash[CALL_FAILED] = report.failed or hasattr(report, "wasxfail")
    return report


@pytest.fixture
def expected_browser_errors() -> list[str]:
    """Substrings of browser errors a test provokes on purpose (it appends to this list)."""
    return []


@pytest.fixture
def page(
    browser: Browser,
    site_url: str,
    request: pytest.FixtureRequest,
    expected_browser_errors: list[str],
) -> Iterator[Page]:
    """A fresh browser context (no cookies) on the example site.

    A test that passes fails anyway if the pages logged errors or threw (but for those it
    names in ``expected_browser_errors``); one that failed already gets them printed with
    its report instead.
    """
    with browser_page(browser, site_url) as (page, problems):
        yield page
    if request.node.stash.get(CALL_FAILED, False):
        print("Errors in the browser:", *problems, sep="\n  ")
    else:
        unexpected = [p for p in problems if not any(e in p for e in expected_browser_errors)]
        assert not unexpected, unexpected


def _request_threads() -> list[threading.Thread]:
    # The live server handles each connection in a thread named after its target.
    return [t for t in threading.enumerate() if t.name.endswith("(process_request_thread)")]


@contextlib.contextmanager
def browser_page(
    browser: Browser, base_url: str, *, cookies: Sequence[Any] = (), settle: bool = True
) -> Iterator[tuple[Page, list[str]]]:
    """A fresh browser context (its own cookies, ``cookies`` added) at ``base_url``, its
    page, and the errors the page records; the context closed, and the live server let
    settle, after the block. A second page, closed while the test's ``page`` stays open,
    leaves the settling to that one (``settle=False``): the open page's connections keep
    their server threads alive, and waiting for them took the whole timeout."""
    context = browser.new_context(base_url=base_url, viewport=VIEWPORT, locale="en-GB")
    context.set_default_timeout(TIMEOUT_MS)
    if cookies:
        context.add_cookies(list(cookies))
    page = context.new_page()
    problems = recorded_problems(page)
    try:
        yield page, problems
    finally:
        context.close()
        if settle:
            settle_live_server()


def recorded_problems(page: Page) -> list[str]:
    """The errors ``page`` will throw or log (a missing favicon aside), as they come."""
    problems: list[str] = []
    page.on("pageerror", lambda error: problems.append(f"page error: {error}"))

    def on_console(message: ConsoleMessage) -> None:
        if message.type == "error" and not message.location.get("url", "").endswith("/favicon.ico"):
            problems.append(f"console error: {message.text} ({message.location.get('url')})")

    page.on("console", on_console)
    return problems


def settle_live_server(timeout: float = 10.0) -> None:
    """Wait until the live server has finished with every connection of the test.

    Closing the browser context closes its connections, and the server threads
    serving them end. The sandbox's threads serve the keep-alive connections of
    django-eid's shared client, which outlives the test: closing that client
    ends them at once (waiting for them instead took the whole timeout, every
    test). Waiting keeps all of that inside the test: otherwise a thread could
    outlive the live server and touch the shared in-memory database after it
    stopped sharing it, failing the run with an unhandled thread exception.
    """
    reset_client()
    deadline = time.monotonic() + timeout
    while (threads := _request_threads()) and time.monotonic() < deadline:
        gc.collect()  # drops finished threads' clients now, not at some later test
        for thread in threads:
            thread.join(timeout=0.05)


@pytest.fixture
def user(transactional_db: None) -> Any:
    """A site user who has not identified yet."""
    return get_user_model().objects.create_user(username="kari", password=PASSWORD)


@pytest.fixture
def log_in(page: Page, user: Any) -> Callable[..., None]:
    """Log in through the login form (at ``site``, default the live server's URL).

    Lands on "Verify my identity".
    """

    def run(site: str = "") -> None:
        page.goto(f"{site}/login/")
        page.get_by_label("Username").fill(user.get_username())
        page.get_by_label("Password").fill(PASSWORD)
        page.get_by_role("button", name="Log in", exact=True).click()
        expect(page).to_have_url(re.compile(r"/eid/start/$"))

    return run


def screenshot(page: Page, name: str, *, docs: bool = False) -> Path:
    """Save ``<name>.png`` under build/screenshots/.

    A picture of the documentation (``docs``) is also copied to the directory that
    ``EID_DOCS_IMG`` names, if set (``make screenshots``: docs/img/).
    """
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    path = SCREENSHOTS / f"{name}.png"
    page.screenshot(path=path, full_page=True, animations="disabled", caret="hide")
    if docs and (docs_img := os.environ.get(DOCS_IMG_ENV)):
        target = Path(docs_img)
        if not target.is_absolute():
            target = ROOT / target
        target.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, target / path.name)
    return path
