"""``django_eid.outcomes``: the catalogue, what a finished identification says, where it sends
its user, and why a gate turns a user away.

The expected texts are written out here, the Norwegian ones copied from the nb catalog
(django_eid/locale/nb/LC_MESSAGES/django.po), so a wrong lookup or a lost translation fails.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from typing import Any

import pytest
from django.utils.translation import override

from django_eid import outcomes, reasons
from django_eid.models import Identification
from django_eid.outcomes import Outcome, destination, gate_reason, rejection_message

Status = Identification.Status

#: Every Outcome of the module, by its name there.
CATALOGUE: dict[str, Outcome] = {
    name: value for name, value in vars(outcomes).items() if isinstance(value, Outcome)
}

#: django-eid's own rejection codes: (English, Norwegian bokmål).
REJECTIONS = {
    "PROVIDER_NOT_ALLOWED": (
        "You identified with an eID that is not accepted here. Please try again.",
        "Du identifiserte deg med en eID som ikke godtas her. Prøv igjen.",
    ),
    "ONE_ACCOUNT_PER_PERSON": (
        "This person is already verified on another account.",
        "Denne personen er allerede bekreftet på en annen konto.",
    ),
    "NOT_SAME_PERSON": (
        "This is not the person verified on this account.",
        "Dette er ikke personen som er bekreftet på denne kontoen.",
    ),
    "AGE_UNKNOWN": (
        "Your identification did not tell your date of birth, which this service needs to "
        "check your age.",
        "Identifiseringen din oppga ikke fødselsdatoen din, som denne tjenesten trenger for å "
        "kontrollere alderen din.",
    ),
    "LOA_TOO_LOW": (
        "Your eID does not give the level of assurance this service needs. Please identify "
        "with another eID.",
        "eID-en din gir ikke sikkerhetsnivået denne tjenesten krever. Identifiser deg med en "
        "annen eID.",
    ),
    "MIN_AGE": (
        "You must be at least 18 years old to use this service.",
        "Du må være minst 18 år gammel for å bruke denne tjenesten.",
    ),
}

#: Gate reasons: (English, Norwegian bokmål).
GATE_REASONS = {
    "not_verified": (
        "Please verify your identity to continue.",
        "Bekreft identiteten din for å fortsette.",
    ),
    "too_old": (
        "Please verify your identity again: this page needs a recent verification.",
        "Bekreft identiteten din på nytt: denne siden krever en nylig bekreftelse.",
    ),
    "wrong_provider": (
        "This page needs a verification with another electronic ID.",
        "Denne siden krever en bekreftelse med en annen elektronisk ID.",
    ),
    "age_not_known": (
        "This page needs your age, and your verified identity does not tell your date of birth.",
        "Denne siden trenger alderen din, og den bekreftede identiteten din oppgir ikke "
        "fødselsdatoen din.",
    ),
    "loa_too_low": (
        "Please verify your identity again with an eID of a higher level of assurance.",
        "Bekreft identiteten din på nytt med en eID med høyere sikkerhetsnivå.",
    ),
    "other_person": (
        "Please verify your identity again, as the person already verified on this account.",
        "Bekreft identiteten din på nytt som den samme personen som allerede er bekreftet på "
        "denne kontoen.",
    ),
}
NOT_ACCEPTED = ("Your identification was not accepted.", "Identifiseringen din ble ikke godtatt.")


def finished(status: str, **fields: Any) -> Identification:
    """An unsaved identification in ``status`` (outcomes reads fields only)."""
    return Identification(status=status, **fields)


# -- the catalogue -------------------------------------------------------------------------------
def test_the_catalogue_is_found() -> None:
    # The outcomes the views and the flow name; the catalogue has more.
    for name in ("INVALID_LINK", "SUCCEEDED", "ABORTED", "FAILED", "EXPIRED", "REJECTED"):
        assert name in CATALOGUE
    assert len(CATALOGUE) >= 20


def test_every_outcome_code_is_unique() -> None:
    codes = [outcome.code for outcome in CATALOGUE.values()]
    duplicates = {code for code in codes if codes.count(code) > 1}
    assert not duplicates


@pytest.mark.parametrize("name", sorted(CATALOGUE))
def test_every_outcome_has_a_status_title_and_message(name: str) -> None:
    outcome = CATALOGUE[name]
    assert re.fullmatch(r"[a-z]+(_[a-z]+)*", outcome.code), outcome.code
    assert isinstance(outcome.status, int)
    assert 200 <= outcome.status <= 599
    for language in ("en", "nb"):
        with override(language):
            assert str(outcome.title).strip()
            assert str(outcome.message).strip()


def test_the_rejection_and_gate_codes_are_unique() -> None:
    rejections = [
        outcomes.PROVIDER_NOT_ALLOWED,
        outcomes.ONE_ACCOUNT_PER_PERSON,
        outcomes.NOT_SAME_PERSON,
        outcomes.MIN_AGE,
        outcomes.AGE_UNKNOWN,
        outcomes.RECEIVER_REJECTED,
        outcomes.RULES_FAILED,
    ]
    gates = [
        reasons.NOT_VERIFIED,
        reasons.TOO_OLD,
        reasons.WRONG_PROVIDER,
        reasons.TOO_YOUNG,
        reasons.AGE_NOT_KNOWN,
        reasons.OTHER_PERSON,
    ]
    assert len(set(rejections)) == len(rejections)
    assert gates == [
        "not_verified",
        "too_old",
        "wrong_provider",
        "too_young",
        "age_not_known",
        "other_person",
    ]


# -- of(): what a finished identification says ---------------------------------------------
@pytest.mark.parametrize(
    ("status", "code", "title", "message"),
    [
        (Status.SUCCESS, "succeeded", "Identity verified", "Your identity is verified."),
        (
            Status.ABORTED,
            "aborted",
            "Identification cancelled",
            "You cancelled the identification.",
        ),
        (
            Status.EXPIRED,
            "expired",
            "Identification expired",
            "The identification took too long and has expired. Please start again.",
        ),
        (
            Status.ERROR,
            "failed",
            "Identification failed",
            "The identification did not succeed. Please try again.",
        ),
        (Status.REJECTED, "rejected", "Identification not accepted", NOT_ACCEPTED[0]),
    ],
)
def test_the_outcome_of_each_status(status: str, code: str, title: str, message: str) -> None:
    outcome = outcomes.of(finished(status))
    assert (outcome.code, str(outcome.title), str(outcome.message)) == (code, title, message)
    assert outcome.status == (410 if status == Status.EXPIRED else 200)


def test_an_error_says_failed_whatever_its_stored_message() -> None:
    row = finished(Status.ERROR, error_code="TIMEOUT", error_message="The broker timed out.")
    assert str(outcomes.of(row).message) == "The identification did not succeed. Please try again."


@pytest.mark.parametrize("code", sorted(REJECTIONS))
def test_django_eids_rejection_is_said_in_the_readers_language(
    code: str, eid: Callable[..., None]
) -> None:
    eid(MIN_AGE=18)
    english, norwegian = REJECTIONS[code]
    # Stored when it happened, in that reader's language: not what is shown now.
    row = finished(Status.REJECTED, error_code=code, error_message="Stored at the time.")
    with override("en"):
        outcome = outcomes.of(row)
        assert outcome.code == "rejected"
        assert str(outcome.message) == english
        assert rejection_message(code) == english
    with override("nb"):
        outcome = outcomes.of(row)
        assert str(outcome.message) == norwegian
        assert str(outcome.title) == "Identifiseringen ble ikke godtatt"
        assert rejection_message(code) == norwegian


@pytest.mark.parametrize("language", ["en", "nb"])
def test_a_receivers_reason_is_shown_as_stored(language: str) -> None:
    row = finished(
        Status.REJECTED,
        error_code=outcomes.RECEIVER_REJECTED,
        error_message="Medlemskapet ditt er ikke aktivt.",
    )
    with override(language):
        assert str(outcomes.of(row).message) == "Medlemskapet ditt er ikke aktivt."
    assert rejection_message(outcomes.RECEIVER_REJECTED) is None


@pytest.mark.parametrize("language", ["en", "nb"])
def test_a_rejection_without_a_reason_says_not_accepted(language: str) -> None:
    row = finished(Status.REJECTED, error_code=outcomes.RECEIVER_REJECTED, error_message="")
    with override(language):
        assert str(outcomes.of(row).message) == NOT_ACCEPTED[language == "nb"]


@pytest.mark.parametrize(
    ("min_age", "english", "norwegian"),
    [
        (
            1,
            "You must be at least 1 year old to use this service.",
            "Du må være minst 1 år gammel for å bruke denne tjenesten.",
        ),
        (
            18,
            "You must be at least 18 years old to use this service.",
            "Du må være minst 18 år gammel for å bruke denne tjenesten.",
        ),
        (
            21,
            "You must be at least 21 years old to use this service.",
            "Du må være minst 21 år gammel for å bruke denne tjenesten.",
        ),
    ],
)
def test_the_min_age_message_uses_the_setting_and_its_plural(
    eid: Callable[..., None], min_age: int, english: str, norwegian: str
) -> None:
    eid(MIN_AGE=min_age)
    row = finished(Status.REJECTED, error_code=outcomes.MIN_AGE, error_message="stored")
    with override("en"):
        assert str(outcomes.of(row).message) == english
    with override("nb"):
        assert str(outcomes.of(row).message) == norwegian


def test_a_min_age_rejection_after_min_age_was_turned_off(eid: Callable[..., None]) -> None:
    eid(MIN_AGE=None)
    stored = "You must be at least 18 years old to use this service."
    row = finished(Status.REJECTED, error_code=outcomes.MIN_AGE, error_message=stored)
    message = str(outcomes.of(row).message)
    assert "at least 0 year" not in message
    assert message == stored


# -- destination(): where a finished identification sends its user -----------------------------
def result_page(row: Identification) -> str:
    return f"/eid/result/{row.reference}/"


@pytest.mark.parametrize(
    ("settings_", "next_url", "expected"),
    [
        ({}, "", "/"),
        ({}, "/shop/basket/?step=2", "/shop/basket/?step=2"),
        ({"SUCCESS_URL": "/welcome/"}, "", "/welcome/"),
        ({"SUCCESS_URL": "/welcome/"}, "/shop/", "/shop/"),
        ({"SUCCESS_URL": "login"}, "", "/login/"),  # a URL name
        ({"SUCCESS_URL": "django_eid:start"}, "", "/eid/start/"),
        ({"ABORT_URL": "/cancelled/", "ERROR_URL": "/oops/"}, "", "/"),
    ],
)
def test_success_goes_to_next_else_success_url(
    eid: Callable[..., None], settings_: dict[str, str], next_url: str, expected: str
) -> None:
    eid(**settings_)
    assert destination(finished(Status.SUCCESS, next_url=next_url)) == (expected, False)


def test_a_success_url_name_that_does_not_reverse_goes_to_the_root(
    eid: Callable[..., None], caplog: pytest.LogCaptureFixture
) -> None:
    eid(SUCCESS_URL="no-such-url-name")
    with caplog.at_level(logging.ERROR, logger="django_eid"):
        assert destination(finished(Status.SUCCESS)) == ("/", False)
    assert "E018" in caplog.text


@pytest.mark.parametrize(
    ("settings_", "next_url", "expected"),
    [
        ({}, "", "/eid/start/"),
        ({}, "/shop/basket/?step=2", "/eid/start/?next=%2Fshop%2Fbasket%2F%3Fstep%3D2"),
        ({"ABORT_URL": "/cancelled/"}, "", "/cancelled/"),
        ({"ABORT_URL": "/cancelled/"}, "/shop/", "/cancelled/"),
        ({"ABORT_URL": "login"}, "/shop/", "/login/"),
        ({"SUCCESS_URL": "/welcome/", "ERROR_URL": "/oops/"}, "", "/eid/start/"),
    ],
)
def test_a_cancel_goes_back_to_the_start_else_abort_url(
    eid: Callable[..., None], settings_: dict[str, str], next_url: str, expected: str
) -> None:
    eid(**settings_)
    assert destination(finished(Status.ABORTED, next_url=next_url)) == (expected, False)


@pytest.mark.parametrize(
    ("settings_", "next_url", "expected"),
    [
        ({"ERROR_URL": "/oops/"}, "", "/oops/"),
        ({"ERROR_URL": "/oops/"}, "/shop/", "/oops/"),
        ({"ERROR_URL": "login"}, "", "/login/"),
    ],
)
def test_a_failure_goes_to_error_url(
    eid: Callable[..., None], settings_: dict[str, str], next_url: str, expected: str
) -> None:
    eid(**settings_)
    assert destination(finished(Status.ERROR, next_url=next_url)) == (expected, False)


@pytest.mark.parametrize("status", [Status.ERROR, Status.EXPIRED, Status.REJECTED])
@pytest.mark.parametrize("next_url", ["", "/shop/"])
def test_without_error_url_the_result_page(
    eid: Callable[..., None], status: str, next_url: str
) -> None:
    eid(SUCCESS_URL="/welcome/", ABORT_URL="/cancelled/")
    row = finished(status, next_url=next_url)
    assert destination(row) == (result_page(row), True)


@pytest.mark.parametrize("status", [Status.EXPIRED, Status.REJECTED])
def test_expired_and_rejected_use_the_result_page_even_with_error_url(
    eid: Callable[..., None], status: str
) -> None:
    eid(ERROR_URL="/oops/")
    row = finished(status, next_url="/shop/")
    assert destination(row) == (result_page(row), True)


# -- gate_reason(): why a gate turns a user away -------------------------------------------
@pytest.mark.parametrize("code", sorted(GATE_REASONS))
def test_each_gate_reason_in_english_and_norwegian(code: str) -> None:
    english, norwegian = GATE_REASONS[code]
    with override("en"):
        assert gate_reason(code) == english
    with override("nb"):
        assert gate_reason(code) == norwegian


@pytest.mark.parametrize(
    ("min_age", "english", "norwegian"),
    [
        (
            1,
            "This page is only for persons aged 1 year or older.",
            "Denne siden er bare for personer som er 1 år eller eldre.",
        ),
        (
            18,
            "This page is only for persons aged 18 years or older.",
            "Denne siden er bare for personer som er 18 år eller eldre.",
        ),
    ],
)
def test_too_young_names_the_gates_age(min_age: int, english: str, norwegian: str) -> None:
    with override("en"):
        assert gate_reason("too_young", min_age=min_age) == english
    with override("nb"):
        assert gate_reason("too_young", min_age=min_age) == norwegian


@pytest.mark.parametrize("code", ["", "no_such_reason", "TOO_OLD", "rejected"])
def test_an_unknown_gate_reason_falls_back_to_please_verify(code: str) -> None:
    with override("en"):
        assert gate_reason(code) == GATE_REASONS["not_verified"][0]
    with override("nb"):
        assert gate_reason(code) == GATE_REASONS["not_verified"][1]
