"""tests/examples.py: the production tier and the version matrix draw fewer examples."""

from __future__ import annotations

import hypothesis
import pytest

from tests import examples


def test_a_property_draws_its_own_count_unless_told_to_draw_fewer(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv(examples.ENV, raising=False)
    assert examples.examples(120) == 120
    monkeypatch.setenv(examples.ENV, "fewer")
    assert (examples.examples(120), examples.examples(8)) == (30, 5)


def test_a_run_that_draws_fewer_lowers_hypothesis_s_default(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(examples.ENV, "fewer")
    before = hypothesis.settings.get_current_profile_name()
    try:
        examples.load_profile()
        assert hypothesis.settings.default.max_examples == examples.DEFAULT_FEWER
    finally:
        hypothesis.settings.load_profile(before)
