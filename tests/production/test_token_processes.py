"""(a) Eight OS processes, one shared Redis: one token request per token lifetime.

Each process is a fresh interpreter with its own ``EidClient`` (and two
threads sharing it), like the workers of a deployment. They hammer a real
broker on loopback from the moment the token is missing, through several
renewals of a short-lived token.
"""

from __future__ import annotations

import itertools

import pytest

from tests.production.stub import BrokerStub, use_window
from tests.production.workers import hammer, run_processes

pytestmark = pytest.mark.production

PROCESSES = 8
LIFETIME = 3  # seconds: used for 3 - 0.3 = 2.7 s (the client's safety margin)
DURATION = 7.0  # three windows: the first fetch and two renewals


def test_eight_processes_make_one_token_request_per_lifetime() -> None:
    window = use_window(LIFETIME)
    with BrokerStub(token_lifetime=LIFETIME) as stub:
        results = run_processes(
            hammer,
            PROCESSES,
            stub.settings(TIMEOUT=5),
            DURATION,
            0.01,
            2,
            kwargs={"request_id": stub.identified_session()},
            timeout=120,
        )
        seen = stub.snapshot()

    errors = [e for r in results for e in r["errors"]]
    assert errors == []
    assert len({r["pid"] for r in results}) == PROCESSES
    calls = sum(r["calls"] for r in results)
    assert calls == seen["retrieves"]
    assert all(r["calls"] > 50 for r in results), "every process kept calling"
    # No process ever presented a token the broker considered expired.
    assert seen["rejected_tokens"] == 0

    times = seen["token_times"]
    gaps = [b - a for a, b in itertools.pairwise(times)]
    # Never two token requests within one lifetime window (a stampede shows as a gap ~0) ...
    assert all(g >= window - 0.25 for g in gaps), (window, gaps)
    # ... and the token was renewed as it ran out, not later.
    assert all(g <= window + 1.5 for g in gaps), (window, gaps)
    # Over DURATION seconds that is one request per window started: 7 s / 2.7 s -> 3.
    assert len(times) == int(DURATION // window) + 1, (window, times)
    assert seen["tokens_used"] == len(times)
