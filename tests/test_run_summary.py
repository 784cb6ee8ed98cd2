"""tests/run_summary.py: what a run did, counted for ``make test``'s summary, in one process
and under pytest-xdist (where only the controller counts and writes)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest_plugins = ["pytester"]
pytestmark = pytest.mark.own_process

PLUGIN = Path(__file__).with_name("run_summary.py").read_text()
TESTS = """
import pytest

def test_passes():
    pass

def test_fails():
    assert False

@pytest.mark.skip(reason="Chromium not installed")
def test_skipped():
    pass

@pytest.mark.skip(reason="Chromium not installed")
def test_skipped_too():
    pass

@pytest.mark.xfail(reason="known limit", strict=True)
def test_known_limit():
    assert False
"""


def run(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, *args: str) -> Path:
    """Run ``pytester``'s tests with the plugin alone; the summary it wrote."""
    summary = pytester.path / "summary" / "run.json"
    monkeypatch.setenv("EID_TEST_SUMMARY", str(summary))
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")  # just this plugin
    pytester.makeconftest(PLUGIN + "\n\ndef pytest_configure(config):\n    register(config)\n")
    pytester.runpytest_subprocess("-p", "no:cacheprovider", *args)
    return summary


@pytest.mark.parametrize("args", [(), ("-p", "xdist", "-n", "2")], ids=["one process", "xdist"])
def test_a_run_writes_what_passed_failed_was_skipped_and_why(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, args: tuple[str, ...]
) -> None:
    pytester.makepyfile(test_outcomes=TESTS)
    summary = run(pytester, monkeypatch, *args)
    written = json.loads(summary.read_text())
    assert written.pop("seconds") >= 0
    assert written == {
        "passed": 1,
        "failed": 1,
        "errors": 0,
        "xpassed": 0,
        "skipped": {"Chromium not installed": 2},
        "xfailed": {"known limit": 1},
        "exitstatus": int(pytest.ExitCode.TESTS_FAILED),
    }
    assert [p.name for p in summary.parent.iterdir()] == ["run.json"]  # no partial file left


def test_a_module_that_cannot_be_collected_is_an_error(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytester.makepyfile(test_outcomes=TESTS, test_broken="import not_a_module_anywhere\n")
    written = json.loads(run(pytester, monkeypatch).read_text())
    assert (written["errors"], written["passed"]) == (1, 0)  # pytest stops before any test
    assert written["exitstatus"] == int(pytest.ExitCode.INTERRUPTED)
