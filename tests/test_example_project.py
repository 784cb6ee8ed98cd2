"""The example project's own pages, receiver, command and settings (no browser needed)."""

from __future__ import annotations

import datetime
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
import time_machine
from django.contrib.auth.models import User
from django.core.management import call_command
from django.test import Client
from django.utils import timezone

from django_eid.exceptions import IdentificationRejected
from django_eid.models import Identification
from django_eid.signals import identification_succeeded, identification_verifying
from tests.browser.example_site import example_site

ROOT = Path(__file__).resolve().parents[1]
SSN = "14038512345"


@pytest.fixture(scope="module", autouse=True)
def _example_site(django_db_setup: None, django_db_blocker: Any) -> Iterator[None]:
    site = example_site()
    with django_db_blocker.unblock():
        site.__enter__()
    try:
        yield
    finally:
        with django_db_blocker.unblock():
            site.__exit__(None, None, None)


@pytest.fixture
def user(db: None) -> User:
    return User.objects.create_user(username="kari", password="pw-kari-123")


@pytest.fixture
def logged_in(client: Client, user: User) -> Client:
    client.force_login(user)
    return client


def identification(user: User, **fields: Any) -> Identification:
    values: dict[str, Any] = {
        "status": Identification.Status.SUCCESS,
        "identity_provider": "NO_BANKID_WEB",
        "name": "Nordmann, Kari Marie",
        "first_name": "Kari",
        "last_name": "Nordmann",
        "date_of_birth": datetime.date(1985, 3, 14),
        "social_security_number": SSN,
        "completed_at": timezone.now(),
    }
    values.update(fields)
    return Identification.objects.create(user=user, **values)


def test_home_invites_anonymous_visitors_to_log_in(client: Client, db: None) -> None:
    response = client.get("/")
    assert response.status_code == 200
    assert b"Log in to start" in response.content


def test_pages_need_login(client: Client, db: None) -> None:
    for path in ("/eid/start/", "/account/"):
        response = client.get(path)
        assert response.status_code == 302
        assert response["Location"] == f"/login/?next={path}"


def test_login_lands_on_verify_page(client: Client, user: User) -> None:
    response = client.post("/login/", {"username": "kari", "password": "pw-kari-123"})
    assert response.status_code == 302
    assert response["Location"] == "/eid/start/"
    assert client.get("/verify/")["Location"] == "/eid/start/"  # the menu's old address


def test_language_can_be_switched(client: Client, db: None) -> None:
    response = client.post("/i18n/setlang/", {"language": "nb", "next": "/login/"})
    assert response.status_code == 302
    assert response["Location"] == "/login/"
    content = client.get("/login/").content.decode()
    assert '<html lang="nb">' in content
    assert "Brukernavn" in content  # Django's own translation of the form's "Username"


def test_verify_page_posts_each_display_to_the_start_view(logged_in: Client) -> None:
    content = logged_in.get("/eid/start/?next=/wine/").content.decode()
    assert "django-eid example" in content  # the site's header on the app's start page
    assert content.count('action="/eid/start/"') == 1
    assert 'name="next" value="/wine/"' in content
    assert 'name="display" value="redirect"' in content
    assert 'name="display" value="iframe"' in content
    assert "csrfmiddlewaretoken" in content


@pytest.mark.parametrize("display", ["redirect", "iframe"])
@pytest.mark.parametrize("next_url", ["", "/wine/"])
def test_a_cancel_comes_back_to_the_page_it_started_from(
    logged_in: Client, eid_broker: Any, display: str, next_url: str
) -> None:
    started_on = "/eid/start/" + (f"?next={next_url.replace('/', '%2F')}" if next_url else "")
    assert "Continue to identification" in logged_in.get(started_on).content.decode()
    logged_in.post("/eid/start/", {"display": display, "next": next_url})
    response = logged_in.get(eid_broker.abort())
    if display == "iframe":  # the frame moves the top window there
        assert f'"{started_on}"' in response.content.decode()
    else:
        assert response["Location"] == started_on
    content = logged_in.get(started_on).content.decode()
    assert "You cancelled the identification." in content
    assert "Continue to identification" in content  # the site's page, as before


def test_account_shows_the_verified_identity_masked(logged_in: Client, user: User) -> None:
    identification(user, status=Identification.Status.ABORTED, social_security_number=None)
    row = identification(user)
    content = logged_in.get("/account/").content.decode()
    assert "Nordmann, Kari Marie" in content
    assert "1985-03-14" in content
    assert f'data-field="age">{row.age}<' in content
    assert "NO_BANKID_WEB" in content
    assert row.masked_social_security_number in content
    assert SSN not in content
    assert "Aborted" in content
    assert "Identified" in content


def test_account_without_identity(logged_in: Client) -> None:
    content = logged_in.get("/account/").content.decode()
    assert "You have not verified your identity yet." in content
    assert "None yet." in content


def test_receiver_marks_the_profile_verified(user: User, client: Client) -> None:
    row = identification(user)
    identification_succeeded.send(
        sender=Identification, identification=row, user=user, request=None
    )
    profile = user.profile  # type: ignore[attr-defined]
    assert profile.eid_verified
    assert profile.eid_verified_at == row.completed_at
    client.force_login(user)
    assert b"Verified with eID" in client.get("/account/").content


@pytest.mark.parametrize(("years", "refused"), [(12, True), (13, False), (None, True)])
def test_the_sites_rule_refuses_children_before_they_are_verified(
    user: User, years: int | None, refused: bool
) -> None:
    today = timezone.localdate()
    born = None if years is None else today.replace(year=today.year - years)
    row = identification(user, date_of_birth=born)
    results = identification_verifying.send_robust(
        sender=Identification, identification=row, user=user, request=None
    )
    rejections = [r for _, r in results if isinstance(r, IdentificationRejected)]
    assert [r.reason for r in rejections] == (
        ["You must be 13 or older to use this service."] if refused else []
    )


def test_the_payout_page_needs_a_recent_verification_and_keeps_the_form(
    logged_in: Client, user: User
) -> None:
    row = identification(user)
    assert b"Current payout account" in logged_in.get("/payout/").content
    Identification.objects.filter(pk=row.pk).update(
        completed_at=timezone.now() - datetime.timedelta(minutes=10)
    )
    response = logged_in.post("/payout/", {"account": "1234.56.78903"})
    assert response.status_code == 302
    assert response["Location"].startswith("/eid/start/?next=%2Feid%2Fresume%2F")


def test_a_valid_payout_account_is_saved(logged_in: Client, user: User) -> None:
    identification(user)
    response = logged_in.post("/payout/", {"account": "1234.56.78903"}, follow=True)
    assert b"Payout account changed." in response.content
    assert user.profile.payout_account == "1234.56.78903"  # type: ignore[attr-defined]
    response = logged_in.post("/payout/", {"account": "12"})
    assert b"Enter an 11-digit account number" in response.content


@pytest.mark.parametrize(("years", "allowed"), [(17, False), (18, True)])
def test_the_wine_shop_is_for_adults(
    logged_in: Client, user: User, years: int, allowed: bool
) -> None:
    today = timezone.localdate()
    identification(user, date_of_birth=today.replace(year=today.year - years))
    response = logged_in.get("/wine/")
    if allowed:
        assert b"your verified identity" in response.content
    else:
        assert response["Location"] == "/eid/start/?next=%2Fwine%2F"


def test_demo_user_command_is_idempotent(db: None, client: Client) -> None:
    out = StringIO()
    call_command("eid_demo_user", "--password", "demo-pw-1", stdout=out)
    assert "Created the demo user." in out.getvalue()
    assert "username: demo" in out.getvalue()
    user = User.objects.get(username="demo")
    identification(user)
    out = StringIO()
    call_command("eid_demo_user", "--password", "demo-pw-2", "--clear", stdout=out)
    assert "Reset the demo user." in out.getvalue()
    assert "password: demo-pw-2" in out.getvalue()
    assert User.objects.filter(username="demo").count() == 1
    assert not Identification.objects.filter(user=user).exists()
    assert client.login(username="demo", password="demo-pw-2")


def test_demo_user_command_needs_a_password_without_debug(db: None) -> None:
    from django.core.management.base import CommandError

    with pytest.raises(CommandError, match="--password"):
        call_command("eid_demo_user", stdout=StringIO())


def test_demo_fill_command_writes_a_reproducible_month(db: None) -> None:
    from django_eid.dashboard import figures
    from django_eid.models import AuditEvent

    def fill(*args: str) -> tuple[Any, ...]:
        call_command("eid_demo_fill", "--per-day", "6", "--seed", "7", *args, stdout=StringIO())
        found = figures()
        return found.days, found.by_provider, found.median_ms, found.months

    with time_machine.travel(timezone.now(), tick=False):  # the same "today so far"
        first = fill()
        rows = Identification.objects.count()
        again = fill("--clear")
    assert rows > 100
    assert AuditEvent.objects.filter(kind="started").count() == rows
    days, providers, median, _months = first
    assert sum(d.outcomes["SUCCESS"] for d in days) > sum(d.outcomes["ERROR"] for d in days) > 0
    assert {r.key for r in providers} >= {"", "NO_BANKID_WEB"}
    assert median is not None
    assert again == first  # the same seed, the same month
    assert Identification.objects.count() == rows


# -- The example's own settings module, as `manage.py` loads it -------------------

_PROBE = """
import json, django
from django.conf import settings
django.setup()
from django.urls import get_resolver
print(json.dumps({
    "debug": settings.DEBUG,
    "engine": settings.DATABASES["default"]["ENGINE"],
    "cache": settings.CACHES["default"]["BACKEND"],
    "installed": "django_eid.sandbox" in settings.INSTALLED_APPS,
    "mounted": any(str(p.pattern) == "eid-sandbox/" for p in get_resolver().url_patterns),
    "eid": {k: settings.DJANGO_EID[k] for k in ("BASE_URL", "AUTH_URL", "CLIENT_ID",
            "GET_SOCIAL_SECURITY_NUMBER", "IDENTITY_PROVIDER", "SUCCESS_URL")},
}))
"""


def run_example(code: str, tmp_path: Path, **env: str) -> subprocess.CompletedProcess[str]:
    """Run ``code`` with the example project's settings and only ``env`` configured."""
    clean = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("EID_", "DJANGO_"))
        and k not in {"DATABASE_URL", "CACHE_URL", "REDIS_URL", "SECRET_KEY", "DEBUG"}
        and k not in {"ALLOWED_HOSTS", "ENV_FILE"}
    }
    clean.update(
        DJANGO_SETTINGS_MODULE="example_project.settings",
        ENV_FILE=str(tmp_path / "no.env"),  # a developer's example_project/.env stays out
        PYTHONWARNINGS="error::RuntimeWarning",
        **env,
    )
    return subprocess.run(  # noqa: S603  (our own interpreter and code)
        [sys.executable, "-c", code],
        cwd=ROOT,
        env=clean,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def probe(tmp_path: Path, **env: str) -> dict[str, Any]:
    result = run_example(_PROBE, tmp_path, **env)
    assert result.returncode == 0, result.stderr
    values: dict[str, Any] = json.loads(result.stdout)
    return values


@pytest.mark.own_process
def test_without_environment_the_example_runs_on_the_sandbox(tmp_path: Path) -> None:
    values = probe(tmp_path)
    assert values["debug"] is True
    assert values["engine"] == "django.db.backends.sqlite3"
    assert values["cache"].endswith("LocMemCache")
    assert values["installed"]
    assert values["mounted"]
    eid = values["eid"]
    assert eid["BASE_URL"] == eid["AUTH_URL"] == "http://127.0.0.1:8000/eid-sandbox"
    assert eid["GET_SOCIAL_SECURITY_NUMBER"] is True
    assert eid["SUCCESS_URL"] == "account"


@pytest.mark.own_process
def test_the_real_broker_is_only_environment_variables(tmp_path: Path) -> None:
    values = probe(
        tmp_path,
        EID_BASE_URL="https://api.broker.example",
        EID_AUTH_URL="https://auth.broker.example",
        EID_CLIENT_ID="client",
        EID_CLIENT_SECRET="secret",
        EID_IDENTITY_PROVIDER="NO_BANKID_WEB",
        REDIS_URL="redis://localhost:6379/1",
    )
    assert not values["installed"]
    assert not values["mounted"]
    assert values["cache"].endswith("RedisCache")
    eid = values["eid"]
    assert eid["BASE_URL"] == "https://api.broker.example"
    assert eid["AUTH_URL"] == "https://auth.broker.example"
    assert eid["CLIENT_ID"] == "client"
    assert eid["IDENTITY_PROVIDER"] == "NO_BANKID_WEB"
    # The number costs extra and needs the broker's permission: asked for only when chosen.
    assert eid["GET_SOCIAL_SECURITY_NUMBER"] is False


@pytest.mark.own_process
def test_manage_py_check_passes_without_environment(tmp_path: Path) -> None:
    code = "import sys; sys.argv = ['manage.py', 'check', '--fail-level', 'WARNING'];"
    code += "import runpy; runpy.run_path('manage.py', run_name='__main__')"
    result = run_example(code, tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "no issues" in result.stdout


# -- The site's own texts in the site's languages ----------------------------------

#: A text of each of the site's own pages, as its catalogs (example_project/locale) say it.
SITE_TEXTS = {
    "en": ("Log in to start", "Continue to identification", "Identification attempts"),
    "nb": ("Logg inn for å starte", "Gå videre til identifisering", "Identifiseringsforsøk"),
    "sv": ("Logga in för att börja", "Fortsätt till identifiering", "Identifieringsförsök"),
    "da": ("Log ind for at begynde", "Fortsæt til identifikation", "Identifikationsforsøg"),
    "fi": ("Kirjaudu sisään aloittaaksesi", "Jatka tunnistautumiseen", "Tunnistautumisyritykset"),
}
REFUSAL = {
    "en": "You must be 13 or older to use this service.",
    "nb": "Du må være 13 år eller eldre for å bruke denne tjenesten.",
    "sv": "Du måste vara 13 år eller äldre för att använda den här tjänsten.",
    "da": "Du skal være 13 år eller ældre for at bruge denne tjeneste.",
    "fi": "Sinun on oltava vähintään 13-vuotias käyttääksesi tätä palvelua.",
}


def speak(client: Client, lang: str) -> None:
    response = client.post("/i18n/setlang/", {"language": lang, "next": "/"})
    assert response.status_code == 302


@pytest.mark.parametrize("lang", list(SITE_TEXTS))
def test_the_site_s_pages_speak_the_chosen_language(client: Client, user: User, lang: str) -> None:
    home, start, account = SITE_TEXTS[lang]
    speak(client, lang)
    assert home in client.get("/").content.decode()
    client.force_login(user)
    page = client.get("/eid/start/").content.decode()
    assert f'<html lang="{lang}">' in page
    assert start in page
    assert account in client.get("/account/").content.decode()
    if lang != "en":
        for english in SITE_TEXTS["en"]:
            assert english not in page + client.get("/account/").content.decode()


@pytest.mark.parametrize("lang", list(REFUSAL))
def test_the_site_s_refusal_speaks_the_chosen_language(
    logged_in: Client, eid_broker: Any, lang: str
) -> None:
    speak(logged_in, lang)
    logged_in.post("/eid/start/")
    response = logged_in.get(eid_broker.complete(eid_broker.persons.CHILD), follow=True)
    assert REFUSAL[lang] in response.content.decode()
