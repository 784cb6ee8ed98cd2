"""Safeguards around the views that a site's own configuration could otherwise undo.

- ``Referrer-Policy: same-origin`` on every django-eid page, whatever the site's policy or
  base template: callback URLs carry the reference and the broker's ids.
- ``SUCCESS_URL``/``ABORT_URL``/``ERROR_URL`` that do not resolve: system check E018, and
  the user goes to ``/`` instead of a 500 after the identity was stored.
- Missing session/authentication middleware: system check E019, and no billed session.
- The admin with the site's own user model, and with a number under a removed key.
"""

from __future__ import annotations

from typing import Any

import pytest
from cryptography.fernet import Fernet
from django.contrib.admin import site
from django.contrib.auth.models import AnonymousUser
from django.core.exceptions import FieldDoesNotExist
from django.db.models import Q
from django.test import Client, RequestFactory
from django.urls import reverse

from django_eid import admin as eid_admin
from django_eid import checks, flow
from django_eid.models import Identification
from django_eid.sandbox.wire import fill_placeholders
from django_eid.testing import EidBroker
from django_eid.views import StartView
from tests.fixtures_client import SettingsWrapper, eid_settings_with
from tests.fixtures_views import analyze_identifications

pytestmark = pytest.mark.django_db

Status = Identification.Status


@pytest.fixture
def user_client(client: Client, django_user_model: Any) -> Client:
    client.force_login(django_user_model.objects.create_user("kari"))
    return client


def start(client: Client, **data: str) -> Any:
    response = client.post(reverse("django_eid:start"), data)
    assert response.status_code == 302, response.content
    return response


# -- Referrer-Policy -------------------------------------------------------------------------
def test_every_page_sends_a_same_origin_referrer_policy_even_if_the_site_says_otherwise(
    user_client: Client, eid_broker: EidBroker, settings: SettingsWrapper
) -> None:
    settings.SECURE_REFERRER_POLICY = "unsafe-url"  # the site's own, looser policy
    pages = [user_client.get(reverse("django_eid:start"))]
    start(user_client)
    pages.append(user_client.get(eid_broker.fail("TIMEOUT")))  # error page at the callback URL
    row = Identification.objects.get()
    pages.append(user_client.get(reverse("django_eid:result", args=[row.reference])))
    start(user_client)
    pages.append(user_client.get(eid_broker.complete()))  # the redirect after success
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
    key: str, settings: SettingsWrapper
) -> None:
    settings.DJANGO_EID = eid_settings_with(**{key: "acount"})  # a typo of a URL name
    (message,) = checks.check_destinations()
    assert message.id == "django_eid.E018"
    assert key in message.msg


@pytest.mark.parametrize("value", ["/account/", "https://example.com/done", "django_eid:start"])
def test_paths_urls_and_url_names_pass(value: str, settings: SettingsWrapper) -> None:
    settings.DJANGO_EID = eid_settings_with(SUCCESS_URL=value, ABORT_URL=value, ERROR_URL=value)
    assert checks.check_destinations() == []


def test_a_success_url_that_does_not_resolve_sends_the_user_home_not_to_a_500(
    user_client: Client, eid_broker: EidBroker, settings: SettingsWrapper, caplog: Any
) -> None:
    settings.DJANGO_EID = eid_settings_with(SUCCESS_URL="acount")
    start(user_client)
    success_url = eid_broker.complete()
    for _ in range(2):  # the callback, then a reload of it
        response = user_client.get(success_url)
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
    subclass = "tests.test_view_safeguards.OwnSessionMiddleware"
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


# -- admin -----------------------------------------------------------------------------------
def test_admin_search_uses_the_user_models_own_fields(monkeypatch: pytest.MonkeyPatch) -> None:
    asked: list[Q] = []

    class Accounts:
        @staticmethod
        def filter(match: Q) -> Any:
            asked.append(match)
            return Identification.objects.none().values_list("pk", flat=True)

    class Meta:
        @staticmethod
        def get_field(name: str) -> object:
            if name != "customer_number":
                raise FieldDoesNotExist(name)
            return object()

    class BankUser:  # USERNAME_FIELD is a customer number, there is no e-mail field
        USERNAME_FIELD = "customer_number"
        _meta = Meta()
        _default_manager = Accounts()

        @classmethod
        def get_email_field_name(cls) -> str:
            return "email"

    monkeypatch.setattr(eid_admin, "get_user_model", lambda: BankUser)
    model_admin = eid_admin.IdentificationAdmin(Identification, site)
    queryset, _ = model_admin.get_search_results(
        RequestFactory().get("/"), Identification.objects.all(), "kari@example.com"
    )
    assert list(queryset) == []
    assert asked == [Q(customer_number="kari@example.com")]


def test_admin_search_finds_by_username_and_email(admin_client: Client, admin_user: Any) -> None:
    row = Identification.objects.create(
        user=admin_user, status=Status.SUCCESS, name="Nordmann, Kari"
    )
    url = reverse("admin:django_eid_identification_changelist")
    for query in (admin_user.username, admin_user.email, row.reference):
        response = admin_client.get(url, {"q": query})
        assert response.status_code == 200
        assert response.context["cl"].result_count == 1
    # Exact values on indexed columns only: a name is no search (it would read every row).
    for query in ("nobody", "Nordmann", admin_user.username[:-1]):
        assert admin_client.get(url, {"q": query}).context["cl"].result_count == 0


def test_admin_list_and_detail_survive_a_number_under_a_removed_key(
    admin_client: Client, admin_user: Any, settings: SettingsWrapper
) -> None:
    old, new = Fernet.generate_key().decode(), Fernet.generate_key().decode()
    settings.DJANGO_EID = eid_settings_with(ENCRYPTION_KEYS=[old])
    row = Identification.objects.create(
        user=admin_user, status=Status.SUCCESS, social_security_number="31127112345"
    )
    settings.DJANGO_EID = eid_settings_with(ENCRYPTION_KEYS=[new])  # removed too early
    analyze_identifications()
    listing = admin_client.get(reverse("admin:django_eid_identification_changelist"))
    assert listing.status_code == 200
    assert listing.context["cl"].result_count == 1
    detail = admin_client.get(reverse("admin:django_eid_identification_change", args=[row.pk]))
    assert detail.status_code == 200
    assert "cannot be decrypted" in detail.content.decode()


# -- what the user is told ---------------------------------------------------------------------
def test_a_refusal_of_the_app_reads_in_the_language_of_whoever_opens_the_result(
    user_client: Client, eid_broker: EidBroker, settings: SettingsWrapper, django_user_model: Any
) -> None:
    settings.DJANGO_EID = eid_settings_with(ONE_ACCOUNT_PER_PERSON=True)
    start(user_client)
    user_client.get(eid_broker.complete())  # Kari, on her own account
    other = Client()
    other.force_login(django_user_model.objects.create_user("someone-else"))
    start(other)
    in_norwegian = other.get(eid_broker.complete(), follow=True, HTTP_ACCEPT_LANGUAGE="nb")
    row = Identification.objects.get(user__username="someone-else")
    assert (row.status, row.error_code) == (Status.REJECTED, "ONE_ACCOUNT_PER_PERSON")
    result = reverse("django_eid:result", args=[row.reference])
    in_english = other.get(result, HTTP_ACCEPT_LANGUAGE="en").content.decode()
    assert "This person is already verified on another account." in in_english
    assert "This person is already verified" not in in_norwegian.content.decode()


def test_a_receivers_reason_is_shown_as_it_was_given(
    user_client: Client, eid_broker: EidBroker
) -> None:
    from django_eid.exceptions import IdentificationRejected
    from django_eid.signals import identification_succeeded

    def refuse(**kwargs: Any) -> None:
        raise IdentificationRejected("Not a customer of this branch.")

    identification_succeeded.connect(refuse, weak=False)
    try:
        start(user_client)
        page = user_client.get(eid_broker.complete(), follow=True)
    finally:
        identification_succeeded.disconnect(refuse)
    assert "Not a customer of this branch." in page.content.decode()


def test_an_abort_that_lost_the_race_does_not_say_you_cancelled(
    user_client: Client, eid_broker: EidBroker
) -> None:
    start(user_client)
    stale = Identification.objects.get()  # read by the abort, before the success lands
    request_id = stale.request_id
    assert request_id is not None
    assert user_client.get(eid_broker.complete()).status_code == 302
    assert flow.abort(stale) is False
    assert stale.status == Status.SUCCESS  # the abort changed nothing
    # The abort's callback arriving after the success says nothing about cancelling.
    abort = fill_placeholders(
        eid_broker.create_requests[-1]["ReturnUrls"]["Abort"],
        {"[1]": request_id, "[2]": stale.external_id},
    )
    page = user_client.get(abort, follow=True)
    assert "You cancelled the identification." not in page.content.decode()
    assert Identification.objects.get().status == Status.SUCCESS


def test_an_abort_that_won_says_so(user_client: Client, eid_broker: EidBroker) -> None:
    start(user_client)
    page = user_client.get(eid_broker.abort(), follow=True)
    assert "You cancelled the identification." in page.content.decode()
    assert Identification.objects.get().status == Status.ABORTED
