"""Suite-wide wiring: the optional test tiers.

* ``browser`` tests need Chromium at ``/usr/bin/chromium``; without it they are
  skipped, "Chromium not installed (/usr/bin/chromium)".
* ``production`` tests need ``DATABASE_URL`` pointing at PostgreSQL and
  ``EID_TEST_REDIS_URL`` (``eval "$(.ci/services.sh env)"``); without them
  they are skipped.

A skip is only acceptable on a developer's machine. CI exports
``EID_REQUIRE_BROWSER=1`` / ``EID_REQUIRE_PRODUCTION=1``: then any skip of a
test of that tier is reported as a failure, and so is a run in which no test of
that tier ran at all (a module skipped at import never reaches the first check).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Generator
from typing import Any

import pytest

CHROMIUM = "/usr/bin/chromium"
POSTGRES_SCHEMES = ("postgres://", "postgresql://", "pgsql://", "postgis://")
TIERS = ("browser", "production")
REQUIRE_VAR = {"browser": "EID_REQUIRE_BROWSER", "production": "EID_REQUIRE_PRODUCTION"}

# Per-run bookkeeping, read by the terminal summary.
_GATED = pytest.StashKey[str]()  # on an item: the tier whose gate skipped it
_SKIPPED = pytest.StashKey[dict[str, list[str]]]()  # tier -> node ids skipped
_RAN = pytest.StashKey[dict[str, int]]()  # tier -> tests of the tier that ran
_MISSING = pytest.StashKey[dict[str, str]]()  # tier -> why the whole tier cannot run


def _tier_unavailable(tier: str) -> str | None:
    """Why the tests of ``tier`` cannot run here, or None when they can."""
    if tier == "browser":
        return None if os.access(CHROMIUM, os.X_OK) else f"Chromium not installed ({CHROMIUM})"
    if not os.environ.get("DATABASE_URL", "").startswith(POSTGRES_SCHEMES):
        return "production tier: DATABASE_URL is not a PostgreSQL URL"
    if not os.environ.get("EID_TEST_REDIS_URL"):
        return "production tier: EID_TEST_REDIS_URL is not set"
    return None


def _required(tier: str) -> bool:
    return os.environ.get(REQUIRE_VAR[tier], "") not in ("", "0")


def pytest_configure(config: pytest.Config) -> None:
    skipped: dict[str, list[str]] = {tier: [] for tier in TIERS}
    config.stash[_SKIPPED] = skipped
    config.stash[_RAN] = {tier: 0 for tier in TIERS}
    config.stash[_MISSING] = {}


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    missing = {tier: why for tier in TIERS if (why := _tier_unavailable(tier))}
    config.stash[_MISSING] = missing
    for item in items:
        # production first: a browser test that also needs PostgreSQL is a
        # production-tier test (EID_REQUIRE_BROWSER does not apply to it there).
        for tier in ("production", "browser"):
            if tier in missing and item.get_closest_marker(tier):
                item.add_marker(pytest.mark.skip(reason=missing[tier]))
                item.stash[_GATED] = tier
                break


def _skip_reason(report: pytest.TestReport) -> str:
    longrepr = report.longrepr
    reason = str(longrepr[2]) if isinstance(longrepr, tuple) else str(longrepr)
    return reason.removeprefix("Skipped: ")


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    tiers = [tier for tier in TIERS if item.get_closest_marker(tier)]
    if report.when == "call":
        for tier in tiers:
            item.config.stash[_RAN][tier] += 1
    if not report.skipped or hasattr(report, "wasxfail"):
        return report
    gated = item.stash.get(_GATED, None)
    for tier in tiers:
        if gated is not None and gated != tier:
            continue  # skipped by the other tier's gate: that tier's rule decides
        item.config.stash[_SKIPPED][tier].append(item.nodeid)
        if _required(tier):
            report.outcome = "failed"
            report.longrepr = (
                f"{REQUIRE_VAR[tier]}=1 but this {tier} test was skipped: {_skip_reason(report)}"
            )
            break
    return report


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if exitstatus != pytest.ExitCode.OK:
        return
    ran = session.config.stash.get(_RAN, {})
    if any(_required(tier) and not ran.get(tier) for tier in TIERS):
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> Generator[None]:
    # Wrapping the others: these lines come last, just above the final tally.
    yield
    config = terminalreporter.config
    skipped = config.stash.get(_SKIPPED, {})
    ran = config.stash.get(_RAN, {})
    missing = config.stash.get(_MISSING, {})
    for tier in TIERS:
        if skipped.get(tier):
            why = missing.get(tier, "see the skip reasons above")
            verdict = "FAILED" if _required(tier) else "skipped"
            terminalreporter.write_line(
                f"{tier} tests {verdict}: {len(skipped[tier])} skipped - {why}",
                red=_required(tier),
                yellow=not _required(tier),
                bold=True,
            )
        if _required(tier) and not ran.get(tier):
            terminalreporter.write_line(
                f"{REQUIRE_VAR[tier]}=1 but no {tier} test ran in this session",
                red=True,
                bold=True,
            )


# --- Fixtures shared by the whole suite go below this line. --------------------
# (tests/test_ci_tiers.py runs the hooks above in isolation: it cuts this file
# at this marker, so keep the tier machinery above it and self-contained.)


@pytest.fixture(autouse=True)
def clean_state() -> Generator[None]:
    """Every test starts and ends with empty caches (the shared token) and no shared client."""
    reset_eid_state()
    yield
    reset_eid_state()


def reset_eid_state() -> None:
    """Empty every cache (the shared token) and drop the shared broker client."""
    from django.core.cache import caches

    import django_eid.client

    for alias in caches:
        caches[alias].clear()
    django_eid.client.reset_client()


@pytest.fixture
def eid(settings: Any) -> Callable[..., None]:
    """``eid(KEY=value, ...)`` changes keys of ``DJANGO_EID`` for this test."""

    def configure(**values: Any) -> None:
        settings.DJANGO_EID = {**settings.DJANGO_EID, **values}

    return configure


@pytest.fixture
def broker_api(request: pytest.FixtureRequest, settings: Any) -> str:
    """The broker API of the test (``BROKER_API``): ``"v1"``, or each API in a suite whose
    conftest parametrizes it (:func:`tests.fixtures_views.parametrize_apis`)."""
    from tests.fixtures_broker import API_SETTINGS
    from tests.fixtures_client import eid_settings_with

    name: str = getattr(request, "param", "v1")
    if name != "v1":
        settings.DJANGO_EID = eid_settings_with(**API_SETTINGS[name])
    return name


@pytest.hookimpl(specname="pytest_collection_modifyitems", trylast=True)
def pytest_collection_modifyitems_apis(config: pytest.Config, items: list[pytest.Item]) -> None:
    """An ``apis`` mark on one parameter set (``pytest.param(..., marks=pytest.mark.apis(
    ...))``) limits that case to those broker APIs; the function's own mark already limits
    which APIs it is generated for (:func:`tests.fixtures_views.parametrize_apis`)."""
    kept: list[pytest.Item] = []
    dropped: list[pytest.Item] = []
    for item in items:
        callspec = getattr(item, "callspec", None)
        api = callspec.params.get("broker_api") if callspec is not None else None
        marks = [m for m in item.iter_markers("apis")] if api is not None else []
        (dropped if any(api not in m.args for m in marks) else kept).append(item)
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = kept
