"""The page of the user's eID links (``django_eid:links``): it lists the user's own links,
removes one on a POST (never the last way to log in, never another user's), and a second
account that verifies a person linked to the first is told it got no link."""

from __future__ import annotations

import datetime
from collections.abc import Callable
from typing import Any

import pytest
from django.contrib.auth.models import AbstractBaseUser
from django.contrib.messages import get_messages
from django.test import Client
from django.utils import timezone, translation
from django.utils.formats import date_format
from django.utils.html import escape

from django_eid import outcomes
from django_eid.models import Identification, LinkedIdentity
from tests.api.conftest import Api, api_start
from tests.fixtures_broker import ScriptedBroker
from tests.fixtures_views import Started, link, logged_in

pytestmark = pytest.mark.django_db

PAGE = "/eid/links/"
REMOVED = "The eID link was removed."


def passwordless(user: AbstractBaseUser) -> Client:
    """``user``'s browser, ``user`` with no usable password (logged in afterwards: changing
    the password ends the sessions before)."""
    user.set_unusable_password()
    user.save()
    return logged_in(user)


def kept() -> set[int]:
    return set(LinkedIdentity.objects.values_list("pk", flat=True))


def messages_of(response: Any) -> list[str]:
    return [str(message) for message in get_messages(response.wsgi_request)]


# -- the list ----------------------------------------------------------------------------------
def test_the_page_lists_the_user_s_own_links(
    alice_client: Client, alice: AbstractBaseUser, bob: AbstractBaseUser
) -> None:
    mine = link(alice), link(alice, "SWE_BANKID", "se-bankid")
    bobs = link(bob, "FI_TUPAS", "fi-tupas")
    response = alice_client.get(PAGE)
    assert response.status_code == 200
    assert list(response.context["links"]) == list(mine)
    page = response.content.decode()
    for shown in ("NO_BANKID_WEB", "no-bankid", "SWE_BANKID", "se-bankid"):
        assert shown in page
    for own in mine:
        assert f'name="link" value="{own.pk}"' in page
    assert "FI_TUPAS" not in page
    assert f'value="{bobs.pk}"' not in page
    # The key names the person: never on a page.
    assert not any(found.key in page for found in (*mine, bobs))
    assert "no-store" in response["Cache-Control"]
    assert response["X-Frame-Options"] == "DENY"


def test_dates_are_localized_and_never_used_says_so(alice: AbstractBaseUser) -> None:
    used = timezone.now() - datetime.timedelta(days=3)
    used_link = link(alice, last_used_at=used)
    link(alice, "SWE_BANKID", "se-bankid")
    page = logged_in(alice).get(PAGE, headers={"accept-language": "de"}).content.decode()
    with translation.override("de"):
        shown = date_format(timezone.localtime(used), "DATETIME_FORMAT")
        linked = date_format(timezone.localtime(used_link.linked_at), "DATETIME_FORMAT")
    assert shown in page
    assert linked in page
    assert "Never" in page


def test_no_links(alice_client: Client) -> None:
    response = alice_client.get(PAGE)
    assert response.status_code == 200
    assert "No electronic ID is linked to your account." in response.content.decode()


def test_nobody_logged_in_is_sent_to_log_in(client: Client, alice: AbstractBaseUser) -> None:
    mine = link(alice)
    for response in (client.get(PAGE), client.post(PAGE, {"link": mine.pk})):
        assert response.status_code == 302
        assert response["Location"] == f"/login/?next={PAGE}"
    assert kept() == {mine.pk}


# -- removing ----------------------------------------------------------------------------------
def test_removing_one_s_own_link(alice_client: Client, alice: AbstractBaseUser) -> None:
    """The only link of an account with a password: it can still log in."""
    assert alice.has_usable_password()
    mine = link(alice)
    response = alice_client.post(PAGE, {"link": mine.pk})
    assert (response.status_code, response["Location"]) == (303, PAGE)
    assert kept() == set()
    page = alice_client.get(PAGE)
    assert messages_of(page) == [REMOVED]
    assert REMOVED in page.content.decode()


def test_another_user_s_link_is_not_found_and_stays(
    alice_client: Client, alice: AbstractBaseUser, bob: AbstractBaseUser
) -> None:
    mine, bobs = link(alice), link(bob)
    response = alice_client.post(PAGE, {"link": bobs.pk})
    assert response.status_code == 404
    assert str(outcomes.LINK_NOT_FOUND.message) in response.content.decode()
    assert list(response.context["links"]) == [mine]  # the page again
    assert kept() == {mine.pk, bobs.pk}


def test_a_malformed_link_is_not_found(alice_client: Client, alice: AbstractBaseUser) -> None:
    """Strictly ASCII digits: ``int()`` would read all of these as the link's id."""
    mine = link(alice)
    pk = str(mine.pk)
    arabic = pk.translate(str.maketrans("0123456789", "٠١٢٣٤٥٦٧٨٩"))
    for value in (f" {pk}", f"{pk}\n", f"+{pk}", arabic, "", "abc", "-1", "1.5", "9" * 40):
        response = alice_client.post(PAGE, {"link": value})
        assert response.status_code == 404, value
        assert str(outcomes.LINK_NOT_FOUND.message) in response.content.decode()
    assert alice_client.post(PAGE, {}).status_code == 404
    assert kept() == {mine.pk}


def test_the_last_way_to_log_in_is_kept(alice: AbstractBaseUser) -> None:
    browser = passwordless(alice)
    only = link(alice)
    response = browser.post(PAGE, {"link": only.pk})
    assert response.status_code == 409
    assert str(outcomes.LAST_LOGIN_METHOD.message) in response.content.decode()
    assert list(response.context["links"]) == [only]
    assert messages_of(response) == []
    assert kept() == {only.pk}


def test_a_link_goes_when_the_user_has_another(alice: AbstractBaseUser) -> None:
    browser = passwordless(alice)
    first, second = link(alice), link(alice, "SWE_BANKID", "se-bankid")
    assert browser.post(PAGE, {"link": first.pk}).status_code == 303
    assert kept() == {second.pk}
    assert browser.post(PAGE, {"link": second.pk}).status_code == 409
    assert kept() == {second.pk}


def test_a_get_removes_nothing(alice_client: Client, alice: AbstractBaseUser) -> None:
    mine = link(alice)
    assert alice_client.get(PAGE, {"link": mine.pk}).status_code == 200
    assert kept() == {mine.pk}


def test_the_post_needs_the_csrf_token(alice: AbstractBaseUser) -> None:
    mine = link(alice)
    browser = Client(enforce_csrf_checks=True)
    browser.force_login(alice)
    assert browser.get(PAGE).status_code == 200
    assert browser.post(PAGE, {"link": mine.pk}).status_code == 403
    assert kept() == {mine.pk}
    token = browser.cookies["csrftoken"].value
    assert browser.post(PAGE, {"link": mine.pk, "csrfmiddlewaretoken": token}).status_code == 303
    assert kept() == set()


def test_without_the_messages_framework_the_removal_still_goes(
    alice: AbstractBaseUser, settings: Any
) -> None:
    settings.INSTALLED_APPS = [a for a in settings.INSTALLED_APPS if a != "django.contrib.messages"]
    settings.MIDDLEWARE = [m for m in settings.MIDDLEWARE if "messages" not in m]
    mine = link(alice)
    response = logged_in(alice).post(PAGE, {"link": mine.pk})
    assert (response.status_code, response["Location"]) == (303, PAGE)
    assert kept() == set()


# -- a person linked to another account --------------------------------------------------------
def test_a_second_account_verifying_a_linked_person_is_told_it_got_no_link(
    broker_api: str,
    start: Callable[..., Started],
    alice: AbstractBaseUser,
    alice_client: Client,
    bob_client: Client,
) -> None:
    """Every API's return view (OpenID Connect's one callback among them)."""
    warning = str(outcomes.LINKED_ELSEWHERE)
    first = start(ends="success")
    response = alice_client.get(first.success_url())
    assert first.refresh().status == Identification.Status.SUCCESS
    assert messages_of(response) == []
    (alices,) = LinkedIdentity.objects.all()
    assert alices.user_id == alice.pk
    # The same person, from bob's account: verified as today (one account per person is
    # off), but not linked.
    second = start(client=bob_client, ends="success")
    response = bob_client.get(second.success_url())
    assert response.status_code == 302
    assert second.refresh().status == Identification.Status.SUCCESS
    assert messages_of(response) == [warning]
    assert list(LinkedIdentity.objects.all()) == [alices]
    assert escape(warning) in bob_client.get(PAGE).content.decode()
    # Alice again: hers already.
    again = start(ends="success")
    assert messages_of(alice_client.get(again.success_url())) == []


def test_the_warning_after_an_error_return_whose_record_says_success(
    start: Callable[..., Started], alice_client: Client, bob_client: Client
) -> None:
    alice_client.get(start(ends="success").success_url())
    second = start(client=bob_client, ends="success")
    response = bob_client.get(second.error_url(p1=second.request_id))
    assert second.refresh().status == Identification.Status.SUCCESS
    assert messages_of(response) == [str(outcomes.LINKED_ELSEWHERE)]


def test_no_warning_for_an_identification_of_the_json_api(
    start: Callable[..., Started],
    broker: ScriptedBroker,
    alice_client: Client,
    bob: AbstractBaseUser,
) -> None:
    """Its front end tells the user (the HTML pages' messages are not its)."""
    alice_client.get(start(ends="success").success_url())
    bob_browser = logged_in(bob)
    started = api_start(Api(bob_browser), broker)
    broker.complete(request_id=started.request_id)
    response = bob_browser.get(started.success_url())
    assert started.refresh().status == Identification.Status.SUCCESS
    assert messages_of(response) == []
