"""Logging in with an eID (``django_eid:login``, ``django_eid/flows/login.py``, ``EidBackend``).

On every broker API: the account linked to the person logs in (Django's ``login()``), and
only in the browser that started; the rules of the door (level, inactive accounts, the
site's rules) apply before anyone is logged in. The anonymous caps: ``test_caps.py``;
signing up: ``test_signup.py``; the races: ``tests/production/test_door_races.py``.
"""

from __future__ import annotations

import io
from collections.abc import Callable
from typing import Any

import pytest
from django.contrib.auth import SESSION_KEY, user_logged_in
from django.contrib.auth.models import AbstractBaseUser
from django.core.management import call_command
from django.dispatch import receiver
from django.test import Client

from django_eid import flow
from django_eid import signals as eid_signals
from django_eid.exceptions import IdentificationRejected
from django_eid.models import Identification, LinkedIdentity
from tests.door.conftest import LOGIN, row_of
from tests.fixtures_broker import ScriptedBroker
from tests.fixtures_views import Signals, Started
from tests.flow.returns import TEST_CLIENT_IP, USER_AGENT, identified_at_the_broker

pytestmark = pytest.mark.django_db

Status = Identification.Status


def logged_in_as(client: Client) -> str | None:
    """The pk of the user ``client``'s session is logged in as, or ``None``."""
    return client.session.get(SESSION_KEY)


@pytest.fixture
def linked(verify: Callable[..., Identification], alice: AbstractBaseUser) -> AbstractBaseUser:
    """Alice, her account linked to the sample person by a verification (the real flow)."""
    row = verify()
    assert row.status == Status.SUCCESS, row.error_code
    assert LinkedIdentity.objects.filter(user=alice).count() == 1
    return alice


def test_the_linked_account_logs_in(
    broker_api: str,
    linked: AbstractBaseUser,
    identify_at_door: Callable[..., tuple[Started, Any]],
    visitor: Client,
    signals: Signals,
) -> None:
    """Every API and preset: the person's link opens their account, through Django's
    ``login()`` (a new session key, ``user_logged_in``), then ``eid_login``."""
    visitor.get(LOGIN)  # a session before the start: its key must change at the login
    before = visitor.session.session_key
    logins: list[Any] = []

    def logged(user: Any, **kwargs: Any) -> None:
        logins.append(user)

    user_logged_in.connect(logged, dispatch_uid="door-test", weak=False)
    try:
        started, response = identify_at_door(next="/account/")
    finally:
        user_logged_in.disconnect(dispatch_uid="door-test")
    row = row_of(started)
    assert (row.status, row.user_id, row.purpose) == (Status.SUCCESS, linked.pk, "login")
    assert response.status_code == 302
    assert response["Location"] == "/account/"
    assert logged_in_as(visitor) == str(linked.pk)
    assert visitor.session.session_key != before
    assert logins == [linked]
    succeeded = signals.of("identification_succeeded")[-1]
    assert (succeeded["purpose"], succeeded["user"]) == ("login", linked)
    (login,) = signals.of("eid_login")
    assert (login["identification"].pk, login["user"], login["purpose"]) == (
        row.pk,
        linked,
        "login",
    )
    assert LinkedIdentity.objects.get().last_used_at is not None


def test_without_a_next_the_login_goes_where_logins_go(
    linked: AbstractBaseUser, identify_at_door: Callable[..., tuple[Started, Any]], settings: Any
) -> None:
    settings.LOGIN_REDIRECT_URL = "/welcome/"
    _started, response = identify_at_door()
    assert response["Location"] == "/welcome/"


def test_an_unsafe_next_is_dropped(
    linked: AbstractBaseUser, identify_at_door: Callable[..., tuple[Started, Any]], settings: Any
) -> None:
    settings.LOGIN_REDIRECT_URL = "/welcome/"
    started, response = identify_at_door(next="https://evil.example/")
    assert row_of(started).next_url == ""
    assert response["Location"] == "/welcome/"


def test_another_browser_with_the_return_logs_nobody_in(
    broker_api: str,
    linked: AbstractBaseUser,
    door: Callable[..., Started],
    broker: ScriptedBroker,
    visitor: Client,
) -> None:
    """Every API: the return reaches a browser that did not start (login CSRF: the victim's
    browser sent the attacker's return; or the link forwarded): nobody is logged in there,
    and the browser that started is not either (it never came back)."""
    started = door()
    broker.will_return(started.request_id)
    victim = Client()
    victim.get(LOGIN)
    response = victim.get(started.success_url() + "&eid_retry=1")
    assert response.status_code < 500
    assert logged_in_as(victim) is None
    assert logged_in_as(visitor) is None
    # Logged in as someone else there: still nobody new.
    bobs = Client()
    bob = type(linked).objects.create_user("bob2", "b@example.com", "pw")
    bobs.force_login(bob)
    bobs.get(started.success_url())
    assert logged_in_as(bobs) == str(bob.pk)
    assert row_of(started).user_id != bob.pk


def test_a_replayed_return_logs_in_nobody_again(
    broker_api: str,
    linked: AbstractBaseUser,
    identify_at_door: Callable[..., tuple[Started, Any]],
    visitor: Client,
) -> None:
    """Every API: the one-time state is used; the same URL again, in the same browser after
    logging out or in a copy of its old cookies, logs nobody in."""
    old_cookies = visitor.cookies.copy()
    started, _response = identify_at_door()
    assert logged_in_as(visitor) == str(linked.pk)
    visitor.logout()
    visitor.get(started.success_url())
    assert logged_in_as(visitor) is None
    thief = Client()
    thief.cookies = old_cookies
    thief.get(started.success_url())
    assert logged_in_as(thief) is None


def test_the_start_is_a_post_with_the_csrf_token(broker: ScriptedBroker) -> None:
    """Login CSRF: another site cannot start a login in the visitor's browser (GET shows
    the form; a POST without the token is refused before the broker is asked)."""
    strict = Client(enforce_csrf_checks=True)
    page = strict.get(LOGIN, {"purpose": "signup"})
    assert page.status_code == 200
    assert b'name="purpose" value="signup"' in page.content
    assert strict.post(LOGIN, {"purpose": "login"}).status_code == 403
    assert broker.create_requests == []


def test_a_second_account_that_verified_the_person_does_not_log_in(
    broker_api: str,
    linked: AbstractBaseUser,
    verify: Callable[..., Identification],
    bob: AbstractBaseUser,
    bob_client: Client,
    identify_at_door: Callable[..., tuple[Started, Any]],
    visitor: Client,
) -> None:
    """Every API: a link cannot be stolen by verifying the person on a second account: Bob
    verifies Alice's person, gets no link, and the person's login opens Alice's account."""
    verified = verify(client=bob_client)
    assert verified.user_id == bob.pk
    assert not LinkedIdentity.objects.filter(user=bob).exists()
    identify_at_door()
    assert logged_in_as(visitor) == str(linked.pk)


def test_only_the_person_key_logs_in(
    linked: AbstractBaseUser,
    identify_at_door: Callable[..., tuple[Started, Any]],
    visitor: Client,
) -> None:
    """The same name, date of birth and number at another eID scheme's person: no login (a
    person key per scheme; nothing else opens an account)."""
    started, response = identify_at_door(IdentityProviderUniqueId="another-pid")
    row = row_of(started)
    assert (row.status, row.user_id) == (Status.SUCCESS, None)
    assert logged_in_as(visitor) is None
    assert response.status_code == 200  # SIGNUP "closed": the page saying so
    assert response.context["outcome"].code == "no_account"


def test_an_inactive_account_does_not_log_in(
    broker_api: str,
    linked: AbstractBaseUser,
    identify_at_door: Callable[..., tuple[Started, Any]],
    visitor: Client,
    signals: Signals,
) -> None:
    linked.is_active = False
    linked.save()
    started, response = identify_at_door()
    row = row_of(started)
    assert (row.status, row.error_code) == (Status.REJECTED, "ACCOUNT_INACTIVE")
    assert logged_in_as(visitor) is None
    assert response.status_code == 200
    assert "cannot log in" in response.content.decode()
    assert signals.of("eid_login") == []


@pytest.mark.apis("eid-hub", reason="the eID Hub states the level of each record")
def test_a_level_below_login_min_loa_does_not_log_in(
    broker_api: str,
    linked: AbstractBaseUser,
    identify_at_door: Callable[..., tuple[Started, Any]],
    visitor: Client,
    eid: Callable[..., None],
) -> None:
    """The level the record states decides (Swedish BankID: substantial; NO BankID: high);
    the account linked to the person or none, a lower level does not pass the door."""
    eid(LOGIN_MIN_LOA="high")
    started, _response = identify_at_door(IdentityProvider="SWE_BANKID")
    row = row_of(started)
    assert (row.level_of_assurance, row.status, row.error_code) == (
        "substantial",
        Status.REJECTED,
        "LOA_TOO_LOW",
    )
    assert logged_in_as(visitor) is None
    identify_at_door()
    assert logged_in_as(visitor) == str(linked.pk)


@pytest.mark.parametrize(
    ("provider", "minimum", "logs_in"),
    [
        ("NO_BANKID_WEB", "high", True),  # published: high
        ("SWE_BANKID", "high", False),  # published: substantial
        ("DK_MITID", "low", False),  # several levels: unknown on v1
        ("DK_MITID", None, True),  # unknown, and the site lowered the setting
    ],
)
def test_v1_logs_in_at_the_provider_s_published_level(
    alice: AbstractBaseUser,
    identify_at_door: Callable[..., tuple[Started, Any]],
    visitor: Client,
    eid: Callable[..., None],
    provider: str,
    minimum: str | None,
    logs_in: bool,
) -> None:
    """v1 states no level: the provider's published one (``PUBLISHED_LEVELS``) is the
    login's, and a provider of no single level does not log in unless the site lowers
    ``LOGIN_MIN_LOA`` to ``None``."""
    from tests.fixtures_views import link as make_link

    eid(LOGIN_MIN_LOA=minimum, ALLOWED_PROVIDERS=[provider])
    started, _response = identify_at_door(IdentityProvider=provider)
    row = row_of(started)
    if not logs_in:
        assert (row.status, row.error_code) == (Status.REJECTED, "LOA_TOO_LOW")
        return
    assert row.status == Status.SUCCESS  # verified without an account: none linked yet
    make_link(alice)  # (another person's link: nobody logs in as this one)
    assert logged_in_as(visitor) is None


def test_min_age_applies_before_anyone_is_logged_in(
    linked: AbstractBaseUser,
    identify_at_door: Callable[..., tuple[Started, Any]],
    visitor: Client,
    eid: Callable[..., None],
) -> None:
    eid(MIN_AGE=120)
    started, _response = identify_at_door()
    assert (row_of(started).status, row_of(started).error_code) == (Status.REJECTED, "MIN_AGE")
    assert logged_in_as(visitor) is None


def test_the_site_s_rules_see_the_account_and_apply_before_the_login(
    linked: AbstractBaseUser,
    identify_at_door: Callable[..., tuple[Started, Any]],
    visitor: Client,
) -> None:
    seen: list[tuple[Any, str]] = []

    @receiver(eid_signals.identification_verifying, dispatch_uid="door-rule")
    def no_logins(user: Any, purpose: str, **kwargs: Any) -> None:
        seen.append((user, purpose))
        raise IdentificationRejected("Not today.")

    try:
        started, response = identify_at_door()
    finally:
        eid_signals.identification_verifying.disconnect(dispatch_uid="door-rule")
    assert seen == [(linked, "login")]
    assert row_of(started).status == Status.REJECTED
    assert "Not today." in response.content.decode()
    assert logged_in_as(visitor) is None


def test_a_logged_in_user_starting_a_login_verifies_instead(
    broker: ScriptedBroker, alice_client: Client, alice: AbstractBaseUser, bob: AbstractBaseUser
) -> None:
    """No switching accounts through the back door: Alice's start at the door is a
    verification of her account; the person's return does not log in Bob."""
    from tests.fixtures_views import start_session

    assert alice_client.get(LOGIN)["Location"] == "/eid/start/"
    started = start_session(broker, alice_client, at=LOGIN, purpose="login")
    row = row_of(started)
    assert (row.purpose, row.user_id) == ("verify", alice.pk)
    broker.will_return(started.request_id)
    alice_client.get(started.success_url())
    assert logged_in_as(alice_client) == str(alice.pk)
    assert row_of(started).status == Status.SUCCESS


def test_an_abort_at_the_door_goes_back_to_the_login_page(
    door: Callable[..., Started], visitor: Client
) -> None:
    started = door(ends="abort")
    response = visitor.get(started.abort_url())
    assert response.status_code == 302
    assert response["Location"] == LOGIN
    assert row_of(started).status == Status.ABORTED
    assert logged_in_as(visitor) is None


def test_a_login_after_eid_purge_still_works(
    linked: AbstractBaseUser,
    identify_at_door: Callable[..., tuple[Started, Any]],
    visitor: Client,
) -> None:
    """The link outlives the identification rows: both modes of ``eid_purge``."""
    quiet = io.StringIO()
    call_command("eid_purge", "--older-than", "0", "--force", "--anonymize", stdout=quiet)
    call_command("eid_purge", "--older-than", "0", "--force", stdout=quiet)
    assert not Identification.objects.exists()
    identify_at_door()
    assert logged_in_as(visitor) == str(linked.pk)


def test_the_app_switch_logs_in_nobody(
    linked: AbstractBaseUser, door: Callable[..., Started], broker: ScriptedBroker
) -> None:
    """Every way an identification finishes without its own return (the return in another
    browser, the frame's status poll, eid_reconcile) leaves a login alone, even on the
    device that started: a relayed session would log its sender in as the person who
    identified. The other browser is told to start again where it started."""
    visitor = Client(headers={"user-agent": USER_AGENT})
    started = door(visitor)
    same_device = {"IPAddress": TEST_CLIENT_IP, "UserAgent": USER_AGENT}
    identified_at_the_broker(broker, started, same_device)
    elsewhere = Client()
    page = elsewhere.get(started.success_url() + "&eid_retry=1")
    assert page.context["outcome"] == "restart"
    assert flow.settle(row_of(started)).outcome == "other_device"
    call_command("eid_reconcile", stdout=io.StringIO())
    assert row_of(started).status == Status.PENDING
    visitor.get(LOGIN)
    assert logged_in_as(elsewhere) is None
    assert logged_in_as(visitor) is None
    # Its own return still logs it in.
    visitor.get(started.success_url())
    assert logged_in_as(visitor) == str(linked.pk)


def test_the_door_is_closed_until_the_backend_is_installed(
    broker: ScriptedBroker, visitor: Client, settings: Any
) -> None:
    """Upgrading opens nothing: without EidBackend no start at the door (each would be a
    billed session that logs nobody in)."""
    settings.AUTHENTICATION_BACKENDS = ["django.contrib.auth.backends.ModelBackend"]
    assert visitor.get(LOGIN).status_code == 503
    assert visitor.post(LOGIN, {"purpose": "login"}).status_code == 503
    assert broker.create_requests == []


def test_a_failed_login_s_result_page_shows_only_the_outcome(
    door: Callable[..., Started], visitor: Client, broker: ScriptedBroker
) -> None:
    """Anyone with a rejected login's result URL sees its words, nothing of the row."""
    started = door()
    broker.will_return(started.request_id, IdentityProvider="DK_MITID")  # level unknown
    visitor.get(started.success_url())
    assert row_of(started).status == Status.REJECTED
    stranger = Client()
    page = stranger.get(f"/eid/result/{started.reference}/")
    assert page.status_code == 200
    assert page.context["identification"] is None
    assert page.context["start_url"] == LOGIN
    assert row_of(started).external_id not in page.content.decode()


def test_a_start_at_the_door_that_fails_at_the_broker_is_stored_once_as_error(
    broker: ScriptedBroker, visitor: Client
) -> None:
    """Written once, after the broker's answer: no user, no request id, the failure."""
    broker.will_fail_create(500)
    response = visitor.post(LOGIN, {"purpose": "login"})
    assert response.status_code == 503  # broker_unreachable: a 5xx of the broker
    (row,) = Identification.objects.all()
    assert (row.status, row.user_id, row.request_id, row.purpose) == (
        Status.ERROR,
        None,
        None,
        "login",
    )
    assert row.completed_at is not None


def test_a_reused_request_id_at_the_door_is_refused(
    broker: ScriptedBroker, visitor: Client, door: Callable[..., Started]
) -> None:
    first = door()
    broker.will_create(first.request_id)
    response = visitor.post(LOGIN, {"purpose": "login"})
    assert response.status_code == 502
    failed = Identification.objects.exclude(pk=first.pk).get()
    assert (failed.status, failed.request_id) == (Status.ERROR, None)
    assert row_of(first).status == Status.PENDING


def test_a_cancelled_sign_up_goes_back_to_signing_up(
    door: Callable[..., Started], visitor: Client
) -> None:
    started = door(purpose="signup", ends="abort")
    response = visitor.get(started.abort_url())
    assert response["Location"] == f"{LOGIN}?purpose=signup"


def test_a_login_in_the_frame(
    linked: AbstractBaseUser, door: Callable[..., Started], broker: ScriptedBroker
) -> None:
    """Iframe display at the door: the page that frames the broker is the visitor's (their
    browser's state), its return in the frame logs the browser in and leaves the frame."""
    visitor = Client()
    started = door(visitor, display="iframe")
    assert Client().get(f"/eid/frame/{started.reference}/").status_code == 302  # not theirs
    broker.will_return(started.request_id)
    response = visitor.get(started.success_url())
    assert response.status_code == 200
    assert "django_eid/frame_exit.html" in [t.name for t in response.templates]
    assert logged_in_as(visitor) == str(linked.pk)


def test_login_providers_narrow_the_door(broker: ScriptedBroker, eid: Callable[..., None]) -> None:
    eid(ALLOWED_PROVIDERS=["NO_BANKID_WEB", "SWE_BANKID", "NO_BUYPASS"])
    eid(LOGIN_PROVIDERS=["NO_BANKID_WEB", "NO_BUYPASS"])
    visitor = Client()
    choices = visitor.get(LOGIN).context["form"].fields["provider"].choices
    assert [value for value, _label in choices] == ["NO_BANKID_WEB", "NO_BUYPASS"]
    refused = visitor.post(LOGIN, {"purpose": "login", "provider": "SWE_BANKID"})
    assert refused.status_code == 400
    assert broker.create_requests == []
    assert visitor.post(LOGIN, {"purpose": "login", "provider": "NO_BUYPASS"}).status_code == 302
    assert broker.sent()["IdentityProvider"] == "NO_BUYPASS"


def test_a_visitor_sees_no_site_text_on_a_result_page(
    door: Callable[..., Started], visitor: Client, broker: ScriptedBroker
) -> None:
    """A receiver's own reason may describe the person: not for whoever has the link."""

    @receiver(eid_signals.identification_verifying, dispatch_uid="door-words")
    def suspended(**kwargs: Any) -> None:
        raise IdentificationRejected("Kari's account is suspended.")

    started = door()
    broker.will_return(started.request_id)
    try:
        visitor.get(started.success_url())
    finally:
        eid_signals.identification_verifying.disconnect(dispatch_uid="door-words")
    page = Client().get(f"/eid/result/{started.reference}/").content.decode()
    assert "suspended" not in page
    assert "Your identification was not accepted." in page


def test_no_account_links_another_way_to_log_in_only_if_there_is_one(
    identify_at_door: Callable[..., tuple[Started, Any]], settings: Any
) -> None:
    _started, response = identify_at_door()
    assert response.context["login_url"] == "/login/"
    settings.LOGIN_URL = "django_eid:login"
    _started, response = identify_at_door(Client())
    assert response.context["login_url"] is None
    assert "Log in another way" not in response.content.decode()
