"""What a gate tells the start page, and where the user goes afterwards: the demand (why,
and what the identification must be) is read only from the user's own session, shown
escaped, never taken from the query string, survives tampering without a crash and stays
bounded; the ``next`` a gate hands over always leads back to this site."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
from django.contrib.auth.models import AbstractBaseUser
from django.test import Client

from django_eid import flow, state
from django_eid.testing import EidBroker
from tests.fixtures_views import logged_in
from tests.gates.helpers import START, Page, is_local, plant, sent_to_start, start_page, verify
from tests.gates.urls import EVIL_HTML

pytestmark = pytest.mark.django_db

URLCONF = "tests.gates.urls"


# -- the demand ------------------------------------------------------------------------------
def test_the_start_page_shows_no_reason_from_the_query_string(alice_client: Client) -> None:
    page = start_page(
        alice_client,
        "/gated/any/",
        reason="HACKED-REASON",
        message="HACKED-MESSAGE",
        codes="other_person",
    )
    assert "HACKED" not in page
    assert not [div for div in Page(page).all("div") if div.get("class") == "eid-reasons"]
    assert "Please verify your identity to continue." not in page


def test_a_demand_is_read_only_from_this_users_session(
    alice_client: Client, bob_client: Client
) -> None:
    sent_to_start(bob_client.get("/gated/contract/"))
    page = start_page(alice_client, "/gated/contract/")
    assert "Only BankID for this contract." not in page


@pytest.mark.urls(URLCONF)
def test_a_gates_own_message_is_escaped_on_the_start_page(alice_client: Client) -> None:
    next_url = sent_to_start(alice_client.get("/hostile/message/"))
    page = start_page(alice_client, next_url)
    assert EVIL_HTML not in page
    assert "&lt;svg onload=alert(1)&gt;" in page
    parsed = Page(page)
    assert not parsed.all("svg")
    assert not parsed.all("img")
    assert not parsed.all("script")


_MISSING = object()


def _demand(**changes: Any) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "codes": ["not_verified"],
        "message": "",
        "min_age": None,
        "same_person": False,
        "providers": None,
        "min_loa": None,
        "at": time.time(),
    }
    entry.update(changes)
    return {"/gated/any/": {k: v for k, v in entry.items() if v is not _MISSING}}


MALFORMED_DEMANDS: list[Any] = [
    pytest.param("not a dict", id="demands-not-a-dict"),
    pytest.param({"/gated/any/": "not a dict"}, id="entry-not-a-dict"),
    pytest.param(_demand(at=_MISSING), id="no-at"),
    pytest.param(_demand(codes=_MISSING), id="no-codes"),
    pytest.param(_demand(codes=["bogus"]), id="unknown-code"),
    pytest.param(_demand(codes="too_old"), id="codes-a-string"),
    pytest.param(_demand(message=5), id="message-an-int"),
    pytest.param(_demand(min_age="18", codes=["too_young"]), id="min-age-a-string"),
    pytest.param(_demand(same_person="true"), id="same-person-a-string"),
    pytest.param(_demand(min_loa=3, codes=["loa_too_low"]), id="min-loa-an-int"),
    pytest.param(_demand(min_loa=["high"], codes=["loa_too_low"]), id="min-loa-a-list"),
    pytest.param(_demand(min_loa={"a": 1}, codes=["loa_too_low"]), id="min-loa-a-dict"),
    pytest.param(_demand(providers=[]), id="providers-empty"),
    pytest.param(_demand(providers="NO_BUYPASS"), id="providers-a-string"),
    pytest.param(_demand(providers=[1, None]), id="providers-not-text"),
    pytest.param(_demand(providers=5), id="providers-an-int"),
    pytest.param(_demand(codes=5), id="codes-an-int"),
]


@pytest.mark.parametrize("demands", MALFORMED_DEMANDS)
def test_malformed_demands_never_crash_the_start_page(
    alice: AbstractBaseUser, eid_broker: EidBroker, demands: Any
) -> None:
    client = logged_in(alice, raise_request_exception=False)
    plant(client, state.DEMANDS_KEY, demands)
    assert client.get(START, {"next": "/gated/any/"}).status_code == 200
    assert client.post(START, {"next": "/gated/any/"}).status_code in (302, 400)


def test_gated_urls_too_long_to_return_to_do_not_grow_the_session(alice_client: Client) -> None:
    padding = "x" * 10_000  # Django refuses to redirect to a URL over 16384 characters
    for i in range(2 * state.MAX_DEMANDS):
        sent_to_start(alice_client.get("/gated/any/", {"i": i, "pad": padding}))
    stored = json.dumps(alice_client.session.get(state.DEMANDS_KEY, {}))
    assert len(stored) <= state.MAX_DEMANDS * (flow.NEXT_MAX_LENGTH + 1024)


# -- where the user goes afterwards ----------------------------------------------------------
@pytest.mark.parametrize(
    ("query", "expected_next"),
    [
        ({"next": "https://evil.example/"}, "/gated/any/?next=https%3A%2F%2Fevil.example%2F"),
        ({"next": "//evil.example/"}, "/gated/any/?next=%2F%2Fevil.example%2F"),
        ({"next": "/\\evil.example/"}, "/gated/any/?next=%2F%5Cevil.example%2F"),
    ],
)
def test_a_gates_own_next_parameter_stays_in_the_query_of_a_local_next(
    alice_client: Client, eid_broker: EidBroker, query: dict[str, str], expected_next: str
) -> None:
    next_url = sent_to_start(alice_client.get("/gated/any/", query))
    assert next_url == expected_next
    assert is_local(next_url)
    callback = verify(alice_client, eid_broker, next=next_url)
    assert callback["Location"] == expected_next
    assert is_local(callback["Location"])


@pytest.mark.urls(URLCONF)
@pytest.mark.parametrize(
    ("raw_path", "after"),
    [
        ("//evil.example/x", "/"),  # dropped by the start (flow.safe_next): SUCCESS_URL
        ("/\\evil.example/x", "/%5Cevil.example/x"),
    ],
)
def test_a_gated_get_on_a_path_that_looks_like_another_host_ends_on_this_site(
    alice_client: Client, eid_broker: EidBroker, raw_path: str, after: str
) -> None:
    response = alice_client.get("/x", PATH_INFO=raw_path)
    next_url = sent_to_start(response)
    page = start_page(alice_client, next_url)
    hidden = [i.get("value") or "" for i in Page(page).all("input") if i.get("name") == "next"]
    assert hidden in ([""], [after])
    callback = verify(alice_client, eid_broker, next=next_url)
    assert callback["Location"] == after
    assert is_local(callback["Location"])
    login = Client().get("/x", PATH_INFO=raw_path)
    assert login["Location"].startswith("/login/?next=")
