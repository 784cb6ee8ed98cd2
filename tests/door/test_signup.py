"""Signing up with an eID (``SIGNUP``, ``django_eid:signup``, the adapter), and a site's own
sign-up that requires a verified identity (``pending_identification``,
``bind_pending_identification``). Two sign-ups of one person at once:
``tests/production/test_door_races.py``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from django import forms
from django.contrib.auth import SESSION_KEY
from django.contrib.auth.models import AbstractBaseUser
from django.test import Client

import django_eid
from django_eid.adapter import DefaultAdapter
from django_eid.exceptions import BindRefused
from django_eid.forms import SignupForm
from django_eid.models import Identification, LinkedIdentity
from django_eid.person_keys import uid_key
from tests.door.conftest import row_of
from tests.fixtures_broker import SAMPLE
from tests.fixtures_views import Signals, Started

pytestmark = pytest.mark.django_db

Status = Identification.Status
SIGNUP = "/eid/signup/"


def logged_in_as(client: Client) -> Any:
    pk = client.session.get(SESSION_KEY)
    return (
        None
        if pk is None
        else Identification._meta.get_field("user").related_model.objects.get(pk=pk)
    )


def test_closed_sign_up_says_no_account_is_linked(
    identify_at_door: Callable[..., tuple[Started, Any]], visitor: Client, eid: Callable[..., None]
) -> None:
    eid(SIGNUP_URL="/register/")
    started, response = identify_at_door(purpose="login")
    assert response.status_code == 200
    page = response.content.decode()
    assert "No account for this eID" in page
    assert 'href="/register/"' in page
    assert logged_in_as(visitor) is None
    assert row_of(started).user_id is None
    assert visitor.get(SIGNUP).status_code == 403  # the sign-up page is closed too
    # Who came to sign up goes on to the site's own sign-up, which binds the identification.
    other = Client()
    started, response = identify_at_door(other, purpose="signup")
    assert response["Location"] == "/register/"
    assert django_eid.pending_identification(response.wsgi_request).pk == started.pk


def test_auto_sign_up_makes_links_binds_and_logs_in(
    broker_api: str,
    identify_at_door: Callable[..., tuple[Started, Any]],
    visitor: Client,
    eid: Callable[..., None],
    signals: Signals,
    settings: Any,
) -> None:
    """Every API: the account exists at once, with the verified name and no usable password,
    linked to the person, the identification bound to it, and logged in."""
    eid(SIGNUP="auto")
    settings.LOGIN_REDIRECT_URL = "/welcome/"
    started, response = identify_at_door(purpose="signup")
    row = row_of(started)
    user = logged_in_as(visitor)
    assert user is not None
    assert response.status_code == 302
    assert response["Location"] == "/welcome/"
    assert row.user_id == user.pk
    assert (user.first_name, user.last_name) == (row.first_name, row.last_name)
    assert SAMPLE.last_name == row.last_name
    assert user.username.startswith("eid-")
    assert not user.has_usable_password()
    assert LinkedIdentity.objects.get().user_id == user.pk
    assert LinkedIdentity.objects.get().key == uid_key(row)
    names = [name for name in signals.names if name != "identification_started"]
    assert names == ["identification_succeeded", "identification_bound", "eid_login"]
    assert [s["purpose"] for s in signals.of("identification_succeeded")] == ["signup"]
    assert django_eid.pending_identification(response.wsgi_request) is None


def test_a_login_of_a_person_without_an_account_signs_up_when_open(
    identify_at_door: Callable[..., tuple[Started, Any]], visitor: Client, eid: Callable[..., None]
) -> None:
    eid(SIGNUP="auto")
    started, _response = identify_at_door(purpose="login")
    assert logged_in_as(visitor) is not None
    assert row_of(started).purpose == "login"


def test_a_sign_up_of_a_linked_person_logs_into_their_account(
    verify: Callable[..., Identification],
    alice: AbstractBaseUser,
    identify_at_door: Callable[..., tuple[Started, Any]],
    visitor: Client,
    eid: Callable[..., None],
) -> None:
    """No second account for a person who has one: they are logged in to it."""
    verify()
    eid(SIGNUP="auto")
    identify_at_door(purpose="signup")
    assert logged_in_as(visitor) == alice
    assert type(alice).objects.count() == 1


def test_the_sign_up_form_is_filled_with_the_verified_name(
    broker_api: str,
    identify_at_door: Callable[..., tuple[Started, Any]],
    visitor: Client,
    eid: Callable[..., None],
) -> None:
    eid(SIGNUP="form")
    started, response = identify_at_door(purpose="signup", next="/after/")
    assert response["Location"] == SIGNUP
    page = visitor.get(SIGNUP)
    assert page.status_code == 200
    form = page.context["form"]
    assert set(form.fields) >= {"username", "email", "first_name", "last_name"}
    assert form.initial["first_name"] == row_of(started).first_name
    assert page["Cache-Control"].startswith("max-age=0") or "no-store" in page["Cache-Control"]
    done = visitor.post(
        SIGNUP,
        {"username": "kari", "email": "kari@example.com", "first_name": "K", "last_name": "N"},
    )
    assert done.status_code == 302
    assert done["Location"] == "/after/"
    user = logged_in_as(visitor)
    assert (user.username, user.email, user.first_name) == ("kari", "kari@example.com", "K")
    assert not user.has_usable_password()
    assert row_of(started).user_id == user.pk
    assert LinkedIdentity.objects.get().user_id == user.pk
    # Used: the page is gone, and a second account cannot be made with it.
    visitor.logout()
    assert visitor.get(SIGNUP).status_code == 403


def test_the_sign_up_form_refuses_a_taken_username(
    identify_at_door: Callable[..., tuple[Started, Any]],
    visitor: Client,
    eid: Callable[..., None],
    alice: AbstractBaseUser,
) -> None:
    eid(SIGNUP="form")
    identify_at_door(purpose="signup")
    response = visitor.post(SIGNUP, {"username": "ALICE", "email": "x@example.com"})
    assert response.status_code == 400
    assert "exists already" in response.content.decode()
    assert logged_in_as(visitor) is None
    assert type(alice).objects.count() == 1


def test_the_sign_up_page_needs_a_verified_identity_of_this_browser(
    identify_at_door: Callable[..., tuple[Started, Any]], eid: Callable[..., None]
) -> None:
    eid(SIGNUP="form")
    identify_at_door(purpose="signup")
    other = Client()
    assert other.get(SIGNUP).status_code == 403
    assert other.post(SIGNUP, {"username": "x", "email": "x@example.com"}).status_code == 403
    assert not LinkedIdentity.objects.exists()


def test_a_minor_is_refused_at_sign_up(
    identify_at_door: Callable[..., tuple[Started, Any]],
    visitor: Client,
    eid: Callable[..., None],
) -> None:
    eid(SIGNUP="auto", MIN_AGE=120)
    started, response = identify_at_door(purpose="signup")
    assert (row_of(started).status, row_of(started).error_code) == (Status.REJECTED, "MIN_AGE")
    assert logged_in_as(visitor) is None
    assert "years old" in response.content.decode()
    assert Identification._meta.get_field("user").related_model.objects.count() == 0


class PickyAdapter(DefaultAdapter):
    def is_open_for_signup(self, request: Any, identification: Identification) -> bool:
        return identification.identity_provider == "SWE_BANKID"

    def populate_user(self, user: Any, identification: Identification, form: Any = None) -> Any:
        user = super().populate_user(user, identification, form)
        user.username = "picked-" + identification.first_name.lower()
        return user

    def signup_redirect_url(self, request: Any) -> str:
        return "/welcome-new/"


def test_the_adapter_decides_who_signs_up_and_how(
    identify_at_door: Callable[..., tuple[Started, Any]],
    visitor: Client,
    eid: Callable[..., None],
) -> None:
    eid(SIGNUP="auto", ADAPTER=f"{__name__}.PickyAdapter")
    _started, response = identify_at_door(purpose="signup")
    assert response.context["outcome"].code == "no_account"
    assert logged_in_as(visitor) is None
    eid(ALLOWED_PROVIDERS=["NO_BANKID_WEB", "SWE_BANKID"])
    swede = Client()
    _started, response = identify_at_door(
        swede,
        purpose="signup",
        provider="SWE_BANKID",
        IdentityProvider="SWE_BANKID",
        IdentityProviderUniqueId="se-1",
    )
    assert response["Location"] == "/welcome-new/"
    assert logged_in_as(swede) is not None
    made = Identification._meta.get_field("user").related_model.objects.get()
    assert made.username == "picked-" + made.first_name.lower()


def test_an_eid_without_a_unique_id_cannot_sign_up(
    identify_at_door: Callable[..., tuple[Started, Any]],
    visitor: Client,
    eid: Callable[..., None],
) -> None:
    """Swedish BankID on v1 names no unique id: an account made of it could never log in."""
    eid(SIGNUP="auto")
    _started, response = identify_at_door(purpose="signup", IdentityProviderUniqueId=...)
    assert response.status_code == 409
    assert "cannot be used to log in" in response.content.decode()
    assert Identification._meta.get_field("user").related_model.objects.count() == 0


# -- the site's own sign-up: pending_identification, bind_pending_identification ------------------
OWN = "/own-signup/"


def test_the_site_s_own_sign_up_binds_the_pending_identification(
    broker_api: str,
    identify_at_door: Callable[..., tuple[Started, Any]],
    visitor: Client,
    signals: Signals,
) -> None:
    """Every API: the browser that verified finds its identification pending, once; the
    site's view makes the account (with a password) and binds it: linked, signals sent."""
    assert visitor.get(OWN)["Location"] == "/eid/login/?purpose=signup"
    started, _response = identify_at_door(purpose="signup")
    page = visitor.get(OWN)
    assert page.status_code == 200
    assert f"Verified: {row_of(started).name}" in page.content.decode()
    done = visitor.post(OWN, {"username": "kari", "password": "pw-kari-1"})
    assert done.status_code == 302
    user = logged_in_as(visitor)
    assert user.username == "kari"
    assert user.has_usable_password()
    assert row_of(started).user_id == user.pk
    assert LinkedIdentity.objects.get().user_id == user.pk
    assert [s["purpose"] for s in signals.of("identification_bound")] == ["signup"]
    # Bound: nothing pending any more.
    visitor.logout()
    assert visitor.get(OWN).status_code == 302


def test_a_second_bind_is_refused(
    identify_at_door: Callable[..., tuple[Started, Any]],
    visitor: Client,
    alice: AbstractBaseUser,
    bob: AbstractBaseUser,
) -> None:
    identify_at_door(purpose="signup")
    request = visitor.get("/eid/login/").wsgi_request
    row = django_eid.bind_pending_identification(request, alice)
    assert row.user_id == alice.pk
    with pytest.raises(BindRefused) as refused:
        django_eid.bind_pending_identification(request, bob)
    assert refused.value.code == "nothing_to_bind"
    assert Identification.objects.get(pk=row.pk).user_id == alice.pk


def test_a_bind_from_another_browser_is_refused(
    identify_at_door: Callable[..., tuple[Started, Any]], alice: AbstractBaseUser
) -> None:
    started, _response = identify_at_door(purpose="signup")
    other = Client()
    request = other.get("/eid/login/").wsgi_request
    assert django_eid.pending_identification(request) is None
    with pytest.raises(BindRefused) as refused:
        django_eid.bind_pending_identification(request, alice)
    assert refused.value.code == "nothing_to_bind"
    assert row_of(started).user_id is None


def test_a_bind_of_a_person_linked_elsewhere_makes_no_account(
    identify_at_door: Callable[..., tuple[Started, Any]],
    visitor: Client,
    verify: Callable[..., Identification],
    alice: AbstractBaseUser,
) -> None:
    """The person verified at the door, then linked to Alice (another browser, meanwhile):
    the site's sign-up is refused, and the account it made in its transaction is gone."""
    started, _response = identify_at_door(purpose="signup")
    verify()  # Alice's account now holds the person
    response = visitor.post(OWN, {"username": "kari", "password": "pw-kari-1"})
    assert response.status_code == 409
    assert b"person_has_account" in response.content
    assert not type(alice).objects.filter(username="kari").exists()
    assert row_of(started).user_id is None
    assert logged_in_as(visitor) is None


def test_a_pending_identification_is_no_older_than_session_max_age(
    identify_at_door: Callable[..., tuple[Started, Any]], visitor: Client
) -> None:
    import datetime

    from django.utils import timezone

    started, _response = identify_at_door(purpose="signup")
    request = visitor.get("/eid/login/").wsgi_request
    assert django_eid.pending_identification(request).pk == started.pk
    Identification.objects.filter(pk=started.pk).update(
        completed_at=timezone.now() - datetime.timedelta(hours=1)
    )
    assert django_eid.pending_identification(request) is None


def test_one_account_per_person_binds_a_person_verified_at_the_door_twice(
    identify_at_door: Callable[..., tuple[Started, Any]],
    visitor: Client,
    eid: Callable[..., None],
    verify: Callable[..., Identification],
    bob: AbstractBaseUser,
    bob_client: Client,
) -> None:
    """A verified identification without an account holds no account: the person's other
    one does not make their sign-up (or another account's verification) "taken"."""
    eid(ONE_ACCOUNT_PER_PERSON=True, SIGNUP="form")
    identify_at_door(Client(), purpose="signup")  # left unbound
    identify_at_door(purpose="signup")
    done = visitor.post(SIGNUP, {"username": "kari", "email": "kari@example.com"})
    assert done.status_code == 302
    user = logged_in_as(visitor)
    assert user.username == "kari"
    # The person now holds Kari's account: Bob's verification of them is refused.
    assert verify(client=bob_client).error_code == "ONE_ACCOUNT_PER_PERSON"


class PhoneSignupForm(SignupForm):
    """A site's own sign-up form: a phone number beside what the default asks."""

    phone = forms.CharField(max_length=20)

    def clean_phone(self) -> str:
        phone: str = self.cleaned_data["phone"]
        if not phone.startswith("+47"):
            raise forms.ValidationError("A Norwegian number, please.")
        return phone


def test_the_sign_up_form_is_the_site_s_to_replace(
    identify_at_door: Callable[..., tuple[Started, Any]],
    visitor: Client,
    eid: Callable[..., None],
) -> None:
    eid(SIGNUP="form", SIGNUP_FORM=f"{__name__}.PhoneSignupForm")
    identify_at_door(purpose="signup")
    assert "phone" in visitor.get(SIGNUP).context["form"].fields
    form = {"username": "kari", "email": "kari@example.com", "phone": "+4612345678"}
    assert visitor.post(SIGNUP, form).status_code == 400
    assert visitor.post(SIGNUP, {**form, "phone": "+4791234567"}).status_code == 302
    assert logged_in_as(visitor).username == "kari"


def test_a_login_forgets_the_person_waiting_to_sign_up(
    identify_at_door: Callable[..., tuple[Started, Any]],
    visitor: Client,
    eid: Callable[..., None],
    bob: AbstractBaseUser,
) -> None:
    """A shared computer: the person who verified and left is not whoever logs in next."""
    eid(SIGNUP="form")
    identify_at_door(purpose="signup")
    assert visitor.post("/login/", {"username": "bob", "password": "pw-bob"}).status_code == 302
    assert visitor.get(SIGNUP)["Location"] == "/accounts/profile/"  # logged in: not here
    visitor.logout()
    assert visitor.get(SIGNUP).status_code == 403  # nothing waits any more
    assert not LinkedIdentity.objects.exists()


def test_a_late_rejection_at_sign_up_leaves_no_account_and_no_link(
    identify_at_door: Callable[..., tuple[Started, Any]],
    visitor: Client,
    eid: Callable[..., None],
) -> None:
    """A receiver of identification_succeeded (sent once the person has an account) that
    says no: the account made for them and its link go; the row keeps the rejection."""
    from django.dispatch import receiver

    from django_eid import signals as eid_signals
    from django_eid.exceptions import IdentificationRejected

    @receiver(eid_signals.identification_succeeded, dispatch_uid="late-no")
    def late_no(purpose: str, **kwargs: Any) -> None:
        if purpose == "signup":
            raise IdentificationRejected("Not this one.")

    eid(SIGNUP="auto")
    try:
        started, response = identify_at_door(purpose="signup")
    finally:
        eid_signals.identification_succeeded.disconnect(dispatch_uid="late-no")
    assert "Not this one." in response.content.decode()
    assert logged_in_as(visitor) is None
    assert not LinkedIdentity.objects.exists()
    assert Identification._meta.get_field("user").related_model.objects.count() == 0
    row = row_of(started)
    assert (row.status, row.user_id) == (Status.REJECTED, None)


def test_a_sign_up_that_breaks_the_user_model_is_not_taken_for_a_name_taken(
    identify_at_door: Callable[..., tuple[Started, Any]],
    eid: Callable[..., None],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """An IntegrityError that is no unique value taken (the adapter's bug) is not told to
    the person as "choose again": it is the site's error to see."""
    from django.db import IntegrityError

    def broken_save(self: Any, *args: Any, **kwargs: Any) -> None:
        raise IntegrityError("NOT NULL constraint failed: auth_user.required_thing")

    eid(SIGNUP="auto")
    monkeypatch.setattr(Identification._meta.get_field("user").related_model, "save", broken_save)
    with pytest.raises(IntegrityError):
        identify_at_door(purpose="signup")


def test_a_refused_sign_up_is_not_offered_again(
    identify_at_door: Callable[..., tuple[Started, Any]],
    visitor: Client,
    eid: Callable[..., None],
    verify: Callable[..., Identification],
) -> None:
    """The person is linked to another account meanwhile: the sign-up is refused, and the
    page no longer offers the identification (nothing it could make)."""
    eid(SIGNUP="form")
    identify_at_door(purpose="signup")
    verify()  # Alice's account holds the person now
    refused = visitor.post(SIGNUP, {"username": "kari", "email": "kari@example.com"})
    assert refused.status_code == 409
    assert refused.context["start_url"] == "/eid/login/?purpose=signup"
    assert visitor.get(SIGNUP).status_code == 403
