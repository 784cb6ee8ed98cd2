"""The resume page (``/eid/resume/<token>/``), which sends a kept form again: only its own
token resumes it, once, for the user and the session that kept it; the page is neither
cached nor framed; tampered session entries never crash it nor post off-site; and whatever
the form held comes back exactly, as inert text (keeping the form: test_kept_forms.py)."""

from __future__ import annotations

import time
from typing import Any
from urllib.parse import parse_qs, quote, urlsplit

import pytest
from django.contrib.auth.models import AbstractBaseUser
from django.test import Client, RequestFactory
from hypothesis import HealthCheck, given
from hypothesis import settings as hsettings
from hypothesis import strategies as st

from django_eid import state, views
from tests.examples import examples
from tests.fixtures_views import logged_in
from tests.gates.helpers import (
    csrf_client,
    is_local,
    keep_form,
    kept_fields,
    plant,
    resume_form,
    sent_to_start,
    session_store,
)
from tests.gates.urls import EVIL_HTML

pytestmark = pytest.mark.django_db

PROPERTY = hsettings(
    max_examples=examples(50),
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
#: The key of an entry planted in the session, and its resume URL.
PLANTED = "A" * 32
PLANTED_URL = f"/eid/resume/{PLANTED}/"


# -- the token -------------------------------------------------------------------------------
def forged_tokens(real: str) -> list[str]:
    return [
        "A" * 32,
        real[:-1],
        real + "A",
        real.swapcase(),
        real + "=",
        "a" * 64,
        "a" * 65,
        "a" * 10_000,
        "tøken-ünïcödé-🙂",
        "..",
        "%2e%2e",
        "..%2F..%2Fadmin",
        "<script>alert(1)</script>",
        "' OR '1'='1",
        "\x00",
        "null",
        "__proto__",
    ]


def test_forged_resume_tokens_resume_nothing_and_do_not_burn_the_real_one(
    alice: AbstractBaseUser,
) -> None:
    client, token = csrf_client(alice)
    next_url = keep_form(client, token, {"account": "1234.56.78903"})
    real = next_url.split("/")[-2]
    for forged in forged_tokens(real):
        response = client.get(f"/eid/resume/{quote(forged, safe='')}/")
        assert response.status_code == 404, forged
        assert b"1234.56.78903" not in response.content
    page = client.get(next_url)
    assert page.status_code == 200
    assert kept_fields(resume_form(page.content.decode())[1]) == [("account", "1234.56.78903")]


@PROPERTY
@given(token=st.text(min_size=1, max_size=100))
def test_no_guessed_token_resumes_a_form(alice: AbstractBaseUser, token: str) -> None:
    client, csrf = csrf_client(alice)
    keep_form(client, csrf, {"account": "secret"})
    response = client.get(f"/eid/resume/{quote(token, safe='')}/")
    assert response.status_code in (404, 400)
    assert b"secret" not in response.content


def test_two_concurrent_gets_of_one_token_resume_the_form_once(alice: AbstractBaseUser) -> None:
    client, token = csrf_client(alice)
    next_url = keep_form(client, token, {"account": "1"})
    resume_token = next_url.split("/")[-2]
    key = client.session.session_key
    # Two requests of the same browser, interleaved as two worker processes run them:
    # both load the session, then each handles its request and saves.
    sessions = [session_store(key), session_store(key)]
    for session in sessions:
        assert state.KEPT_KEY in session  # loaded now
    codes = []
    for session in sessions:
        request = RequestFactory().get(next_url)
        request.session = session
        request.user = alice
        response = views.ResumeView.as_view()(request, token=resume_token)
        response.render()
        session.save()
        codes.append(response.status_code)
    assert codes == [200, 404]


def test_another_users_token_resumes_nothing(
    alice: AbstractBaseUser, bob: AbstractBaseUser, bob_client: Client
) -> None:
    client, token = csrf_client(alice)
    next_url = keep_form(client, token, {"account": "alice-only"})
    response = bob_client.get(next_url)
    assert response.status_code == 404
    assert "no longer kept" in response.content.decode()
    assert b"alice-only" not in response.content
    # Bob logged in on Alice's browser, with her entries planted back into his session.
    entries = client.session[state.KEPT_KEY]
    client.force_login(bob)
    assert state.KEPT_KEY not in client.session  # the login of another user flushed it
    plant(client, state.KEPT_KEY, entries)
    response = client.get(next_url)
    assert response.status_code == 404
    assert b"alice-only" not in response.content


def test_a_form_kept_in_one_session_cannot_be_resumed_in_another(alice: AbstractBaseUser) -> None:
    client, token = csrf_client(alice)
    next_url = keep_form(client, token, {"account": "1"})
    other = logged_in(alice)  # the same account, another browser
    assert other.get(next_url).status_code == 404
    assert client.get(next_url).status_code == 200


def test_a_token_does_not_survive_logout(alice: AbstractBaseUser) -> None:
    client, token = csrf_client(alice)
    next_url = keep_form(client, token, {"account": "1"})
    client.logout()
    response = client.get(next_url)
    assert response.status_code == 302
    assert response["Location"] == f"/login/?next={quote(next_url)}"
    assert response.content == b""
    client.force_login(alice)
    assert client.get(next_url).status_code == 404


def test_a_logged_out_user_on_a_resume_url_goes_to_the_login_page(client: Client) -> None:
    response = client.get(PLANTED_URL)
    assert response.status_code == 302
    assert response["Location"].startswith("/login/?next=")
    assert response.content == b""


def test_a_kept_form_expires_with_session_max_age(alice: AbstractBaseUser) -> None:
    client, token = csrf_client(alice)
    next_url = keep_form(client, token, {"account": "1"})
    session = client.session
    for entry in session[state.KEPT_KEY].values():
        entry["at"] -= 1801
    session.save()
    assert client.get(next_url).status_code == 404


def test_the_resume_page_is_not_cached_nor_framed(alice: AbstractBaseUser) -> None:
    client, token = csrf_client(alice)
    next_url = keep_form(client, token, {"account": "1234.56.78903"})
    for response in (client.get(next_url), client.get(next_url)):  # the page, then the 404
        assert "no-store" in response["Cache-Control"]
        assert "private" in response["Cache-Control"]
        assert response["X-Frame-Options"] == "DENY"
        assert response["Referrer-Policy"] == "same-origin"


# -- tampered session entries ----------------------------------------------------------------
OFF_SITE_PATHS = [
    "//evil.example/",
    "https://evil.example/",
    "javascript:alert(1)",
    "/\\evil.example/",
    "\\\\evil.example/",
    " //evil.example/",
]


@pytest.mark.parametrize("kept_path", OFF_SITE_PATHS)
def test_a_tampered_kept_path_never_posts_off_site(alice: AbstractBaseUser, kept_path: str) -> None:
    client = logged_in(alice)
    entry = {"at": time.time(), "user": str(alice.pk), "path": kept_path, "fields": [["a", "1"]]}
    plant(client, state.KEPT_KEY, {PLANTED: entry})
    response = client.get(PLANTED_URL)
    assert response.status_code in (200, 404)
    if response.status_code == 200:
        action, _ = resume_form(response.content.decode())
        assert is_local(action), action


_MISSING = object()


def _kept(alice: AbstractBaseUser, **changes: Any) -> dict[str, Any]:
    entry: dict[str, Any] = {"at": time.time(), "user": str(alice.pk), "path": "/gated/payout/"}
    entry["fields"] = [["a", "1"]]
    entry.update(changes)
    return {PLANTED: {k: v for k, v in entry.items() if v is not _MISSING}}


MALFORMED_KEPT: list[Any] = [
    pytest.param(lambda a: "not a dict", id="kept-not-a-dict"),
    pytest.param(lambda a: ["a", "list"], id="kept-a-list"),
    pytest.param(lambda a: {PLANTED: "not a dict"}, id="entry-not-a-dict"),
    pytest.param(lambda a: _kept(a, at=_MISSING), id="no-at"),
    pytest.param(lambda a: _kept(a, at="now"), id="at-a-string"),
    pytest.param(lambda a: _kept(a, at=float("nan")), id="at-nan"),
    pytest.param(lambda a: _kept(a, user=_MISSING), id="no-user"),
    pytest.param(lambda a: _kept(a, user=a.pk), id="user-an-int"),
    pytest.param(lambda a: _kept(a, user=None), id="user-none"),
    pytest.param(lambda a: _kept(a, path=None), id="path-none"),
    pytest.param(lambda a: _kept(a, path=123), id="path-an-int"),
    pytest.param(lambda a: _kept(a, path=["/x"]), id="path-a-list"),
    pytest.param(lambda a: _kept(a, fields=_MISSING), id="no-fields"),
    pytest.param(lambda a: _kept(a, fields=None), id="fields-none"),
    pytest.param(lambda a: _kept(a, fields="abc"), id="fields-a-string"),
    pytest.param(lambda a: _kept(a, fields={"a": "b"}), id="fields-a-dict"),
    pytest.param(lambda a: _kept(a, fields=[["a"]]), id="pair-of-one"),
    pytest.param(lambda a: _kept(a, fields=[[1, None]]), id="pair-not-text"),
    pytest.param(lambda a: _kept(a, fields=[["a", {"x": 1}]]), id="value-a-dict"),
    pytest.param(lambda a: _kept(a, fields=5), id="fields-an-int"),
    pytest.param(lambda a: _kept(a, fields=True), id="fields-a-bool"),
]


@pytest.mark.parametrize("kept", MALFORMED_KEPT)
def test_malformed_kept_entries_never_crash_the_resume_page(
    alice: AbstractBaseUser, kept: Any
) -> None:
    client = logged_in(alice, raise_request_exception=False)
    plant(client, state.KEPT_KEY, kept(alice))
    response = client.get(PLANTED_URL)
    assert response.status_code in (200, 404)
    if response.status_code == 200:
        action, _ = resume_form(response.content.decode())
        assert is_local(action) or not action.startswith(("/", "\\")), action
        assert urlsplit(action).netloc == ""


# -- what the form held comes back exactly, as inert text ------------------------------------
INJECTIONS = [
    EVIL_HTML,
    '" autofocus onfocus="alert(1)',
    "' onmouseover='alert(1)",
    "</form><form action=https://evil.example/><input name=x>",
    "</script><script>alert(1)</script>",
    "<!--",
    "{{ request.user }}{% csrf_token %}",
    "&quot;&#34;&lt;",
    "\u2028\u2029 ünïcödé 🙂",
]


@pytest.mark.parametrize("payload", INJECTIONS)
def test_kept_field_names_and_values_are_escaped_on_the_resume_page(
    alice: AbstractBaseUser, payload: str
) -> None:
    client, token = csrf_client(alice)
    next_url = keep_form(client, token, {payload: payload, "account": payload})
    html = client.get(next_url).content.decode()
    action, fields = resume_form(html)
    assert action == "/gated/payout/"
    assert kept_fields(fields) == [(payload, payload), ("account", payload)]
    assert [name for name, _ in fields].count("csrfmiddlewaretoken") == 1


def test_a_hostile_query_string_of_the_kept_path_is_escaped(alice: AbstractBaseUser) -> None:
    client, token = csrf_client(alice)
    query = "a=\"><svg onload=alert(1)>&b='</script><img src=x onerror=alert(1)>"
    data = {"account": "1", "csrfmiddlewaretoken": token}
    next_url = sent_to_start(client.post("/gated/payout/", data, QUERY_STRING=query))
    action, _ = resume_form(client.get(next_url).content.decode())
    assert is_local(action)
    assert action.startswith("/gated/payout/?")
    assert parse_qs(urlsplit(action).query) == {
        "a": ['"><svg onload=alert(1)>'],
        "b": ["'</script><img src=x onerror=alert(1)>"],
    }


# Django's multipart parser strips field names: the site's view never sees " a ".
names = st.text(
    alphabet=st.characters(blacklist_categories=("Cs", "Cc")), min_size=1, max_size=30
).filter(lambda s: s == s.strip() and s != "csrfmiddlewaretoken")
values = st.one_of(
    st.text(alphabet=st.characters(blacklist_categories=("Cs", "Cc")), max_size=60),
    st.sampled_from(INJECTIONS),
)


@PROPERTY
@given(form=st.dictionaries(names, values, min_size=1, max_size=6))
def test_any_kept_form_comes_back_exactly_and_inert(
    alice: AbstractBaseUser, form: dict[str, str]
) -> None:
    client, token = csrf_client(alice)
    next_url = keep_form(client, token, form)
    action, fields = resume_form(client.get(next_url).content.decode())
    assert action == "/gated/payout/"
    assert kept_fields(fields) == list(form.items())
