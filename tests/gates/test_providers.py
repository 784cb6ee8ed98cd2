"""Provider gates (``eid_required(providers=...)``): the wrong provider does not pass, the
start offers the right one and refuses the others, and no way around it opens the gate (a
plain start with another provider, a provider chosen at the broker, a broker answering
another provider than the one asked). The gate of tests/gates/views.py names a provider of
the v1 API (``NO_BANKID_WEB``): these tests run with it, the default."""

from __future__ import annotations

import pytest
from django.test import Client

from django_eid.models import Identification
from django_eid.sandbox.broker import record_of
from django_eid.testing import EidBroker
from tests.gates.helpers import START, latest, sent_to_start, start_page, verify

pytestmark = pytest.mark.django_db

Status = Identification.Status


def test_the_wrong_provider_does_not_pass_and_the_start_offers_the_right_one(
    alice_client: Client, eid_broker: EidBroker
) -> None:
    verify(alice_client, eid_broker, eid_broker.persons.NO_MIDDLE_NAME)  # Buypass
    next_url = sent_to_start(alice_client.get("/gated/contract/"))
    page = start_page(alice_client, next_url)
    assert "Only BankID for this contract." in page  # the gate's own message
    assert "This page needs a verification with another electronic ID." not in page
    verify(alice_client, eid_broker, eid_broker.persons.NORWEGIAN, next=next_url)
    assert eid_broker.create_requests[-1]["IdentityProvider"] == "NO_BANKID_WEB"
    assert alice_client.get("/gated/contract/").content == b"contract"


@pytest.mark.parametrize("provider", ["NO_BUYPASS", "SWE_BANKID", "NO_BANKID_MOBILE"])
def test_the_start_of_a_provider_gate_refuses_every_other_provider(
    alice_client: Client, eid_broker: EidBroker, provider: str
) -> None:
    next_url = sent_to_start(alice_client.get("/gated/contract/"))
    response = alice_client.post(START, {"next": next_url, "provider": provider})
    assert response.status_code == 400
    assert f"The provider {provider} is not offered here." in response.content.decode()
    assert eid_broker.create_requests == []
    assert not Identification.objects.exists()


def test_a_plain_start_with_another_provider_does_not_open_a_provider_gate(
    alice_client: Client, eid_broker: EidBroker
) -> None:
    next_url = sent_to_start(alice_client.get("/gated/contract/"))
    ola = eid_broker.persons.NO_MIDDLE_NAME
    verify(alice_client, eid_broker, ola, provider="NO_BUYPASS")  # no next: no demand
    assert (latest().status, latest().identity_provider) == (Status.SUCCESS, "NO_BUYPASS")
    assert sent_to_start(alice_client.get("/gated/contract/")) == next_url
    assert "Only BankID for this contract." in start_page(alice_client, next_url)


def test_a_provider_chosen_at_the_broker_does_not_open_a_provider_gate(
    alice_client: Client, eid_broker: EidBroker
) -> None:
    alice_client.post(START)  # no provider asked: the person chooses at the broker
    assert "IdentityProvider" not in eid_broker.create_requests[-1]
    alice_client.get(eid_broker.complete(eid_broker.persons.NORWEGIAN, provider="NO_BUYPASS"))
    assert (latest().status, latest().identity_provider) == (Status.SUCCESS, "NO_BUYPASS")
    sent_to_start(alice_client.get("/gated/contract/"))


@pytest.mark.parametrize("answered", ["NO_BUYPASS", "no_bankid_web", "NO_BANKID_MOBILE"])
def test_a_broker_answering_another_provider_than_the_gate_asked_never_passes(
    alice_client: Client, eid_broker: EidBroker, answered: str
) -> None:
    next_url = sent_to_start(alice_client.get("/gated/contract/"))
    alice_client.post(START, {"next": next_url})
    assert eid_broker.create_requests[-1]["IdentityProvider"] == "NO_BANKID_WEB"
    url = eid_broker.complete()
    request_id = eid_broker.sessions[-1].request_id
    body = {**record_of(eid_broker.persons.NORWEGIAN, request_id), "IdentityProvider": answered}
    eid_broker.inject("retrieve", body=body, request_id=request_id)
    alice_client.get(url)
    assert latest().status != Status.SUCCESS
    assert not Identification.objects.filter(status=Status.SUCCESS).exists()
    sent_to_start(alice_client.get("/gated/contract/"))
