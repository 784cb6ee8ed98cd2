"""django-eid against an independent OpenID provider, in a real browser.

The provider is django-oauth-toolkit (:mod:`tests.interop.op_project`), a maintained OP
that shares no code with django-eid: its own process on loopback, over TLS with a
certificate of a private CA (the site trusts it through ``CA_BUNDLE`` alone, with
``REQUESTS_CA_BUNDLE`` and ``CURL_CA_BUNDLE`` naming another bundle), RS256 id_tokens, PKCE
required, a login and a consent page, ``iss`` in the authorization response (RFC 9207).
One client per claim layout: the generic one (OIDC Core's standard claims) and each
preset's (Idura's, Signicat's, BankID Norge's and Vipps', the number from userinfo where
that broker puts it there). Chromium, logged in at the suite's site (a session cookie),
starts at ``/eid/start/``, logs in and consents at the provider and comes back; the row
must be a SUCCESS with the preset's provider, unique id and number.

One browser run per layout, every one over https: TLS costs nothing more per run (one
provider process serves them all, the certificates are made once), and a real provider is
reached over https only (an http issuer is refused without ``DEBUG``). The generic
run goes on after a rotation of the provider's signing key, as the second identification.
"""

from __future__ import annotations

import base64
import hashlib
import importlib.util
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import certifi
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from django.conf import settings as django_settings
from django.contrib.auth import get_user_model
from django.test import Client
from playwright.sync_api import Browser, Page, expect, sync_playwright
from pytest_django.live_server_helper import LiveServer

from django_eid.models import Identification
from django_eid.sandbox.persons import builtin_persons
from tests.browser.conftest import (
    CHROMIUM,
    CHROMIUM_ARGS,
    TIMEOUT_MS,
    browser_page,
    orm_beside_playwright,
)
from tests.client.test_tls import Ca, make_ca
from tests.interop.provider import CLIENT_SECRET, PASSWORD, USERNAME, Provider, client_id

pytestmark = [
    pytest.mark.browser,
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(
        importlib.util.find_spec("oauth2_provider") is None,
        reason="django-oauth-toolkit not installed (the browser extra: pip install -e '.[browser]')",
    ),
]

Status = Identification.Status
KARI = builtin_persons().NORWEGIAN
#: Vipps' pairwise subject of the person (a UUID at Vipps).
VIPPS_SUB = "c06c4afe-d9e1-4c5d-939a-177d752a0944"
#: What the provider knows about its user, as each layout names it.
PERSON = {
    "name": "Kari Marie Nordmann",
    "given_name": "Kari Marie",
    "family_name": "Nordmann",
    "birthdate": KARI.birth_date.isoformat(),
    "number": KARI.national_identity_number,
    "pid": KARI.identity_provider_unique_id,
    "vipps_sub": VIPPS_SUB,
}
DONE = "/done/"


@dataclass(frozen=True)
class Expected:
    """A preset's row after the login: the eID it asks for (``IDENTITY_PROVIDER``), the
    provider and unique id stored, and whether it reads the number."""

    asks_for: str | None
    provider: str
    unique_id: str
    level: str
    number: bool = True


PRESETS = {
    "idura": Expected("no-bankid", "no-bankid", KARI.identity_provider_unique_id, "high"),
    "signicat": Expected("nbid", "nbid", KARI.identity_provider_unique_id, "high"),
    "bankid-no": Expected("bid", "bid", KARI.identity_provider_unique_id, "high"),
    "vipps": Expected(None, "vipps", VIPPS_SUB, "substantial"),
}


# -- the provider and the browser ------------------------------------------------------------
@pytest.fixture(scope="module")
def _allow_orm_beside_playwright() -> Iterator[None]:
    with orm_beside_playwright():  # as in tests/browser
        yield


@pytest.fixture(scope="module")
def tls(tmp_path_factory: pytest.TempPathFactory) -> Ca:
    """The private CA and the provider's certificate for 127.0.0.1."""
    return make_ca(tmp_path_factory.mktemp("interop-tls"), "op")


@pytest.fixture(scope="module")
def provider(
    tmp_path_factory: pytest.TempPathFactory, tls: Ca, live_server: LiveServer
) -> Iterator[Provider]:
    """django-oauth-toolkit in a process of its own, the site's callback registered (about
    1.5 s to start: Python, Django, the migrations of a new SQLite database)."""
    op = Provider(
        directory=tmp_path_factory.mktemp("interop-op"),
        tls=tls,
        redirect_uri=f"{live_server.url}/eid/oidc/callback/",
        person=PERSON,
    )
    op.start()
    try:
        yield op
    finally:
        op.stop()


def spki_pin(certificate: bytes) -> str:
    """Chromium's pin of a certificate's key: base64 of the SHA-256 of its SubjectPublicKeyInfo."""
    key = x509.load_pem_x509_certificate(certificate).public_key()
    der = key.public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    return base64.b64encode(hashlib.sha256(der).digest()).decode()


@pytest.fixture(scope="module")
def chromium(tls: Ca, _allow_orm_beside_playwright: None) -> Iterator[Browser]:
    """Chromium trusting the provider's certificate by its key alone (the browser's trust is
    not under test: the site's back channel, through ``CA_BUNDLE``, is)."""
    expect.set_options(timeout=TIMEOUT_MS)
    pin = spki_pin(tls.server_cert.read_bytes())
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=CHROMIUM,
            headless=True,
            args=[*CHROMIUM_ARGS, f"--ignore-certificate-errors-spki-list={pin}"],
        )
        try:
            yield browser
        finally:
            browser.close()


@pytest.fixture
def kari(transactional_db: None) -> Any:
    """The site's user (not the provider's: that one is :data:`USERNAME`)."""
    return get_user_model().objects.create_user(username="kari", password="site-password-1")


@pytest.fixture
def page(chromium: Browser, live_server: LiveServer, kari: Any) -> Iterator[Page]:
    """A fresh browser context, logged in at the site as ``kari``; fails the test on any
    error the pages logged or threw."""
    client = Client()
    client.force_login(kari)
    name = django_settings.SESSION_COOKIE_NAME
    session = {"name": name, "value": client.cookies[name].value, "url": live_server.url}
    with browser_page(chromium, live_server.url, cookies=[session]) as (page, problems):
        yield page
    assert not problems, problems


@pytest.fixture
def site(
    settings: Any, provider: Provider, tls: Ca, monkeypatch: pytest.MonkeyPatch
) -> Callable[[str], None]:
    """``site(layout)``: the suite's site as a relying party of the provider's client of that
    layout (``generic``: no preset). The environment names the system's CA bundle, as in
    many containers: ``CA_BUNDLE`` must win for the provider to be reached."""
    for name in ("REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE"):
        monkeypatch.setenv(name, certifi.where())

    def configure(layout: str) -> None:
        settings.ROOT_URLCONF = "tests.interop.site_urls"
        expected = PRESETS.get(layout)
        settings.DJANGO_EID = {
            **settings.DJANGO_EID,
            "BROKER_API": "oidc",
            "OIDC_PRESET": None if layout == "generic" else layout,
            "OIDC_ISSUER": provider.issuer,
            "CLIENT_ID": client_id(layout),
            "CLIENT_SECRET": CLIENT_SECRET,
            "CA_BUNDLE": str(tls.bundle),
            "SCOPES": None,
            "BASE_URL": None,
            "AUTH_URL": None,
            "IDENTITY_PROVIDER": expected.asks_for if expected else None,
            # The generic preset reads no number.
            "GET_SOCIAL_SECURITY_NUMBER": expected is not None,
            "SUCCESS_URL": DONE,
        }

    return configure


# -- the steps -------------------------------------------------------------------------------
def identify(page: Page, provider: Provider, layout: str) -> Identification:
    """The person's whole way: the site's start page, the provider's login and consent
    pages, back at the site. The row as it ended."""
    page.goto("/eid/start/")
    page.get_by_role("button", name="Verify my identity").click()

    # prompt=login: the provider asks for its password even with a session of its own.
    origin = re.escape(provider.issuer.removesuffix("/o"))
    expect(page).to_have_url(re.compile(rf"^{origin}/accounts/login/\?next="))
    page.get_by_label("Username").fill(USERNAME)
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Log in").click()

    expect(page).to_have_url(re.compile(rf"^{origin}/o/authorize/\?"))
    expect(page.get_by_role("heading", name=f"Authorize django-eid ({layout})?")).to_be_visible()
    page.get_by_role("button", name="Authorize").click()

    expect(page).to_have_url(re.compile(rf"^http://localhost:\d+{DONE}$"))
    return Identification.objects.latest("pk")


def assert_the_person(row: Identification) -> None:
    assert row.status == Status.SUCCESS, (row.status, row.error_code, row.error_message)
    assert row.name == PERSON["name"]
    assert row.last_name == PERSON["family_name"]
    assert row.date_of_birth == KARI.birth_date


# -- the runs --------------------------------------------------------------------------------
@pytest.mark.parametrize("layout", sorted(PRESETS))
def test_each_presets_claim_layout(
    layout: str, page: Page, provider: Provider, site: Callable[[str], None], kari: Any
) -> None:
    """About 1.5 s a preset: a browser run through two pages of the provider."""
    site(layout)
    since = provider.log_size()
    row = identify(page, provider, layout)

    expected = PRESETS[layout]
    assert row.user == kari
    assert_the_person(row)
    assert row.identity_provider == expected.provider
    assert row.identity_provider_unique_id == expected.unique_id
    assert row.level_of_assurance == expected.level
    assert row.social_security_number == KARI.national_identity_number
    assert row.national_id_country == "NO"
    # Signicat and Vipps keep the person (the number at least) in the userinfo answer.
    userinfo = "GET /o/userinfo/" in provider.requests(since)
    assert userinfo == (layout in ("signicat", "vipps"))


def test_the_generic_preset_across_a_signing_key_rotation(
    page: Page, provider: Provider, site: Callable[[str], None]
) -> None:
    """Two browser runs and a restart of the provider (about 4 s): the generic preset
    (standard claims, the person keyed by the issuer and ``sub``), then the provider signs
    with a new key (the old one only in its JWKS, inactive), and the site, which cached the
    old JWKS, fetches it again for the token's unknown ``kid``."""
    site("generic")
    first = identify(page, provider, "generic")
    assert_the_person(first)
    issuer_label = provider.issuer.removeprefix("https://")
    # The provider's ``sub`` is its user's id: its one user, the first.
    assert (first.identity_provider, first.identity_provider_unique_id) == (issuer_label, "1")
    assert first.social_security_number in ("", None)

    provider.rotate()
    since = provider.log_size()
    second = identify(page, provider, "generic")

    assert second.pk != first.pk
    # The keys the site had cached did not have the token's: it asked for them again.
    requests = provider.requests(since)
    assert requests[-2:] == ["POST /o/token/", "GET /o/.well-known/jwks.json"], requests
    assert_the_person(second)
    assert (second.identity_provider, second.identity_provider_unique_id) == (issuer_label, "1")
