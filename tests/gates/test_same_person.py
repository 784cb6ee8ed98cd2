"""``same_person`` gates: only the person already verified on the account passes
(``claims.account_person``), told apart by number or by provider and unique id; someone
else is refused at the broker's return, and no way around it opens the gate (a start
without the gate's demand, verifying someone else again and again, the retention purge).
One known limit of the purge is an expected failure (docs/security.md, residual risks)."""

from __future__ import annotations

import datetime
import io
from collections.abc import Callable
from typing import Any

import pytest
from django.contrib.auth.models import AbstractBaseUser
from django.core.management import call_command
from django.test import Client
from django.utils import timezone

from django_eid import claims
from django_eid.models import Identification
from django_eid.testing import EidBroker
from tests.gates.helpers import JSON, START, latest, make_old, sent_to_start, start_page, verify

pytestmark = pytest.mark.django_db

Status = Identification.Status


def test_the_first_verification_of_an_account_passes_a_same_person_gate(
    alice_client: Client, eid_broker: EidBroker
) -> None:
    verify(alice_client, eid_broker, eid_broker.persons.SWEDISH, next="/gated/payout/")
    assert alice_client.get("/gated/payout/").status_code == 200


def test_same_person_refuses_someone_else_and_prefills_the_expected_number_when_asked(
    alice_client: Client, eid_broker: EidBroker, eid: Callable[..., None]
) -> None:
    eid(GET_SOCIAL_SECURITY_NUMBER=True, PREFILL_SAME_PERSON=True)
    kari, ola = eid_broker.persons.NORWEGIAN, eid_broker.persons.NO_MIDDLE_NAME
    verify(alice_client, eid_broker, kari)
    make_old(Identification.objects.get(), 3600)
    next_url = sent_to_start(alice_client.get("/gated/payout/"))
    page = verify(alice_client, eid_broker, ola, next=next_url)
    # The broker was asked to pre-fill Kari's number, in the body only.
    sent = eid_broker.create_requests[-1]
    assert sent["PreFilledSocialSecurityNumber"] == kari.national_identity_number
    assert kari.national_identity_number not in str(sent["ReturnUrls"])
    other = Identification.objects.latest("created_at")
    assert (other.status, other.error_code) == (Status.REJECTED, "NOT_SAME_PERSON")
    assert other.same_person
    assert "This is not the person verified on this account." in page.content.decode()
    sent_to_start(alice_client.get("/gated/payout/"))
    # Kari herself passes.
    verify(alice_client, eid_broker, kari, next=next_url)
    assert alice_client.get("/gated/payout/").content == b"payout form"


def test_the_expected_number_is_not_prefilled_by_default(
    alice_client: Client, eid_broker: EidBroker, eid: Callable[..., None]
) -> None:
    """The broker's page would show the owner's number to whoever holds the session."""
    eid(GET_SOCIAL_SECURITY_NUMBER=True)
    kari = eid_broker.persons.NORWEGIAN
    verify(alice_client, eid_broker, kari)
    make_old(Identification.objects.get(), 3600)
    next_url = sent_to_start(alice_client.get("/gated/payout/"))
    verify(alice_client, eid_broker, kari, next=next_url)
    assert "PreFilledSocialSecurityNumber" not in eid_broker.create_requests[-1]
    assert Identification.objects.latest("created_at").same_person
    assert alice_client.get("/gated/payout/").status_code == 200


def test_same_person_without_the_number_matches_provider_and_unique_id(
    alice_client: Client, eid_broker: EidBroker, eid: Callable[..., None]
) -> None:
    eid(PREFILL_SAME_PERSON=True)  # no number to pre-fill: nothing is sent
    kari, ola = eid_broker.persons.NORWEGIAN, eid_broker.persons.NO_MIDDLE_NAME
    verify(alice_client, eid_broker, kari)
    make_old(Identification.objects.get(), 3600)
    next_url = sent_to_start(alice_client.get("/gated/payout/"))
    verify(alice_client, eid_broker, ola, next=next_url)
    assert "PreFilledSocialSecurityNumber" not in eid_broker.create_requests[-1]
    other = Identification.objects.latest("created_at")
    assert (other.same_person, other.status, other.error_code) == (
        True,
        Status.REJECTED,
        "NOT_SAME_PERSON",
    )
    verify(alice_client, eid_broker, kari, next=next_url)
    assert alice_client.get("/gated/payout/").status_code == 200


def test_a_gate_survives_a_number_under_a_removed_key(
    alice_client: Client, eid_broker: EidBroker, eid: Callable[..., None]
) -> None:
    from cryptography.fernet import Fernet

    old, new = Fernet.generate_key().decode(), Fernet.generate_key().decode()
    eid(GET_SOCIAL_SECURITY_NUMBER=True, ENCRYPTION_KEYS=[old])
    kari = eid_broker.persons.NORWEGIAN
    verify(alice_client, eid_broker, kari)
    make_old(Identification.objects.get(), 3600)
    eid(ENCRYPTION_KEYS=[new])  # the old key removed before eid_reencrypt ran
    next_url = sent_to_start(alice_client.get("/gated/payout/"))
    # Kari again: the unique id at her provider still says who she is.
    verify(alice_client, eid_broker, kari, next=next_url)
    assert Identification.objects.latest("created_at").status == Status.SUCCESS
    assert alice_client.get("/gated/payout/").content == b"payout form"


def test_a_retry_after_an_abort_keeps_what_the_gate_asked(
    alice_client: Client, eid_broker: EidBroker
) -> None:
    verify(alice_client, eid_broker, eid_broker.persons.NORWEGIAN)
    make_old(Identification.objects.get(), 3600)
    next_url = sent_to_start(alice_client.get("/gated/payout/"))
    alice_client.post(START, {"next": next_url})
    aborted = alice_client.get(eid_broker.abort())
    # Back on the start page, with the gate's reason, for another try.
    assert aborted["Location"] == f"{START}?next=%2Fgated%2Fpayout%2F"
    assert "needs a recent verification" in alice_client.get(aborted["Location"]).content.decode()
    verify(alice_client, eid_broker, eid_broker.persons.NO_MIDDLE_NAME, next=next_url)
    retry = Identification.objects.latest("created_at")
    assert (retry.same_person, retry.status, retry.error_code) == (
        True,
        Status.REJECTED,
        "NOT_SAME_PERSON",
    )


# -- someone else, without the gate's demand ------------------------------------------------
ESCAPE_NEXTS = [
    "",
    "/gated/payout/?x=1",
    "/gated/payout",
    "/gated/any/",
    "https://evil.example/gated/payout/",
    "//testserver/gated/payout/",
    "/eid/resume/forged-token-forged-token/",
]


@pytest.mark.parametrize("with_number", [False, True], ids=["uid-only", "with-number"])
@pytest.mark.parametrize("escape_next", ESCAPE_NEXTS)
def test_a_start_without_the_gates_demand_does_not_open_a_same_person_gate(
    alice: AbstractBaseUser,
    alice_client: Client,
    eid_broker: EidBroker,
    eid: Any,
    escape_next: str,
    with_number: bool,
) -> None:
    eid(GET_SOCIAL_SECURITY_NUMBER=with_number)
    kari, ola = eid_broker.persons.NORWEGIAN, eid_broker.persons.NO_MIDDLE_NAME
    verify(alice_client, eid_broker, kari)
    first = latest()
    make_old(first, 3600)
    assert sent_to_start(alice_client.get("/gated/payout/")) == "/gated/payout/"
    # The start names another destination: the demand (same person) is not found.
    verify(alice_client, eid_broker, ola, **({"next": escape_next} if escape_next else {}))
    other = latest()
    assert (other.status, other.same_person) == (Status.SUCCESS, False)
    # A fresh verification of Ola, yet the gate compares it with the account's person.
    assert sent_to_start(alice_client.get("/gated/payout/")) == "/gated/payout/"
    assert "as the person already verified on this account" in start_page(
        alice_client, "/gated/payout/"
    )
    answer = alice_client.get("/gated/payout/", headers=JSON)
    assert (answer.status_code, answer.json()["reasons"]) == (403, ["other_person"])
    person = claims.account_person(alice)
    assert person is not None
    assert person.pk == first.pk


def test_verifying_someone_else_again_and_again_never_opens_a_same_person_gate(
    alice_client: Client, eid_broker: EidBroker
) -> None:
    kari, ola = eid_broker.persons.NORWEGIAN, eid_broker.persons.NO_MIDDLE_NAME
    verify(alice_client, eid_broker, kari)
    make_old(latest(), 3600)
    next_url = sent_to_start(alice_client.get("/gated/payout/"))
    # With the demand: rejected at once.
    verify(alice_client, eid_broker, ola, next=next_url)
    assert (latest().status, latest().error_code) == (Status.REJECTED, "NOT_SAME_PERSON")
    # The demand stays for a retry ("Try again" keeps next): rejected again.
    verify(alice_client, eid_broker, ola, next=next_url)
    assert (latest().status, latest().error_code) == (Status.REJECTED, "NOT_SAME_PERSON")
    # A plain start (no next) is stored ...
    verify(alice_client, eid_broker, ola)
    assert latest().status == Status.SUCCESS
    # ... and again, with another provider, and with the same unique id at another provider.
    verify(alice_client, eid_broker, ola, provider="NO_BANKID_WEB")
    verify(
        alice_client,
        eid_broker,
        ola,
        provider="NO_BUYPASS",
        identity_provider_unique_id=kari.identity_provider_unique_id,
    )
    assert latest().status == Status.SUCCESS
    assert sent_to_start(alice_client.get("/gated/payout/")) == "/gated/payout/"
    # Kari herself still passes.
    verify(alice_client, eid_broker, kari, next="/gated/payout/")
    assert alice_client.get("/gated/payout/").content == b"payout form"


def test_a_later_identification_of_the_account_person_still_passes_when_someone_else_came_between(
    alice_client: Client, eid_broker: EidBroker
) -> None:
    kari, ola = eid_broker.persons.NORWEGIAN, eid_broker.persons.NO_MIDDLE_NAME
    verify(alice_client, eid_broker, kari)
    verify(alice_client, eid_broker, ola)
    # The latest (Ola) is what the gate judges, not an older Kari.
    sent_to_start(alice_client.get("/gated/payout/"))
    verify(alice_client, eid_broker, kari)
    assert alice_client.get("/gated/payout/").content == b"payout form"


# -- the retention purge ---------------------------------------------------------------------
def verified_long_ago(client: Client, eid_broker: EidBroker) -> None:
    """Kari verified on the account 100 days ago (past a 90-day retention)."""
    verify(client, eid_broker, eid_broker.persons.NORWEGIAN)
    long_ago = timezone.now() - datetime.timedelta(days=100)
    Identification.objects.filter(pk=latest().pk).update(created_at=long_ago, completed_at=long_ago)


@pytest.mark.parametrize("purge", [["--anonymize"], []], ids=["anonymize", "delete"])
def test_the_retention_purge_does_not_hand_a_same_person_gate_to_someone_else(
    alice_client: Client, eid_broker: EidBroker, purge: list[str]
) -> None:
    kari, ola = eid_broker.persons.NORWEGIAN, eid_broker.persons.NO_MIDDLE_NAME
    # T0: Kari is the account's person, verified 100 days ago.
    verified_long_ago(alice_client, eid_broker)
    # T1: someone with the password verifies as Ola (a plain start is allowed) ...
    verify(alice_client, eid_broker, ola)
    assert latest().status == Status.SUCCESS
    sent_to_start(alice_client.get("/gated/payout/"))  # ... and is turned away.
    # T2: Kari verifies through the gate and passes.
    verify(alice_client, eid_broker, kari, next="/gated/payout/")
    assert alice_client.get("/gated/payout/").content == b"payout form"
    # The 90-day retention removes T0 only.
    call_command("eid_purge", "--older-than", "90d", *purge, stdout=io.StringIO())
    # Kari, verified a moment ago, is still the account's person; Ola is not.
    assert alice_client.get("/gated/payout/").content == b"payout form"
    verify(alice_client, eid_broker, ola)
    sent_to_start(alice_client.get("/gated/payout/"))


@pytest.mark.xfail(
    strict=True,
    reason=(
        "Known limit (docs/security.md, residual risks): when retention removes the account's "
        "only verification accepted as its person, and another person verified on the account "
        "without a same_person gate, that verification becomes the reference."
    ),
)
def test_anonymizing_the_accounts_person_does_not_make_a_later_other_person_the_reference(
    alice_client: Client, eid_broker: EidBroker
) -> None:
    verified_long_ago(alice_client, eid_broker)
    verify(alice_client, eid_broker, eid_broker.persons.NO_MIDDLE_NAME)
    sent_to_start(alice_client.get("/gated/payout/"))
    call_command("eid_purge", "--older-than", "90d", "--anonymize", stdout=io.StringIO())
    sent_to_start(alice_client.get("/gated/payout/"))
