"""A form sent to a gate before verifying: kept in the session and sent again after the
verification (through the resume page, with a fresh CSRF token), but only a form Django's
CSRF middleware vouched for, without files, small enough, to a path on this site, in a
session kept on the server; and never beyond the session's limits. The resume page itself
(its tokens, tampered entries, injection) is test_resume.py."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from django.contrib.auth.models import AbstractBaseUser
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client

from django_eid import state
from django_eid.testing import EidBroker
from tests.gates.helpers import (
    START,
    csrf_client,
    is_local,
    keep_form,
    kept_fields,
    resume_form,
    sent_to_start,
)

pytestmark = pytest.mark.django_db

URLCONF = "tests.gates.urls"


def test_a_gated_post_is_resumed_after_the_verification(
    alice: AbstractBaseUser, eid_broker: EidBroker
) -> None:
    client, token = csrf_client(alice)
    data = {"account": ["1234.56.78903", "second"], "csrfmiddlewaretoken": token}
    next_url = sent_to_start(client.post("/gated/payout/", data))
    assert re.fullmatch(r"/eid/resume/[\w-]+/", next_url)
    start = client.post(START, {"next": next_url, "csrfmiddlewaretoken": token})
    assert start.status_code == 302
    callback = client.get(eid_broker.complete())
    assert callback["Location"] == next_url
    page = client.get(next_url)
    assert page["Cache-Control"].startswith("max-age=0")
    action, fields = resume_form(page.content.decode())
    assert action == "/gated/payout/"
    assert kept_fields(fields) == [("account", "1234.56.78903"), ("account", "second")]
    # The browser sends the form with the fresh token; the CSRF middleware checks it again.
    fresh = dict(fields)["csrfmiddlewaretoken"]
    resumed = client.post(
        action, {"account": ["1234.56.78903", "second"], "csrfmiddlewaretoken": fresh}
    )
    assert resumed.content == b"saved 1234.56.78903,second"
    # Once only.
    again = client.get(next_url)
    assert again.status_code == 404
    assert "no longer kept" in again.content.decode()
    assert "eid-resume" not in again.content.decode()


def test_a_resumed_post_without_a_valid_token_is_refused_by_csrf(
    alice: AbstractBaseUser, eid_broker: EidBroker
) -> None:
    client, token = csrf_client(alice)
    next_url = keep_form(client, token, {"account": "1"})
    client.post(START, {"next": next_url, "csrfmiddlewaretoken": token})
    client.get(eid_broker.complete())
    action, _ = resume_form(client.get(next_url).content.decode())
    assert client.post(action, {"account": "1"}).status_code == 403


def test_the_old_csrf_token_is_not_kept_and_the_resume_page_has_a_fresh_one(
    alice: AbstractBaseUser,
) -> None:
    client, token = csrf_client(alice)
    next_url = keep_form(client, token, {"account": "1"})
    entry = next(iter(client.session[state.KEPT_KEY].values()))
    assert token not in json.dumps(entry)
    _, fields = resume_form(client.get(next_url).content.decode())
    assert [name for name, _ in fields].count("csrfmiddlewaretoken") == 1


# -- what is not kept ------------------------------------------------------------------------
def test_keep_form_false_keeps_nothing(alice: AbstractBaseUser) -> None:
    client, token = csrf_client(alice)
    response = client.post("/gated/password/", {"password": "s3cret", "csrfmiddlewaretoken": token})
    assert sent_to_start(response) == "/gated/password/"
    assert not client.session.get(state.KEPT_KEY)


def test_no_form_is_kept_in_a_signed_cookie_session(alice: AbstractBaseUser, settings: Any) -> None:
    """The cookie would carry the form to the browser (and overflow)."""
    settings.SESSION_ENGINE = "django.contrib.sessions.backends.signed_cookies"
    client, token = csrf_client(alice)
    next_url = sent_to_start(
        client.post("/gated/payout/", {"account": "1", "csrfmiddlewaretoken": token})
    )
    assert next_url == "/gated/payout/"


def test_a_form_too_big_to_keep_is_not_kept(alice: AbstractBaseUser) -> None:
    client, token = csrf_client(alice)
    big = "x" * (state.MAX_KEPT_SIZE + 1)
    next_url = sent_to_start(
        client.post("/gated/payout/", {"account": big, "csrfmiddlewaretoken": token})
    )
    assert next_url == "/gated/payout/"
    assert not client.session.get(state.KEPT_KEY)


def test_a_form_with_a_file_is_not_kept(alice: AbstractBaseUser) -> None:
    client, token = csrf_client(alice)
    upload = SimpleUploadedFile("statement.pdf", b"%PDF-1.4")
    data = {"account": "1", "statement": upload, "csrfmiddlewaretoken": token}
    next_url = sent_to_start(client.post("/gated/payout/", data))
    assert next_url == "/gated/payout/"


def test_a_cross_site_post_to_a_gate_is_refused_before_the_gate_and_keeps_nothing(
    alice: AbstractBaseUser,
) -> None:
    client, _ = csrf_client(alice)
    response = client.post(
        "/gated/payout/", {"account": "1"}, headers={"origin": "https://evil.example"}
    )
    assert response.status_code == 403
    assert state.KEPT_KEY not in client.session
    assert state.DEMANDS_KEY not in client.session


@pytest.mark.parametrize("attack", ["no-token", "bobs-token", "forged-token", "evil-origin"])
def test_a_csrf_exempt_gate_keeps_no_form_without_a_valid_token(
    alice: AbstractBaseUser, bob: AbstractBaseUser, attack: str
) -> None:
    client, token = csrf_client(alice)
    headers: dict[str, str] = {}
    data = {"field": "x"}
    if attack == "bobs-token":
        data["csrfmiddlewaretoken"] = csrf_client(bob)[1]
    elif attack == "forged-token":
        data["csrfmiddlewaretoken"] = "x" * 64
    elif attack == "evil-origin":
        data["csrfmiddlewaretoken"] = token
        headers["origin"] = "https://evil.example"
    next_url = sent_to_start(client.post("/gated/exempt/", data, headers=headers))
    assert next_url == "/gated/exempt/"
    assert not client.session.get(state.KEPT_KEY)
    # Not even with the session's own token: nothing vouched for it (the view is exempt) ...
    plain = client.post("/gated/exempt/", {"field": "x", "csrfmiddlewaretoken": token})
    assert sent_to_start(plain) == "/gated/exempt/"
    # ... while the same POST to a protected gate is kept.
    kept = client.post("/gated/payout/", {"account": "1", "csrfmiddlewaretoken": token})
    assert sent_to_start(kept).startswith("/eid/resume/")


def test_a_logged_out_post_to_a_gate_keeps_nothing() -> None:
    csrf = Client(enforce_csrf_checks=True)
    token = "t" * 32  # a well-formed token in the browser's cookie (login page has no template)
    csrf.cookies["csrftoken"] = token
    response = csrf.post("/gated/payout/", {"account": "1", "csrfmiddlewaretoken": token})
    assert response.status_code == 302
    assert response["Location"].startswith("/login/?next=")
    assert state.KEPT_KEY not in csrf.session
    assert state.DEMANDS_KEY not in csrf.session


@pytest.mark.urls(URLCONF)
def test_a_form_kept_on_a_path_beginning_with_two_slashes_is_not_posted_off_site(
    alice: AbstractBaseUser, eid_broker: EidBroker
) -> None:
    client, token = csrf_client(alice)
    data = {"iban": "NO93 8601 1117 947", "csrfmiddlewaretoken": token}
    response = client.post("/x", data, PATH_INFO="//evil.example/x")
    next_url = sent_to_start(response)
    # Not kept: the path leads off-site for a browser; the start then drops it as `next`.
    assert not client.session.get(state.KEPT_KEY)
    assert not next_url.startswith("/eid/resume/")
    client.post(START, {"next": next_url, "csrfmiddlewaretoken": token})
    callback = client.get(eid_broker.complete())
    assert is_local(callback["Location"])
    assert not callback["Location"].startswith("/eid/resume/")


@pytest.mark.urls(URLCONF)
def test_a_form_kept_on_a_backslash_path_is_posted_on_this_site(alice: AbstractBaseUser) -> None:
    client, token = csrf_client(alice)
    data = {"field": "1", "csrfmiddlewaretoken": token}
    next_url = sent_to_start(client.post("/x", data, PATH_INFO="/\\evil.example/x"))
    action, _ = resume_form(client.get(next_url).content.decode())
    assert action == "/%5Cevil.example/x"
    assert is_local(action)


# -- the session's limits --------------------------------------------------------------------
def test_demands_and_kept_forms_stay_capped(alice: AbstractBaseUser) -> None:
    client, token = csrf_client(alice)
    urls = [
        sent_to_start(client.get("/gated/any/", {"i": i})) for i in range(3 * state.MAX_DEMANDS)
    ]
    demands = client.session[state.DEMANDS_KEY]
    assert len(demands) == state.MAX_DEMANDS
    assert urls[-1] in demands
    assert urls[0] not in demands
    kept = [keep_form(client, token, {"account": str(i)}) for i in range(3 * state.MAX_KEPT)]
    assert len(client.session[state.KEPT_KEY]) == state.MAX_KEPT
    assert len(client.session[state.DEMANDS_KEY]) == state.MAX_DEMANDS
    assert client.get(kept[0]).status_code == 404  # the oldest went first
    assert client.get(kept[-1]).status_code == 200


def test_a_kept_form_is_bounded_with_its_path(alice: AbstractBaseUser) -> None:
    client, token = csrf_client(alice)
    data = {"account": "1", "csrfmiddlewaretoken": token}
    client.post("/gated/payout/", data, QUERY_STRING="pad=" + "x" * (2 * state.MAX_KEPT_SIZE))
    stored = json.dumps(client.session.get(state.KEPT_KEY, {}))
    assert len(stored) <= state.MAX_KEPT_SIZE + 1024


@pytest.mark.parametrize("url", ["/gated/payout/", "/gated/exempt/"])
def test_too_many_fields_is_a_clean_400_and_nothing_is_kept(
    alice: AbstractBaseUser, url: str, settings: Any
) -> None:
    client, token = csrf_client(alice, raise_request_exception=False)
    data = {f"f{i}": "x" for i in range(settings.DATA_UPLOAD_MAX_NUMBER_FIELDS + 1)}
    data["csrfmiddlewaretoken"] = token
    assert client.post(url, data).status_code == 400
    assert not client.session.get(state.KEPT_KEY)


@pytest.mark.parametrize("url", ["/gated/payout/", "/gated/exempt/"])
def test_a_body_too_big_is_a_clean_400_and_nothing_is_kept(
    alice: AbstractBaseUser, url: str, settings: Any
) -> None:
    client, token = csrf_client(alice, raise_request_exception=False)
    big = "x" * (settings.DATA_UPLOAD_MAX_MEMORY_SIZE + 1)
    assert client.post(url, {"a": big, "csrfmiddlewaretoken": token}).status_code == 400
    assert not client.session.get(state.KEPT_KEY)


def test_too_many_files_or_a_broken_multipart_body_is_a_clean_400(
    alice: AbstractBaseUser, settings: Any
) -> None:
    client, token = csrf_client(alice, raise_request_exception=False)
    files = {
        f"f{i}": SimpleUploadedFile(f"{i}.txt", b"x")
        for i in range(settings.DATA_UPLOAD_MAX_NUMBER_FILES + 1)
    }
    response = client.post("/gated/exempt/", {**files, "csrfmiddlewaretoken": token})
    assert response.status_code == 400
    broken = client.post(
        "/gated/exempt/", b"--x\r\nbroken", content_type="multipart/form-data; boundary="
    )
    assert broken.status_code == 400
    assert not client.session.get(state.KEPT_KEY)
