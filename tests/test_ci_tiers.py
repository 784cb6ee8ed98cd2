"""The tier gates of tests/conftest.py: skipped locally, mandatory in CI.

Each case runs the hooks of tests/conftest.py (the part above its fixtures
marker) in a separate pytest over three tiny tests, without Django.
"""

from __future__ import annotations

from pathlib import Path

import pytest

pytest_plugins = ["pytester"]
pytestmark = pytest.mark.own_process

CONFTEST = Path(__file__).with_name("conftest.py").read_text()
MARKER = "# --- Fixtures shared by the whole suite go below this line."
assert MARKER in CONFTEST, "tests/conftest.py lost its fixtures marker"
HOOKS = CONFTEST.split(MARKER)[0]

TESTS = """
import pytest

@pytest.mark.browser
def test_in_browser():
    pass

@pytest.mark.production
def test_on_postgres():
    pass

def test_plain():
    pass
"""
INI = """[pytest]
addopts = -ra --strict-markers -p no:cacheprovider
markers =
    browser: b
    production: p
"""
ENV = ("EID_REQUIRE_BROWSER", "EID_REQUIRE_PRODUCTION", "DATABASE_URL", "EID_TEST_REDIS_URL")


def run(
    pytester: pytest.Pytester,
    monkeypatch: pytest.MonkeyPatch,
    *,
    chromium: bool,
    env: dict[str, str] | None = None,
    args: tuple[str, ...] = (),
) -> pytest.RunResult:
    for name in ENV:
        monkeypatch.delenv(name, raising=False)
    # Neither pytest-django nor any other installed plugin: just these hooks.
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")
    for name, value in (env or {}).items():
        monkeypatch.setenv(name, value)
    # Any executable stands in for an installed Chromium.
    chromium_path = "/bin/sh" if chromium else "/nonexistent/chromium"
    pytester.makeconftest(HOOKS + f"\nCHROMIUM = {chromium_path!r}\n")
    pytester.makeini(INI)
    pytester.makepyfile(test_tiers=TESTS)
    return pytester.runpytest_subprocess(*args)


PRODUCTION_ENV = {
    "DATABASE_URL": "postgres://eid:eid@127.0.0.1:5439/eid",
    "EID_TEST_REDIS_URL": "redis://127.0.0.1:6390/0",
}


def test_locally_missing_tiers_are_skipped_with_a_reason(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    result = run(pytester, monkeypatch, chromium=False)
    result.assert_outcomes(passed=1, skipped=2)
    result.stdout.fnmatch_lines(
        [
            "*SKIPPED*Chromium not installed (/nonexistent/chromium)",
            "*SKIPPED*DATABASE_URL is not a PostgreSQL URL",
            "browser tests skipped: 1 skipped - Chromium not installed*",
            "production tests skipped: 1 skipped - *",
        ]
    )


def test_everything_runs_when_available(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    env = {**PRODUCTION_ENV, "EID_REQUIRE_BROWSER": "1", "EID_REQUIRE_PRODUCTION": "1"}
    result = run(pytester, monkeypatch, chromium=True, env=env)
    result.assert_outcomes(passed=3)
    assert result.ret == 0


def test_required_browser_turns_the_skip_into_a_failure(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    result = run(pytester, monkeypatch, chromium=False, env={"EID_REQUIRE_BROWSER": "1"})
    result.assert_outcomes(passed=1, skipped=1, errors=1)
    result.stdout.fnmatch_lines(["*EID_REQUIRE_BROWSER=1 but this browser test was skipped*"])
    assert result.ret == pytest.ExitCode.TESTS_FAILED


def test_required_production_turns_the_skip_into_a_failure(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    result = run(pytester, monkeypatch, chromium=True, env={"EID_REQUIRE_PRODUCTION": "1"})
    result.assert_outcomes(passed=2, errors=1)
    result.stdout.fnmatch_lines(["*EID_REQUIRE_PRODUCTION=1 but this production test*"])
    assert result.ret == pytest.ExitCode.TESTS_FAILED


def test_required_tier_that_never_ran_fails_the_session(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    env = {**PRODUCTION_ENV, "EID_REQUIRE_BROWSER": "1"}
    result = run(pytester, monkeypatch, chromium=True, env=env, args=("-m", "not browser"))
    result.assert_outcomes(passed=2, deselected=1)
    result.stdout.fnmatch_lines(["*EID_REQUIRE_BROWSER=1 but no browser test ran*"])
    assert result.ret == pytest.ExitCode.TESTS_FAILED


@pytest.mark.parametrize(
    ("only", "code"),
    [((), pytest.ExitCode.OK), (("-m", "not browser"), pytest.ExitCode.TESTS_FAILED)],
    ids=["all", "no-browser-test"],
)
def test_the_tally_is_kept_across_xdist_workers(
    pytester: pytest.Pytester,
    monkeypatch: pytest.MonkeyPatch,
    only: tuple[str, ...],
    code: pytest.ExitCode,
) -> None:
    """With pytest-xdist the tests run in workers and only their reports reach the
    controller, which decides: each tier's tests counted there, wherever they ran."""
    env = {**PRODUCTION_ENV, "EID_REQUIRE_BROWSER": "1", "EID_REQUIRE_PRODUCTION": "1"}
    result = run(
        pytester, monkeypatch, chromium=True, env=env, args=("-p", "xdist", "-n", "2", *only)
    )
    assert result.ret == code
    if code != pytest.ExitCode.OK:
        result.stdout.fnmatch_lines(["*EID_REQUIRE_BROWSER=1 but no browser test ran*"])
    else:
        result.stdout.no_fnmatch_line("*no * test ran*")


def test_each_xdist_worker_has_a_redis_database_of_its_own() -> None:
    from django.core.exceptions import ImproperlyConfigured

    from tests.parallel import REDIS_DATABASES, worker_redis_url

    url = "redis://127.0.0.1:6390/{}"
    databases = {
        worker_redis_url(url.format(slot), f"gw{worker}")
        for slot in range(16)
        for worker in range(8)
    }
    plain = {url.format(slot) for slot in range(16)}  # runs without workers
    assert len(databases) == 16 * 8
    assert not databases & plain
    assert max(int(u.rsplit("/", 1)[1]) for u in databases) == REDIS_DATABASES - 1
    services = (Path(__file__).parents[1] / ".ci" / "services.sh").read_text()
    assert f"REDIS_DATABASES={REDIS_DATABASES}\n" in services
    with pytest.raises(ImproperlyConfigured, match="at most 8 workers"):
        worker_redis_url(url.format(0), "gw8")
