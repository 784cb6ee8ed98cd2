"""Translations: the shipped catalogs are complete, the pages use them, the broker hears the language.

- Every catalog (nb, sv, da, fi) of the package and of the example project translates
  every string, with no fuzzy entry, and its compiled ``.mo`` says what its ``.po`` says.
- No string of the source is missing from the catalogs (``makemessages`` into a copy of
  the package, or of the example project, finds nothing new); skipped when GNU gettext is
  not installed, except in CI.
- The start page, the error page and the sandbox's login page render in each language.
- The ``Language`` of the create request follows Django's active language.
"""

from __future__ import annotations

import base64
import gettext
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from django.test import Client
from django.urls import reverse

import django_eid
import django_eid.client
from django_eid.conf import eid_settings
from tests.fixtures_broker import ScriptedBroker
from tests.fixtures_client import sandbox_settings

PACKAGE = Path(django_eid.__file__).resolve().parent
#: The directories with a ``locale`` of their own: the app, and the example project's pages.
CATALOGS = {"django_eid": PACKAGE, "example_project": PACKAGE.parent / "example_project"}
LANGUAGES = ("nb", "sv", "da", "fi")

#: One string per page and language, as the catalogs translate it.
START = {
    "en": "Verify my identity",
    "nb": "Bekreft identiteten min",
    "sv": "Bekräfta min identitet",
    "da": "Bekræft min identitet",
    "fi": "Vahvista henkilöllisyyteni",
}
ERROR = {
    "en": "This identification link is not valid.",
    "nb": "Denne identifiseringslenken er ikke gyldig.",
    "sv": "Den här identifieringslänken är inte giltig.",
    "da": "Dette identifikationslink er ikke gyldigt.",
    "fi": "Tämä tunnistautumislinkki ei ole kelvollinen.",
}
TRY_AGAIN = {
    "en": "Try again",
    "nb": "Prøv igjen",
    "sv": "Försök igen",
    "da": "Prøv igen",
    "fi": "Yritä uudelleen",
}
SANDBOX = {
    "en": "Identify yourself",
    "nb": "Identifiser deg",
    "sv": "Identifiera dig",
    "da": "Identificér dig",
    "fi": "Tunnistaudu",
}
#: The broker's code for each Django language.
BROKER_LANGUAGE = {"nb": "NO", "sv": "SV", "da": "DA", "fi": "FI", "en": "EN"}


# -- the catalogs ----------------------------------------------------------------------


def po_path(lang: str, catalog: str = "django_eid") -> Path:
    return CATALOGS[catalog] / "locale" / lang / "LC_MESSAGES" / "django.po"


def read_po(path: Path) -> list[dict[str, Any]]:
    """The entries of a ``.po`` file: msgctxt, msgid, msgid_plural, msgstr[n], flags.

    Obsolete (``#~``) entries are left out; the header (empty msgid) is included.
    """
    entries: list[dict[str, Any]] = []
    entry: dict[str, Any] = {}
    key: str | None = None

    def flush() -> None:
        nonlocal entry, key
        if "msgid" in entry:
            entries.append(entry)
        entry, key = {}, None

    for raw in path.read_text(encoding="utf-8").splitlines():
        line = raw.strip()
        if not line:
            flush()
            continue
        if line.startswith("#~"):
            continue
        if line.startswith("#,"):
            if "msgid" in entry:
                flush()
            entry.setdefault("flags", set()).update(f.strip() for f in line[2:].split(","))
            continue
        if line.startswith("#"):
            if "msgid" in entry:
                flush()
            continue
        if line.startswith('"'):
            assert key is not None, f"{path}: continuation without a keyword: {raw!r}"
            entry[key] += json.loads(line)
            continue
        keyword, _, value = line.partition(" ")
        if keyword == "msgid" and "msgid" in entry:
            flush()
        key = keyword
        entry[key] = json.loads(value)
    flush()
    return entries


def msgstrs(entry: dict[str, Any]) -> list[str]:
    return [v for k, v in entry.items() if k.startswith("msgstr")]


def lookup_key(entry: dict[str, Any]) -> str:
    """The key of ``entry`` in a compiled catalog (context, EOT, msgid)."""
    ctx = entry.get("msgctxt")
    return f"{ctx}\x04{entry['msgid']}" if ctx is not None else entry["msgid"]


@pytest.mark.parametrize("catalog", CATALOGS)
@pytest.mark.parametrize("lang", LANGUAGES)
def test_the_catalog_translates_every_string(lang: str, catalog: str) -> None:
    entries = [e for e in read_po(po_path(lang, catalog)) if e["msgid"]]
    assert len(entries) > 50, "suspiciously few strings: was makemessages run?"
    fuzzy = [e["msgid"] for e in entries if "fuzzy" in e.get("flags", ())]
    untranslated = [e["msgid"] for e in entries if not all(msgstrs(e))]
    assert not fuzzy, f"fuzzy in {lang}: {fuzzy}"
    assert not untranslated, f"untranslated in {lang}: {untranslated}"
    header = next(e for e in read_po(po_path(lang, catalog)) if not e["msgid"])
    assert f"Language: {lang}\n" in header["msgstr"]
    assert "charset=UTF-8" in header["msgstr"]


@pytest.mark.parametrize("catalog", CATALOGS)
@pytest.mark.parametrize("lang", LANGUAGES)
def test_the_compiled_catalog_matches_its_source(lang: str, catalog: str) -> None:
    mo = po_path(lang, catalog).with_suffix(".mo")
    assert mo.is_file(), f"{mo} is missing: run make messages"
    with mo.open("rb") as handle:
        compiled = gettext.GNUTranslations(handle)._catalog  # type: ignore[attr-defined]
    stale = []
    for entry in read_po(po_path(lang, catalog)):
        if not entry["msgid"]:
            continue
        if "msgid_plural" in entry:
            for n, text in enumerate(msgstrs(entry)):
                if compiled.get((lookup_key(entry), n)) != text:
                    stale.append(entry["msgid"])
        elif compiled.get(lookup_key(entry)) != entry["msgstr"]:
            stale.append(entry["msgid"])
    assert not stale, f"{mo} is older than its .po (run make messages): {stale}"


@pytest.fixture(scope="module", params=list(CATALOGS))
def extracted(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the package (or of the example project) with its catalogs refreshed by
    ``makemessages``."""
    if shutil.which("xgettext") is None or shutil.which("msgmerge") is None:
        if os.environ.get("CI") == "true":
            pytest.fail(
                "GNU gettext is not installed; CI must install it (apt-get install gettext)"
            )
        pytest.skip("GNU gettext is not installed (apt-get install gettext)")
    catalog: str = request.param
    copy = tmp_path_factory.mktemp("i18n") / catalog
    shutil.copytree(
        CATALOGS[catalog],
        copy,
        ignore=shutil.ignore_patterns("__pycache__", "*.pyc", "*.mo", "db.sqlite3", ".env"),
    )
    command = [sys.executable, "-m", "django", "makemessages", "--no-obsolete"]
    command += [f"--locale={lang}" for lang in LANGUAGES]
    env = {"PATH": str(Path(sys.executable).parent) + ":/usr/bin:/bin", "LC_ALL": "C.UTF-8"}
    result = subprocess.run(  # noqa: S603  (a fixed command)
        command, cwd=copy, env=env, capture_output=True, text=True, timeout=300, check=False
    )
    assert result.returncode == 0, result.stderr
    return copy


@pytest.mark.parametrize("lang", LANGUAGES)
def test_no_string_of_the_source_is_missing_from_the_catalog(extracted: Path, lang: str) -> None:
    shipped = {lookup_key(e) for e in read_po(po_path(lang, extracted.name)) if e["msgid"]}
    fresh_path = extracted / "locale" / lang / "LC_MESSAGES" / "django.po"
    fresh = {lookup_key(e): e for e in read_po(fresh_path) if e["msgid"]}
    new = sorted(set(fresh) - shipped)
    gone = sorted(shipped - set(fresh))
    assert not new, f"strings not in the {lang} catalog (run make messages, translate): {new}"
    assert not gone, f"strings in the {lang} catalog the code no longer has: {gone}"


# -- the pages ---------------------------------------------------------------------------


@pytest.mark.django_db
@pytest.mark.parametrize("lang", ["en", *LANGUAGES])
def test_the_start_page_speaks_the_language(alice_client: Client, lang: str) -> None:
    response = alice_client.get(reverse("django_eid:start"), HTTP_ACCEPT_LANGUAGE=lang)
    assert response.status_code == 200
    html = response.content.decode()
    assert f'<html lang="{lang}">' in html
    assert START[lang] in html
    assert response["Content-Language"] == lang


@pytest.mark.parametrize("lang", ["en", *LANGUAGES])
def test_the_error_page_speaks_the_language(client: Client, lang: str) -> None:
    url = reverse("django_eid:success", args=["x"])
    response = client.get(url, HTTP_ACCEPT_LANGUAGE=lang)
    assert response.status_code == 404
    html = response.content.decode()
    assert f'<html lang="{lang}">' in html
    assert ERROR[lang] in html
    assert TRY_AGAIN[lang] in html


def sandbox_session(client: Client, language: str) -> str:
    """Create a session at the sandbox over its HTTP API; returns its login page URL."""
    s = eid_settings
    basic = base64.b64encode(f"{s.CLIENT_ID}:{s.CLIENT_SECRET}".encode()).decode()
    token = client.post(
        reverse("django_eid_sandbox:token"),
        "grant_type=client_credentials&scope=identify",
        content_type="application/x-www-form-urlencoded",
        HTTP_AUTHORIZATION=f"Basic {basic}",
    )
    assert token.status_code == 200, token.content
    back = "http://testserver/back/"
    body = {
        "ReturnUrls": {
            "Success": back + "?requestId=[1]&externalId=[2]",
            "Abort": back + "?requestId=[1]&externalId=[2]",
            "Error": back + "?status=[0]",
        },
        "ExternalReference": "0123456789abcdef0123456789abcdef",
        "Language": language,
    }
    created = client.post(
        reverse("django_eid_sandbox:session"),
        json.dumps(body),
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Bearer {token.json()['access_token']}",
    )
    assert created.status_code == 200, created.content
    url: str = created.json()["Url"]
    return url


@pytest.mark.parametrize("lang", ["en", *LANGUAGES])
def test_the_sandbox_page_speaks_the_session_language(
    client: Client, settings: Any, lang: str
) -> None:
    settings.DJANGO_EID = sandbox_settings()
    url = sandbox_session(client, BROKER_LANGUAGE[lang])
    # The browser's own language does not matter: the session's Language does.
    response = client.get(url, HTTP_ACCEPT_LANGUAGE="en" if lang != "en" else "fi")
    assert response.status_code == 200
    html = response.content.decode()
    assert f'<html lang="{lang}">' in html
    assert SANDBOX[lang] in html


# -- the language sent to the broker ---------------------------------------------------


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("accept_language", "expected"),
    [
        ("nb", "NO"),
        ("nb-NO,nb;q=0.9", "NO"),
        ("nn", "NO"),
        ("sv", "SV"),
        ("sv-SE", "SV"),
        ("da", "DA"),
        ("fi", "FI"),
        ("en", "EN"),
        ("de", "EN"),
        ("", "EN"),
    ],
)
def test_the_broker_hears_the_active_language(
    alice_client: Client, broker: ScriptedBroker, accept_language: str, expected: str
) -> None:
    response = alice_client.post(
        reverse("django_eid:start"), {"display": "redirect"}, HTTP_ACCEPT_LANGUAGE=accept_language
    )
    assert response.status_code == 302, response.content
    assert broker.sent().get("Language") == expected


@pytest.mark.django_db
def test_the_language_setting_wins_over_the_active_language(
    alice_client: Client, broker: ScriptedBroker, settings: Any
) -> None:
    settings.DJANGO_EID = {**settings.DJANGO_EID, "LANGUAGE": "DA"}
    response = alice_client.post(reverse("django_eid:start"), HTTP_ACCEPT_LANGUAGE="fi")
    assert response.status_code == 302, response.content
    assert broker.sent().get("Language") == "DA"
