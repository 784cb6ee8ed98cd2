"""How many examples the property tests draw in this run.

The SQLite tier draws each property's own count. The production tier and the version matrix
run the same properties again, to find what PostgreSQL, Redis or another Django and Python
change, not new inputs: there ``EID_TEST_EXAMPLES=fewer`` (tox.ini, and the Makefile's
production tier but in CI, where the SQLite tier leaves these tests to it) draws a quarter of
each count, and 25 for a property that keeps Hypothesis's default.
"""

from __future__ import annotations

import os

import hypothesis

ENV = "EID_TEST_EXAMPLES"
#: The share drawn by a run that draws fewer, and the fewest any property then draws.
FEWER, AT_LEAST = 4, 5
#: Hypothesis's default (100), in a run that draws fewer.
DEFAULT_FEWER = 25


def fewer() -> bool:
    return os.environ.get(ENV) == "fewer"


def examples(count: int) -> int:
    """``count``, or its share in a run that draws fewer: ``max_examples=examples(120)``."""
    return max(AT_LEAST, count // FEWER) if fewer() else count


def load_profile() -> None:
    """The profile of this run, for the properties that keep Hypothesis's default count
    (conftest calls this before any test module is imported)."""
    if fewer():
        hypothesis.settings.register_profile("fewer", max_examples=DEFAULT_FEWER)
        hypothesis.settings.load_profile("fewer")
