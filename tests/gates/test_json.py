"""The gates' answer to a JSON client: 403 JSON naming the start URL, never a redirect, for
whoever asks for JSON first (``Accept``) or sends it (``Content-Type``); any other request,
however malformed its headers, gets the redirect. A refusal, and the start page it leads to,
carry no personal data. (The logged-out 401 is in test_decorator.py.)"""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
from django.contrib.auth.models import AbstractBaseUser
from django.http import HttpResponse
from django.test import Client
from hypothesis import HealthCheck, given
from hypothesis import settings as hsettings
from hypothesis import strategies as st

from django_eid import state
from django_eid.testing import EidBroker
from tests.examples import examples
from tests.gates.helpers import (
    JSON,
    START,
    csrf_client,
    is_local,
    latest,
    make_old,
    personal_data,
    sent_to_start,
    start_page,
    verify,
)

pytestmark = pytest.mark.django_db


def assert_gate_answer(response: HttpResponse, kind: str | None = None) -> None:
    """A refusal is a redirect to the start page or the 403 JSON, never anything else."""
    if response.status_code == 302:
        assert kind in (None, "redirect")
        sent_to_start(response)
        return
    assert kind in (None, "json")
    assert response.status_code == 403
    assert response["Content-Type"] == "application/json"
    body = response.json()
    assert set(body) == {"code", "message", "reasons", "start_url"}
    assert body["code"] == "eid_required"
    # The front end decides where the user goes afterwards: no next back to an API URL.
    assert body["start_url"] == START
    assert is_local(body["start_url"])


@pytest.mark.parametrize(
    "headers",
    [
        {"accept": "application/json"},
        {"accept": "application/problem+json, text/html;q=0.5"},
        {"content_type": "application/json"},
    ],
    ids=["accept", "accept-json-first", "content-type"],
)
def test_a_json_client_gets_403_json_naming_the_start_url(
    alice_client: Client, headers: dict[str, str]
) -> None:
    if "content_type" in headers:
        response = alice_client.post("/gated/payout/", "{}", content_type="application/json")
    else:
        response = alice_client.get("/gated/payout/", headers=headers)
    assert response.status_code == 403
    body = response.json()
    assert body["code"] == "eid_required"
    assert body["reasons"] == ["not_verified"]
    assert body["message"] == "Please verify your identity to continue."
    # The front end decides where the user goes afterwards: no next back to this URL.
    assert body["start_url"] == "/eid/start/"
    assert state.KEPT_KEY not in alice_client.session  # a JSON POST is not kept


# -- which answer: the first type the client accepts decides ----------------------------------
ACCEPTS = [
    ("application/json", "json"),
    ("APPLICATION/JSON", "json"),
    ("application/problem+json", "json"),
    ("*/*, application/json", "json"),
    (" , ;q=1, application/json", "json"),
    # Documented: quality values are not weighed; the first type listed decides.
    ("application/json;q=0", "json"),
    ("application/json;q=0, text/html", "json"),
    ("text/html;q=0.1, application/json", "redirect"),
    # A browser's, and one accepting anything: the redirect.
    ("text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8", "redirect"),
    ("*/*", "redirect"),
    ("application/jsonp", "redirect"),
    ("application/json-seq", "redirect"),
    ("text/json", "redirect"),
    ("", "redirect"),
    ("\x00application/json", "redirect"),
    (";;;;,,,,", "redirect"),
    ("text/html," * 5000 + "application/json", "redirect"),
]


@pytest.mark.parametrize(("accept", "kind"), ACCEPTS, ids=[str(i) for i in range(len(ACCEPTS))])
def test_accept_headers_get_one_of_the_two_answers(
    alice_client: Client, accept: str, kind: str
) -> None:
    began = time.monotonic()
    response = alice_client.get("/gated/any/", headers={"accept": accept})
    assert time.monotonic() - began < 5
    assert_gate_answer(response, kind)


@hsettings(
    max_examples=examples(50),
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(accept=st.text(max_size=200))
def test_any_accept_header_gets_one_of_the_two_answers(alice_client: Client, accept: str) -> None:
    assert_gate_answer(alice_client.get("/gated/any/", HTTP_ACCEPT=accept))


@pytest.mark.parametrize(
    ("content_type", "kind"),
    [
        ("application/json", "json"),
        ("application/json; charset=utf-8", "json"),
        ("Application/JSON", "json"),
        ("text/plain", "redirect"),
        ("application/x-www-form-urlencoded; charset=bogus-charset", "kept"),
    ],
)
def test_content_types_of_a_gated_post(
    alice: AbstractBaseUser, content_type: str, kind: str
) -> None:
    client, token = csrf_client(alice)
    body = f"account=1&csrfmiddlewaretoken={token}".encode()
    # generic(): the body goes as it is, whatever charset the header claims.
    response = client.generic(
        "POST", "/gated/payout/", body, content_type=content_type, headers={"X-CSRFToken": token}
    )
    if kind == "json":
        assert_gate_answer(response, "json")
    else:
        next_url = sent_to_start(response)
        assert next_url.startswith("/eid/resume/") == (kind == "kept")
    assert bool(client.session.get(state.KEPT_KEY)) == (kind == "kept")


# -- no personal data --------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("url", "person_key", "reason"),
    [
        ("/gated/adults/", "MINOR", "too_young"),
        ("/gated/payout/", "NORWEGIAN", "too_old"),
        ("/gated/contract/", "NO_MIDDLE_NAME", "wrong_provider"),
        ("/gated/api/adults/", "MINOR", "too_young"),
        ("/gated/api/payout/", "NORWEGIAN", "too_old"),
        ("/gated/class/adults/", "MINOR", "too_young"),
    ],
)
def test_a_json_refusal_carries_no_personal_data(
    alice_client: Client,
    eid_broker: EidBroker,
    eid: Any,
    url: str,
    person_key: str,
    reason: str,
) -> None:
    eid(GET_SOCIAL_SECURITY_NUMBER=True)
    person = getattr(eid_broker.persons, person_key)
    verify(alice_client, eid_broker, person)
    make_old(latest(), 3600)
    assert latest().social_security_number == person.national_identity_number
    response = alice_client.get(url, headers=JSON)
    assert response.status_code == 403
    body = response.json()
    assert reason in body["reasons"]
    text = json.dumps(body, ensure_ascii=False) + response.content.decode()
    for value in personal_data(person):
        assert value not in text, value


def test_the_start_page_of_a_same_person_gate_shows_no_personal_data(
    alice_client: Client, eid_broker: EidBroker, eid: Any
) -> None:
    eid(GET_SOCIAL_SECURITY_NUMBER=True)
    kari = eid_broker.persons.NORWEGIAN
    verify(alice_client, eid_broker, kari)
    make_old(latest(), 3600)
    next_url = sent_to_start(alice_client.get("/gated/payout/"))
    page = start_page(alice_client, next_url)
    for value in personal_data(kari):
        assert value not in page, value
