"""1. Token economy: token requests of K worker processes x N identifications.

K spawned processes (each a fresh interpreter with its own client, like the
workers of a deployment) each run N identifications (create + retrieve) at a
steady pace against the broker stub, whose tokens live a few seconds, so the
run spans several token lifetimes. The stub counts the token requests. The
same run is repeated with the token cache on Redis (shared), on a per-process
local-memory cache, and with no cache (DummyCache).

Reference (ideal): one token request per lifetime window for the whole
deployment: replaying the API calls the stub received, in order, against one
perfectly shared token renewed on demand gives the minimum number of token
requests those calls need.
"""

from __future__ import annotations

from typing import Any

from benchmarks.common import header, log, row, table_header
from tests.production.stub import BrokerStub, ideal_token_requests, use_window
from tests.production.workers import identify, run_processes

LIFETIME = 2  # seconds; used for 1.8 s (the client's safety margin)
CACHES: dict[str, dict[str, Any] | None] = {
    # None: tests.settings, i.e. Redis when EID_TEST_REDIS_URL is set.
    "redis (shared)": None,
    "locmem (per process)": {
        "default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}
    },
    "none (DummyCache)": {"default": {"BACKEND": "django.core.cache.backends.dummy.DummyCache"}},
}


def run_one(
    processes: int, count: int, interval: float, caches: dict[str, Any] | None
) -> dict[str, Any]:
    window = use_window(LIFETIME)
    with BrokerStub(token_lifetime=LIFETIME) as stub:
        results = run_processes(
            identify,
            processes,
            stub.settings(TIMEOUT=5),
            count,
            interval,
            kwargs={"caches": caches},
            timeout=120,
        )
        seen = stub.snapshot()
    errors = [e for r in results for e in r["errors"]]
    done = sum(r["identifications"] for r in results)
    span = (seen["last_call"] or 0) - (seen["first_call"] or 0)
    ideal = ideal_token_requests(seen["call_times"], window)
    return {
        "processes": processes,
        "identifications": done,
        "errors": len(errors),
        "error_samples": errors[:3],
        "token_requests": seen["token_requests"],
        "ideal_token_requests": ideal,
        "ratio_to_ideal": round(seen["token_requests"] / ideal, 2),
        "span_s": round(span, 2),
        "window_s": window,
        "rejected_tokens": seen["rejected_tokens"],
        "api_calls": seen["creates"] + seen["retrieves"],
        "connections": seen["connections"],
    }


def run(quick: bool = False) -> dict[str, Any]:
    header("1. Token economy (token requests counted at the broker stub)")
    count, interval = (12, 0.25) if quick else (20, 0.2)
    ks = (1, 8) if quick else (1, 4, 8)
    log(
        f"  token lifetime {LIFETIME} s (used {use_window(LIFETIME):.1f} s), "
        f"{count} identifications per process, one every {interval} s"
    )
    table_header("token reqs", "ideal")
    out: dict[str, Any] = {"lifetime_s": LIFETIME, "per_process": count, "runs": []}
    for name, caches in CACHES.items():
        for k in ks:
            result = run_one(k, count, interval, caches)
            result["cache"] = name
            out["runs"].append(result)
            note = f"x{result['ratio_to_ideal']} ideal; {result['identifications']} idents"
            if result["errors"]:
                note += f"; {result['errors']} ERRORS e.g. {result['error_samples'][0]}"
            row(f"{name}, K={k}", result["token_requests"], result["ideal_token_requests"], note)
    return out
