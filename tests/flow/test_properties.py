"""Property tests: the record parser takes any JSON value; the callbacks take any text.

``parse_record`` (and ``parse_created``) either return their dataclass or raise
``EidProtocolError``, nothing else, and never put the national identity number in a message or
a ``repr``. The callbacks answer 2xx/3xx/4xx for any path reference and any query values,
never a 5xx (the test client does not re-raise, so a 500 would show as one).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any
from urllib.parse import quote, urlencode

import pytest
from django.contrib.auth.models import AbstractBaseUser
from django.test import Client
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from django_eid import state
from django_eid.brokers.v1 import parse_created, parse_record
from django_eid.exceptions import EidProtocolError
from django_eid.models import Identification
from django_eid.records import CreatedSession, IdentificationRecord
from tests.examples import examples
from tests.fixtures_broker import RECORD_PROPERTIES, SSN, ScriptedBroker, new_request_id, record
from tests.fixtures_views import Started, snapshot

FAST = settings(
    max_examples=examples(120),
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)

# Every JSON value json.loads can produce (NaN and infinities included: Python accepts them).
scalars = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=24)
    | st.sampled_from(["SUCCESS", "ERROR", "CREATED", SSN, "311271", "", "\x00"])
)
json_values = st.recursive(
    scalars,
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=12), children, max_size=4)
    ),
    max_leaves=10,
)
#: The record's properties, and those of its nested objects (EnvironmentInfo, Error).
RECORD_KEYS = [
    "RequestId",
    *RECORD_PROPERTIES,
    "UserAgent",
    "IPAddress",
    "NativeErrorCode",
    "ErrorCode",
    "ErrorMessage",
]


@st.composite
def record_keys(draw: st.DrawFn) -> str:
    """A property name of the record (or a nested object) in any casing."""
    key = draw(st.sampled_from(RECORD_KEYS))
    flips = draw(st.lists(st.booleans(), min_size=len(key), max_size=len(key)))
    return "".join(c.swapcase() if f else c for c, f in zip(key, flips, strict=True))


# Record-shaped objects: known property names (any casing) holding any JSON value, nested.
record_like = st.recursive(
    scalars,
    lambda children: st.dictionaries(record_keys() | st.text(max_size=8), children, max_size=8),
    max_leaves=16,
)


def check_record(body: Any) -> None:
    try:
        parsed = parse_record(body)
    except EidProtocolError as err:
        message = str(err)
    else:
        message = ""
    assert SSN not in message
    if message:
        return
    assert isinstance(parsed, IdentificationRecord)
    assert "social_security_number" not in repr(parsed)
    assert all(str(k).lower() != "socialsecuritynumber" for k in parsed.redacted())
    json.dumps(parsed.redacted())  # storable in the JSON column
    parsed.birth_date  # noqa: B018  (never raises)


@FAST
@given(json_values)
def test_any_json_value_is_a_record_or_a_protocol_error(body: Any) -> None:
    check_record(body)


@FAST
@given(record_like)
def test_any_record_shaped_object_is_a_record_or_a_protocol_error(body: Any) -> None:
    check_record(body)


@FAST
@given(
    st.dictionaries(record_keys(), scalars | st.dictionaries(record_keys(), scalars), max_size=13)
)
def test_any_values_under_the_known_names_are_a_record_or_a_protocol_error(body: Any) -> None:
    check_record(body)


@FAST
@given(st.dictionaries(st.sampled_from(["Url", "url", "RequestId", "requestid", "x"]), json_values))
def test_any_create_answer_is_a_session_or_a_protocol_error(body: Any) -> None:
    try:
        created = parse_created(body)
    except EidProtocolError:
        return
    assert isinstance(created, CreatedSession)
    assert created.url.startswith(("https://", "http://"))
    assert created.request_id


@FAST
@given(st.text(max_size=12), st.text(max_size=12))
def test_any_date_of_birth_parses_to_a_date_or_none(value: str, ssn: str) -> None:
    from django_eid.records import parse_birth_date

    parse_birth_date(value, ssn)
    parse_birth_date(value[:6], SSN)


# -- the callbacks -------------------------------------------------------------------------
# Any text a URL can carry: every code point except lone surrogates (not encodable).
any_text = st.text(st.characters(exclude_categories=("Cs",)), max_size=300)


def pending(client: Client, user: AbstractBaseUser, broker: ScriptedBroker) -> Identification:
    """A pending row of ``user`` whose reference this client's session holds.

    The row is made here, not through the broker, so the broker is told what
    retrieving it answers: the sample person's record, as if they identified.
    """
    row = Identification.objects.create(user=user, request_id=new_request_id())
    broker.answer_record(row.request_id, record(row.request_id))
    session = client.session
    session[state.SESSION_KEY] = {
        **session.get(state.SESSION_KEY, {}),
        row.reference: 1.0,
    }
    session.save()
    return row


@pytest.mark.django_db
@FAST
@given(reference=any_text, kind=st.sampled_from(["success", "abort", "error", "bogus"]))
def test_any_path_reference_is_answered_without_a_5xx(
    alice: AbstractBaseUser, broker: ScriptedBroker, reference: str, kind: str
) -> None:
    client = Client(raise_request_exception=False)
    client.force_login(alice)
    response = client.get(f"/eid/return/{quote(reference, safe='')}/{kind}/?requestId=x")
    assert 200 <= response.status_code < 500


@pytest.mark.django_db
@FAST
@given(
    kind=st.sampled_from(["success", "abort", "error"]),
    params=st.lists(
        st.tuples(
            st.sampled_from(["requestId", "externalId", "status", "eid_retry", "x"]) | any_text,
            any_text,
        ),
        max_size=6,
    ),
    genuine=st.booleans(),
    logged_in=st.booleans(),
)
def test_any_query_values_are_answered_without_a_5xx(
    alice: AbstractBaseUser,
    broker: ScriptedBroker,
    kind: str,
    params: list[tuple[str, str]],
    genuine: bool,
    logged_in: bool,
) -> None:
    client = Client(raise_request_exception=False)
    client.force_login(alice)
    row = pending(client, alice, broker)
    if genuine:  # the real ids first, hostile extras after
        params = [("requestId", row.request_id or ""), ("externalId", row.external_id), *params]
    if not logged_in:
        client.logout()
    before = snapshot()
    response = client.get(f"/eid/return/{row.reference}/{kind}/?{urlencode(params)}")
    assert 200 <= response.status_code < 500
    if response.status_code >= 400:  # a refusal changed nothing
        assert snapshot() == before


@pytest.mark.django_db
@settings(
    max_examples=examples(60),
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(record_like)
def test_any_retrieved_record_is_answered_without_a_5xx(
    start: Callable[..., Started],
    alice_client: Client,
    broker: ScriptedBroker,
    eid: Callable[..., None],
    body: Any,
) -> None:
    eid(MAX_PENDING_PER_USER=10_000)
    started = start(ends="success")
    if isinstance(body, dict):
        body = {**body, "RequestId": started.request_id}
    broker.answer_record(started.request_id, body)
    alice_client.raise_request_exception = False
    before = snapshot()
    response = alice_client.get(started.success_url())
    assert response.status_code < 500 or response.status_code in (502, 503)
    if response.status_code >= 400:
        assert snapshot() == before  # the row stays pending
