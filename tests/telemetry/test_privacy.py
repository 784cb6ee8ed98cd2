"""No attribute of a span or a data point carries personal data or a secret: whatever the
broker answers (names and numbers that look like tokens, the secret itself as a name),
only codes, the broker's host and numbers reach OpenTelemetry."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from django_eid.client import get_client
from django_eid.conf import eid_settings
from django_eid.models import Identification
from tests.fixtures_broker import ACCESS_TOKEN, SSN
from tests.fixtures_client import BASIC
from tests.telemetry.conftest import Recorded

pytestmark = pytest.mark.django_db

#: Names a hostile broker might send: a token, the client's secret, a number.
CRAFTED = [
    {"FirstName": ACCESS_TOKEN, "LastName": "Nordmann-Secretsson"},
    {"FirstName": "test-secret-s3cr3t-value", "LastName": "Bearer eyJhbGciOiJIUzI1NiJ9"},
    {"Name": f"Kari {SSN} Nordmann", "MiddleName": "https://evil.example/?token=abc"},
]
#: Token-like text, with neither "." nor "_": it cannot be a host, an operation or a code.
token_like = st.text(
    alphabet=st.sampled_from("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-+/="),
    min_size=16,
    max_size=40,
)


def attribute_values(otel: Recorded) -> Iterator[str]:
    """Every attribute value of every span (its events and links too) and data point."""
    for span in otel.spans():
        yield span.name
        for attributes in (
            span.attributes,
            *(e.attributes for e in span.events),
            *(link.attributes for link in span.links),
        ):
            yield from (str(v) for v in (attributes or {}).values())
    for point in otel.points():
        yield from (str(v) for v in point.attributes.values())


def assert_none_of(secrets: list[str], otel: Recorded) -> None:
    values = list(attribute_values(otel))
    assert values, "nothing was recorded"
    leaked = [(s, v) for s in secrets for v in values if s and s in v]
    assert leaked == []


def secrets_of(rows: list[Identification], names: list[str]) -> list[str]:
    token = get_client().tokens.last_seen()
    s = eid_settings
    ids = [value for row in rows for value in (row.request_id, row.external_id, row.reference)]
    return [
        *names,
        SSN,
        s.CLIENT_SECRET,
        BASIC.split()[1],
        token.access_token if token else "",
        *ids,
    ]


def test_crafted_hostile_identities_leave_no_trace(
    otel: Recorded,
    verify: Callable[..., Identification],
    django_capture_on_commit_callbacks: Any,
) -> None:
    rows = []
    with django_capture_on_commit_callbacks(execute=True):
        for identity in CRAFTED:
            rows.append(verify(**identity))
    assert any(row.status == "SUCCESS" for row in rows)
    names = [v for identity in CRAFTED for v in identity.values()]
    assert_none_of(secrets_of(rows, names), otel)


@settings(
    max_examples=5,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(first=token_like, last=token_like)
def test_generated_token_like_names_leave_no_trace(
    otel: Recorded,
    verify: Callable[..., Identification],
    django_capture_on_commit_callbacks: Any,
    first: str,
    last: str,
) -> None:
    otel.exporter.clear()
    with django_capture_on_commit_callbacks(execute=True):
        row = verify(FirstName=first, LastName=last, Name=f"{first} {last}")
    assert_none_of(secrets_of([row], [first, last]), otel)
