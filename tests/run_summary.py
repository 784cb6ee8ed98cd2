"""What a test run did, for ``make test``'s summary: a pytest plugin.

With ``EID_TEST_SUMMARY=<file>`` set, the run writes to that file, as JSON, how many tests
passed and failed, and how many were skipped and expected to fail, by reason. ``make test``
(``.ci/test.sh``) runs each tier so and ends with one summary of all of them, the skips by
why (Chromium missing, PostgreSQL missing) and the known limits (the xfails) apart from what
passed. The counts are kept where the reports arrive: in the one process, or on
pytest-xdist's controller.
"""

from __future__ import annotations

import json
import os
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

SUMMARY_VAR = "EID_TEST_SUMMARY"


def _reason(report: pytest.TestReport) -> str:
    longrepr = report.longrepr
    reason = str(longrepr[2]) if isinstance(longrepr, tuple) else str(longrepr)
    return reason.removeprefix("Skipped: ")


class RunSummary:
    """Counts the outcomes of a run and writes them to ``path`` at its end."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.started = time.monotonic()
        self.outcomes: Counter[str] = Counter()
        self.skipped: Counter[str] = Counter()
        self.xfailed: Counter[str] = Counter()

    def pytest_collectreport(self, report: pytest.CollectReport) -> None:
        if report.failed:  # a module that cannot be collected: none of its tests ran
            self.outcomes["errors"] += 1

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if hasattr(report, "wasxfail"):
            if report.skipped:
                self.xfailed[str(report.wasxfail) or "xfail"] += 1
            elif report.when == "call":
                self.outcomes["xpassed"] += 1
        elif report.skipped:
            self.skipped[_reason(report)] += 1
        elif report.failed:
            self.outcomes["failed" if report.when == "call" else "errors"] += 1
        elif report.when == "call":
            self.outcomes["passed"] += 1

    @pytest.hookimpl(trylast=True)  # after the hooks that may still change the exit status
    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        summary: dict[str, Any] = {
            **{key: self.outcomes[key] for key in ("passed", "failed", "errors", "xpassed")},
            "skipped": dict(self.skipped.most_common()),
            "xfailed": dict(self.xfailed.most_common()),
            "exitstatus": int(session.exitstatus),
            "seconds": round(time.monotonic() - self.started, 1),
        }
        self.path.parent.mkdir(parents=True, exist_ok=True)
        # Whole or not at all: a reader never sees half a file.
        partial = self.path.with_name(f".{self.path.name}.{os.getpid()}")
        partial.write_text(json.dumps(summary, indent=2) + "\n")
        partial.replace(self.path)


def register(config: pytest.Config) -> None:
    """Count this run (on the controller, not on pytest-xdist's workers) when asked to."""
    path = os.environ.get(SUMMARY_VAR)
    if path and not hasattr(config, "workerinput"):
        config.pluginmanager.register(RunSummary(Path(path)), "eid-run-summary")
