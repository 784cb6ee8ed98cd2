"""The views' safeguards (``django_eid/views.py``) that a site's own configuration could
otherwise undo, and what the views tell the user.

- ``Referrer-Policy: same-origin`` on every django-eid page, whatever the site's policy or
  base template: callback URLs carry the reference and the broker's ids.
- ``SUCCESS_URL``/``ABORT_URL``/``ERROR_URL`` that do not resolve: system check E018, and
  the user goes to ``/`` instead of a 500 after the identity was stored.
- Missing session/authentication middleware: system check E019, and no billed session.
- What the user is told: the app's refusal in the reader's language, a receiver's reason as
  given, and no "you cancelled" for an abort that lost the race to a success.

(The admin with the site's own user model: ``tests/admin/test_admin.py``; with a number
under a removed key: ``tests/models/test_lost_key.py``.)
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from django.contrib.auth.models import AnonymousUser
from django.test import Client, RequestFactory
from django.urls import reverse

from django_eid import checks, flow
from django_eid.models import Identification
from django_eid.sandbox.wire import fill_placeholders
from django_eid.testing import EidBroker
from django_eid.views import StartView
from tests.fixtures_client import SettingsWrapper

pytestmark = pytest.mark.django_db

Status = Identification.Status


def post_start(client: Client, **data: str) -> Any:
    response = client.post(reverse("django_eid:start"), data)
    assert response.status_code == 302, response.content
    return response


# -- Referrer-Policy -------------------------------------------------------------------------
def test_every_page_sends_a_same_origin_referrer_policy_even_if_the_site_says_otherwise(
    alice_client: Client, eid_broker: EidBroker, settings: SettingsWrapper
) -> None:
    settings.SECURE_REFERRER_POLICY = "unsafe-url"  # the site's own, looser policy
    pages = [alice_client.get(reverse("django_eid:start"))]
    post_start(alice_client)
    pages.append(alice_client.get(eid_broker.fail("TIMEOUT")))  # error page at the callback URL
    row = Identification.objects.get()
    pages.append(alice_client.get(reverse("django_eid:result", args=[row.reference])))
    post_start(alice_client)
    pages.append(alice_client.get(eid_broker.complete()))  # the redirect after success
    assert [p.status_code for p in pages] == [200, 200, 200, 302]
    assert [p["Referrer-Policy"] for p in pages] == ["same-origin"] * 4


def test_other_pages_of_the_site_keep_their_own_policy(
    client: Client, settings: SettingsWrapper
) -> None:
    settings.SECURE_REFERRER_POLICY = "unsafe-url"
    assert client.get("/admin/login/")["Referrer-Policy"] == "unsafe-url"


# -- destinations: E018 ------------------------------------------------------------------------
@pytest.mark.parametrize("key", ["SUCCESS_URL", "ABORT_URL", "ERROR_URL"])
def test_a_destination_that_does_not_resolve_is_error_e018(
    key: str, eid: Callable[..., None]
) -> None:
    eid(**{key: "acount"})  # a typo of a URL name
    (message,) = checks.check_destinations()
    assert message.id == "django_eid.E018"
    assert key in message.msg


@pytest.mark.parametrize("value", ["/account/", "https://example.com/done", "django_eid:start"])
def test_paths_urls_and_url_names_pass(value: str, eid: Callable[..., None]) -> None:
    eid(SUCCESS_URL=value, ABORT_URL=value, ERROR_URL=value)
    assert checks.check_destinations() == []


def test_a_success_url_that_does_not_resolve_sends_the_user_home_not_to_a_500(
    alice_client: Client, eid_broker: EidBroker, eid: Callable[..., None], caplog: Any
) -> None:
    eid(SUCCESS_URL="acount")
    post_start(alice_client)
    success_url = eid_broker.complete()
    for _ in range(2):  # the callback, then a reload of it
        response = alice_client.get(success_url)
        assert (response.status_code, response["Location"]) == (302, "/")
    assert Identification.objects.get().status == Status.SUCCESS
    assert "E018" in caplog.text


# -- middleware: E019 --------------------------------------------------------------------------
SESSION = "django.contrib.sessions.middleware.SessionMiddleware"
AUTH = "django.contrib.auth.middleware.AuthenticationMiddleware"


def test_the_test_settings_have_the_middleware() -> None:
    assert checks.check_middleware() == []


@pytest.mark.parametrize("missing", [SESSION, AUTH])
def test_missing_middleware_is_error_e019(missing: str, settings: SettingsWrapper) -> None:
    settings.MIDDLEWARE = [m for m in settings.MIDDLEWARE if m != missing]
    (message,) = checks.check_middleware()
    assert message.id == "django_eid.E019"
    assert missing in message.msg


def test_a_subclass_of_the_middleware_counts(settings: SettingsWrapper) -> None:
    subclass = "tests.test_views.OwnSessionMiddleware"
    settings.MIDDLEWARE = [subclass if m == SESSION else m for m in settings.MIDDLEWARE]
    assert checks.check_middleware() == []


from django.contrib.sessions.middleware import SessionMiddleware  # noqa: E402


class OwnSessionMiddleware(SessionMiddleware):
    """A site's own session middleware (referenced by dotted path above)."""


def test_without_a_session_the_start_refuses_before_the_broker_is_called(
    eid_broker: EidBroker, django_user_model: Any
) -> None:
    request = RequestFactory().post(reverse("django_eid:start"), {})
    request.user = django_user_model.objects.create_user("kari")  # e.g. token authentication
    response = StartView.as_view()(request)
    assert response.status_code == 503
    assert eid_broker.create_requests == []
    assert not Identification.objects.exists()


def test_an_anonymous_request_without_a_session_goes_to_login() -> None:
    request = RequestFactory().post(reverse("django_eid:start"), {})
    request.user = AnonymousUser()
    assert StartView.as_view()(request).status_code == 302


# -- what the user is told ---------------------------------------------------------------------
def test_a_refusal_of_the_app_reads_in_the_language_of_whoever_opens_the_result(
    alice_client: Client,
    eid_broker: EidBroker,
    eid: Callable[..., None],
    django_user_model: Any,
) -> None:
    eid(ONE_ACCOUNT_PER_PERSON=True)
    post_start(alice_client)
    alice_client.get(eid_broker.complete())  # Kari, on her own account
    other = Client()
    other.force_login(django_user_model.objects.create_user("someone-else"))
    post_start(other)
    in_norwegian = other.get(eid_broker.complete(), follow=True, HTTP_ACCEPT_LANGUAGE="nb")
    row = Identification.objects.get(user__username="someone-else")
    assert (row.status, row.error_code) == (Status.REJECTED, "ONE_ACCOUNT_PER_PERSON")
    result = reverse("django_eid:result", args=[row.reference])
    in_english = other.get(result, HTTP_ACCEPT_LANGUAGE="en").content.decode()
    assert "This person is already verified on another account." in in_english
    assert "This person is already verified" not in in_norwegian.content.decode()


def test_a_receivers_reason_is_shown_as_it_was_given(
    alice_client: Client, eid_broker: EidBroker
) -> None:
    from django_eid.exceptions import IdentificationRejected
    from django_eid.signals import identification_succeeded

    def refuse(**kwargs: Any) -> None:
        raise IdentificationRejected("Not a customer of this branch.")

    identification_succeeded.connect(refuse, weak=False)
    try:
        post_start(alice_client)
        page = alice_client.get(eid_broker.complete(), follow=True)
    finally:
        identification_succeeded.disconnect(refuse)
    assert "Not a customer of this branch." in page.content.decode()


def test_an_abort_that_lost_the_race_does_not_say_you_cancelled(
    alice_client: Client, eid_broker: EidBroker
) -> None:
    post_start(alice_client)
    stale = Identification.objects.get()  # read by the abort, before the success lands
    request_id = stale.request_id
    assert request_id is not None
    assert alice_client.get(eid_broker.complete()).status_code == 302
    assert flow.abort(stale) is False
    assert stale.status == Status.SUCCESS  # the abort changed nothing
    # The abort's callback arriving after the success says nothing about cancelling.
    abort = fill_placeholders(
        eid_broker.create_requests[-1]["ReturnUrls"]["Abort"],
        {"[1]": request_id, "[2]": stale.external_id},
    )
    page = alice_client.get(abort, follow=True)
    assert "You cancelled the identification." not in page.content.decode()
    assert Identification.objects.get().status == Status.SUCCESS


def test_an_abort_that_won_says_so(alice_client: Client, eid_broker: EidBroker) -> None:
    post_start(alice_client)
    page = alice_client.get(eid_broker.abort(), follow=True)
    assert "You cancelled the identification." in page.content.decode()
    assert Identification.objects.get().status == Status.ABORTED
