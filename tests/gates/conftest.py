"""The frozen clock of the tests of ``verified_for()`` and ``Requirements``: a boundary is
tested a microsecond inside and a microsecond outside."""

from __future__ import annotations

import datetime
from collections.abc import Callable

import pytest
from django.utils import timezone

from tests.gates.rows import NOW


@pytest.fixture
def freeze(monkeypatch: pytest.MonkeyPatch) -> Callable[[datetime.datetime], datetime.datetime]:
    """``freeze(moment)``: ``timezone.now()`` (and so ``localdate()``) answers ``moment``."""

    def set_now(moment: datetime.datetime) -> datetime.datetime:
        monkeypatch.setattr(timezone, "now", lambda: moment)
        return moment

    return set_now


@pytest.fixture
def now(freeze: Callable[[datetime.datetime], datetime.datetime]) -> datetime.datetime:
    """The clock frozen at :data:`tests.gates.rows.NOW`."""
    return freeze(NOW)
