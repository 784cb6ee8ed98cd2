"""Hostile callbacks: forged, tampered, replayed, foreign, expired, or sent with odd methods.

Every refusal changes no row, fires no signal, asks the broker nothing and consumes nothing:
the genuine callback still completes afterwards.
"""

from __future__ import annotations

import datetime
from collections.abc import Callable
from typing import Any

import pytest
from django.contrib.auth.models import AbstractBaseUser
from django.test import Client

from django_eid.exceptions import IdentificationRejected
from django_eid.signals import identification_succeeded
from tests.hostile.conftest import (
    FakeBroker,
    Fired,
    Started,
    Status,
    assert_genuine_completes,
    assert_untouched,
    changed,
    logged_in,
    snapshot,
)

pytestmark = pytest.mark.django_db

START = "/eid/start/"
# -- [1] and [2]: missing, empty, duplicated, oversized, odd characters --------------
BIG = "A" * 10_240
PLACEHOLDER_QUERIES: dict[str, Callable[[str, str], str]] = {
    "both missing": lambda r, e: "",
    "request id missing": lambda r, e: f"externalId={e}",
    "external id missing": lambda r, e: f"requestId={r}",
    "request id empty": lambda r, e: f"requestId=&externalId={e}",
    "external id empty": lambda r, e: f"requestId={r}&externalId=",
    "both empty": lambda r, e: "requestId=&externalId=",
    "request id twice, both genuine": lambda r, e: f"requestId={r}&requestId={r}&externalId={e}",
    "external id twice, both genuine": lambda r, e: f"requestId={r}&externalId={e}&externalId={e}",
    "request id twice, one forged": lambda r, e: f"requestId=X&requestId={r}&externalId={e}",
    "external id twice, one forged": lambda r, e: f"requestId={r}&externalId={e}&externalId=X",
    "request id 10 kB": lambda r, e: f"requestId={r}{BIG}&externalId={e}",
    "external id 10 kB": lambda r, e: f"requestId={r}&externalId={e}{BIG}",
    "both 10 kB": lambda r, e: f"requestId={BIG}&externalId={BIG}",
    # Refused by Django itself (DATA_UPLOAD_MAX_NUMBER_FIELDS) before the view reads it.
    "25,000 parameters": lambda r, e: f"requestId={r}&externalId={e}&" + "x=1&" * 25_000,
    "request id unicode": lambda r, e: f"requestId={r}%C3%86%C3%98%C3%85&externalId={e}",
    "external id unicode": lambda r, e: f"requestId={r}&externalId=%F0%9F%92%A5{e}",
    "request id with NUL": lambda r, e: f"requestId={r}%00&externalId={e}",
    "external id with NUL": lambda r, e: f"requestId={r}&externalId=%00{e}",
    "NUL only": lambda r, e: "requestId=%00&externalId=%00",
    "invalid UTF-8": lambda r, e: f"requestId={r}%FF%FE&externalId={e}",
    "placeholders unsubstituted": lambda r, e: "requestId=[1]&externalId=[2]",
    "[1] unsubstituted": lambda r, e: f"requestId=[1]&externalId={e}",
    "[2] unsubstituted": lambda r, e: f"requestId={r}&externalId=[2]",
    "placeholders percent-encoded": lambda r, e: "requestId=%5B1%5D&externalId=%5B2%5D",
    "[2] percent-encoded": lambda r, e: f"requestId={r}&externalId=%5B2%5D",
    "placeholders double-encoded": lambda r, e: "requestId=%255B1%255D&externalId=%255B2%255D",
    "swapped": lambda r, e: f"requestId={e}&externalId={r}",
    "request id upper-cased": lambda r, e: f"requestId={r.upper()}&externalId={e}",
    "external id upper-cased": lambda r, e: f"requestId={r}&externalId={e.upper()}",
    "request id truncated": lambda r, e: f"requestId={r[:-1]}&externalId={e}",
    "external id extended": lambda r, e: f"requestId={r}&externalId={e}0",
    "external id padded with a space": lambda r, e: f"requestId={r}&externalId=+{e}",
    "external id with a newline": lambda r, e: f"requestId={r}&externalId={e}%0A",
    "names in another case": lambda r, e: f"RequestId={r}&ExternalId={e}",
    "names as arrays": lambda r, e: f"requestId[]={r}&externalId[]={e}",
    "semicolon separator": lambda r, e: f"requestId={r};externalId={e}",
}


@pytest.mark.parametrize("kind", ["success", "abort"])
@pytest.mark.parametrize("query", list(PLACEHOLDER_QUERIES), ids=str)
def test_tampered_placeholders_are_refused(
    start: Callable[..., Started],
    alice_client: Client,
    alice: AbstractBaseUser,
    broker: FakeBroker,
    fired: Fired,
    kind: str,
    query: str,
) -> None:
    started = start()
    fired.clear()
    before = snapshot()
    qs = PLACEHOLDER_QUERIES[query](started.request_id, started.external_id)
    response = alice_client.get(f"{started.path(kind)}?{qs}")
    assert_untouched(response, 400, before, fired, broker)
    assert (b"did not match" in response.content) is (query != "25,000 parameters")
    assert_genuine_completes(alice_client, started, kind, fired, alice)


# -- [0] of the Error URL: an opaque short code, whatever arrives -------------------
ERROR_STATUS_QUERIES = {
    "missing": ("", "UNKNOWN"),
    "empty": ("status=", "UNKNOWN"),
    "unsubstituted": ("status=[0]", "UNKNOWN"),
    "percent-encoded placeholder": ("status=%5B0%5D", "UNKNOWN"),
    "duplicated": ("status=TIMEOUT&status=LOGIN", "UNKNOWN"),
    "10 kB": (f"status={BIG}", "A" * 64),
    "unicode": ("status=TIME%C3%98OUT", "TIMEOUT"),
    "NUL": ("status=TIME%00OUT", "TIMEOUT"),
    "only control characters": ("status=%00%01%7F", "UNKNOWN"),
    "CRLF injection": ("status=LOGIN%0D%0ASet-Cookie:%20x=1", "LOGINSet-Cookie:x=1"),
    "markup": ("status=%3Cscript%3Ealert(1)%3C/script%3E", "<script>alert(1)</script>"),
    "normal": ("status=LOGIN", "LOGIN"),
    "forged ids beside it": ("status=TIMEOUT&requestId=X&externalId=Y", "TIMEOUT"),
}


@pytest.mark.parametrize("query", list(ERROR_STATUS_QUERIES), ids=str)
def test_error_status_is_stored_as_a_short_printable_code(
    start: Callable[..., Started],
    alice_client: Client,
    alice: AbstractBaseUser,
    broker: FakeBroker,
    fired: Fired,
    query: str,
) -> None:
    started = start()
    fired.clear()
    qs, stored = ERROR_STATUS_QUERIES[query]
    before = snapshot()
    response = alice_client.get(f"{started.path('error')}?{qs}")
    assert response.status_code == 200
    assert changed(before, snapshot()) == {started.pk}
    row = started.row
    assert (row.status, row.error_status) == (Status.ERROR, stored)
    assert fired.calls == [("failed", started.pk, Status.ERROR, alice.pk)]
    assert broker.counts["retrieve"] == 1  # the record, for its Error details
    assert b"<script>" not in response.content


# -- another session's ids, another user's session, another browser ------------------
@pytest.mark.parametrize("kind", ["success", "abort"])
@pytest.mark.parametrize("forged", ["request id", "external id", "both"])
def test_ids_of_another_session_are_refused(
    start: Callable[..., Started],
    alice_client: Client,
    alice: AbstractBaseUser,
    broker: FakeBroker,
    fired: Fired,
    kind: str,
    forged: str,
) -> None:
    mine, other = start(), start()
    fired.clear()
    values = {
        "p1": other.request_id if forged != "external id" else mine.request_id,
        "p2": other.external_id if forged != "request id" else mine.external_id,
    }
    before = snapshot()
    url = mine.success_url(**values) if kind == "success" else mine.abort_url(**values)
    assert_untouched(alice_client.get(url), 400, before, fired, broker)
    assert_genuine_completes(alice_client, mine, kind, fired, alice)
    assert other.row.status == Status.PENDING


@pytest.mark.parametrize("kind", ["success", "abort", "error"])
@pytest.mark.parametrize("ids", ["alice's", "bob's"])
def test_another_users_session_cannot_be_touched(
    start: Callable[..., Started],
    alice_client: Client,
    bob_client: Client,
    alice: AbstractBaseUser,
    broker: FakeBroker,
    fired: Fired,
    kind: str,
    ids: str,
) -> None:
    alices = start()
    bobs = start(client=bob_client)
    fired.clear()
    before = snapshot()
    if kind == "error":
        url = alices.error_url()
    else:
        source = alices if ids == "alice's" else bobs
        template = alices.template("Success" if kind == "success" else "Abort")
        url = template.replace("[1]", source.request_id).replace("[2]", source.external_id)
    response = bob_client.get(url)
    assert_untouched(response, 404, before, fired, broker)
    assert response["X-Frame-Options"] == "SAMEORIGIN"
    assert_genuine_completes(alice_client, alices, kind, fired, alice)
    assert bobs.row.status == Status.PENDING


@pytest.mark.parametrize("kind", ["success", "abort", "error"])
def test_the_same_user_in_another_browser_is_refused(
    start: Callable[..., Started],
    alice_client: Client,
    alice: AbstractBaseUser,
    broker: FakeBroker,
    fired: Fired,
    kind: str,
) -> None:
    started = start()
    fired.clear()
    before = snapshot()
    other_browser = logged_in(alice)
    response = other_browser.get(started.url(kind))
    assert_untouched(response, 403, before, fired, broker)
    assert_genuine_completes(alice_client, started, kind, fired, alice)


@pytest.mark.parametrize("kind", ["success", "abort", "error"])
@pytest.mark.parametrize("interstitial", [True, False])
def test_a_callback_without_any_session_changes_nothing(
    start: Callable[..., Started],
    alice_client: Client,
    alice: AbstractBaseUser,
    broker: FakeBroker,
    fired: Fired,
    eid: Callable[..., None],
    kind: str,
    interstitial: bool,
) -> None:
    eid(CALLBACK_INTERSTITIAL=interstitial)
    started = start()
    fired.clear()
    before = snapshot()
    response = Client().get(started.url(kind))
    assert_untouched(response, 200 if interstitial else 403, before, fired, broker)
    if interstitial:  # the same URL once more, marked, from our own page
        retry = response.context["retry_url"]
        assert retry.startswith(started.path(kind))
        assert "eid_retry=1" in retry
        assert_untouched(Client().get(retry), 403, before, fired, broker)
    assert_genuine_completes(alice_client, started, kind, fired, alice)


# -- finished, expired and unknown references ------------------------------------------
FINISHED_DESTINATION = {
    Status.SUCCESS: (302, "/"),
    Status.ABORTED: (302, START),
    Status.ERROR: (200, None),
    Status.REJECTED: (200, None),
}


def _reject(**kwargs: Any) -> None:
    raise IdentificationRejected("Under age.")


@pytest.mark.parametrize("kind", ["success", "abort", "error"])
@pytest.mark.parametrize("finished_by", ["success", "abort", "error", "rejection"])
def test_a_finished_session_replays_its_destination_and_nothing_else(
    start: Callable[..., Started],
    alice_client: Client,
    broker: FakeBroker,
    fired: Fired,
    kind: str,
    finished_by: str,
) -> None:
    started = start()
    identification_succeeded.connect(_reject, dispatch_uid="hostile-reject")
    try:
        if finished_by != "rejection":
            identification_succeeded.disconnect(dispatch_uid="hostile-reject")
        alice_client.get(started.url("success" if finished_by == "rejection" else finished_by))
    finally:
        identification_succeeded.disconnect(dispatch_uid="hostile-reject")
    status = started.row.status
    fired.clear()
    broker.counts.clear()
    before = snapshot()
    for _ in range(2):  # reload, back button, double click
        response = alice_client.get(started.url(kind))
        code, location = FINISHED_DESTINATION[status]
        assert_untouched(response, code, before, fired, broker)
        if location:
            assert response["Location"] == location


@pytest.mark.parametrize("kind", ["success", "abort", "error"])
def test_an_expired_session_expires_and_fires_nothing(
    start: Callable[..., Started],
    alice_client: Client,
    broker: FakeBroker,
    fired: Fired,
    kind: str,
) -> None:
    started = start()
    fired.clear()
    created = started.row.created_at - datetime.timedelta(seconds=1801)
    type(started.row).objects.filter(pk=started.pk).update(created_at=created)
    before = snapshot()
    response = alice_client.get(started.url(kind))
    assert response.status_code == 410
    assert changed(before, snapshot()) == {started.pk}
    assert started.row.status == Status.EXPIRED
    assert (fired.names, broker.counts["retrieve"]) == ([], 0)
    again = snapshot()
    assert_untouched(alice_client.get(started.url(kind)), 410, again, fired, broker)


UNKNOWN_REFERENCES = [
    "A" * 32,  # the right shape, never issued
    "short",
    "A" * 65,
    "has.a.dot.in.it.0123456789",
    "%00" + "A" * 31,
    "%F0%9F%92%A5" * 6,
    "..%2F..%2F..%2Fetc%2Fpasswd",
    "'%20OR%201=1--%20" + "A" * 20,
]


@pytest.mark.parametrize("kind", ["success", "abort", "error"])
@pytest.mark.parametrize("reference", UNKNOWN_REFERENCES, ids=range(len(UNKNOWN_REFERENCES)))
def test_unknown_references_are_404(
    start: Callable[..., Started],
    alice_client: Client,
    alice: AbstractBaseUser,
    broker: FakeBroker,
    fired: Fired,
    kind: str,
    reference: str,
) -> None:
    started = start()
    fired.clear()
    before = snapshot()
    query = started.url(kind).split("?", 1)[1]
    response = alice_client.get(f"/eid/return/{reference}/{kind}/?{query}")
    assert_untouched(response, 404, before, fired, broker)
    assert_genuine_completes(alice_client, started, kind, fired, alice)


# -- unexpected methods ---------------------------------------------------------------
METHODS = ["post", "put", "delete", "patch", "head", "options"]


@pytest.mark.parametrize("kind", ["success", "abort", "error"])
@pytest.mark.parametrize("method", METHODS)
def test_callbacks_answer_only_get(
    start: Callable[..., Started],
    alice_client: Client,
    alice: AbstractBaseUser,
    broker: FakeBroker,
    fired: Fired,
    kind: str,
    method: str,
) -> None:
    started = start()
    fired.clear()
    before = snapshot()
    response = getattr(alice_client, method)(started.url(kind))
    assert_untouched(response, 405, before, fired, broker)
    assert response["Allow"] == "GET"
    assert_genuine_completes(alice_client, started, kind, fired, alice)


@pytest.mark.parametrize("method", [m for m in METHODS if m != "post"])
def test_start_and_result_answer_only_their_methods(
    start: Callable[..., Started],
    alice_client: Client,
    broker: FakeBroker,
    fired: Fired,
    method: str,
) -> None:
    started = start()
    alice_client.get(started.error_url())
    fired.clear()
    broker.counts.clear()
    before = snapshot()
    for url in (START, f"/eid/result/{started.reference}/"):
        response = getattr(alice_client, method)(url, {"display": "redirect"})
        assert_untouched(response, 405, before, fired, broker)
    assert broker.counts["create"] == 0
