"""``eid_required``: who passes, who is sent to verify (and why), JSON clients, and the form
kept over the verification. The gated views are tests/gated_views.py, under ``/gated/``."""

from __future__ import annotations

import datetime
import re
from collections.abc import Callable
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
from django.contrib.auth.models import AbstractBaseUser
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import call_command
from django.http import HttpResponse
from django.test import Client
from django.utils import timezone

from django_eid import state
from django_eid.decorators import eid_required
from django_eid.models import Identification
from django_eid.sandbox.broker import record_of
from django_eid.sandbox.persons import Person
from django_eid.testing import EidBroker
from tests.fixtures_views import logged_in

pytestmark = pytest.mark.django_db

Status = Identification.Status
START = "/eid/start/"


def verify(
    client: Client, eid_broker: EidBroker, person: Person | None = None, *, next_url: str = ""
) -> HttpResponse:
    """Start from the start page, as its form posts, and identify as ``person``."""
    response = client.post(START, {"next": next_url} if next_url else {})
    assert response.status_code == 302, response.content.decode()
    callback: HttpResponse = client.get(eid_broker.complete(person))
    return callback


def make_old(identification: Identification, seconds: int) -> None:
    """Pretend ``identification`` was verified ``seconds`` ago."""
    completed = timezone.now() - datetime.timedelta(seconds=seconds)
    Identification.objects.filter(pk=identification.pk).update(completed_at=completed)


def sent_to_start(response: HttpResponse) -> str:
    """The ``next`` of a redirect to the start page (asserting it is one)."""
    assert response.status_code == 302, response.status_code
    parts = urlsplit(response["Location"])
    assert parts.path == START
    return parse_qs(parts.query)["next"][0]


def start_page(client: Client, next_url: str) -> str:
    return client.get(START, {"next": next_url}).content.decode()


# -- logged out ----------------------------------------------------------------------------------
def test_a_logged_out_user_goes_to_the_login_page(client: Client) -> None:
    response = client.get("/gated/payout/?x=1")
    assert response.status_code == 302
    assert response["Location"] == "/login/?next=/gated/payout/%3Fx%3D1"


def test_a_logged_out_json_client_gets_401_json(client: Client) -> None:
    response = client.get("/gated/any/", headers={"accept": "application/json"})
    assert response.status_code == 401
    assert response.json() == {
        "code": "login_required",
        "message": "Please log in.",
        "login_url": "/login/",
    }


# -- not verified, verified ------------------------------------------------------------------
def test_an_unverified_user_is_sent_to_verify_and_comes_back(
    alice_client: Client, eid_broker: EidBroker
) -> None:
    response = alice_client.get("/gated/any/")
    next_url = sent_to_start(response)
    assert next_url == "/gated/any/"
    assert "Please verify your identity to continue." in start_page(alice_client, next_url)
    callback = verify(alice_client, eid_broker, next_url=next_url)
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


# -- max_age -------------------------------------------------------------------------------------
def test_a_stale_identification_is_sent_to_verify_again(
    alice_client: Client, eid_broker: EidBroker
) -> None:
    verify(alice_client, eid_broker)
    assert alice_client.get("/gated/payout/").content == b"payout form"
    make_old(Identification.objects.get(), 301)
    next_url = sent_to_start(alice_client.get("/gated/payout/"))
    page = start_page(alice_client, next_url)
    assert "this page needs a recent verification" in page
    verify(alice_client, eid_broker, next_url=next_url)
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


# -- min_age -------------------------------------------------------------------------------------
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


# -- min_loa -------------------------------------------------------------------------------------
def verified_at(client: Client, eid_broker: EidBroker, level: str) -> Identification:
    """Verify through the sandbox, then give the row ``level`` as a broker would have."""
    verify(client, eid_broker, eid_broker.persons.NORWEGIAN)
    row = Identification.objects.latest("created_at")
    Identification.objects.filter(pk=row.pk).update(level_of_assurance=level)
    return row


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
    response = alice_client.get("/gated/payout-account/", headers={"accept": "application/json"})
    assert (response.status_code, response.json()["reasons"]) == (403, ["loa_too_low"])


def test_a_high_level_gate_still_asks_for_its_max_age(
    alice_client: Client, eid_broker: EidBroker
) -> None:
    row = verified_at(alice_client, eid_broker, "high")
    make_old(row, 301)
    response = alice_client.get("/gated/payout-account/", headers={"accept": "application/json"})
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


# -- providers -----------------------------------------------------------------------------------
def test_the_wrong_provider_does_not_pass_and_the_start_offers_the_right_one(
    alice_client: Client, eid_broker: EidBroker
) -> None:
    verify(alice_client, eid_broker, eid_broker.persons.NO_MIDDLE_NAME)  # Buypass
    next_url = sent_to_start(alice_client.get("/gated/contract/"))
    page = start_page(alice_client, next_url)
    assert "Only BankID for this contract." in page  # the gate's own message
    assert "This page needs a verification with another electronic ID." not in page
    verify(alice_client, eid_broker, eid_broker.persons.NORWEGIAN, next_url=next_url)
    assert eid_broker.create_requests[-1]["IdentityProvider"] == "NO_BANKID_WEB"
    assert alice_client.get("/gated/contract/").content == b"contract"


def test_a_start_for_a_provider_gate_refuses_another_provider(
    alice_client: Client, eid_broker: EidBroker
) -> None:
    sent_to_start(alice_client.get("/gated/contract/"))
    response = alice_client.post(START, {"next": "/gated/contract/", "provider": "NO_BUYPASS"})
    assert response.status_code == 400
    assert "The provider NO_BUYPASS is not offered here." in response.content.decode()
    assert eid_broker.create_requests == []


# -- anonymized rows -----------------------------------------------------------------------------
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


# -- the same person -----------------------------------------------------------------------------
def test_same_person_refuses_someone_else_and_prefills_the_expected_number_when_asked(
    alice_client: Client, eid_broker: EidBroker, eid: Callable[..., None]
) -> None:
    eid(GET_SOCIAL_SECURITY_NUMBER=True, PREFILL_SAME_PERSON=True)
    kari, ola = eid_broker.persons.NORWEGIAN, eid_broker.persons.NO_MIDDLE_NAME
    verify(alice_client, eid_broker, kari)
    make_old(Identification.objects.get(), 3600)
    next_url = sent_to_start(alice_client.get("/gated/payout/"))
    page = verify(alice_client, eid_broker, ola, next_url=next_url)
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
    verify(alice_client, eid_broker, kari, next_url=next_url)
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
    verify(alice_client, eid_broker, kari, next_url=next_url)
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
    verify(alice_client, eid_broker, ola, next_url=next_url)
    assert "PreFilledSocialSecurityNumber" not in eid_broker.create_requests[-1]
    other = Identification.objects.latest("created_at")
    assert (other.same_person, other.status, other.error_code) == (
        True,
        Status.REJECTED,
        "NOT_SAME_PERSON",
    )
    verify(alice_client, eid_broker, kari, next_url=next_url)
    assert alice_client.get("/gated/payout/").status_code == 200


def test_someone_else_verified_elsewhere_does_not_open_a_same_person_gate(
    alice_client: Client, eid_broker: EidBroker
) -> None:
    kari, ola = eid_broker.persons.NORWEGIAN, eid_broker.persons.NO_MIDDLE_NAME
    verify(alice_client, eid_broker, kari)
    make_old(Identification.objects.get(), 3600)
    # A plain verification (no gate) of another person: stored, but not the account's person.
    verify(alice_client, eid_broker, ola)
    assert Identification.objects.latest("created_at").status == Status.SUCCESS
    next_url = sent_to_start(alice_client.get("/gated/payout/"))
    assert "as the person already verified on this account" in start_page(alice_client, next_url)


def test_the_first_verification_of_an_account_passes_a_same_person_gate(
    alice_client: Client, eid_broker: EidBroker
) -> None:
    verify(alice_client, eid_broker, eid_broker.persons.SWEDISH, next_url="/gated/payout/")
    assert alice_client.get("/gated/payout/").status_code == 200


# -- JSON clients --------------------------------------------------------------------------------
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


def test_a_browser_accepting_anything_gets_the_redirect(alice_client: Client) -> None:
    accept = "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"
    sent_to_start(alice_client.get("/gated/any/", headers={"accept": accept}))
    sent_to_start(alice_client.get("/gated/any/", headers={"accept": "*/*"}))


# -- a form sent before verifying ----------------------------------------------------------------
def csrf_client(user: AbstractBaseUser) -> tuple[Client, str]:
    """A logged-in client that enforces CSRF, and its token."""
    client = logged_in(user, enforce_csrf_checks=True)
    client.get(START)  # sets the CSRF cookie
    return client, client.cookies["csrftoken"].value


def resume_form(page: str) -> tuple[str, list[tuple[str, str]]]:
    """The action and the hidden fields of the resume page's form."""
    action = re.search(r'<form id="eid-resume" method="post" action="([^"]+)"', page)
    assert action is not None, page
    fields = re.findall(r'<input type="hidden" name="([^"]+)" value="([^"]*)"', page)
    return action.group(1), fields


def test_a_gated_post_is_resumed_after_the_verification(
    alice: AbstractBaseUser, eid_broker: EidBroker
) -> None:
    client, token = csrf_client(alice)
    data = {"account": ["1234.56.78903", "second"], "csrfmiddlewaretoken": token}
    next_url = sent_to_start(client.post("/gated/payout/", data))
    assert re.fullmatch(r"/eid/resume/[\w-]+/", next_url)
    start = client.post(START, {"next": next_url, "csrfmiddlewaretoken": token})
    assert start.status_code == 302
    callback = client.get(eid_broker.complete())
    assert callback["Location"] == next_url
    page = client.get(next_url)
    assert page["Cache-Control"].startswith("max-age=0")
    action, fields = resume_form(page.content.decode())
    assert action == "/gated/payout/"
    kept = [pair for pair in fields if pair[0] != "csrfmiddlewaretoken"]
    assert kept == [("account", "1234.56.78903"), ("account", "second")]
    # The browser sends the form with the fresh token; the CSRF middleware checks it again.
    fresh = dict(fields)["csrfmiddlewaretoken"]
    resumed = client.post(
        action, {"account": ["1234.56.78903", "second"], "csrfmiddlewaretoken": fresh}
    )
    assert resumed.content == b"saved 1234.56.78903,second"
    # Once only.
    again = client.get(next_url)
    assert again.status_code == 404
    assert "no longer kept" in again.content.decode()


def test_a_resumed_post_without_a_valid_token_is_refused_by_csrf(
    alice: AbstractBaseUser, eid_broker: EidBroker
) -> None:
    client, token = csrf_client(alice)
    next_url = sent_to_start(
        client.post("/gated/payout/", {"account": "1", "csrfmiddlewaretoken": token})
    )
    client.post(START, {"next": next_url, "csrfmiddlewaretoken": token})
    client.get(eid_broker.complete())
    action, _ = resume_form(client.get(next_url).content.decode())
    assert client.post(action, {"account": "1"}).status_code == 403


def test_another_users_kept_form_is_not_resumed(
    alice: AbstractBaseUser, bob: AbstractBaseUser, bob_client: Client
) -> None:
    client, token = csrf_client(alice)
    next_url = sent_to_start(
        client.post("/gated/payout/", {"account": "1", "csrfmiddlewaretoken": token})
    )
    response = bob_client.get(next_url)
    assert response.status_code == 404
    assert "no longer kept" in response.content.decode()
    # ... nor in Alice's own session once someone else is logged in there.
    session = client.session
    entries = session[state.KEPT_KEY]
    client.force_login(bob)
    session = client.session
    session[state.KEPT_KEY] = entries
    session.save()
    assert client.get(next_url).status_code == 404


def test_a_kept_form_expires_with_session_max_age(alice: AbstractBaseUser) -> None:
    client, token = csrf_client(alice)
    next_url = sent_to_start(
        client.post("/gated/payout/", {"account": "1", "csrfmiddlewaretoken": token})
    )
    session = client.session
    for entry in session[state.KEPT_KEY].values():
        entry["at"] -= 1801
    session.save()
    assert client.get(next_url).status_code == 404


def test_a_form_to_a_csrf_exempt_view_without_a_token_is_not_kept(
    alice: AbstractBaseUser,
) -> None:
    client, _ = csrf_client(alice)
    next_url = sent_to_start(client.post("/gated/exempt/", {"field": "x"}))
    assert next_url == "/gated/exempt/"
    assert not client.session.get(state.KEPT_KEY)


def test_a_form_too_big_to_keep_is_not_kept(alice: AbstractBaseUser) -> None:
    client, token = csrf_client(alice)
    big = "x" * (state.MAX_KEPT_SIZE + 1)
    next_url = sent_to_start(
        client.post("/gated/payout/", {"account": big, "csrfmiddlewaretoken": token})
    )
    assert next_url == "/gated/payout/"
    assert not client.session.get(state.KEPT_KEY)


def test_a_form_with_a_file_is_not_kept(alice: AbstractBaseUser) -> None:
    client, token = csrf_client(alice)
    upload = SimpleUploadedFile("statement.pdf", b"%PDF-1.4")
    data = {"account": "1", "statement": upload, "csrfmiddlewaretoken": token}
    next_url = sent_to_start(client.post("/gated/payout/", data))
    assert next_url == "/gated/payout/"


def test_at_most_a_few_forms_are_kept_per_session(alice: AbstractBaseUser) -> None:
    client, token = csrf_client(alice)
    urls = [
        sent_to_start(
            client.post("/gated/payout/", {"account": str(i), "csrfmiddlewaretoken": token})
        )
        for i in range(state.MAX_KEPT + 2)
    ]
    assert len(client.session[state.KEPT_KEY]) == state.MAX_KEPT
    assert client.get(urls[0]).status_code == 404  # the oldest went first
    assert client.get(urls[-1]).status_code == 200


# -- the decorator's own arguments ---------------------------------------------------------------
@pytest.mark.parametrize(
    ("options", "error"),
    [
        ({"max_age": -1}, ValueError),
        ({"max_age": 0}, ValueError),
        ({"max_age": "300"}, TypeError),
        ({"min_age": -3}, ValueError),
        ({"min_age": 17.5}, ValueError),
        ({"min_loa": "HIGH"}, ValueError),
        ({"min_loa": "substantial+"}, ValueError),
        ({"min_loa": 3}, ValueError),
        ({"providers": []}, ValueError),
    ],
)
def test_bad_options_fail_when_the_view_is_decorated(
    options: dict[str, Any], error: type[Exception]
) -> None:
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


# -- what the view gets, and the options of the gate ---------------------------------------------
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


def test_keep_form_false_keeps_nothing(alice: AbstractBaseUser) -> None:
    client, token = csrf_client(alice)
    response = client.post("/gated/password/", {"password": "s3cret", "csrfmiddlewaretoken": token})
    assert sent_to_start(response) == "/gated/password/"
    assert not client.session.get(state.KEPT_KEY)


def test_no_form_is_kept_in_a_signed_cookie_session(alice: AbstractBaseUser, settings: Any) -> None:
    """The cookie would carry the form to the browser (and overflow)."""
    settings.SESSION_ENGINE = "django.contrib.sessions.backends.signed_cookies"
    client, token = csrf_client(alice)
    next_url = sent_to_start(
        client.post("/gated/payout/", {"account": "1", "csrfmiddlewaretoken": token})
    )
    assert next_url == "/gated/payout/"


def test_the_latest_verification_decides_not_an_older_one(
    alice_client: Client, eid_broker: EidBroker
) -> None:
    """An adult's earlier verification does not open an 18+ gate for the child verified since."""
    verify(alice_client, eid_broker, eid_broker.persons.NORWEGIAN)
    verify(alice_client, eid_broker, eid_broker.persons.CHILD)
    sent_to_start(alice_client.get("/gated/adults/"))


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
    verify(alice_client, eid_broker, eid_broker.persons.NO_MIDDLE_NAME, next_url=next_url)
    retry = Identification.objects.latest("created_at")
    assert (retry.same_person, retry.status, retry.error_code) == (
        True,
        Status.REJECTED,
        "NOT_SAME_PERSON",
    )


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
    verify(alice_client, eid_broker, kari, next_url=next_url)
    assert Identification.objects.latest("created_at").status == Status.SUCCESS
    assert alice_client.get("/gated/payout/").content == b"payout form"


def test_class_attributes_are_checked_when_the_class_is_defined() -> None:
    from django.views import View

    from django_eid.mixins import EidRequiredMixin

    with pytest.raises(ValueError, match="min_age"):

        class Broken(EidRequiredMixin, View):
            eid_min_age = -1

    with pytest.raises(ValueError, match="provider"):

        class Typo(EidRequiredMixin, View):
            eid_providers = ["bank id"]
