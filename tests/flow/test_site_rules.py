"""Site rules decided before success is visible: ``identification_verifying``, ``MIN_AGE``,
and the compatibility of a rejection from ``identification_succeeded``."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import pytest
from django.contrib.auth.models import AbstractBaseUser
from django.test import Client

from django_eid import signals as eid_signals
from django_eid.exceptions import IdentificationRejected
from django_eid.models import Identification, PersonClaim
from tests.audit_sql import event_statements
from tests.fixtures_broker import SAMPLE, ScriptedBroker, expected
from tests.fixtures_views import Signals, Started

pytestmark = pytest.mark.django_db

Status = Identification.Status


#: ``finish(person=None, **record)`` -> the start and the response to its return.
Finish = Callable[..., tuple[Started, Any]]


@pytest.fixture
def finish(start: Callable[..., Started], broker: ScriptedBroker, alice_client: Client) -> Finish:
    """``finish(person=None, **record)``: alice starts and comes back with a success whose
    record is the sample person's, or ``person``'s (a name of the sandbox's persons: their
    birth date, national identity number and eID), with ``record``'s fields."""

    def run(person: str | None = None, **record: Any) -> tuple[Started, Any]:
        if person is not None:
            who = broker.persons.get(person)
            assert who is not None, person
            record = {
                "DateOfBirth": who.date_of_birth,
                "SocialSecurityNumber": who.national_identity_number,
                "IdentityProvider": who.identity_provider,
                **record,
            }
        started = start()
        broker.will_return(started.request_id, **record)
        return started, alice_client.get(started.success_url())

    return run


# -- identification_verifying ---------------------------------------------------------------------
def test_verifying_sees_the_uncommitted_success_inside_the_transaction(
    finish: Finish, alice: AbstractBaseUser, verifying: Callable[..., None], signals: Signals
) -> None:
    seen: list[tuple[str, Any, Any]] = []

    def rule(identification: Identification, user: Any, request: Any, **kwargs: Any) -> None:
        seen.append((identification.status, user, request))

    verifying(rule)
    started, response = finish()
    assert response.status_code == 302
    [(status, user, request)] = seen
    assert (status, user) == (Status.SUCCESS, alice)
    assert request is not None
    assert request.path == started.path("success")
    assert started.refresh().status == Status.SUCCESS
    # identification_verifying is not among the signals recorded (its receivers are rules).
    assert signals.names == ["identification_started", "identification_succeeded"]


def test_a_rejection_in_verifying_is_stored_and_success_is_never_sent(
    finish: Finish, verifying: Callable[..., None], signals: Signals
) -> None:
    def rule(identification: Identification, **kwargs: Any) -> None:
        raise IdentificationRejected("Members only.")

    verifying(rule)
    started, response = finish()
    assert response.status_code == 200
    assert "Members only." in response.content.decode()
    row = started.refresh()
    assert (row.status, row.error_code, row.error_message) == (
        Status.REJECTED,
        "REJECTED",
        "Members only.",
    )
    # The identity is kept on the row for the record, but it is not a verified identity.
    assert row.name == SAMPLE.name  # v1's Name ("Last, First")
    assert not row.is_verified
    assert signals.names == ["identification_started", "identification_failed"]
    assert signals.of("identification_failed")[0]["status"] == Status.REJECTED


def test_a_rejection_rolls_back_what_the_receivers_wrote(
    finish: Finish,
    alice: AbstractBaseUser,
    verifying: Callable[..., None],
    eid: Callable[..., None],
) -> None:
    eid(ONE_ACCOUNT_PER_PERSON=True, GET_SOCIAL_SECURITY_NUMBER=True)

    def writes(identification: Identification, user: Any, **kwargs: Any) -> None:
        user.first_name = "Written by a rule"
        user.save(update_fields=["first_name"])

    def rejects(identification: Identification, **kwargs: Any) -> None:
        raise IdentificationRejected("No.")

    verifying(writes)
    verifying(rejects)
    started, _ = finish()
    assert started.refresh().status == Status.REJECTED
    alice.refresh_from_db()
    assert alice.first_name == ""  # type: ignore[attr-defined]
    assert not PersonClaim.objects.exists()  # the person's claims went with the rollback


def test_the_first_rejection_wins(finish: Finish, verifying: Callable[..., None]) -> None:
    for reason in ("First.", "Second."):

        def rule(reason: str = reason, **kwargs: Any) -> None:
            raise IdentificationRejected(reason)

        verifying(rule)
    started, _ = finish()
    assert started.refresh().error_message == "First."


def test_a_rejection_without_a_reason_gets_the_default_one(
    finish: Finish, verifying: Callable[..., None]
) -> None:
    def rule(**kwargs: Any) -> None:
        raise IdentificationRejected()

    verifying(rule)
    started, response = finish()
    assert started.refresh().error_message == "Your identification was not accepted."
    assert "Your identification was not accepted." in response.content.decode()


def test_a_crashing_rule_refuses_the_identity(
    finish: Finish,
    verifying: Callable[..., None],
    signals: Signals,
    caplog: pytest.LogCaptureFixture,
) -> None:
    def rule(identification: Identification, **kwargs: Any) -> None:
        raise KeyError(identification.name)  # a bug in the site's rule, with personal data

    verifying(rule)
    with caplog.at_level(logging.ERROR, logger="django_eid"):
        started, response = finish()
    row = started.refresh()
    assert (row.status, row.error_code) == (Status.ERROR, "RULES_FAILED")
    assert "The identification did not succeed." in response.content.decode()
    assert signals.names == ["identification_started", "identification_failed"]
    ours = [r.getMessage() for r in caplog.records if r.name == "django_eid"]
    assert any("identification_verifying failed" in m and "KeyError" in m for m in ours)
    assert not any(SAMPLE.last_name in m for m in ours)


def test_without_rules_the_success_is_one_update(
    start: Callable[..., Started],
    broker: ScriptedBroker,
    alice_client: Client,
    django_assert_num_queries: Any,
    broker_api: str,
) -> None:
    """No receiver, no MIN_AGE, no claims: no transaction around the SUCCESS (OpenID
    Connect's return finds its row by the state first)."""
    started = start()
    broker.will_return(started.request_id)
    # Session, user, the row, the UPDATE, the link's INSERT (LINK_ON_VERIFY) and the
    # session's UPDATE, each of these two in a savepoint pair here (inside the test's
    # transaction; a request outside one runs them alone). The INSERT linked the person:
    # the page asks nothing more. The UPDATE's and the INSERT's audit events with them.
    with django_assert_num_queries(10 + expected().extra_return_queries + event_statements(2)):
        assert alice_client.get(started.success_url()).status_code == 302


# -- MIN_AGE --------------------------------------------------------------------------------------
def test_min_age_rejects_a_minor_before_anyone_sees_them_verified(
    finish: Finish, eid: Callable[..., None], verifying: Callable[..., None], signals: Signals
) -> None:
    eid(MIN_AGE=18)
    ran: list[str] = []
    verifying(lambda **kwargs: ran.append("rule"))
    started, response = finish("MINOR")
    row = started.refresh()
    assert (row.status, row.error_code) == (Status.REJECTED, "MIN_AGE")
    assert row.error_message == "You must be at least 18 years old to use this service."
    assert "You must be at least 18 years old to use this service." in response.content.decode()
    assert ran == []  # the site's receivers are not asked about a refused identity
    assert signals.names == ["identification_started", "identification_failed"]


def test_min_age_rejects_an_unknown_age(
    finish: Finish, eid: Callable[..., None], broker_api: str
) -> None:
    """Whatever each API's record leaves out of the birth date (no date, no number)."""
    eid(MIN_AGE=18)
    started, response = finish(DateOfBirth=None, SocialSecurityNumber=None)
    row = started.refresh()
    assert (row.status, row.error_code, row.date_of_birth) == (Status.REJECTED, "AGE_UNKNOWN", None)
    assert "did not tell your date of birth" in response.content.decode()


@pytest.mark.parametrize("person", ["NORWEGIAN", "CENTENARIAN", "SWEDISH_COORDINATION"])
def test_min_age_lets_adults_through(
    finish: Finish, broker: ScriptedBroker, eid: Callable[..., None], broker_api: str, person: str
) -> None:
    """The age from each API's record of persons of each country: v1's two-digit
    DateOfBirth with the number, the successors' and OpenID Connect's full dates."""
    eid(MIN_AGE=18)
    started, response = finish(person)
    assert response.status_code == 302
    who = broker.persons.get(person)
    assert who is not None
    row = started.refresh()
    assert (row.status, row.date_of_birth) == (Status.SUCCESS, who.birth_date)


def test_the_centenarian_is_not_taken_for_a_child(finish: Finish, eid: Callable[..., None]) -> None:
    """Her two-digit DateOfBirth alone reads as this century; her number says 1924."""
    eid(MIN_AGE=18)
    started, _ = finish("CENTENARIAN")  # a Swede (SWE_BANKID)
    row = started.refresh()
    assert row.status == Status.SUCCESS
    assert row.age is not None
    assert row.age >= 100


def test_the_min_age_reason_is_shown_in_the_readers_language(
    finish: Finish, alice_client: Client, eid: Callable[..., None]
) -> None:
    eid(MIN_AGE=18)
    started, _ = finish("MINOR")
    page = alice_client.get(
        f"/eid/result/{started.reference}/", headers={"accept-language": "nb"}
    ).content.decode()
    assert "Du må være minst 18 år gammel for å bruke denne tjenesten." in page


# -- identification_succeeded, for compatibility --------------------------------------------------
def test_a_rejection_from_succeeded_still_works_after_the_commit(
    finish: Finish, signals: Signals
) -> None:
    def late(identification: Identification, **kwargs: Any) -> None:
        raise IdentificationRejected("Too late, but still no.")

    eid_signals.identification_succeeded.connect(late, sender=Identification, weak=False)
    try:
        started, _ = finish()
    finally:
        eid_signals.identification_succeeded.disconnect(late, sender=Identification)
    row = started.refresh()
    assert (row.status, row.error_message) == (Status.REJECTED, "Too late, but still no.")
    assert signals.names == [
        "identification_started",
        "identification_succeeded",
        "identification_failed",
    ]


def test_the_first_receiver_that_says_no_stops_the_others(
    finish: Finish, verifying: Callable[..., None]
) -> None:
    ran: list[str] = []

    def first(**kwargs: Any) -> None:
        ran.append("first")
        raise IdentificationRejected("No.")

    def second(**kwargs: Any) -> None:
        ran.append("second")  # would e-mail, book, charge ...

    verifying(first)
    verifying(second)
    started, _ = finish()
    assert started.refresh().status == Status.REJECTED
    assert ran == ["first"]


def test_a_min_age_refusal_keeps_saying_the_age_that_applied(
    finish: Finish, alice_client: Client, eid: Callable[..., None]
) -> None:
    eid(MIN_AGE=18)
    started, _ = finish("MINOR")
    eid(MIN_AGE=20)  # the site raises its limit later
    page = alice_client.get(f"/eid/result/{started.reference}/").content.decode()
    assert "You must be at least 18 years old to use this service." in page


def test_ages_work_without_time_zone_support(
    finish: Finish, eid: Callable[..., None], settings: Any
) -> None:
    settings.USE_TZ = False
    eid(MIN_AGE=18)
    started, _ = finish("MINOR")
    assert started.refresh().error_code == "MIN_AGE"
