"""The admin's tests count the list's rows (but the one that gives an estimate)."""

from __future__ import annotations

import pytest

from tests.fixtures_views import without_planner_estimate


@pytest.fixture(autouse=True)
def _counted(monkeypatch: pytest.MonkeyPatch) -> None:
    without_planner_estimate(monkeypatch)
