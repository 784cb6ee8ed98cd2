"""The spans and the duration histogram of the broker calls (``django_eid/transport.py``,
``client.py``), and the token requests (``tokens.py``)."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import requests
from django.test import Client
from urllib3.exceptions import NewConnectionError

from django_eid.client import get_client, reset_client
from django_eid.models import Identification
from tests.fixtures_broker import ScriptedBroker, raises
from tests.fixtures_views import Started
from tests.telemetry.conftest import Recorded

pytestmark = pytest.mark.django_db

START = "/eid/start/"


def by_name(otel: Recorded) -> dict[str, list[dict[str, object]]]:
    found: dict[str, list[dict[str, object]]] = {}
    for span in otel.spans():
        found.setdefault(span.name, []).append(dict(span.attributes or {}))
    return found


def test_a_success_is_a_span_per_call_with_its_http_attempts(
    otel: Recorded, verify: Callable[..., Identification]
) -> None:
    from opentelemetry.trace import SpanKind, StatusCode

    assert verify().status == "SUCCESS"
    spans = otel.spans()
    internal = {s.name: s for s in spans if s.kind == SpanKind.INTERNAL}
    assert set(internal) == {
        "eid.broker token",
        "eid.broker create_session",
        "eid.broker get_session",
    }
    for name, span in internal.items():
        assert span.attributes == {
            "eid.broker.api": "v1",
            "eid.broker.operation": name.split()[1],
        }
        assert span.status.status_code == StatusCode.UNSET
    attempts = [s for s in spans if s.kind == SpanKind.CLIENT]
    assert [(s.name, s.attributes["eid.broker.operation"]) for s in attempts] == [
        ("POST", "token"),
        ("POST", "create_session"),
        ("GET", "get_session"),
    ]
    token, create, get = attempts
    assert dict(create.attributes or {}) == {
        "http.request.method": "POST",
        "server.address": "api.broker.test",
        "server.port": 443,
        "http.response.status_code": 200,
        "eid.broker.status_class": "2xx",
        "eid.broker.api": "v1",
        "eid.broker.operation": "create_session",
    }
    assert token.attributes["server.address"] == "auth.broker.test"
    # Each attempt is a child of its call; the token's call of the create that needed it.
    assert create.parent.span_id == internal["eid.broker create_session"].context.span_id
    assert get.parent.span_id == internal["eid.broker get_session"].context.span_id
    assert (
        internal["eid.broker token"].parent.span_id
        == internal["eid.broker create_session"].context.span_id
    )
    durations = otel.points("http.client.request.duration")
    assert sorted(p.attributes["eid.broker.operation"] for p in durations) == [
        "create_session",
        "get_session",
        "token",
    ]
    assert all(p.value == 1 and p.sum is not None and p.sum >= 0 for p in durations)
    assert otel.total("eid.broker.token.requests", eid_token_result="issued") == 1


def test_a_broker_answering_503_is_an_error_span_and_a_5xx_duration(
    otel: Recorded, broker: ScriptedBroker, alice_client: Client
) -> None:
    from opentelemetry.trace import StatusCode

    broker.will_fail_create(503)
    alice_client.post(START)
    spans = by_name(otel)
    (create,) = [a for a in spans["POST"] if a["eid.broker.operation"] == "create_session"]
    assert create["http.response.status_code"] == 503
    assert create["error.type"] == "503"
    assert create["eid.broker.status_class"] == "5xx"
    assert spans["eid.broker create_session"] == [
        {
            "eid.broker.api": "v1",
            "eid.broker.operation": "create_session",
            "error.type": "django_eid.exceptions.EidUnavailable",
        }
    ]
    failed = [s for s in otel.spans() if s.name == "eid.broker create_session"]
    assert failed[0].status.status_code == StatusCode.ERROR
    assert failed[0].events == ()  # no exception event: its message is not an attribute
    (point,) = otel.points("http.client.request.duration", eid_broker_operation="create_session")
    assert point.attributes["error.type"] == "503"
    assert point.attributes["eid.broker.status_class"] == "5xx"


def test_connection_refused_is_resent_and_each_attempt_is_a_span(
    otel: Recorded, broker: ScriptedBroker, alice_client: Client
) -> None:
    refused = "requests.exceptions.ConnectionError"
    broker.fault(
        "create",
        raises(lambda: requests.ConnectionError(NewConnectionError(None, "Connection refused"))),  # type: ignore[arg-type]
    )
    alice_client.post(START)
    creates = [
        dict(s.attributes or {})
        for s in otel.spans()
        if s.name == "POST" and s.attributes["eid.broker.operation"] == "create_session"
    ]
    # Never reached the broker, so resent: the semantic conventions' resend count.
    assert [a.get("http.request.resend_count") for a in creates] == [None, 1, 2]
    assert {(a["error.type"], a["eid.broker.status_class"]) for a in creates} == {
        (refused, "error")
    }
    assert all("http.response.status_code" not in a for a in creates)
    points = otel.points("http.client.request.duration", eid_broker_operation="create_session")
    assert [(p.attributes["error.type"], p.value) for p in points] == [(refused, 3)]
    assert Identification.objects.get().status == "ERROR"


def test_the_token_endpoint_refusing_counts_a_refused_token_request(
    otel: Recorded, broker: ScriptedBroker, alice_client: Client
) -> None:
    broker.will_fail_token(401, json={"error": "invalid_client"})
    alice_client.post(START)
    (point,) = otel.points("eid.broker.token.requests")
    assert point.attributes == {
        "eid.broker.api": "v1",
        "eid.token.result": "refused",
        "error.type": "django_eid.exceptions.InvalidClient",
    }


def test_a_token_another_worker_fetched_counts_as_cached(
    otel: Recorded, broker: ScriptedBroker
) -> None:
    get_client().get_token()
    reset_client()  # another process: its own client, the same TOKEN_CACHE
    get_client().get_token()
    get_client().get_token()  # this process's own copy: not counted (the hot path)
    results = sorted(
        str(p.attributes["eid.token.result"]) for p in otel.points("eid.broker.token.requests")
    )
    assert results == ["cached", "issued"]
    assert len(broker.calls("token")) == 1


def test_an_abort_is_calls_without_errors(
    otel: Recorded, start: Callable[..., Started], alice_client: Client
) -> None:
    started = start(ends="abort")
    alice_client.get(started.abort_url())
    assert started.refresh().status == "ABORTED"
    assert not [s for s in otel.spans() if "error.type" in (s.attributes or {})]
