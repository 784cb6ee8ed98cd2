"""What the tests of the gates share: verifying through the sandbox (the ``eid_broker``
plugin fixture, as a site's tests would), ageing a verification, reading where a gate sends
the user, keeping a form and reading the resume page back as a browser parses it."""

from __future__ import annotations

import datetime
import re
from html.parser import HTMLParser
from importlib import import_module
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.http import HttpResponse
from django.test import Client
from django.utils import timezone
from django.utils.http import url_has_allowed_host_and_scheme

from django_eid.models import Identification
from django_eid.sandbox.persons import Person
from django_eid.testing import EidBroker
from tests.fixtures_views import logged_in

START = "/eid/start/"
JSON = {"accept": "application/json"}


# -- verifying -----------------------------------------------------------------------------
def verify(
    client: Client, eid_broker: EidBroker, person: Person | None = None, **post: Any
) -> HttpResponse:
    """Start from the start page (``post`` is what its form sends, e.g. ``next``) and
    identify as ``person`` (by default ``persons.NORWEGIAN``); the callback's response."""
    response = client.post(START, post)
    assert response.status_code == 302, response.content.decode()
    callback: HttpResponse = client.get(eid_broker.complete(person))
    return callback


def make_old(identification: Identification, seconds: int) -> None:
    """Pretend ``identification`` was verified ``seconds`` ago."""
    completed = timezone.now() - datetime.timedelta(seconds=seconds)
    Identification.objects.filter(pk=identification.pk).update(completed_at=completed)


def verified_at(client: Client, eid_broker: EidBroker, level: str) -> Identification:
    """Verify through the sandbox, then give the row the level of assurance ``level`` (as a
    broker states it; the level each API reads is tested with the brokers)."""
    verify(client, eid_broker, eid_broker.persons.NORWEGIAN)
    row = latest()
    Identification.objects.filter(pk=row.pk).update(level_of_assurance=level)
    return row


def latest() -> Identification:
    """The identification made last."""
    row = Identification.objects.order_by("-pk").first()
    assert row is not None
    return row


def personal_data(person: Person) -> list[str]:
    """What of ``person`` a page or an answer must not show."""
    found = [
        person.first_name,
        person.last_name,
        person.national_identity_number,
        person.birth_date.isoformat(),
        person.birth_date.strftime("%d.%m.%Y"),
        person.date_of_birth,
    ]
    return found + [v for v in (person.middle_name, person.identity_provider_unique_id) if v]


# -- where a gate sends the user -------------------------------------------------------------
def sent_to_start(response: HttpResponse) -> str:
    """The ``next`` of a redirect to the start page (asserting it is one, on this site)."""
    assert response.status_code == 302, response.status_code
    parts = urlsplit(response["Location"])
    assert (parts.scheme, parts.netloc, parts.path) == ("", "", START), response["Location"]
    return parse_qs(parts.query)["next"][0]


def start_page(client: Client, next_url: str, **params: str) -> str:
    return client.get(START, {"next": next_url, **params}).content.decode()


def is_local(url: str) -> bool:
    """A URL a browser resolves on this site: a path, never ``//host`` nor ``/\\host``."""
    return (
        url.startswith("/")
        and not url.startswith(("//", "/\\"))
        and url_has_allowed_host_and_scheme(url, allowed_hosts={"testserver"})
    )


# -- kept forms ------------------------------------------------------------------------------
def csrf_client(user: AbstractBaseUser, **kwargs: Any) -> tuple[Client, str]:
    """A logged-in client that enforces CSRF, and its token."""
    client = logged_in(user, enforce_csrf_checks=True, **kwargs)
    client.get(START)  # sets the CSRF cookie
    return client, client.cookies["csrftoken"].value


def keep_form(
    client: Client, token: str, fields: dict[str, Any], url: str = "/gated/payout/"
) -> str:
    """POST a form to a gate that turns the user away; the resume URL it was kept under.

    URL-encoded, as the resume page sends it: Django's multipart parser unescapes
    backslashes in field names that its test client does not escape.
    """
    body = urlencode({**fields, "csrfmiddlewaretoken": token}, doseq=True)
    response = client.post(url, body, content_type="application/x-www-form-urlencoded")
    next_url = sent_to_start(response)
    assert re.fullmatch(r"/eid/resume/[\w-]{16,64}/", next_url), next_url
    return next_url


class Page(HTMLParser):
    """The start tags of a page, as a browser's tokenizer sees them (entities decoded)."""

    def __init__(self, html: str) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.feed(html)
        self.close()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))

    def all(self, tag: str) -> list[dict[str, str | None]]:
        return [attrs for name, attrs in self.tags if name == tag]


def resume_form(html: str) -> tuple[str, list[tuple[str, str]]]:
    """The resume page's one form (``eid-resume``, a POST): its action and hidden fields, as
    a browser sends them; nothing injected (one script, the auto-submit)."""
    page = Page(html)
    forms = page.all("form")
    assert len(forms) == 1, html
    assert (forms[0]["id"], forms[0]["method"]) == ("eid-resume", "post"), html
    assert len(page.all("script")) == 1, html
    assert not page.all("svg"), html
    assert not page.all("img"), html
    fields = [
        (str(attrs["name"]), str(attrs["value"]))
        for attrs in page.all("input")
        if attrs.get("type") == "hidden"
    ]
    return str(forms[0]["action"]), fields


def kept_fields(fields: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """The hidden fields of a resume page but its fresh CSRF token."""
    return [pair for pair in fields if pair[0] != "csrfmiddlewaretoken"]


# -- the session -----------------------------------------------------------------------------
def session_store(key: str) -> Any:
    return import_module(settings.SESSION_ENGINE).SessionStore(key)


def plant(client: Client, key: str, value: Any) -> None:
    """Write ``value`` under ``key`` in the client's session (as tampered data would be)."""
    session = client.session
    session[key] = value
    session.save()
