"""Hostile callbacks: forged, tampered, replayed, foreign, expired, or sent with odd methods.

Every refusal changes no row, fires no signal, asks the broker nothing and consumes nothing:
the genuine callback still completes afterwards. The Error URL is bound to its session like
the others, and ends the row only as the broker's record says. A genuine return in a browser
without the one-time state (the app switch) settles the row from the broker, and completes
an identity only when the broker saw it on the device that started.
"""

from __future__ import annotations

import datetime
from collections.abc import Callable
from typing import Any
from urllib.parse import urlencode

import pytest
from django.contrib.auth.models import AbstractBaseUser
from django.test import Client

from django_eid.exceptions import IdentificationRejected
from django_eid.signals import identification_succeeded
from tests.hostile.conftest import (
    ELSEWHERE,
    TEST_CLIENT_IP,
    USER_AGENT,
    FakeBroker,
    Fired,
    Started,
    Status,
    assert_genuine_completes,
    assert_go_back_page,
    assert_untouched,
    changed,
    come_back_elsewhere,
    logged_in,
    record,
    reply,
    snapshot,
)

pytestmark = pytest.mark.django_db

START = "/eid/start/"
# -- [1] and [2]: missing, empty, duplicated, oversized, odd characters --------------
BIG = "A" * 10_240
PLACEHOLDER_QUERIES: dict[str, Callable[[str, str], str]] = {
    # (Without the request id, or with an empty one, it is django-eid's own URL: accepted.)
    "both missing": lambda r, e: "",
    "external id missing": lambda r, e: f"requestId={r}",
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


def url_of(started: Started, kind: str, **values: str) -> str:
    """The return URL of ``kind``, its placeholders filled by hand (``p0``/``p1``/``p2``;
    the genuine ids by default, ``[0]`` TIMEOUT), without asking the broker."""
    fill = {"success": started.success_url, "abort": started.abort_url}.get(kind)
    return fill(**values) if fill else started.error_url(**values)


@pytest.mark.parametrize("kind", ["success", "abort", "error"])
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
    """The Error URL carries ``[1]`` and ``[2]`` too: a browser alone (a page that makes it
    visit an Error URL) cannot end a pending row, even with a plausible ``[0]``."""
    started = start(ends=kind)
    fired.clear()
    before = snapshot()
    qs = PLACEHOLDER_QUERIES[query](started.request_id, started.external_id)
    if kind == "error":
        qs = f"status=TIMEOUT&{qs}"
    response = alice_client.get(f"{started.path(kind)}?{qs}")
    assert_untouched(response, 400, before, fired, broker)
    assert (b"did not match" in response.content) is (query != "25,000 parameters")
    assert_genuine_completes(alice_client, started, kind, fired, alice)


# -- [0] of the Error URL: an opaque short code, whatever arrives -------------------
# No usable code in the URL: the record's status (ERROR) is stored.
ERROR_STATUS_QUERIES = {
    "missing": ("", "ERROR"),
    "empty": ("status=", "ERROR"),
    "unsubstituted": ("status=[0]", "ERROR"),
    "percent-encoded placeholder": ("status=%5B0%5D", "ERROR"),
    "duplicated": ("status=TIMEOUT&status=LOGIN", "ERROR"),
    "10 kB": (f"status={BIG}", "A" * 64),
    "unicode": ("status=TIME%C3%98OUT", "TIMEOUT"),
    "NUL": ("status=TIME%00OUT", "TIMEOUT"),
    "only control characters": ("status=%00%01%7F", "UNKNOWN"),
    "CRLF injection": ("status=LOGIN%0D%0ASet-Cookie:%20x=1", "LOGINSet-Cookie:x=1"),
    "markup": ("status=%3Cscript%3Ealert(1)%3C/script%3E", "<script>alert(1)</script>"),
    "normal": ("status=LOGIN", "LOGIN"),
    # Forged ids beside a good status: refused (test_tampered_placeholders_are_refused).
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
    started = start(ends="error")  # the broker's record says ERROR (ErrorCode TIMEOUT)
    fired.clear()
    qs, stored = ERROR_STATUS_QUERIES[query]
    ids = urlencode({"requestId": started.request_id, "externalId": started.external_id})
    before = snapshot()
    response = alice_client.get(f"{started.path('error')}?{'&'.join(filter(None, [qs, ids]))}")
    assert response.status_code == 200
    assert changed(before, snapshot()) == {started.pk}
    row = started.row
    # [0] from the URL, cleaned; the details from the broker's record.
    assert (row.status, row.error_status, row.error_code) == (Status.ERROR, stored, "TIMEOUT")
    assert fired.calls == [("failed", started.pk, Status.ERROR, alice.pk)]
    assert broker.counts["retrieve"] == 1  # the record, which confirms the failure
    assert b"<script>" not in response.content


# -- the Error URL ends the row only as the broker's record says ------------------------
def _error_record(request_id: str, status: str) -> dict[str, Any]:
    error = {"ErrorCode": "E1", "ErrorMessage": "Sorry."} if status != "SUCCESS" else None
    return record(request_id, status, Error=error if error else ...)


@pytest.mark.parametrize(
    ("answer", "code", "outcome"),
    [
        ("ERROR", 200, (Status.ERROR, "failed")),
        ("USERABORTED", 302, (Status.ABORTED, "aborted")),  # the user cancelled, says the record
        ("TIMEOUT", 200, (Status.ERROR, "failed")),
        ("SUCCESS", 302, (Status.SUCCESS, "succeeded")),
        ("CREATED", 409, None),
        ("USERINITIATED", 409, None),
        ("broker down", 503, None),
        ("another session's record", 502, None),
        ("not a record", 502, None),
    ],
)
def test_an_error_return_ends_the_row_only_as_the_brokers_record_says(
    start: Callable[..., Started],
    alice_client: Client,
    alice: AbstractBaseUser,
    broker: FakeBroker,
    fired: Fired,
    answer: str,
    code: int,
    outcome: tuple[str, str] | None,
) -> None:
    """A genuine-looking Error URL cannot fail a session the broker says succeeded, nor one
    still in progress; a broker that cannot confirm leaves the row pending (reload)."""
    started = start(ends="pending")
    rid = started.request_id
    if answer == "broker down":
        broker.answer_record(rid, reply(503))
    elif answer == "another session's record":
        broker.answer_record(rid, record("another-request-id", "ERROR"))
    elif answer == "not a record":
        broker.answer_record(rid, reply(200, ["ERROR"]))
    else:
        broker.answer_record(rid, _error_record(rid, answer))
    fired.clear()
    before = snapshot()
    url = started.error_url("LOGIN", p1=rid)  # filled by hand: the broker's record is scripted
    response = alice_client.get(url)
    assert response.status_code == code
    assert broker.counts["retrieve"] >= 1
    if outcome is None:  # pending: nothing changed, nothing consumed
        assert (snapshot(), fired.names) == (before, [])
        broker.heal()
        broker.fail("TIMEOUT", request_id=rid)
        assert_genuine_completes(alice_client, started, "error", fired, alice)
        return
    status, signal = outcome
    assert changed(before, snapshot()) == {started.pk}
    row = started.row
    assert row.status == status
    assert fired.calls == [(signal, started.pk, status, alice.pk)]
    if status == Status.ERROR:
        assert (row.error_status, row.error_code) == ("LOGIN", "E1")
    elif status == Status.ABORTED:  # back to the start page, which says so
        assert response["Location"] == "/eid/start/"
        assert row.last_name == ""
    else:
        assert response["Location"] == "/"
        assert (row.error_status, row.last_name) == ("", "Nordmann")


# -- another session's ids, another user's session, another browser ------------------
@pytest.mark.parametrize("kind", ["success", "abort", "error"])
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
    mine, other = start(ends=kind), start(ends=kind)
    fired.clear()
    values = {
        "p1": other.request_id if forged != "external id" else mine.request_id,
        "p2": other.external_id if forged != "request id" else mine.external_id,
    }
    before = snapshot()
    url = url_of(mine, kind, **values)
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
    alices = start(ends=kind)
    bobs = start(client=bob_client, ends=kind)
    fired.clear()
    before = snapshot()
    source = alices if ids == "alice's" else bobs
    template = alices.template(kind.capitalize())
    url = template.replace("[0]", "TIMEOUT").replace("[1]", source.request_id)
    url = url.replace("[2]", source.external_id)
    response = bob_client.get(url)
    assert_untouched(response, 404, before, fired, broker)
    assert b"not valid" in response.content
    assert response["X-Frame-Options"] == "SAMEORIGIN"
    assert_genuine_completes(alice_client, alices, kind, fired, alice)
    assert bobs.row.status == Status.PENDING


@pytest.mark.parametrize("kind", ["success", "abort", "error"])
def test_the_same_user_in_another_browser_with_forged_ids_is_refused(
    start: Callable[..., Started],
    alice_client: Client,
    alice: AbstractBaseUser,
    broker: FakeBroker,
    fired: Fired,
    kind: str,
) -> None:
    """Not this browser's, and not the broker's return either: refused as before."""
    started = start(ends=kind)
    fired.clear()
    before = snapshot()
    other_browser = logged_in(alice)
    forged = {"p2": "0" * len(started.external_id)}
    url = url_of(started, kind, **forged)
    response = other_browser.get(url)
    assert_untouched(response, 403, before, fired, broker)
    assert b"not started in this browser" in response.content
    assert_genuine_completes(alice_client, started, kind, fired, alice)


@pytest.mark.parametrize("kind", ["success", "abort", "error"])
@pytest.mark.parametrize("interstitial", [True, False])
def test_a_callback_without_any_session_and_forged_ids_changes_nothing(
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
    started = start(ends=kind)
    fired.clear()
    before = snapshot()
    forged = {"p1": started.request_id[:-1] + "X"}
    url = url_of(started, kind, **forged)
    response = Client().get(url)
    if interstitial:  # the same URL once more, marked, from our own page
        assert_untouched(response, 200, before, fired, broker)
        retry = response.context["retry_url"]
        assert retry.startswith(started.path(kind))
        assert "eid_retry=1" in retry
        response = Client().get(retry)
    assert_untouched(response, 403, before, fired, broker)
    assert b"Session expired" in response.content
    assert_genuine_completes(alice_client, started, kind, fired, alice)


# -- the app switch: a genuine return in a browser without the one-time state --------------
@pytest.mark.parametrize("kind", ["success", "abort", "error"])
@pytest.mark.parametrize("how", ELSEWHERE)
def test_an_app_switch_does_not_complete_an_identity_from_another_device(
    start: Callable[..., Started],
    alice_client: Client,
    alice: AbstractBaseUser,
    broker: FakeBroker,
    fired: Fired,
    eid: Callable[..., None],
    caplog: pytest.LogCaptureFixture,
    kind: str,
    how: str,
) -> None:
    """Whoever holds a genuine return URL (a relayed session: someone else identified at
    the URL of a session started on this account) is told to go back; the identity is not
    stored, whatever kind of return it is, until the browser that started comes back."""
    started = start()  # identified on the sample person's device, not the test client
    fired.clear()
    broker.counts.clear()
    before = snapshot()
    response = come_back_elsewhere(how, started.url(kind), alice, broker, eid)
    assert_go_back_page(response)
    assert (snapshot(), fired.names) == (before, [])
    # The status call first, then the record, to compare where it was identified.
    assert (broker.counts["status"], broker.counts["retrieve"]) == (1, 1)
    assert any("another device" in r.getMessage() for r in caplog.records)
    assert_genuine_completes(alice_client, started, "success", fired, alice)


@pytest.mark.parametrize(
    ("environment", "completed"),
    [
        ({"IPAddress": TEST_CLIENT_IP, "UserAgent": USER_AGENT}, True),
        ({"IPAddress": "198.51.100.7", "UserAgent": USER_AGENT}, False),
        ({"IPAddress": TEST_CLIENT_IP, "UserAgent": USER_AGENT + " relay"}, False),
        ({"IPAddress": TEST_CLIENT_IP}, False),
        ({"UserAgent": USER_AGENT}, False),
        ({"IPAddress": "127.000.000.001", "UserAgent": USER_AGENT}, False),
        (..., False),
    ],
    ids=[
        "the device that started",
        "another address",
        "another user agent",
        "no user agent",
        "no address",
        "an address in another spelling",
        "no EnvironmentInfo",
    ],
)
@pytest.mark.parametrize("how", ELSEWHERE)
def test_an_app_switch_completes_only_on_the_device_that_started(
    start: Callable[..., Started],
    alice: AbstractBaseUser,
    broker: FakeBroker,
    fired: Fired,
    eid: Callable[..., None],
    environment: Any,
    completed: bool,
    how: str,
) -> None:
    starting_browser = logged_in(alice, HTTP_USER_AGENT=USER_AGENT)  # REMOTE_ADDR 127.0.0.1
    started = start(client=starting_browser)
    rid = started.request_id
    broker.answer_record(rid, record(rid, EnvironmentInfo=environment))
    fired.clear()
    broker.counts.clear()
    before = snapshot()
    response = come_back_elsewhere(how, started.url("success"), alice, broker, eid)
    assert_go_back_page(response)
    assert (broker.counts["status"], broker.counts["retrieve"]) == (1, 1)
    if not completed:
        assert (snapshot(), fired.names) == (before, [])
        return
    assert changed(before, snapshot()) == {started.pk}
    row = started.row
    assert (row.status, row.last_name) == (Status.SUCCESS, "Nordmann")
    # The browser's address and user agent are the record's, stored on completion.
    assert (row.ip_address, row.user_agent) == (TEST_CLIENT_IP, USER_AGENT)
    assert fired.calls == [("succeeded", started.pk, Status.SUCCESS, alice.pk)]
    # The browser that started shows where it went, once, and fetches nothing again.
    fired.clear()
    broker.counts.clear()
    shown = starting_browser.get(START)
    assert (shown.status_code, shown["Location"]) == (302, "/")
    assert starting_browser.get(START).status_code == 200  # the form again
    assert (fired.names, broker.counts["retrieve"]) == ([], 0)


@pytest.mark.parametrize(
    ("ends", "answer", "outcome"),
    [
        ("abort", None, (Status.ABORTED, "aborted", "")),
        ("error", None, (Status.ERROR, "failed", "ERROR")),
        ("pending", "TIMEOUT", (Status.EXPIRED, None, "TIMEOUT")),
        ("pending", "INVALIDATED", (Status.ERROR, "failed", "INVALIDATED")),
        ("pending", None, None),
        ("pending", "USERINITIATED", None),
    ],
    ids=["aborted", "failed", "timed out", "invalidated", "created", "user initiated"],
)
@pytest.mark.parametrize("kind", ["success", "abort", "error"])
def test_an_app_switch_finishes_only_what_the_broker_ended(
    start: Callable[..., Started],
    alice: AbstractBaseUser,
    broker: FakeBroker,
    fired: Fired,
    eid: Callable[..., None],
    ends: str,
    answer: str | None,
    outcome: tuple[str, str | None, str] | None,
    kind: str,
) -> None:
    """An ended session reveals no identity: it is finished as the broker's record says,
    whichever return URL came; one still at the broker stays pending."""
    started = start(ends=ends)
    rid = started.request_id
    if answer is not None:
        broker.inject("status", body={"Done": answer not in ("CREATED", "USERINITIATED")})
        broker.answer_record(rid, record(rid, answer))
    fired.clear()
    broker.counts.clear()
    before = snapshot()
    url = url_of(started, kind, p1=rid)  # filled by hand: the broker's record is scripted
    response = come_back_elsewhere(ELSEWHERE[0], url, alice, broker, eid)
    assert_go_back_page(response)
    if outcome is None:
        assert (snapshot(), fired.names) == (before, [])
        assert (broker.counts["status"], broker.counts["retrieve"]) == (1, 0)
        return
    status, signal, error_status = outcome
    assert changed(before, snapshot()) == {started.pk}
    row = started.row
    assert (row.status, row.error_status, row.last_name) == (status, error_status, "")
    expected = [(signal, started.pk, status, alice.pk)] if signal else []
    assert fired.calls == expected
    assert (broker.counts["status"], broker.counts["retrieve"]) == (1, 1)


# -- finished, expired and unknown references ------------------------------------------
FINISHED_DESTINATION = {
    Status.SUCCESS: (302, "/"),
    Status.ABORTED: (302, START),
    Status.ERROR: (200, None),
    Status.REJECTED: (200, None),
}


FINISHED_BY = {
    "success": Status.SUCCESS,
    "abort": Status.ABORTED,
    "error": Status.ERROR,
    "rejection": Status.REJECTED,
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
    started = start(ends="success" if finished_by == "rejection" else finished_by)
    identification_succeeded.connect(_reject, dispatch_uid="hostile-reject")
    try:
        if finished_by != "rejection":
            identification_succeeded.disconnect(dispatch_uid="hostile-reject")
        alice_client.get(started.url("success" if finished_by == "rejection" else finished_by))
    finally:
        identification_succeeded.disconnect(dispatch_uid="hostile-reject")
    status = started.row.status
    assert status == FINISHED_BY[finished_by]
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
    """A late return of a session still at the broker (abandoned there) expires; an Abort
    return expires without asking the broker. Nothing is sent."""
    started = start(ends="pending")
    fired.clear()
    created = started.row.created_at - datetime.timedelta(seconds=1801)
    type(started.row).objects.filter(pk=started.pk).update(created_at=created)
    before = snapshot()
    response = alice_client.get(url_of(started, kind, p1=started.request_id))
    assert response.status_code == 410
    assert changed(before, snapshot()) == {started.pk}
    assert started.row.status == Status.EXPIRED
    # The broker's record decides a late Success or Error return: still in progress.
    assert (fired.names, broker.counts["retrieve"]) == ([], 0 if kind == "abort" else 1)
    again = snapshot()
    broker.counts.clear()
    replay = alice_client.get(url_of(started, kind, p1=started.request_id))
    assert_untouched(replay, 410, again, fired, broker)


@pytest.mark.parametrize("kind", ["success", "error"])
def test_a_late_return_of_a_success_stores_it(
    start: Callable[..., Started],
    alice_client: Client,
    alice: AbstractBaseUser,
    broker: FakeBroker,
    fired: Fired,
    kind: str,
) -> None:
    """Past SESSION_MAX_AGE the broker's record still decides: a paid identification that
    the browser that started brings back late is stored, not expired."""
    started = start()  # the person identified at the broker
    fired.clear()
    created = started.row.created_at - datetime.timedelta(seconds=1801)
    type(started.row).objects.filter(pk=started.pk).update(created_at=created)
    response = alice_client.get(url_of(started, kind, p1=started.request_id))
    assert (response.status_code, response["Location"]) == (302, "/")
    row = started.row
    assert (row.status, row.last_name) == (Status.SUCCESS, "Nordmann")
    assert fired.calls == [("succeeded", started.pk, Status.SUCCESS, alice.pk)]


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
    started = start(ends=kind)
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
    started = start(ends=kind)
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
    started = start(ends="error")
    alice_client.get(started.error_url())
    assert started.row.status == Status.ERROR  # a result page to ask for
    fired.clear()
    broker.counts.clear()
    before = snapshot()
    for url in (START, f"/eid/result/{started.reference}/"):
        response = getattr(alice_client, method)(url, {"display": "redirect"})
        assert_untouched(response, 405, before, fired, broker)
    assert broker.counts["create"] == 0
