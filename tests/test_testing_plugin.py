"""The ``eid_broker`` fixture, and the whole app flow end to end against it."""

from __future__ import annotations

import textwrap
from typing import Any
from urllib.parse import urlsplit

import pytest
import requests
from django.core.cache import caches
from django.test import Client
from django.urls import reverse

from django_eid import signals as eid_signals
from django_eid.client import get_client
from django_eid.conf import eid_settings
from django_eid.exceptions import IdentificationRejected
from django_eid.models import Identification
from django_eid.sandbox.broker import record_of
from django_eid.sandbox.fake import forget_tokens
from django_eid.testing import EidBroker
from tests.fixtures_client import SettingsWrapper, eid_settings_with
from tests.fixtures_views import Signals

pytest_plugins = ["pytester"]

Status = Identification.Status


def post_start(client: Client, **data: str) -> Any:
    response = client.post(reverse("django_eid:start"), data)
    assert response.status_code == 302, response.content
    return response


# -- the whole flow ------------------------------------------------------------------------------
@pytest.mark.django_db
def test_success_end_to_end(alice_client: Client, eid_broker: EidBroker, signals: Signals) -> None:
    response = post_start(alice_client)
    session = eid_broker.pending()
    assert response["Location"] == f"https://api.broker.test/login/{session.request_id}/"
    person = eid_broker.persons.NORWEGIAN
    response = alice_client.get(eid_broker.complete(person))
    assert response.status_code == 302
    assert response["Location"] == "/"
    row = Identification.objects.get()
    assert row.status == Status.SUCCESS
    assert row.request_id == session.request_id
    assert (row.first_name, row.middle_name, row.last_name) == ("Kari", "Marie", "Nordmann")
    assert row.name == "Nordmann, Kari Marie"
    assert row.date_of_birth == person.birth_date
    assert row.identity_provider_unique_id == person.identity_provider_unique_id
    assert row.identity_provider == "NO_BANKID_WEB"
    assert row.social_security_number is None  # not requested by default
    # What the broker saw (the record's EnvironmentInfo), not the starting browser's.
    assert (row.ip_address, row.user_agent) == (person.ip_address, person.user_agent)
    assert signals.names == ["identification_started", "identification_succeeded"]
    assert signals.sent[1].kwargs["identification"].pk == row.pk
    assert eid_broker.retrieve_requests == [session.request_id]
    assert eid_broker.status_requests == []  # the browser's own callback needs no status call


@pytest.mark.django_db
def test_what_the_app_sent(alice_client: Client, eid_broker: EidBroker) -> None:
    post_start(alice_client)
    row = Identification.objects.get()
    (body,) = eid_broker.create_requests
    assert body["ExternalReference"] == row.external_id
    assert body["Language"] == "EN"
    assert body["GetSocialSecurityNumber"] is False
    assert body["ReturnUrls"]["Success"].endswith("/success/?externalId=[2]")
    assert body["ReturnUrls"]["Abort"].endswith("/abort/?externalId=[2]")
    # The Error URL is bound to its session by django-eid's external id too.
    assert body["ReturnUrls"]["Error"].endswith("/error/?status=[0]&externalId=[2]")
    assert "iFrame" not in body  # redirect display
    # The starting browser, as a keyed hash, never its address or agent; none at all here: the
    # test client sends no User-Agent, and a device without one is never recognised.
    assert row.device_key == ""
    assert (row.ip_address, row.user_agent) == (None, "")
    assert eid_broker.token_requests == 1
    post_start(alice_client)
    assert eid_broker.token_requests == 1  # the token is cached and reused
    assert [s.status for s in eid_broker.sessions] == ["CREATED", "CREATED"]


@pytest.mark.django_db
def test_the_number_and_a_minor(
    alice_client: Client, eid_broker: EidBroker, settings: SettingsWrapper
) -> None:
    settings.DJANGO_EID = eid_settings_with(GET_SOCIAL_SECURITY_NUMBER=True)
    post_start(alice_client)
    minor = eid_broker.persons.MINOR
    alice_client.get(eid_broker.complete(minor))
    row = Identification.objects.get()
    assert row.social_security_number == minor.national_identity_number
    assert row.date_of_birth == minor.birth_date
    assert row.age is not None
    assert row.age < 18


@pytest.mark.django_db
def test_a_receiver_rejects_a_minor(alice_client: Client, eid_broker: EidBroker) -> None:
    def adults_only(sender: Any, identification: Identification, **kwargs: Any) -> None:
        if (identification.age or 0) < 18:
            raise IdentificationRejected("Adults only.")

    eid_signals.identification_succeeded.connect(adults_only, weak=False)
    try:
        post_start(alice_client)
        response = alice_client.get(eid_broker.complete(eid_broker.persons.MINOR))
    finally:
        eid_signals.identification_succeeded.disconnect(adults_only)
    assert response.status_code == 200
    assert "Adults only." in response.content.decode()
    assert Identification.objects.get().status == Status.REJECTED


@pytest.mark.django_db
def test_overrides_and_d_number(alice_client: Client, eid_broker: EidBroker) -> None:
    post_start(alice_client)
    alice_client.get(eid_broker.complete(eid_broker.persons.D_NUMBER, first_name="Janusz"))
    row = Identification.objects.get()
    assert (row.first_name, row.date_of_birth) == ("Janusz", eid_broker.persons.D_NUMBER.birth_date)


@pytest.mark.django_db
def test_abort_end_to_end(alice_client: Client, eid_broker: EidBroker, signals: Signals) -> None:
    post_start(alice_client)
    response = alice_client.get(eid_broker.abort())
    assert response.status_code == 302
    assert Identification.objects.get().status == Status.ABORTED
    assert signals.names == ["identification_started", "identification_aborted"]


@pytest.mark.django_db
def test_fail_end_to_end(alice_client: Client, eid_broker: EidBroker, signals: Signals) -> None:
    post_start(alice_client)
    session = eid_broker.pending()
    url = eid_broker.fail("LOGIN")
    # The sandbox fills [0], and [2] as in the other return URLs; no broker id in URLs.
    assert "status=LOGIN&externalId=" in url
    assert session.request_id not in url
    response = alice_client.get(url)
    assert response.status_code == 200  # the outcome page, with a way to try again
    assert reverse("django_eid:start") in response.content.decode()
    row = Identification.objects.get()
    assert url.endswith(f"&externalId={row.external_id}")
    assert (row.status, row.error_status, row.error_code) == (Status.ERROR, "LOGIN", "LOGIN")
    assert row.error_message
    assert signals.names == ["identification_started", "identification_failed"]
    assert eid_broker.retrieve_requests == [session.request_id]  # the record confirmed it


@pytest.mark.django_db
@pytest.mark.parametrize("record_status", ["TIMEOUT", "UNKNOWN"])
def test_fail_with_each_published_status(
    alice_client: Client, eid_broker: EidBroker, signals: Signals, record_status: str
) -> None:
    post_start(alice_client)
    session = eid_broker.pending()
    url = eid_broker.fail("TIMEOUT", record_status=record_status)
    assert eid_broker.broker.session(session.request_id).status == record_status  # type: ignore[union-attr]
    assert alice_client.get(url).status_code == 200
    row = Identification.objects.get()
    assert (row.status, row.error_status) == (Status.ERROR, "TIMEOUT")  # the URL's [0]
    assert row.identity_provider == ""  # the record's UNKNOWN is no provider
    assert signals.names == ["identification_started", "identification_failed"]


@pytest.mark.django_db
def test_a_session_invalidated_before_the_app_retrieves_it(
    alice_client: Client, eid_broker: EidBroker, signals: Signals
) -> None:
    post_start(alice_client)
    url = eid_broker.complete()
    eid_broker.invalidate()  # used elsewhere first: the broker serves no identity any more
    assert eid_broker.sessions[0].status == "INVALIDATED"
    alice_client.get(url)
    row = Identification.objects.get()
    assert (row.status, row.error_status, row.name) == (Status.ERROR, "INVALIDATED", "")
    assert signals.names == ["identification_started", "identification_failed"]
    with pytest.raises(LookupError):
        eid_broker.invalidate(request_id="no-such-session")


@pytest.mark.django_db
def test_an_error_url_of_another_session_is_refused(
    alice_client: Client, eid_broker: EidBroker, signals: Signals
) -> None:
    post_start(alice_client)
    post_start(alice_client)
    first, second = eid_broker.sessions
    url = eid_broker.fail("LOGIN", request_id=second.request_id)
    # The first session's Error URL, with the ids the broker filled in for the second.
    first_path = urlsplit(first.return_urls["Error"]).path
    response = alice_client.get(f"{first_path}?{urlsplit(url).query}")
    assert response.status_code == 400
    assert "did not match" in response.content.decode()
    assert [r.status for r in Identification.objects.order_by("pk")] == [Status.PENDING] * 2
    assert eid_broker.retrieve_requests == []
    assert signals.names == ["identification_started", "identification_started"]


@pytest.mark.django_db
@pytest.mark.parametrize("device", ["the one that started", "another one"])
def test_an_app_switch_end_to_end(
    django_user_model: Any, eid_broker: EidBroker, signals: Signals, device: str
) -> None:
    """Identified in the broker's app, back in another browser: the row is settled from the
    status call and the record, and completed only for the device that started."""
    user_agent = "Mozilla/5.0 (Android 14) Browser/1.0"
    starting = Client(HTTP_USER_AGENT=user_agent)  # REMOTE_ADDR 127.0.0.1
    starting.force_login(django_user_model.objects.create_user("kari"))
    post_start(starting)
    session = eid_broker.pending()
    same = device == "the one that started"
    url = eid_broker.complete(
        user_agent=user_agent if same else "BankID/7.1",
        ip_address="127.0.0.1" if same else "203.0.113.9",
    )
    response = Client().get(url + "&eid_retry=1")  # no session: after the interstitial
    assert response.status_code == 200
    assert "Go back to where you started" in response.content.decode()
    assert "Nordmann" not in response.content.decode()
    assert eid_broker.status_requests == [session.request_id]
    assert eid_broker.retrieve_requests == [session.request_id]
    row = Identification.objects.get()
    if same:
        assert (row.status, row.user_agent, row.ip_address) == (
            Status.SUCCESS,
            user_agent,
            "127.0.0.1",
        )
        assert signals.names == ["identification_started", "identification_succeeded"]
    else:
        assert row.status == Status.PENDING
        assert signals.names == ["identification_started"]
        assert starting.get(url).status_code == 302  # the browser that started completes it
        assert Identification.objects.get().status == Status.SUCCESS


@pytest.mark.django_db
def test_iframe_display_sends_the_parent_domain(
    alice_client: Client, eid_broker: EidBroker
) -> None:
    response = alice_client.post(reverse("django_eid:start"), {"display": "iframe"}, follow=True)
    assert response.status_code == 200
    assert response.templates[0].name == "django_eid/iframe.html"
    (body,) = eid_broker.create_requests
    assert body["iFrame"] == {"Domain": "testserver", "WebMessaging": False}
    assert body["domain"] == "testserver"
    assert eid_broker.pending().iframe_domain == "testserver"
    response = alice_client.get(eid_broker.complete())
    assert Identification.objects.get().status == Status.SUCCESS


# -- breaking the broker on purpose ------------------------------------------------------------
@pytest.mark.django_db
def test_create_fails(alice_client: Client, eid_broker: EidBroker) -> None:
    eid_broker.fail_next("create", 503)
    response = alice_client.post(reverse("django_eid:start"))
    assert response.status_code == 503
    assert Identification.objects.get().status == Status.ERROR
    assert eid_broker.sessions == []
    with pytest.raises(LookupError, match="No pending sandbox session"):
        eid_broker.complete()


@pytest.mark.django_db
def test_retrieve_fails_then_recovers(alice_client: Client, eid_broker: EidBroker) -> None:
    post_start(alice_client)
    url = eid_broker.complete()
    eid_broker.fail_next("retrieve", exception=requests.ConnectionError("down"), times=3)
    assert alice_client.get(url).status_code == 503
    assert Identification.objects.get().status == Status.PENDING
    assert alice_client.get(url).status_code == 302  # reloading works once the broker is back
    assert Identification.objects.get().status == Status.SUCCESS


@pytest.mark.django_db
def test_a_revoked_token_is_renewed_once(alice_client: Client, eid_broker: EidBroker) -> None:
    post_start(alice_client)
    eid_broker.revoke_tokens()
    alice_client.get(eid_broker.complete())
    assert Identification.objects.get().status == Status.SUCCESS
    assert eid_broker.token_requests == 2


@pytest.mark.django_db
def test_token_failure_bodies(alice_client: Client, eid_broker: EidBroker) -> None:
    eid_broker.fail_next("token", 400, body={"error": "invalid_scope"})
    assert alice_client.post(reverse("django_eid:start")).status_code == 502
    eid_broker.fail_next("token", 500, body="<html>oops</html>")
    assert alice_client.post(reverse("django_eid:start")).status_code == 503
    with pytest.raises(ValueError, match="unknown endpoint"):
        eid_broker.fail_next("nope", 500)  # type: ignore[arg-type]


@pytest.mark.django_db
def test_an_outage_lasts_until_healed(alice_client: Client, eid_broker: EidBroker) -> None:
    eid_broker.fail_next("create", 503, headers={"Retry-After": "120"}, times=None)
    for _ in range(3):
        assert alice_client.post(reverse("django_eid:start")).status_code == 503
    assert len(eid_broker.create_requests) == 3
    eid_broker.heal()
    assert alice_client.post(reverse("django_eid:start")).status_code == 302
    assert len(eid_broker.sessions) == 1


@pytest.mark.django_db
def test_injected_answers_queue_then_the_lasting_one(eid_broker: EidBroker) -> None:
    client = get_client()
    eid_broker.inject("token", 500, body=b"raw", headers={"X-Injected": "1"}, times=None)
    eid_broker.inject("token", 200, body={"access_token": "t1", "expires_in": 60}, times=1)
    assert client.get_token().access_token == "t1"  # the counted one first
    forget_tokens()
    with pytest.raises(Exception, match="500"):
        get_client().get_token()  # then the lasting one, raw body and all
    eid_broker.heal("token")
    forget_tokens()
    assert get_client().get_token().access_token == eid_broker.issued_tokens[-1]


@pytest.mark.django_db
def test_an_exception_class_is_raised_fresh_each_call(
    alice_client: Client, eid_broker: EidBroker
) -> None:
    # A connect timeout is retried (the request never left): three attempts, three raises.
    eid_broker.inject("create", exception=requests.ConnectTimeout, times=3)
    assert alice_client.post(reverse("django_eid:start")).status_code == 503
    assert len(eid_broker.create_requests) == 3
    assert alice_client.post(reverse("django_eid:start")).status_code == 302


@pytest.mark.django_db
def test_a_hostile_record_for_one_session(alice_client: Client, eid_broker: EidBroker) -> None:
    post_start(alice_client)
    success_url = eid_broker.complete()
    request_id = eid_broker.sessions[-1].request_id
    record = record_of(eid_broker.persons.NORWEGIAN, request_id)
    eid_broker.inject("retrieve", body={**record, "RequestId": "another"}, request_id=request_id)
    assert alice_client.get(success_url).status_code == 502
    assert Identification.objects.get().status == Status.PENDING
    eid_broker.heal(request_id=request_id)
    assert alice_client.get(success_url).status_code == 302
    assert Identification.objects.get().status == Status.SUCCESS


def test_injections_are_checked(eid_broker: EidBroker) -> None:
    for endpoint in ("create", "token"):
        with pytest.raises(ValueError, match="request_id goes with the retrieve and status"):
            eid_broker.inject(endpoint, request_id="r1")  # type: ignore[arg-type]
    for endpoint in ("retrieve", "status"):
        eid_broker.inject(endpoint, request_id="r1")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="times is a positive number"):
        eid_broker.inject("token", times=0)


def test_request_ids_login_url_and_tokens_can_be_given(settings: SettingsWrapper) -> None:
    ids = iter(["rid-1", "rid-2"])
    with EidBroker.from_settings(
        login_url=lambda request_id: f"https://id.test/{request_id}",
        request_ids=lambda: next(ids),
        tokens=lambda: "known-token",
    ) as broker:
        urls = {k: "https://site.test/r/?requestId=[1]" for k in ("Success", "Abort", "Error")}
        created = get_client().create_session(return_urls=_urls(urls), external_reference="x")
        assert (created.request_id, created.url) == ("rid-1", "https://id.test/rid-1")
        assert broker.issued_tokens == ["known-token"]


def _urls(urls: dict[str, str]) -> Any:
    from django_eid.client import ReturnUrls

    return ReturnUrls(success=urls["Success"], abort=urls["Abort"], error=urls["Error"])


# -- the fixture itself ------------------------------------------------------------------------
def test_the_fixture_clears_the_shared_token(eid_broker: EidBroker) -> None:
    client = get_client()
    client.get_token()
    cache = caches[eid_settings.TOKEN_CACHE]
    assert cache.get(client.tokens.key) is not None
    # A lock and a failure left by a worker of an earlier test go too: the failure would
    # otherwise be raised to this test's first token request.
    cache.set(client.tokens.lock_key, "another-worker", 30)
    cache.set(client.tokens.failed_key, {"at": 0.0, "error": "broker down"}, 30)
    forget_tokens()
    # forget_tokens() finds the entries itself; they must be the client's.
    keys = (client.tokens.key, client.tokens.lock_key, client.tokens.failed_key)
    assert cache.get_many(keys) == {}
    assert get_client() is not client


def test_the_fixture_follows_the_settings(settings: SettingsWrapper) -> None:
    settings.DJANGO_EID = eid_settings_with(BASE_URL="https://other.test/api")
    broker = EidBroker.from_settings()
    assert broker.session_url == "https://other.test/api/identification/session"
    assert broker.token_url == "https://auth.broker.test/oauth/connect/token"


@pytest.mark.own_process
def test_the_plugin_imports_without_django() -> None:
    import subprocess
    import sys

    code = (
        "import sys, django_eid.testing as t\n"
        "assert 'django.conf' not in sys.modules, 'django imported'\n"
        "assert 'responses' not in sys.modules, 'responses imported'\n"
        "assert t.EidBroker.__name__ == 'EidBroker'\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)  # noqa: S603


SITE_TEST = """
    from django.urls import reverse
    from django_eid import signals as eid_signals

    verified = []
    eid_signals.identification_succeeded.connect(
        lambda identification, **kw: verified.append(identification.last_name), weak=False
    )

    def test_my_receiver(client, django_user_model, eid_broker):
        client.force_login(django_user_model.objects.create_user("kari"))
        client.post(reverse("django_eid:start"))
        client.get(eid_broker.complete(eid_broker.persons.SWEDISH))
        assert verified == ["Lindqvist"]
"""

SITE_SETTINGS = """
    SECRET_KEY = "site"
    INSTALLED_APPS = ["django.contrib.auth", "django.contrib.contenttypes",
                      "django.contrib.sessions", "django_eid"]
    MIDDLEWARE = ["django.contrib.sessions.middleware.SessionMiddleware",
                  "django.contrib.auth.middleware.AuthenticationMiddleware"]
    ROOT_URLCONF = "site_urls"
    DATABASES = {"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": ":memory:"}}
    TEMPLATES = [{"BACKEND": "django.template.backends.django.DjangoTemplates", "APP_DIRS": True}]
    USE_TZ = True
    DJANGO_EID = {"CLIENT_ID": "site", "CLIENT_SECRET": "site-secret",
                  "BASE_URL": "https://broker.site.test", "AUTH_URL": "https://auth.site.test"}
"""


@pytest.mark.own_process
def test_a_site_gets_the_fixture_from_the_entry_point(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        site_settings=textwrap.dedent(SITE_SETTINGS),
        site_urls=(
            "from django.urls import include, path\n"
            'urlpatterns = [path("eid/", include("django_eid.urls"))]\n'
        ),
        test_site=textwrap.dedent(SITE_TEST),
    )
    pytester.makeini("[pytest]\nDJANGO_SETTINGS_MODULE = site_settings\npythonpath = .\n")
    # Only entry-point plugins: no conftest names the fixture.
    # --ds: an outer DJANGO_SETTINGS_MODULE would otherwise win over the ini file.
    result = pytester.runpytest_subprocess("--ds=site_settings", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)


@pytest.mark.django_db
def test_a_login_and_a_sign_up_at_the_door(eid_broker: EidBroker, settings: Any) -> None:
    """The fixture serves starts at the door as it serves verifications: a site's test of
    its eID login and sign-up reads as its test of a verification."""
    from django.contrib.auth import SESSION_KEY, get_user_model

    settings.DJANGO_EID = {**settings.DJANGO_EID, "SIGNUP": "auto"}
    visitor = Client()
    visitor.post("/eid/login/", {"purpose": "signup"})
    visitor.get(eid_broker.complete(eid_broker.persons.NORWEGIAN))
    (user,) = get_user_model().objects.all()
    assert visitor.session[SESSION_KEY] == str(user.pk)
    again = Client()
    again.post("/eid/login/", {"purpose": "login"})
    again.get(eid_broker.complete(eid_broker.persons.NORWEGIAN))
    assert again.session[SESSION_KEY] == str(user.pk)
