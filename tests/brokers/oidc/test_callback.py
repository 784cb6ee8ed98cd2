"""The returns to the one callback URL (``BROKER_API = "oidc"``): the ``state`` that names
the row, the ``code`` and its single use, a cancel or an error at the provider, and the
hostile ones (replayed, crossed, another user's or browser's, naming no row, malformed),
through the callback and through the JSON API.

A hostile return changes nothing it should not: the page (never a 500), the row (``ERROR``
with the step's code, or untouched), the signals, no code spent on it.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
from django.contrib.auth.models import AbstractBaseUser
from django.contrib.messages import get_messages
from django.test import Client
from django.urls import reverse

from django_eid import outcomes
from django_eid.models import Identification
from django_eid.sandbox.fake import EidBroker
from tests.brokers.oidc.conftest import (
    CALLBACK,
    NORWEGIAN,
    PRESET_NAMES,
    PRESETS,
    REDIRECT_URI,
    START,
    Status,
    assert_clean,
    assert_failed,
    begin,
    from_the_op,
    path_of,
)
from tests.fixtures_broker import jwts_in
from tests.fixtures_views import Signals, changed, logged_in, snapshot

pytestmark = pytest.mark.django_db


def test_a_replayed_callback_shows_the_finished_row_and_asks_nothing_again(
    op: EidBroker, alice_client: Client, signals: Signals
) -> None:
    row, _ = begin(alice_client)
    url = op.complete()
    assert alice_client.get(url).status_code == 302
    assert op.token_requests == 1
    before = snapshot()
    signals.clear()
    for client in (alice_client, Client()):
        again = client.get(url)
        assert again.status_code in (200, 302)
        assert again.status_code != 500
    assert op.token_requests == 1
    assert snapshot() == before
    assert signals.names == []
    row.refresh_from_db()
    assert row.status == Status.SUCCESS


def test_the_state_of_one_session_with_the_code_of_another_is_refused(
    op: EidBroker, alice_client: Client, bob_client: Client, signals: Signals, logs: Any
) -> None:
    """Alice's state with Bob's code: the OP refuses the exchange (PKCE, invalid_grant);
    Alice's row ends, Bob's is untouched."""
    mine, _ = begin(alice_client)
    theirs, _ = begin(bob_client)
    signals.clear()
    sessions = op.sessions
    op.complete(request_id=sessions[0].request_id)
    their_url = op.complete(op.persons.SWEDISH, request_id=sessions[1].request_id)
    their_code = parse_qs(urlsplit(their_url).query)["code"][0]
    before = snapshot()
    response = alice_client.get(
        CALLBACK, from_the_op({"code": their_code, "state": mine.external_id})
    )
    assert_failed(
        response,
        mine,
        "invalid_grant",
        signals,
        says="invalid_grant",
        sent=("identification_failed",),
    )
    assert changed(before, snapshot()) == {mine.pk}
    theirs.refresh_from_db()
    assert theirs.status == Status.PENDING
    assert_clean(op, mine, logs)


@pytest.mark.parametrize("who", ["another user", "the owner in another browser", "nobody"])
def test_a_callback_in_another_users_or_browsers_hands_is_refused(
    op: EidBroker,
    alice: AbstractBaseUser,
    alice_client: Client,
    bob_client: Client,
    signals: Signals,
    who: str,
) -> None:
    row, _ = begin(alice_client)
    url = op.complete()
    before = snapshot()
    if who == "another user":
        response = bob_client.get(url)
        assert response.status_code == outcomes.INVALID_LINK.status
    elif who == "the owner in another browser":
        response = logged_in(alice).get(url)
        assert response.status_code == 200
        assert response.templates[0].name == "django_eid/elsewhere.html"
    else:
        response = Client().get(url + "&eid_retry=1")
        assert response.status_code in (200, 403)
    assert op.persons.NORWEGIAN.first_name not in response.content.decode()
    assert op.token_requests == 0
    assert snapshot() == before
    assert signals.names == ["identification_started"]
    # The code was not spent: the browser that started still completes.
    done = alice_client.get(url)
    assert (done.status_code, done["Location"]) == (302, "/")
    row.refresh_from_db()
    assert row.status == Status.SUCCESS


@pytest.mark.parametrize(
    "query",
    [
        pytest.param(lambda row: {"code": "abc", "state": "f" * 32}, id="a state naming no row"),
        pytest.param(lambda row: {"code": "abc"}, id="no state"),
        pytest.param(lambda row: {"code": "abc", "state": ""}, id="an empty state"),
        pytest.param(lambda row: {"code": "abc", "state": "x" * 5000}, id="a huge state"),
        pytest.param(
            lambda row: {"code": "abc", "state": [row.external_id, row.external_id]},
            id="the state twice",
        ),
    ],
)
def test_a_callback_naming_no_row_is_refused(
    op: EidBroker, alice_client: Client, signals: Signals, query: Callable[[Any], dict[str, Any]]
) -> None:
    row, _ = begin(alice_client)
    before = snapshot()
    response = alice_client.get(CALLBACK, query(row))
    assert response.status_code == outcomes.INVALID_LINK.status
    assert op.token_requests == 0
    assert snapshot() == before
    assert signals.names == ["identification_started"]


@pytest.mark.parametrize("twice", ["code", "error"])
def test_a_duplicated_code_or_error_ends_the_row_without_a_token_call(
    op: EidBroker, alice_client: Client, signals: Signals, twice: str
) -> None:
    row, _ = begin(alice_client)
    url = op.complete()
    code = parse_qs(urlsplit(url).query)["code"][0]
    values = [code, code] if twice == "code" else ["access_denied", "access_denied"]
    response = alice_client.get(CALLBACK, from_the_op({twice: values, "state": row.external_id}))
    assert_failed(response, row, "invalid_request", signals)
    assert op.token_requests == 0


def test_a_callback_with_more_parameters_than_django_reads_is_a_malformed_link(
    op: EidBroker, alice_client: Client, signals: Signals, settings: Any
) -> None:
    """Past ``DATA_UPLOAD_MAX_NUMBER_FIELDS`` no broker's return: refused before the row is
    looked up; the genuine return still completes it afterwards."""
    row, _ = begin(alice_client)
    url = op.complete()
    flood = "&".join(f"x{i}=1" for i in range(settings.DATA_UPLOAD_MAX_NUMBER_FIELDS + 1))
    response = alice_client.get(f"{url}&{flood}")
    assert response.status_code == outcomes.MALFORMED_LINK.status
    row.refresh_from_db()
    assert row.status == Status.PENDING
    assert (op.token_requests, signals.names) == (0, ["identification_started"])
    assert alice_client.get(url).status_code == 302
    row.refresh_from_db()
    assert row.status == Status.SUCCESS


def test_an_error_other_than_access_denied_ends_the_row_with_its_code_and_no_number(
    op: EidBroker, alice_client: Client, signals: Signals, logs: Any
) -> None:
    row, _ = begin(alice_client)
    number = op.persons.NORWEGIAN.national_identity_number
    url = op.fail("login_required", message=f"No login for {number}, try again")
    response = alice_client.get(url)
    assert response.status_code == 200
    row.refresh_from_db()
    assert (row.status, row.error_code, row.error_status) == (
        Status.ERROR,
        "login_required",
        "login_required",
    )
    assert number not in row.error_message
    assert "No login for" in row.error_message
    assert signals.names == ["identification_started", "identification_failed"]
    assert op.token_requests == 0
    assert_clean(op, row, logs)


@pytest.mark.parametrize("preset", PRESET_NAMES)
def test_access_denied_aborts_the_row(
    serve: Callable[..., EidBroker], alice_client: Client, signals: Signals, preset: str
) -> None:
    op = serve(preset)
    row, _ = begin(alice_client)
    url = op.abort()
    assert "error=access_denied" in url
    response = alice_client.get(url)
    assert (response.status_code, response["Location"]) == (302, START)
    page = alice_client.get(START)
    assert str(outcomes.ABORTED.message) in page.content.decode()
    assert [str(m) for m in get_messages(page.wsgi_request)] == [
        "You cancelled the identification."
    ]
    row.refresh_from_db()
    assert row.status == Status.ABORTED
    assert signals.names == ["identification_started", "identification_aborted"]
    assert op.token_requests == 0


@pytest.mark.parametrize(
    "code",
    [
        pytest.param("abc def", id="a space"),
        pytest.param("abc\ndef", id="a newline"),
        pytest.param("x" * 2049, id="too long"),
        pytest.param("k\u00e5de", id="not ASCII"),
    ],
)
def test_a_code_no_provider_issues_ends_the_row_without_a_token_call(
    op: EidBroker, alice_client: Client, signals: Signals, code: str
) -> None:
    row, _ = begin(alice_client)
    op.complete()
    response = alice_client.get(CALLBACK, from_the_op({"code": code, "state": row.external_id}))
    assert_failed(response, row, "invalid_request", signals)
    assert op.token_requests == 0


def test_an_error_return_with_hostile_text_is_stored_short_and_printable(
    op: EidBroker, alice_client: Client, signals: Signals
) -> None:
    row, _ = begin(alice_client)
    error = "server_error\x00\n<script>" + "x" * 500
    query = from_the_op({"error": error, "error_description": "d" * 5000, "state": row.external_id})
    response = alice_client.get(CALLBACK, query)
    assert response.status_code == 200
    row.refresh_from_db()
    assert row.status == Status.ERROR
    assert row.error_code.startswith("server_error<script>")
    assert len(row.error_code) <= 64
    assert all(32 < ord(c) < 127 for c in row.error_code + row.error_status)
    assert len(row.error_message) <= 300
    assert op.token_requests == 0


# -- through the JSON API ------------------------------------------------------------------
API = "/eid/api/identifications/"


def api_begin(client: Client, op: EidBroker) -> tuple[Identification, str]:
    response = client.generic("POST", API, "{}", content_type="application/json")
    assert response.status_code == 201, response.content.decode()[:500]
    started = response.json()
    row = Identification.objects.get(reference=started["reference"])
    return row, started["secret"]


def api_return(client: Client, row: Identification, secret: str, query: str) -> Any:
    body = json.dumps({"query": query, "secret": secret})
    url = f"{API}{row.reference}/return/"
    return client.generic("POST", url, body, content_type="application/json")


def test_the_json_api_finishes_an_oidc_return_and_checks_it_as_the_callback_does(
    op: EidBroker, alice_client: Client, signals: Signals, logs: Any
) -> None:
    row, secret = api_begin(alice_client, op)
    url = op.complete()
    op.tamper_next_token(claims={"nonce": "A" * 43})
    response = api_return(alice_client, row, secret, "eid_return=success&" + urlsplit(url).query)
    assert response.status_code == 200
    assert response.json()["status"] == Status.ERROR
    row.refresh_from_db()
    assert (row.status, row.error_code) == (Status.ERROR, "id_token_invalid")
    assert signals.names == ["identification_started", "identification_failed"]
    assert_clean(op, row, logs)
    assert not jwts_in(response.content.decode())


def test_access_denied_sent_to_the_json_api_as_a_success_aborts(
    op: EidBroker, alice_client: Client, signals: Signals
) -> None:
    """The front end names the kind of return; the provider's ``error`` decides."""
    row, secret = api_begin(alice_client, op)
    url = op.abort()
    response = api_return(alice_client, row, secret, "eid_return=success&" + urlsplit(url).query)
    assert response.status_code == 200
    row.refresh_from_db()
    assert row.status == Status.ABORTED
    assert signals.names == ["identification_started", "identification_aborted"]
    assert op.token_requests == 0


@pytest.mark.parametrize("preset", ["idura", "signicat"])
def test_an_identification_started_through_the_api(
    serve: Callable[..., EidBroker], alice_client: Client, preset: str
) -> None:
    op = serve(preset)
    response = alice_client.post(
        reverse("django_eid:api-start"), {}, content_type="application/json"
    )
    assert response.status_code == 201, response.content
    started = response.json()
    assert started["url"].startswith(PRESETS[preset][0] + "/authorize?")
    row = Identification.objects.get(reference=started["reference"])
    assert op.authorization_requests[0]["state"] == row.external_id
    assert op.authorization_requests[0]["redirect_uri"] == REDIRECT_URI
    pending = alice_client.get(reverse("django_eid:api-identification", args=[row.reference]))
    assert pending.json()["status"] == "PENDING"
    alice_client.get(path_of(op.complete()))
    answer = alice_client.get(reverse("django_eid:api-identification", args=[row.reference]))
    assert answer.status_code == 200
    body = answer.json()
    assert body["status"] == "SUCCESS"
    assert body["identity"]["last_name"] == NORWEGIAN.last_name
    assert NORWEGIAN.national_identity_number not in answer.content.decode()


# -- the issuer of the authorization response (RFC 9207) ----------------------------------------
@pytest.mark.parametrize(
    "iss",
    [
        pytest.param(["https://evil.test/oidc/idura"], id="another issuer"),
        pytest.param([], id="none, although the discovery says it is sent"),
        pytest.param(None, id="twice"),
    ],
)
def test_a_return_that_may_come_from_another_provider_ends_without_a_token_call(
    op: EidBroker, alice_client: Client, signals: Signals, iss: list[str] | None
) -> None:
    """A mix-up attack: a code of another provider must never be sent to this one's token
    endpoint (with this client's credentials and PKCE verifier)."""
    row, _ = begin(alice_client)
    params = parse_qs(urlsplit(op.complete()).query)
    params["iss"] = iss if iss is not None else params["iss"] * 2
    response = alice_client.get(CALLBACK, params)
    assert_failed(response, row, "iss_mismatch", signals)
    assert op.token_requests == 0


def test_the_providers_own_issuer_in_the_return_passes(op: EidBroker, alice_client: Client) -> None:
    row, _ = begin(alice_client)
    url = op.complete()
    assert parse_qs(urlsplit(url).query)["iss"] == [op.oidc.issuer]  # type: ignore[union-attr]
    assert alice_client.get(path_of(url)).status_code == 302
    row.refresh_from_db()
    assert row.status == Status.SUCCESS
