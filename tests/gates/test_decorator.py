"""``eid_required``: who passes, who is sent to verify and why (``max_age``, ``min_age``,
``min_loa``), what the view gets, and the decorator's own arguments. Provider gates,
``same_person``, JSON clients and the kept form have their own modules."""

from __future__ import annotations

import datetime
from collections.abc import Callable
from typing import Any

import pytest
from django.contrib.auth.models import AbstractBaseUser
from django.core.management import call_command
from django.http import HttpResponse
from django.test import Client
from django.utils import timezone

from django_eid import state
from django_eid.decorators import eid_required
from django_eid.models import Identification
from django_eid.sandbox.broker import record_of
from django_eid.testing import EidBroker
from tests.fixtures_views import logged_in
from tests.gates.helpers import (
    JSON,
    START,
    make_old,
    sent_to_start,
    start_page,
    verified_at,
    verify,
)

pytestmark = pytest.mark.django_db

Status = Identification.Status


# -- logged out ----------------------------------------------------------------------------
def test_a_logged_out_user_goes_to_the_login_page(client: Client) -> None:
    response = client.get("/gated/payout/?x=1")
    assert response.status_code == 302
    assert response["Location"] == "/login/?next=/gated/payout/%3Fx%3D1"


def test_a_logged_out_json_client_gets_401_json(client: Client) -> None:
    response = client.get("/gated/any/", headers=JSON)
    assert response.status_code == 401
    assert response.json() == {
        "code": "login_required",
        "message": "Please log in.",
        "login_url": "/login/",
    }


# -- not verified, verified ----------------------------------------------------------------
def test_an_unverified_user_is_sent_to_verify_and_comes_back(
    alice_client: Client, eid_broker: EidBroker
) -> None:
    response = alice_client.get("/gated/any/")
    next_url = sent_to_start(response)
    assert next_url == "/gated/any/"
    assert "Please verify your identity to continue." in start_page(alice_client, next_url)
    callback = verify(alice_client, eid_broker, next=next_url)
    assert callback["Location"] == "/gated/any/"
    assert alice_client.get("/gated/any/").content == b"verified"


def test_the_bare_decorator_keeps_the_views_name() -> None:
    @eid_required
    def my_view(request: Any) -> HttpResponse:
        """Mine."""
        return HttpResponse()

    assert (my_view.__name__, my_view.__doc__) == ("my_view", "Mine.")


def test_a_failed_aborted_or_rejected_identification_does_not_pass(
    alice_client: Client, eid_broker: EidBroker, eid: Callable[..., None]
) -> None:
    alice_client.post(START)
    alice_client.get(eid_broker.fail("TIMEOUT"))
    alice_client.post(START)
    alice_client.get(eid_broker.abort())
    eid(MIN_AGE=18)
    verify(alice_client, eid_broker, eid_broker.persons.MINOR)
    statuses = set(Identification.objects.values_list("status", flat=True))
    assert statuses == {Status.ERROR, Status.ABORTED, Status.REJECTED}
    sent_to_start(alice_client.get("/gated/any/"))


def test_another_users_identification_does_not_count(
    alice_client: Client, bob_client: Client, eid_broker: EidBroker
) -> None:
    verify(bob_client, eid_broker)
    sent_to_start(alice_client.get("/gated/any/"))


def test_an_anonymized_identification_never_counts_as_verified(
    alice: AbstractBaseUser, alice_client: Client, eid_broker: EidBroker
) -> None:
    verify(alice_client, eid_broker)
    assert Identification.objects.verified_for(alice) is not None
    call_command("eid_purge", "--older-than", "0", "--anonymize", "--force", stdout=None)
    row = Identification.objects.get()
    assert (row.status, row.name, row.is_verified) == (Status.SUCCESS, "", False)
    assert row.anonymized_at is not None
    assert Identification.objects.verified_for(alice) is None
    sent_to_start(alice_client.get("/gated/any/"))


def test_the_latest_verification_decides_not_an_older_one(
    alice_client: Client, eid_broker: EidBroker
) -> None:
    """An adult's earlier verification does not open an 18+ gate for the child verified since."""
    verify(alice_client, eid_broker, eid_broker.persons.NORWEGIAN)
    verify(alice_client, eid_broker, eid_broker.persons.CHILD)
    sent_to_start(alice_client.get("/gated/adults/"))


def test_a_view_that_passes_finds_the_verification_on_the_request(
    alice: AbstractBaseUser, eid_broker: EidBroker
) -> None:
    seen: list[Any] = []

    @eid_required(max_age=300)
    def view(request: Any) -> HttpResponse:
        seen.append(request.eid_identification)
        return HttpResponse("ok")

    client = logged_in(alice)
    verify(client, eid_broker)
    request = client.get("/gated/any/").wsgi_request
    assert view(request).content == b"ok"
    assert seen == [Identification.objects.get()]


# -- max_age -------------------------------------------------------------------------------
def test_a_stale_identification_is_sent_to_verify_again(
    alice_client: Client, eid_broker: EidBroker
) -> None:
    verify(alice_client, eid_broker)
    assert alice_client.get("/gated/payout/").content == b"payout form"
    make_old(Identification.objects.get(), 301)
    next_url = sent_to_start(alice_client.get("/gated/payout/"))
    page = start_page(alice_client, next_url)
    assert "this page needs a recent verification" in page
    verify(alice_client, eid_broker, next=next_url)
    assert alice_client.get("/gated/payout/").content == b"payout form"


def test_max_age_counts_from_the_verification_not_the_start(
    alice_client: Client, eid_broker: EidBroker
) -> None:
    alice_client.post(START)
    row = Identification.objects.get()
    Identification.objects.filter(pk=row.pk).update(
        created_at=timezone.now() - datetime.timedelta(seconds=290)
    )
    alice_client.get(eid_broker.complete())
    assert alice_client.get("/gated/payout/").status_code == 200


# -- min_age -------------------------------------------------------------------------------
def test_a_minor_does_not_pass_an_age_limit_and_is_told_why(
    alice_client: Client, eid_broker: EidBroker
) -> None:
    verify(alice_client, eid_broker, eid_broker.persons.MINOR)
    assert Identification.objects.get().status == Status.SUCCESS  # verified, just too young
    next_url = sent_to_start(alice_client.get("/gated/adults/"))
    assert "This page is only for persons aged 18 years or older." in start_page(
        alice_client, next_url
    )


def test_an_adult_passes_an_age_limit(alice_client: Client, eid_broker: EidBroker) -> None:
    verify(alice_client, eid_broker, eid_broker.persons.NORWEGIAN)
    assert alice_client.get("/gated/adults/").content == b"adults only"


def test_a_person_of_unknown_age_does_not_pass_an_age_limit(
    alice_client: Client, eid_broker: EidBroker
) -> None:
    alice_client.post(START)
    url = eid_broker.complete()
    request_id = eid_broker.sessions[-1].request_id
    unknown = record_of(eid_broker.persons.NORWEGIAN, request_id, with_number=False)
    del unknown["DateOfBirth"]
    eid_broker.inject("retrieve", body=unknown, request_id=request_id)
    alice_client.get(url)
    row = Identification.objects.get()
    assert (row.status, row.date_of_birth) == (Status.SUCCESS, None)
    next_url = sent_to_start(alice_client.get("/gated/adults/"))
    assert "your verified identity does not tell your date of birth" in start_page(
        alice_client, next_url
    )


# -- min_loa: the row's level set as a broker states it -------------------------------------
def test_a_high_level_verification_passes_a_high_gate(
    alice_client: Client, eid_broker: EidBroker
) -> None:
    verified_at(alice_client, eid_broker, "high")
    assert alice_client.get("/gated/payout-account/").content == b"payout account"


@pytest.mark.parametrize("level", ["substantial", "low", ""])
def test_a_lower_or_unstated_level_is_sent_to_verify_again_and_told_why(
    alice_client: Client, eid_broker: EidBroker, level: str
) -> None:
    verified_at(alice_client, eid_broker, level)
    next_url = sent_to_start(alice_client.get("/gated/payout-account/"))
    assert next_url == "/gated/payout-account/"
    page = start_page(alice_client, next_url)
    assert "Please verify your identity again with an eID of a higher level of assurance." in page
    assert "needs a recent verification" not in page  # verified seconds ago
    assert alice_client.session[state.DEMANDS_KEY][next_url]["min_loa"] == "high"
    response = alice_client.get("/gated/payout-account/", headers=JSON)
    assert (response.status_code, response.json()["reasons"]) == (403, ["loa_too_low"])


def test_a_high_level_gate_still_asks_for_its_max_age(
    alice_client: Client, eid_broker: EidBroker
) -> None:
    row = verified_at(alice_client, eid_broker, "high")
    make_old(row, 301)
    response = alice_client.get("/gated/payout-account/", headers=JSON)
    assert response.json()["reasons"] == ["too_old"]


def test_the_start_page_tells_the_level_reason_in_norwegian(
    alice_client: Client, eid_broker: EidBroker
) -> None:
    verified_at(alice_client, eid_broker, "substantial")
    next_url = sent_to_start(alice_client.get("/gated/payout-account/"))
    page = alice_client.get(
        START, {"next": next_url}, headers={"accept-language": "nb"}
    ).content.decode()
    assert "Bekreft identiteten din på nytt med en eID med høyere sikkerhetsnivå." in page


# -- the decorator's own arguments ---------------------------------------------------------
@pytest.mark.parametrize(
    ("options", "error"),
    [({"max_age": "300"}, TypeError), ({"min_age": -3}, ValueError)],
)
def test_bad_options_fail_when_the_view_is_decorated(
    options: dict[str, Any], error: type[Exception]
) -> None:
    """Each bad option of ``Requirements.of`` (test_requirements.py) fails the same way."""
    with pytest.raises(error):
        eid_required(**options)


def test_a_single_provider_may_be_given_as_a_string(
    alice_client: Client, eid_broker: EidBroker
) -> None:
    @eid_required(providers="NO_BANKID_WEB")
    def view(request: Any) -> HttpResponse:
        return HttpResponse("ok")

    verify(alice_client, eid_broker)
    request = alice_client.get("/gated/any/").wsgi_request
    assert view(request).content == b"ok"
