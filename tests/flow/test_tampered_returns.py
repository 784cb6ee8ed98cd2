"""Forged and tampered returns: placeholders missing, duplicated, oversized or odd, the ids
of another session, unknown references, other methods than GET.

Every refusal changes no row, sends no signal, asks the broker nothing and consumes
nothing: the genuine return still completes afterwards. The Error URL carries ``[1]`` and
``[2]`` too: a browser alone (a page that makes it visit an Error URL) cannot end a pending
row, even with a plausible ``[0]``.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
from django.test import Client

from django_eid.models import Identification
from tests.fixtures_broker import NO_BROKER_IDS, REST_APIS, ScriptedBroker
from tests.fixtures_views import Signals, Started, snapshot
from tests.flow.returns import START, Ended, assert_untouched, pending_refs, url_of

pytestmark = pytest.mark.django_db

Status = Identification.Status

# -- [1] and [2]: missing, empty, duplicated, oversized, odd characters --------------
BIG = "A" * 10_240
MISSING = "externalId missing"
#: case -> (the query from the request id and the external id, the refusal logged)
PLACEHOLDER_QUERIES: dict[str, tuple[Callable[[str, str], str], str | None]] = {
    # (Without the request id, or with an empty one, it is django-eid's own URL: accepted.)
    "both missing": (lambda r, e: "", MISSING),
    "external id missing": (lambda r, e: f"requestId={r}", MISSING),
    "external id empty": (lambda r, e: f"requestId={r}&externalId=", MISSING),
    "both empty": (lambda r, e: "requestId=&externalId=", MISSING),
    "request id twice, both genuine": (
        lambda r, e: f"requestId={r}&requestId={r}&externalId={e}",
        "requestId given 2 times",
    ),
    "external id twice, both genuine": (
        lambda r, e: f"requestId={r}&externalId={e}&externalId={e}",
        "externalId given 2 times",
    ),
    "request id twice, one forged": (
        lambda r, e: f"requestId=X&requestId={r}&externalId={e}",
        "requestId given 2 times",
    ),
    "external id twice, one forged": (
        lambda r, e: f"requestId={r}&externalId={e}&externalId=X",
        "externalId given 2 times",
    ),
    "request id 10 kB": (lambda r, e: f"requestId={r}{BIG}&externalId={e}", "requestId too long"),
    "external id 10 kB": (
        lambda r, e: f"requestId={r}&externalId={e}{BIG}",
        "externalId too long",
    ),
    "both 10 kB": (lambda r, e: f"requestId={BIG}&externalId={BIG}", "externalId too long"),
    # Refused by Django itself (DATA_UPLOAD_MAX_NUMBER_FIELDS) before the view reads it.
    "25,000 parameters": (
        lambda r, e: f"requestId={r}&externalId={e}&" + "x=1&" * 25_000,
        None,
    ),
    "request id unicode": (
        lambda r, e: f"requestId={r}%C3%86%C3%98%C3%85&externalId={e}",
        "requestId does not match",
    ),
    "external id unicode": (
        lambda r, e: f"requestId={r}&externalId=%F0%9F%92%A5{e}",
        "externalId does not match",
    ),
    "request id with NUL": (
        lambda r, e: f"requestId={r}%00&externalId={e}",
        "requestId does not match",
    ),
    "external id with NUL": (
        lambda r, e: f"requestId={r}&externalId=%00{e}",
        "externalId does not match",
    ),
    "NUL only": (lambda r, e: "requestId=%00&externalId=%00", "externalId does not match"),
    "invalid UTF-8": (
        lambda r, e: f"requestId={r}%FF%FE&externalId={e}",
        "requestId does not match",
    ),
    "placeholders unsubstituted": (lambda r, e: "requestId=[1]&externalId=[2]", MISSING),
    "[2] unsubstituted": (lambda r, e: f"requestId={r}&externalId=[2]", MISSING),
    "placeholders percent-encoded": (lambda r, e: "requestId=%5B1%5D&externalId=%5B2%5D", MISSING),
    "[2] percent-encoded": (lambda r, e: f"requestId={r}&externalId=%5B2%5D", MISSING),
    "placeholders double-encoded": (
        lambda r, e: "requestId=%255B1%255D&externalId=%255B2%255D",
        "externalId does not match",
    ),
    "swapped": (lambda r, e: f"requestId={e}&externalId={r}", "externalId does not match"),
    "external id of the request": (
        lambda r, e: f"requestId={r}&externalId={r}",
        "externalId does not match",
    ),
    "request id upper-cased": (
        lambda r, e: f"requestId={r.upper()}&externalId={e}",
        "requestId does not match",
    ),
    "external id upper-cased": (
        lambda r, e: f"requestId={r}&externalId={e.upper()}",
        "externalId does not match",
    ),
    "request id truncated": (
        lambda r, e: f"requestId={r[:-1]}&externalId={e}",
        "requestId does not match",
    ),
    "external id extended": (
        lambda r, e: f"requestId={r}&externalId={e}0",
        "externalId does not match",
    ),
    "external id padded with a space": (
        lambda r, e: f"requestId={r}&externalId=+{e}",
        "externalId does not match",
    ),
    "external id with a newline": (
        lambda r, e: f"requestId={r}&externalId={e}%0A",
        "externalId does not match",
    ),
    "names in another case": (lambda r, e: f"RequestId={r}&ExternalId={e}", MISSING),
    "names as arrays": (lambda r, e: f"requestId[]={r}&externalId[]={e}", MISSING),
    "semicolon separator": (lambda r, e: f"requestId={r};externalId={e}", MISSING),
}


@pytest.mark.parametrize("kind", ["success", "abort", "error"])
@pytest.mark.parametrize("query", list(PLACEHOLDER_QUERIES), ids=str)
def test_tampered_placeholders_are_refused(
    ended_at_the_broker: Callable[..., Ended],
    alice_client: Client,
    caplog: pytest.LogCaptureFixture,
    kind: str,
    query: str,
) -> None:
    """v1's placeholders (the successors' ids: tests/brokers/test_contract.py)."""
    ended = ended_at_the_broker(kind)
    started = ended.started
    make_query, reason = PLACEHOLDER_QUERIES[query]
    qs = make_query(started.request_id, started.external_id)
    if kind == "error":
        qs = f"status=TIMEOUT&{qs}"
    response = alice_client.get(f"{started.path(kind)}?{qs}")
    ended.assert_untouched(response, 400)
    assert (b"did not match" in response.content) is (reason is not None)
    refusals = [r.getMessage() for r in caplog.records if "Refused a callback" in r.getMessage()]
    refused = f"Refused a callback of identification {started.pk}: {reason}"
    assert refusals == ([refused] if reason else [])
    assert started.reference in pending_refs(alice_client)
    ended.assert_genuine_completes()


def test_a_request_id_substituted_without_percent_encoding_still_matches(
    start: Callable[..., Started], broker: ScriptedBroker, alice_client: Client
) -> None:
    """v1's placeholders, filled by the broker: "+" reaches the query string raw and
    Django reads it as a space."""
    started = start(request_id="abc+def/ghi=" + "x" * 40)
    broker.will_return(started.request_id)
    url = started.return_urls["Success"].replace("[1]", started.request_id)
    url = url.replace("[2]", started.row.external_id).replace("http://testserver", "")
    assert alice_client.get(url).status_code == 302
    assert started.refresh().status == Status.SUCCESS


def test_a_space_is_not_a_wildcard(
    start: Callable[..., Started], broker: ScriptedBroker, alice_client: Client
) -> None:
    started = start(request_id="abc+def")
    broker.will_return(started.request_id)
    url = started.success_url(p1="abc def ")
    assert alice_client.get(url).status_code == 400
    assert started.refresh().status == Status.PENDING


# -- the ids of another session ----------------------------------------------------------
@pytest.mark.parametrize("kind", ["success", "abort", "error"])
@pytest.mark.parametrize("forged", ["request id", "external id", "both"])
def test_ids_of_another_session_are_refused(
    start: Callable[..., Started],
    ended_at_the_broker: Callable[..., Ended],
    alice_client: Client,
    kind: str,
    forged: str,
) -> None:
    """v1's ids (each API's: test_another_sessions_ids_are_refused_by_each_api)."""
    other = start(ends=kind)
    ended = ended_at_the_broker(kind)
    mine = ended.started
    values = {
        "p1": other.request_id if forged != "external id" else mine.request_id,
        "p2": other.external_id if forged != "request id" else mine.external_id,
    }
    url = url_of(mine, kind, **values)
    ended.assert_untouched(alice_client.get(url), 400)
    ended.assert_genuine_completes()
    assert other.row.status == Status.PENDING


@pytest.mark.apis(*REST_APIS, reason=NO_BROKER_IDS)
def test_another_sessions_ids_are_refused_by_each_api(
    start: Callable[..., Started], broker: ScriptedBroker, alice_client: Client, broker_api: str
) -> None:
    mine, other = start(), start()
    broker.will_return(mine.request_id)
    broker.will_return(other.request_id)
    swapped = mine.success_url(p1=other.request_id, p2=other.row.external_id)
    assert alice_client.get(swapped).status_code == 400
    assert (mine.refresh().status, other.refresh().status) == (Status.PENDING, Status.PENDING)
    assert len(broker.get_calls) == 0


# -- unknown references ------------------------------------------------------------------
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
    ended_at_the_broker: Callable[..., Ended], alice_client: Client, kind: str, reference: str
) -> None:
    """v1's return URLs (each API's: test_an_unknown_reference_is_404_with_each_api)."""
    ended = ended_at_the_broker(kind)
    query = ended.started.url(kind).split("?", 1)[1]
    response = alice_client.get(f"/eid/return/{reference}/{kind}/?{query}")
    ended.assert_untouched(response, 404)
    ended.assert_genuine_completes()


@pytest.mark.parametrize("reference", ["A" * 32, "short"])
def test_an_unknown_reference_is_404_with_each_api(
    start: Callable[..., Started], alice_client: Client, broker_api: str, reference: str
) -> None:
    started = start()
    url = started.success_url().replace(started.row.reference, reference)
    if started.is_oidc:  # the one callback URL: its state names the identification
        url = started.success_url(p2=reference)
    assert alice_client.get(url).status_code == 404
    assert started.refresh().status == Status.PENDING


# -- unexpected methods ---------------------------------------------------------------
METHODS = ["post", "put", "delete", "patch", "head", "options"]


@pytest.mark.parametrize("kind", ["success", "abort", "error"])
@pytest.mark.parametrize("method", METHODS)
def test_callbacks_answer_only_get(
    ended_at_the_broker: Callable[..., Ended], alice_client: Client, kind: str, method: str
) -> None:
    """v1's return URLs (each API's: test_each_apis_returns_answer_only_get)."""
    ended = ended_at_the_broker(kind)
    response = getattr(alice_client, method)(ended.started.url(kind))
    ended.assert_untouched(response, 405)
    assert response["Allow"] == "GET"
    ended.assert_genuine_completes()


def test_each_apis_returns_answer_only_get(
    start: Callable[..., Started], broker: ScriptedBroker, alice_client: Client, broker_api: str
) -> None:
    """OpenID Connect's returns come to its one callback URL, another view."""
    started = start()
    broker.will_return(started.request_id)
    for url in (started.success_url(), started.abort_url(), started.error_url()):
        assert alice_client.post(url).status_code == 405
    assert started.refresh().status == Status.PENDING
    assert len(broker.get_calls) == 0


@pytest.mark.parametrize("method", [m for m in METHODS if m != "post"])
def test_start_and_result_answer_only_their_methods(
    start: Callable[..., Started],
    alice_client: Client,
    broker: ScriptedBroker,
    signals: Signals,
    method: str,
) -> None:
    started = start(ends="error")
    alice_client.get(started.error_url())
    assert started.row.status == Status.ERROR  # a result page to ask for
    signals.clear()
    broker.counts.clear()
    before = snapshot()
    for url in (START, f"/eid/result/{started.reference}/"):
        response = getattr(alice_client, method)(url, {"display": "redirect"})
        assert_untouched(response, 405, before, signals, broker)
    assert broker.counts["create"] == 0
