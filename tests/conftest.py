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

import importlib.util
import os
import re
from collections.abc import Callable, Generator, Iterator
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:  # Django is configured after this module is imported
    import responses
    from django.contrib.auth.models import AbstractBaseUser
    from django.test import Client

    from django_eid.models import Identification
    from tests.fixtures_broker import ScriptedBroker
    from tests.fixtures_views import Signals, Started

CHROMIUM = "/usr/bin/chromium"
POSTGRES_SCHEMES = ("postgres://", "postgresql://", "pgsql://", "postgis://")
TIERS = ("browser", "production")
REQUIRE_VAR = {"browser": "EID_REQUIRE_BROWSER", "production": "EID_REQUIRE_PRODUCTION"}
#: The user property a test of a tier carries on its reports: reports, not items, reach
#: pytest-xdist's controller, which keeps the tally.
TIER_PROPERTY = "eid_tier"
#: ... and one whose gate skipped it.
GATED_PROPERTY = "eid_tier_skipped"


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


def _tier_of(item: pytest.Item) -> str | None:
    # production first: a browser test that also needs PostgreSQL is a production-tier
    # test (EID_REQUIRE_BROWSER does not apply to it there).
    return next((tier for tier in ("production", "browser") if item.get_closest_marker(tier)), None)


class TierTally:
    """What ran and what was skipped of each tier, kept where the reports arrive: in the
    one process, or on pytest-xdist's controller (its workers' reports are sent there)."""

    def __init__(self) -> None:
        self.missing = {tier: why for tier in TIERS if (why := _tier_unavailable(tier))}
        self.ran = dict.fromkeys(TIERS, 0)
        self.skipped: dict[str, list[str]] = {tier: [] for tier in TIERS}

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        properties = dict(report.user_properties)
        tier = properties.get(TIER_PROPERTY)
        if tier is None:
            return
        if properties.get(GATED_PROPERTY):
            self.skipped[tier].append(report.nodeid)
        elif report.when == "call":
            self.ran[tier] += 1


_TALLY = pytest.StashKey[TierTally]()


def pytest_configure(config: pytest.Config) -> None:
    config.stash[_TALLY] = tally = TierTally()
    config.pluginmanager.register(tally, "eid-tier-tally")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    missing = config.stash[_TALLY].missing
    for item in items:
        tier = _tier_of(item)
        if tier in missing:
            item.add_marker(pytest.mark.skip(reason=missing[tier]))


def _skip_reason(report: pytest.TestReport) -> str:
    longrepr = report.longrepr
    reason = str(longrepr[2]) if isinstance(longrepr, tuple) else str(longrepr)
    return reason.removeprefix("Skipped: ")


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    tier = _tier_of(item)
    if tier is None:
        return report
    properties = [*report.user_properties, (TIER_PROPERTY, tier)]
    if report.skipped and not hasattr(report, "wasxfail"):
        properties.append((GATED_PROPERTY, True))
        if _required(tier):
            report.outcome = "failed"
            report.longrepr = (
                f"{REQUIRE_VAR[tier]}=1 but this {tier} test was skipped: {_skip_reason(report)}"
            )
    report.user_properties = properties
    return report


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if exitstatus != pytest.ExitCode.OK or hasattr(session.config, "workerinput"):
        return  # a pytest-xdist worker sees only its share: the controller decides
    ran = session.config.stash[_TALLY].ran
    if any(_required(tier) and not ran[tier] for tier in TIERS):
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> Generator[None]:
    # Wrapping the others: these lines come last, just above the final tally.
    yield
    tally = terminalreporter.config.stash[_TALLY]
    for tier in TIERS:
        if tally.skipped[tier]:
            why = tally.missing.get(tier, "see the skip reasons above")
            verdict = "FAILED" if _required(tier) else "skipped"
            terminalreporter.write_line(
                f"{tier} tests {verdict}: {len(tally.skipped[tier])} skipped - {why}",
                red=_required(tier),
                yellow=not _required(tier),
                bold=True,
            )
        if _required(tier) and not tally.ran[tier]:
            terminalreporter.write_line(
                f"{REQUIRE_VAR[tier]}=1 but no {tier} test ran in this session",
                red=True,
                bold=True,
            )


# --- Fixtures shared by the whole suite go below this line. --------------------
# (tests/test_ci_tiers.py runs the hooks above in isolation: it cuts this file
# at this marker, so keep the tier machinery above it and self-contained.)

#: Without Playwright (the ``browser`` extra: tox installs the ``test`` extra alone) the
#: browser tests cannot even be collected; CI, which requires them, then fails on "no
#: browser test ran" instead.
collect_ignore = [] if importlib.util.find_spec("playwright") else ["browser"]


@pytest.hookimpl(specname="pytest_configure")
def pytest_configure_summary(config: pytest.Config) -> None:
    from tests import examples, run_summary

    run_summary.register(config)
    examples.load_profile()


@pytest.fixture(autouse=True)
def clean_state() -> Generator[None]:
    """Every test starts and ends with empty caches (the shared token), no shared client,
    and the site's language: a request through ``LocaleMiddleware`` leaves the language it
    read active in the thread, for whichever test runs next (``-p randomly`` found it)."""
    from django.utils import translation

    reset_eid_state()
    translation.deactivate()
    yield
    reset_eid_state()
    translation.deactivate()


def reset_eid_state() -> None:
    """Empty every cache (the shared token) and drop the shared broker client."""
    from django.core.cache import caches

    import django_eid.client

    for alias in caches:
        caches[alias].clear()
    django_eid.client.reset_client()


@pytest.fixture(autouse=True)
def _no_retry_wait(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """No test sleeps between the client's retries, but those of the backoff itself
    (``real_backoff``)."""
    import django_eid.transport

    if "real_backoff" not in request.fixturenames:
        monkeypatch.setattr(django_eid.transport, "BACKOFF", 0.0)


@pytest.fixture
def real_backoff() -> None:
    """The client's own delays between retries, for a test of them (with ``slept``, which
    records them rather than waiting them out)."""


@pytest.fixture
def slept(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """The delays the client asks for between retries (its ``BACKOFF``, none unless the test
    asks for ``real_backoff``; ``Retry-After``), recorded instead of slept."""
    import django_eid.transport

    delays: list[float] = []
    monkeypatch.setattr(django_eid.transport.time, "sleep", delays.append)
    return delays


@pytest.fixture
def eid(request: pytest.FixtureRequest, settings: Any) -> Callable[..., None]:
    """``eid(KEY=value, ...)`` changes keys of ``DJANGO_EID`` for this test (on top of the
    broker API's settings, when the test asks for ``broker_api``)."""
    if "broker_api" in request.fixturenames:
        request.getfixturevalue("broker_api")  # it sets DJANGO_EID whole: first

    def configure(**values: Any) -> None:
        settings.DJANGO_EID = {**settings.DJANGO_EID, **values}

    return configure


# -- the broker API: the contract suite by construction ------------------------------------
def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """A test that asks for ``broker_api`` (itself or through a fixture of its own) runs once
    per broker API and OpenID Connect preset, or per API its ``apis`` mark names
    (``@pytest.mark.apis(*REST_APIS, reason=...)``); every other test runs once, against
    the default API (``"v1"``). So what the broker's API can change is tested with each,
    and nothing else is, without a list to keep up to date."""
    if "broker_api" not in metafunc.fixturenames:
        return
    from tests.fixtures_broker import API_SETTINGS

    marker = metafunc.definition.get_closest_marker("apis")
    names = marker.args if marker else tuple(API_SETTINGS)
    metafunc.parametrize("broker_api", names, indirect=True)


@pytest.fixture
def broker_api(request: pytest.FixtureRequest, settings: Any) -> str:
    """The broker API of the test (``BROKER_API``, an entry of
    :data:`tests.fixtures_broker.API_SETTINGS`): asking for it runs the test once per API
    (:func:`pytest_generate_tests`)."""
    from tests.fixtures_broker import API_SETTINGS
    from tests.fixtures_client import eid_settings_with

    name: str = request.param
    settings.DJANGO_EID = eid_settings_with(**API_SETTINGS[name])
    return name


@pytest.hookimpl(specname="pytest_collection_modifyitems", tryfirst=True)
def pytest_collection_modifyitems_ids(items: list[pytest.Item]) -> None:
    """Every process collects the same test ids (pytest-xdist's workers must agree): an id
    made of an object's ``repr`` names its memory address, different in each."""
    unstable = [item.nodeid for item in items if re.search(r" at 0x[0-9a-fA-F]+", item.nodeid)]
    if unstable:
        raise pytest.UsageError(
            "test ids that name a memory address (give the parameters ids=): " + ", ".join(unstable)
        )


@pytest.hookimpl(specname="pytest_collection_modifyitems", trylast=True)
def pytest_collection_modifyitems_apis(config: pytest.Config, items: list[pytest.Item]) -> None:
    """An ``apis`` mark on one parameter set (``pytest.param(..., marks=pytest.mark.apis(
    ...))``) limits that case to those broker APIs; the function's own mark already limits
    which APIs it is generated for (:func:`pytest_generate_tests`)."""
    kept: list[pytest.Item] = []
    dropped: list[pytest.Item] = []
    for item in items:
        if item.get_closest_marker("apis") and "broker_api" not in getattr(
            item, "fixturenames", ()
        ):
            raise pytest.UsageError(
                f"{item.nodeid}: an apis mark without broker_api does nothing; the test runs "
                "once, against the default API (ask for broker_api, or drop the mark)"
            )
        callspec = getattr(item, "callspec", None)
        api = callspec.params.get("broker_api") if callspec is not None else None
        marks = [m for m in item.iter_markers("apis")] if api is not None else []
        (dropped if any(api not in m.args for m in marks) else kept).append(item)
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = kept


# -- the broker, the users, the start, the signals: the vocabulary of the suite ----------
@pytest.fixture
def broker(request: pytest.FixtureRequest) -> Iterator[ScriptedBroker]:
    """The sandbox broker behind ``responses`` (:class:`tests.fixtures_broker.ScriptedBroker`),
    speaking the test's broker API: each API's for a test that asks for ``broker_api``, else
    the default (``"v1"``)."""
    from tests.fixtures_broker import ScriptedBroker

    if "broker_api" in request.fixturenames:
        request.getfixturevalue("broker_api")  # its settings first: the broker reads them
    with ScriptedBroker() as scripted:
        yield scripted


@pytest.fixture
def wire() -> Iterator[responses.RequestsMock]:
    """The broker's URLs mocked answer by answer with ``responses``, nothing else: for the
    tests of the client's exact requests and its reading of exact answers
    (``tests.fixtures_client``: ``add_token``, ``token_calls`` ...). A test of anything
    above the client uses ``broker``."""
    import responses

    with responses.RequestsMock(assert_all_requests_are_fired=False) as mock:
        yield mock


@pytest.fixture
def alice(django_user_model: Any) -> AbstractBaseUser:
    from tests.fixtures_views import make_user

    return make_user(django_user_model, "alice")


@pytest.fixture
def bob(django_user_model: Any) -> AbstractBaseUser:
    from tests.fixtures_views import make_user

    return make_user(django_user_model, "bob")


@pytest.fixture
def alice_client(alice: AbstractBaseUser) -> Client:
    from tests.fixtures_views import logged_in

    return logged_in(alice)


@pytest.fixture
def bob_client(bob: AbstractBaseUser) -> Client:
    from tests.fixtures_views import logged_in

    return logged_in(bob)


@pytest.fixture
def start(broker: ScriptedBroker, alice_client: Client) -> Callable[..., Started]:
    """``start(client=alice_client, request_id=None, *, ends="pending", at="/eid/start/",
    **post)``: POST the start view (``at``: another, the login page's), then the person at
    the broker ends the session as ``ends`` says (:func:`tests.fixtures_views.start_session`)."""
    from tests.fixtures_views import start_session

    def run(
        client: Client = alice_client,
        request_id: str | None = None,
        *,
        ends: str = "pending",
        at: str = "/eid/start/",
        **post: str,
    ) -> Started:
        return start_session(broker, client, request_id, ends=ends, at=at, **post)

    return run


@pytest.fixture
def verify(
    start: Callable[..., Started], broker: ScriptedBroker, alice_client: Client
) -> Callable[..., Identification]:
    """``verify(client=alice_client, **record)``: start and finish one identification of
    the record's person (:data:`tests.fixtures_broker.SAMPLE`, ``record`` overriding its
    properties) through the start page and the success return; the row as it ends."""

    def run(client: Client = alice_client, **record: Any) -> Identification:
        started = start(client=client)
        broker.will_return(started.request_id, **record)
        response = client.get(started.success_url())
        row = started.refresh()
        # The user goes on after a success; a refusal is a page saying why.
        success = row.status == "SUCCESS"
        assert response.status_code == (302 if success else 200)
        return row

    return run


@pytest.fixture
def verifying() -> Iterator[Callable[[Callable[..., None]], None]]:
    """``verifying(receiver)`` connects a receiver of ``identification_verifying`` for the test."""
    from django_eid.models import Identification
    from django_eid.signals import identification_verifying

    connected: list[Callable[..., None]] = []

    def connect(receiver: Callable[..., None]) -> None:
        identification_verifying.connect(receiver, sender=Identification, weak=False)
        connected.append(receiver)

    yield connect
    for receiver in connected:
        identification_verifying.disconnect(receiver, sender=Identification)


@pytest.fixture
def signals() -> Iterator[Signals]:
    """Every django-eid signal sent during the test (:class:`tests.fixtures_views.Signals`)."""
    from tests.fixtures_views import Signals

    recorder = Signals()
    recorder.connect("test-signals")
    yield recorder
    recorder.disconnect("test-signals")
