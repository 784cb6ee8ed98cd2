"""Headers and transport: framing rules per page (and per API's return view), no page stored,
the iframe page's CSP and the sites' CSP nonces, TLS verification that no setting or
environment turns off, the response size cap, cookies left alone, and the system check for a
Strict session cookie without the interstitial.
"""

from __future__ import annotations

import datetime
import re
from collections.abc import Callable
from typing import Any

import pytest
import requests
from django.core import checks
from django.template.loader import render_to_string
from django.test import Client, RequestFactory

from django_eid.client import EidClient
from django_eid.conf import DEFAULTS
from django_eid.exceptions import EidProtocolError
from django_eid.models import Identification
from tests.fixtures_broker import BROKER_PAGE, ScriptedBroker, reply
from tests.fixtures_views import Started

pytestmark = pytest.mark.django_db

START = "/eid/start/"
CLICKJACKING = "django.middleware.clickjacking.XFrameOptionsMiddleware"


def _start_page(start: Callable[..., Started], client: Client, broker: ScriptedBroker) -> Any:
    return client.get(START)


def _start_invalid(start: Callable[..., Started], client: Client, broker: ScriptedBroker) -> Any:
    return client.post(START, {"display": "popup"})


def _start_429(start: Callable[..., Started], client: Client, broker: ScriptedBroker) -> Any:
    start()
    return client.post(START)


def _start_502(start: Callable[..., Started], client: Client, broker: ScriptedBroker) -> Any:
    broker.fault("create", reply(400, {"message": "no"}))
    return client.post(START)


def _start_503(start: Callable[..., Started], client: Client, broker: ScriptedBroker) -> Any:
    broker.fault("token", reply(503))
    return client.post(START)


def _iframe_page(start: Callable[..., Started], client: Client, broker: ScriptedBroker) -> Any:
    return start(display="iframe").response


def _result_page(start: Callable[..., Started], client: Client, broker: ScriptedBroker) -> Any:
    started = start(ends="error")
    assert client.get(started.error_url()).status_code == 200
    return client.get(f"/eid/result/{started.reference}/")


def _callback(kind: str, tamper: str = "") -> Callable[..., Any]:
    def hit(start: Callable[..., Started], client: Client, broker: ScriptedBroker) -> Any:
        # Expired: a session abandoned at the broker (a late SUCCESS would be stored).
        ends = "pending" if tamper in ("in progress", "expired") else kind
        started = start(display="iframe" if tamper == "iframe" else "redirect", ends=ends)
        if tamper == "in progress":  # filled by hand: the session is still at the broker
            url = started.error_url(p1=started.request_id)
        else:
            url = started.url(kind)
        if tamper == "forged":
            url = started.success_url(p1="forged")
        elif tamper == "unknown":
            url = url.replace(started.reference, "A" * 32)
        elif tamper in ("no session", "no session, retried"):
            client = Client()
            if tamper == "no session, retried":
                url = client.get(url).context["retry_url"]
        elif tamper in ("other browser", "other browser, forged"):
            client.logout()
            client.force_login(started.row.user)
            if tamper == "other browser, forged":
                url = started.abort_url(p2="forged")
        elif tamper == "expired":
            old = started.row.created_at - datetime.timedelta(hours=1)
            Identification.objects.filter(pk=started.pk).update(created_at=old)
        elif tamper == "broker down":
            broker.fault("retrieve", reply(503))
        return client.get(url)

    return hit


PAGES: dict[str, tuple[Callable[..., Any], int, str]] = {
    "start page": (_start_page, 200, "DENY"),
    "start form error": (_start_invalid, 400, "DENY"),
    "too many pending": (_start_429, 429, "DENY"),
    "broker refused the start": (_start_502, 502, "DENY"),
    "broker unavailable at start": (_start_503, 503, "DENY"),
    "iframe page": (_iframe_page, 200, "DENY"),
    "result page": (_result_page, 200, "DENY"),
    "success redirect": (_callback("success"), 302, "SAMEORIGIN"),
    "abort redirect": (_callback("abort"), 302, "SAMEORIGIN"),
    "error outcome": (_callback("error"), 200, "SAMEORIGIN"),
    "frame exit": (_callback("success", "iframe"), 200, "SAMEORIGIN"),
    "tampered callback": (_callback("success", "forged"), 400, "SAMEORIGIN"),
    "unknown reference": (_callback("abort", "unknown"), 404, "SAMEORIGIN"),
    "interstitial": (_callback("success", "no session"), 200, "SAMEORIGIN"),
    "app switch, no session": (_callback("success", "no session, retried"), 200, "SAMEORIGIN"),
    "another browser": (_callback("error", "other browser"), 200, "SAMEORIGIN"),
    "another browser, forged": (_callback("abort", "other browser, forged"), 403, "SAMEORIGIN"),
    "expired": (_callback("success", "expired"), 410, "SAMEORIGIN"),
    "retrieval failed": (_callback("success", "broker down"), 503, "SAMEORIGIN"),
    "error return, still at the broker": (_callback("error", "in progress"), 409, "SAMEORIGIN"),
}


@pytest.mark.parametrize("page", list(PAGES))
@pytest.mark.parametrize(
    "site", ["default", "without the middleware", "X_FRAME_OPTIONS=SAMEORIGIN"]
)
def test_each_page_sets_its_own_framing_rule(
    start: Callable[..., Started],
    alice_client: Client,
    broker: ScriptedBroker,
    eid: Callable[..., None],
    settings: Any,
    page: str,
    site: str,
) -> None:
    eid(MAX_PENDING_PER_USER=1)
    if site == "without the middleware":
        settings.MIDDLEWARE = [m for m in settings.MIDDLEWARE if m != CLICKJACKING]
    elif site != "default":
        settings.X_FRAME_OPTIONS = "SAMEORIGIN"
    make, status, framing = PAGES[page]
    response = make(start, alice_client, broker)
    assert response.status_code == status
    assert response["X-Frame-Options"] == framing


@pytest.mark.parametrize("callback", ["success", "abort", "error"])
def test_each_apis_returns_allow_same_origin_framing_only(
    start: Callable[..., Started], alice_client: Client, broker_api: str, callback: str
) -> None:
    """OpenID Connect's returns come to its one callback URL, another view: a return, and
    a refused one, may be framed by the site itself only (the iframe display)."""
    started = start(display="iframe")
    returned = alice_client.get(getattr(started, f"{callback}_url")().replace("?", "?x=1&", 1))
    url = f"/eid/return/{started.row.reference}/{callback}/?requestId=[1]&externalId=[2]"
    for response in (returned, alice_client.get(url)):
        assert response["X-Frame-Options"] == "SAMEORIGIN"


def _status_answer(start: Callable[..., Started], client: Client, broker: ScriptedBroker) -> Any:
    started = start(display="iframe")
    return client.get(f"/eid/status/{started.reference}/")


@pytest.mark.parametrize("page", [*PAGES, "frame status"])
def test_each_page_forbids_storing_it(
    start: Callable[..., Started],
    alice_client: Client,
    broker: ScriptedBroker,
    eid: Callable[..., None],
    page: str,
) -> None:
    """Every page says who the user is, or carries the session's ids: no browser or shared
    cache keeps it (the back button on a shared computer, a proxy)."""
    eid(MAX_PENDING_PER_USER=1)
    make, status = PAGES[page][:2] if page in PAGES else (_status_answer, 200)
    response = make(start, alice_client, broker)
    assert response.status_code == status
    directives = {d.strip() for d in response["Cache-Control"].split(",")}
    assert {"no-store", "no-cache", "private", "must-revalidate"} <= directives


WEB_MESSAGING_SCRIPT = "https://cdn.broker.test/js/web-messaging.js"


@pytest.mark.parametrize("web_messaging", [False, True])
def test_the_iframe_page_allows_framing_only_the_broker(
    start: Callable[..., Started],
    alice_client: Client,
    eid: Callable[..., None],
    web_messaging: bool,
) -> None:
    """Only the broker may be framed, and only its web-messaging script run, when used."""
    if web_messaging:
        eid(IFRAME_WEB_MESSAGING=True, IFRAME_WEB_MESSAGING_SCRIPT=WEB_MESSAGING_SCRIPT)
    started = start(display="iframe")
    response = started.response
    assert started.sent["iFrame"] == {"Domain": "testserver", "WebMessaging": web_messaging}
    expected = {"frame-src": ["https://id.broker.test"]}
    if web_messaging:
        expected["script-src"] = ["https://cdn.broker.test"]
    assert response._csp_update == expected
    page = response.content.decode()
    assert f'src="{BROKER_PAGE.replace("&", "&amp;")}' in page
    assert (f'<script src="{WEB_MESSAGING_SCRIPT}">' in page) is web_messaging


@pytest.mark.parametrize("page", ["start", "success", "abort", "error"])
def test_no_page_sets_or_changes_a_cookie_beyond_session_and_csrf(
    start: Callable[..., Started], alice_client: Client, settings: Any, page: str
) -> None:
    settings.SESSION_COOKIE_SAMESITE = "Strict"
    started = start(ends="success" if page == "start" else page)
    response = started.response if page == "start" else alice_client.get(started.url(page))
    assert response.status_code == (200 if page == "error" else 302)
    ours = {settings.SESSION_COOKIE_NAME, settings.CSRF_COOKIE_NAME, "messages"}  # the abort note
    assert set(response.cookies) <= ours
    for morsel in response.cookies.values():
        assert morsel["samesite"] in ("Strict", "Lax")


# -- TLS ---------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "attempt",
    [
        {},
        {"VERIFY": False},
        {"VERIFY_SSL": False},
        {"SSL_VERIFY": False},
        {"INSECURE": True},
        {"CA_BUNDLE": ""},
        {"CA_BUNDLE": None},
        {"CA_BUNDLE": False},
    ],
    ids=str,
)
@pytest.mark.parametrize("debug", [False, True])
def test_no_setting_turns_tls_verification_off(
    eid: Callable[..., None], settings: Any, attempt: dict[str, Any], debug: bool
) -> None:
    settings.DEBUG = debug
    eid(**attempt)
    assert EidClient().http.verify is True


def test_a_ca_bundle_replaces_the_default_trust_store_but_still_verifies(
    eid: Callable[..., None],
) -> None:
    eid(CA_BUNDLE="/etc/ssl/private-ca.pem")
    assert EidClient().http.verify == "/etc/ssl/private-ca.pem"


def test_there_is_no_setting_to_disable_verification() -> None:
    # LINK_ON_VERIFY is about the identity verified, not the broker's certificate.
    names = [k for k in DEFAULTS if k != "LINK_ON_VERIFY"]
    assert not [k for k in names if any(w in k for w in ("VERIF", "INSECURE", "SSL", "TLS"))]


@pytest.mark.parametrize(
    ("env", "verify"),
    [
        ({}, True),
        ({"REQUESTS_CA_BUNDLE": "", "CURL_CA_BUNDLE": ""}, True),
        ({"REQUESTS_CA_BUNDLE": "/etc/ssl/site-ca.pem"}, "/etc/ssl/site-ca.pem"),
    ],
    ids=["no CA variables", "empty CA variables", "a CA bundle from the environment"],
)
def test_every_call_of_a_flow_verifies_tls(
    start: Callable[..., Started],
    alice_client: Client,
    broker: ScriptedBroker,
    monkeypatch: pytest.MonkeyPatch,
    env: dict[str, str],
    verify: Any,
) -> None:
    for name in ("REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    started = start(ends="success")
    alice_client.get(started.success_url())
    # The app switch asks the broker's status call, then the record, without the browser.
    elsewhere = start(ends="success")
    assert Client().get(elsewhere.success_url() + "&eid_retry=1").status_code == 200
    calls = broker.mock.calls
    assert {c.request.url.split("?")[0].split("/")[2] for c in calls} == {
        "auth.broker.test",
        "api.broker.test",
    }
    assert dict(broker.counts) == {"token": 1, "create": 2, "retrieve": 2, "status": 1}
    assert [c.request.req_kwargs["verify"] for c in calls] == [verify] * 6
    assert all(c.request.req_kwargs["timeout"] for c in calls)


# -- the size cap -------------------------------------------------------------------------
@pytest.mark.parametrize("over", [-1, 0, 1, 100_000])
def test_the_size_cap_is_exact(broker: ScriptedBroker, eid: Callable[..., None], over: int) -> None:
    eid(MAX_RESPONSE_BYTES=2048)
    body = b'{"RequestId": "r", "Pad": "' + b"x" * 2048 + b'"}'
    body = body[: 2048 + over - 2] + b'"}' if over <= 0 else body + b" " * over
    broker.fault("retrieve", reply(raw=body))
    client = EidClient()
    if len(body) <= 2048:
        assert client.get_session("r").request_id == "r"
    else:
        with pytest.raises(EidProtocolError, match="over 2048 bytes"):
            client.get_session("r")


# -- the system check -----------------------------------------------------------------------
@pytest.mark.parametrize(
    ("samesite", "interstitial", "warned"),
    [
        ("Strict", False, True),
        ("strict", False, True),
        ("Strict", True, False),
        ("Lax", False, False),
        ("None", False, False),
        (False, False, False),
        ("Lax", True, False),
    ],
)
def test_a_strict_session_cookie_without_the_interstitial_is_warned_about(
    settings: Any, eid: Callable[..., None], samesite: Any, interstitial: bool, warned: bool
) -> None:
    settings.SESSION_COOKIE_SAMESITE = samesite
    eid(CALLBACK_INTERSTITIAL=interstitial)
    found = [m for m in checks.run_checks(tags=["django_eid"]) if m.id == "django_eid.W004"]
    assert bool(found) is warned
    if warned:
        assert found[0].level == checks.WARNING
        assert "CALLBACK_INTERSTITIAL" in (found[0].hint or "")


def test_the_http_session_carries_no_default_credentials() -> None:
    http = EidClient().http
    assert isinstance(http, requests.Session)
    assert http.auth is None  # credentials go per call, never via .netrc


FRAME_CONTEXT = {
    "broker_url": "https://id.broker.test/start?s=1",
    "broker_origin": "https://id.broker.test",
    "status_url": "/eid/status/ref/",
    "poll_interval": 2000,
    "poll_for": 1815000,
    "web_messaging_script": WEB_MESSAGING_SCRIPT,
}


@pytest.mark.parametrize(
    ("provider", "nonce"),
    [("django-csp", "bm9uY2UtY3Nw"), ("Django's own CSP", "bm9uY2UtZGphbmdv"), (None, None)],
)
def test_the_frame_pages_scripts_carry_the_sites_csp_nonce(
    rf: RequestFactory, provider: str | None, nonce: str | None
) -> None:
    """A site whose policy allows scripts by nonce: the frame page's own script and the
    broker's both carry it, from django-csp (``request.csp_nonce``) or Django's built-in CSP
    (``csp_nonce`` in the context); without either, no attribute."""
    request = rf.get("/eid/frame/ref/")
    context = dict(FRAME_CONTEXT)
    if provider == "django-csp":
        request.csp_nonce = nonce  # type: ignore[attr-defined]
    elif provider is not None:
        context["csp_nonce"] = nonce
    page = render_to_string("django_eid/iframe.html", context, request=request)
    scripts = re.findall(r"<script\b[^>]*>", page)
    assert len(scripts) == 2
    for tag in scripts:
        assert ("nonce=" in tag) is (nonce is not None)
        if nonce is not None:
            assert f'nonce="{nonce}"' in tag
    assert f'<script src="{WEB_MESSAGING_SCRIPT}"' in page


@pytest.mark.parametrize("template", ["frame_exit", "resume"])
def test_the_other_inline_scripts_carry_the_sites_csp_nonce(
    rf: RequestFactory, template: str
) -> None:
    context = {"destination": "/account/", "action": "/pay/", "fields": []}
    for nonce_in in ("request", "context"):
        request = rf.get("/")
        if nonce_in == "request":
            request.csp_nonce = "cmVxdWVzdA"  # type: ignore[attr-defined]
        page = render_to_string(
            f"django_eid/{template}.html",
            context if nonce_in == "request" else {**context, "csp_nonce": "Y29udGV4dA"},
            request=request,
        )
        nonce = "cmVxdWVzdA" if nonce_in == "request" else "Y29udGV4dA"
        assert f'<script nonce="{nonce}">' in page
