"""``api-start``: the HTML start's rules, limits and refusals, answered as JSON.

What the broker's API changes (where the user is sent, the return URL the start sends,
the broker's errors on the create request) is tested with each (``broker_api``); the rest
once, against v1, whose create request carries the frame (``iFrame``) and the provider
names these tests use.
"""

from __future__ import annotations

import datetime
import gettext
import hashlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import requests
from django.test import Client
from django.utils.dateparse import parse_datetime

import django_eid
from django_eid.models import Identification
from tests.api.conftest import (
    FRONTEND_HOST,
    SAME_DEVICE,
    Api,
    api_start,
    assert_documented,
    fields_of,
    identified,
    problem,
)
from tests.fixtures_broker import BROKER_PAGE, NO_SESSION_TO_ASK, REST_APIS, SAMPLE, ScriptedBroker

pytestmark = pytest.mark.django_db

Status = Identification.Status
NB_CATALOG = Path(django_eid.__file__).parent / "locale" / "nb" / "LC_MESSAGES" / "django.mo"


def nb(message: str) -> str:
    """``message`` as the shipped Norwegian (bokmål) catalogue translates it."""
    with NB_CATALOG.open("rb") as catalog:
        return gettext.GNUTranslations(catalog).gettext(message)


# -- started -------------------------------------------------------------------------------------
def test_a_start_answers_201_with_where_to_send_the_user(
    broker_api: str, api: Api, broker: ScriptedBroker, eid: Callable[..., None]
) -> None:
    eid(SESSION_MAX_AGE=600)
    started = api_start(api, broker)
    response = started.response
    body = response.json()
    assert set(body) == {"reference", "url", "display", "expires_at", "secret"}
    assert body["reference"] == started.reference
    # A one-time secret of 256 bits; only its hash is stored.
    assert len(body["secret"]) >= 43
    assert body["secret"] not in started.row.return_key
    assert started.row.return_key == hashlib.sha256(body["secret"].encode()).hexdigest()
    if started.is_oidc:  # the provider's authorization endpoint, the request pushed
        assert broker.oidc is not None
        assert body["url"].startswith(broker.oidc.endpoint("authorize") + "?client_id=")
    else:
        assert body["url"] == BROKER_PAGE
    assert body["display"] == "redirect"
    row = started.row
    expires_at = parse_datetime(body["expires_at"])
    assert expires_at is not None
    # Sent to the millisecond.
    expected = row.created_at + datetime.timedelta(seconds=600)
    assert abs(expires_at - expected) < datetime.timedelta(milliseconds=1)
    assert response["Location"] == f"/eid/api/identifications/{started.reference}/"
    assert "no-store" in response["Cache-Control"]


def test_the_row_is_pending_and_marked_as_started_through_the_api(
    api: Api, broker: ScriptedBroker
) -> None:
    row = api_start(api, broker).row
    assert (row.status, row.channel, row.display) == (Status.PENDING, "api", "redirect")
    assert row.next_url == ""


def test_the_browser_remembers_the_reference_so_the_return_url_accepts_it(
    broker_api: str, api: Api, broker: ScriptedBroker
) -> None:
    started = api_start(api, broker)
    assert started.reference in api.client.session["django_eid_pending"]
    response = api.client.get(identified(broker, started, SAME_DEVICE))
    assert (response.status_code, response["Location"]) == (302, "/")
    assert started.refresh().status == Status.SUCCESS


@pytest.mark.apis(*REST_APIS, reason=NO_SESSION_TO_ASK)
def test_another_browser_of_the_same_user_is_not_the_one_that_started(
    broker_api: str, api: Api, broker: ScriptedBroker, alice: Any
) -> None:
    started = api_start(api, broker)
    other = Client(HTTP_USER_AGENT="Mozilla/5.0 (X11) Firefox")
    other.force_login(alice)
    response = other.get(identified(broker, started, SAME_DEVICE))
    # Settled without the starting browser (the record is that browser's device), and
    # this browser is told to go back: nothing of the identity shown to it.
    assert response.status_code == 200
    page = response.content.decode()
    assert "The identification has ended. Go back to the browser or app where you started" in page
    assert SAMPLE.last_name not in page
    assert started.refresh().status == Status.SUCCESS
    assert started.reference in api.client.session["django_eid_pending"]


def test_an_empty_body_is_an_empty_request(api: Api, broker: ScriptedBroker) -> None:
    api_start(api, broker, raw=b"", content_type="text/plain")
    api_start(api, broker, raw=b"", content_type="application/json")
    api_start(api, broker, {})


def test_null_fields_are_absent(api: Api, broker: ScriptedBroker) -> None:
    started = api_start(api, broker, {"provider": None, "display": None, "next": None})
    assert started.row.display == "redirect"


#: How each broker API's create request asks for the frame of a page on ``testserver``
#: (OpenID Connect asks for none: the provider's page is framed as it is).
FRAME_REQUEST: dict[str, dict[str, Any]] = {
    "v1": {"iFrame": {"Domain": "testserver", "WebMessaging": False}, "domain": "testserver"},
    "v2": {"flow": "iframe", "iframeSettings": {"parentDomains": ["testserver"]}},
    "eid-hub": {"flow": "embedded", "embeddedParentDomains": ["testserver"]},
}


def test_the_iframe_display_and_next_are_kept(
    broker_api: str, api: Api, broker: ScriptedBroker
) -> None:
    started = api_start(api, broker, {"display": "iframe", "next": "/account/?tab=eid"})
    row = started.row
    assert (row.display, row.next_url) == ("iframe", "/account/?tab=eid")
    assert started.response.json()["display"] == "iframe"
    frame = FRAME_REQUEST.get(broker_api, {})
    assert {key: started.sent.get(key) for key in frame} == frame
    if broker_api == "eid-hub":  # the frame ends at the Success URL, whatever the outcome
        assert started.sent["returnUrl"] == started.return_urls["Success"]


def test_a_provider_is_asked_for(
    api: Api, broker: ScriptedBroker, eid: Callable[..., None]
) -> None:
    eid(ALLOWED_PROVIDERS=["NO_BANKID_WEB", "SWE_BANKID"])
    started = api_start(api, broker, {"provider": "SWE_BANKID"})
    assert started.sent["IdentityProvider"] == "SWE_BANKID"
    assert started.row.identity_provider == "SWE_BANKID"


# -- the frame's parent ----------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("origin", "domain"),
    [
        # Matched as next and FRONTEND_URLS are: the exact host, a port only when listed.
        (f"https://{FRONTEND_HOST}:8443", "testserver"),
        (f"https://{FRONTEND_HOST}", FRONTEND_HOST),
        (f"http://{FRONTEND_HOST}", FRONTEND_HOST),
        ("http://[::1", "testserver"),
        ("https://evil.example", "testserver"),
        (f"https://evil.{FRONTEND_HOST}", "testserver"),
        (f"https://{FRONTEND_HOST}.evil.example", "testserver"),
        (f"https://user@{FRONTEND_HOST}", "testserver"),
        ("null", "testserver"),
    ],
)
def test_the_frame_s_parent_is_the_front_end_s_origin_when_it_is_allowed(
    api: Api, broker: ScriptedBroker, eid: Callable[..., None], origin: str, domain: str
) -> None:
    eid(FRONTEND_ALLOWED_HOSTS=[FRONTEND_HOST])
    started = api_start(api, broker, {"display": "iframe"}, headers={"Origin": origin})
    assert started.sent["iFrame"]["Domain"] == domain


def test_a_front_end_listed_with_its_port_may_frame_the_broker(
    api: Api, broker: ScriptedBroker, eid: Callable[..., None]
) -> None:
    """A development front end: ``FRONTEND_URLS`` on ``localhost:3000`` need the port in
    ``FRONTEND_ALLOWED_HOSTS`` (check E024), and then its ``Origin`` is the frame's parent."""
    eid(
        FRONTEND_ALLOWED_HOSTS=["localhost:3000"],
        FRONTEND_URLS={
            kind: f"http://localhost:3000/{kind}/{{reference}}"
            for kind in ("success", "abort", "error")
        },
    )
    started = api_start(
        api, broker, {"display": "iframe"}, headers={"Origin": "http://localhost:3000"}
    )
    assert started.sent["iFrame"]["Domain"] == "localhost:3000"


def test_the_origin_does_not_matter_for_a_redirect(
    api: Api, broker: ScriptedBroker, eid: Callable[..., None]
) -> None:
    eid(FRONTEND_ALLOWED_HOSTS=[FRONTEND_HOST])
    started = api_start(api, broker, headers={"Origin": f"https://{FRONTEND_HOST}"})
    assert "iFrame" not in started.sent


# -- refusals of the request ---------------------------------------------------------------------
@pytest.mark.parametrize(
    ("body", "field", "code"),
    [
        ({"provder": "NO_BANKID_WEB"}, "provder", "unknown_field"),
        ({"provider": 5}, "provider", "not_a_string"),
        ({"display": ["iframe"]}, "display", "not_a_string"),
        ({"next": {"url": "/"}}, "next", "not_a_string"),
        ({"next": True}, "next", "not_a_string"),
        ({"display": "popup"}, "display", "display_invalid"),
        ({"display": ""}, "display", "display_invalid"),
        ({"display": "IFRAME"}, "display", "display_invalid"),
        ({"next": "https://evil.example/"}, "next", "next_not_allowed"),
        ({"next": "javascript:alert(1)"}, "next", "next_not_allowed"),
        ({"next": "//evil.example/"}, "next", "next_not_allowed"),
        ({"next": "/\\evil.example/"}, "next", "next_not_allowed"),
        ({"next": " /account/"}, "next", "next_not_allowed"),
        ({"next": "/account/\n"}, "next", "next_not_allowed"),
        ({"next": "/" + "a" * 2000}, "next", "next_not_allowed"),
        ({"provider": "no-bankid"}, "provider", "provider_malformed"),
        ({"provider": "NO_BANKID_"}, "provider", "provider_malformed"),
    ],
)
def test_a_field_at_fault_is_named(
    api: Api, broker: ScriptedBroker, body: dict[str, Any], field: str, code: str
) -> None:
    refused = problem(api.start(body), 400, code)
    assert fields_of(refused) == [(field, code)]
    assert refused["errors"][0]["message"] == refused["message"]
    assert broker.create_requests == []
    assert not Identification.objects.exists()


def test_the_malformed_provider_is_quoted_in_the_message(api: Api, broker: ScriptedBroker) -> None:
    refused = problem(api.start({"provider": "bank id"}), 400, "provider_malformed")
    assert refused["message"] == ("“bank id” is not a provider name.")


def test_a_provider_longer_than_any_provider_name_is_refused_before_the_broker(
    api: Api, broker: ScriptedBroker
) -> None:
    """The HTML start form refuses it (``max_length``); sent on, the row would store a cut
    name that the broker's record never matches."""
    refused = problem(api.start({"provider": "NO_" + "X" * 100}), 400, "provider_malformed")
    assert fields_of(refused) == [("provider", "provider_malformed")]
    assert broker.create_requests == []


def test_a_next_on_the_front_end_s_host_is_allowed(
    api: Api, broker: ScriptedBroker, eid: Callable[..., None]
) -> None:
    url = f"https://{FRONTEND_HOST}/after?x=1"
    assert problem(api.start({"next": url}), 400, "next_not_allowed")
    eid(FRONTEND_ALLOWED_HOSTS=[FRONTEND_HOST])
    assert api_start(api, broker, {"next": url}).row.next_url == url


def test_several_errors_are_one_invalid_request_naming_each(
    api: Api, broker: ScriptedBroker
) -> None:
    body = {"colour": "red", "display": "popup", "next": "//evil.example", "provider": 1}
    refused = problem(api.start(body), 400, "invalid_request")
    assert refused["message"] == "The request is not valid."
    assert sorted(fields_of(refused)) == [
        ("colour", "unknown_field"),
        ("display", "display_invalid"),
        ("next", "next_not_allowed"),
        ("provider", "not_a_string"),
    ]
    assert broker.create_requests == []


def test_a_malformed_provider_is_named_beside_the_other_errors(
    api: Api, broker: ScriptedBroker
) -> None:
    """As the HTML start form does: each field at fault, not only the first one looked at."""
    refused = problem(
        api.start({"provider": "bank id", "display": "popup"}), 400, "invalid_request"
    )
    assert sorted(fields_of(refused)) == [
        ("display", "display_invalid"),
        ("provider", "provider_malformed"),
    ]


@pytest.mark.parametrize(
    ("raw", "content_type"),
    [
        (b"{", "application/json"),
        # Blanks are a body, and no JSON object, whatever the content type says.
        (b"  \n", "application/json"),
        (b" ", "text/plain"),
        (b"\t", ""),
        (b"[]", "application/json"),
        (b'"iframe"', "application/json"),
        (b"null", "application/json"),
        (b"\xff\xfe{}", "application/json"),
        (b"{'display': 'iframe'}", "application/json"),
        (b'{"display": "iframe"}', "text/plain"),
        (b"display=iframe", "application/x-www-form-urlencoded"),
        (b"[" * 100_000, "application/json"),
        (b'{"a":' * 50_000, "application/json"),
    ],
)
def test_a_body_that_is_not_a_json_object_is_refused(
    api: Api, broker: ScriptedBroker, raw: bytes, content_type: str
) -> None:
    refused = problem(api.start(raw=raw, content_type=content_type), 400, "invalid_body")
    assert "errors" not in refused
    assert broker.create_requests == []


def test_a_body_of_the_wrong_type_says_so(api: Api) -> None:
    refused = problem(api.start(raw=b"{}", content_type="text/plain"), 400, "invalid_body")
    assert refused["message"] == "Send the body as application/json."


def test_json_with_a_charset_is_json(api: Api, broker: ScriptedBroker) -> None:
    started = api_start(
        api, broker, raw=b'{"display": "iframe"}', content_type="application/json; charset=utf-8"
    )
    assert started.row.display == "iframe"


def test_a_body_too_large_is_refused(api: Api, broker: ScriptedBroker, settings: Any) -> None:
    """``DATA_UPLOAD_MAX_MEMORY_SIZE``: Django will not read the body; a JSON refusal."""
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 100
    response = api.start({"next": "/" + "a" * 200})
    problem(response, 400, "invalid_body")
    assert_documented(response, "/identifications/", "post")
    assert broker.create_requests == []


# -- refusals of the flow ------------------------------------------------------------------------
def test_a_provider_not_offered(api: Api, broker: ScriptedBroker, eid: Callable[..., None]) -> None:
    eid(ALLOWED_PROVIDERS=["NO_BANKID_WEB"])
    refused = problem(api.start({"provider": "SWE_BANKID"}), 400, "provider_not_offered")
    assert refused["message"] == "The provider SWE_BANKID is not offered here."
    assert fields_of(refused) == [("provider", "provider_not_offered")]
    assert broker.create_requests == []


def test_a_provider_must_be_chosen_among_several(
    api: Api, broker: ScriptedBroker, eid: Callable[..., None]
) -> None:
    eid(ALLOWED_PROVIDERS=["NO_BANKID_WEB", "SWE_BANKID"])
    refused = problem(api.start(), 400, "provider_required")
    assert fields_of(refused) == [("provider", "provider_required")]
    assert broker.create_requests == []
    eid(IDENTITY_PROVIDER="SWE_BANKID")  # a default among them
    assert api_start(api, broker).sent["IdentityProvider"] == "SWE_BANKID"


def test_the_pending_limit(api: Api, broker: ScriptedBroker, eid: Callable[..., None]) -> None:
    eid(MAX_PENDING_PER_USER=2)
    api_start(api, broker)
    api_start(api, broker)
    refused = problem(api.start(), 429, "too_many_pending")
    assert "errors" not in refused
    assert len(broker.create_requests) == 2
    assert Identification.objects.count() == 2


def test_the_pending_limit_counts_html_and_api_starts_together(
    api: Api, broker: ScriptedBroker, eid: Callable[..., None]
) -> None:
    eid(MAX_PENDING_PER_USER=1)
    assert api.client.post("/eid/start/").status_code == 302
    problem(api.start(), 429, "too_many_pending")


def test_the_broker_unreachable(broker_api: str, api: Api, broker: ScriptedBroker) -> None:
    broker.fail_next("create", exception=requests.ConnectionError("refused"), times=None)
    problem(api.start(), 503, "broker_unreachable")
    row = Identification.objects.get()
    assert (row.status, row.request_id, row.channel) == (Status.ERROR, None, "api")


def test_the_broker_refusing(broker_api: str, api: Api, broker: ScriptedBroker) -> None:
    broker.will_fail_create(400, json={"message": "Bad provider", "code": "INVALID"})
    problem(api.start(), 502, "broker_refused")
    assert Identification.objects.get().status == Status.ERROR


def test_not_configured(api: Api, broker: ScriptedBroker, eid: Callable[..., None]) -> None:
    eid(CLIENT_SECRET=None)
    problem(api.start(), 503, "not_available")
    assert broker.create_requests == []
    assert not Identification.objects.exists()


# -- the language ---------------------------------------------------------------------------------
def test_a_refusal_of_the_flow_is_in_the_request_s_language(
    api: Api, broker: ScriptedBroker, eid: Callable[..., None]
) -> None:
    eid(ALLOWED_PROVIDERS=["NO_BANKID_WEB"])
    refused = problem(
        api.start({"provider": "SWE_BANKID"}, headers={"Accept-Language": "nb"}),
        400,
        "provider_not_offered",
    )
    expected = nb("The provider %(provider)s is not offered here.") % {"provider": "SWE_BANKID"}
    assert refused["message"] == expected == "Leverandøren SWE_BANKID tilbys ikke her."
    assert refused["errors"][0]["message"] == expected
    broker.fail_next("create", 503, times=None)
    refused = problem(api.start(headers={"Accept-Language": "nb"}), 503, "broker_unreachable")
    assert refused["message"] == nb(
        "The identification service could not be reached. Please try again in a moment."
    )
    assert refused["message"].startswith("Fikk ikke kontakt")


API_MESSAGES = [
    "The request is not valid.",
    "This field is not known.",
    "This field must be a string.",
    "The request body must be a JSON object.",
    "Send the body as application/json.",
    "This is neither a page of this site nor of an allowed front end.",
    "Please log in to verify your identity.",
    "The request was refused: its CSRF token is missing or not valid. Reload and try again.",
    "This method is not allowed here.",
    "This identification has already ended.",
    "The identification is not finished yet.",
    "Give the age as a whole number of years below 150.",
    "Give the level of assurance as low, substantial or high.",
    "Give the age of the verification as a whole number of seconds, at most 100 years.",
]


def test_the_api_s_own_refusals_are_translated(api: Api) -> None:
    untranslated = [m for m in API_MESSAGES if nb(m) == m]
    assert untranslated == []
    refused = problem(
        api.start({"colour": 1, "display": 2}, headers={"Accept-Language": "nb"}),
        400,
        "invalid_request",
    )
    assert refused["message"] == nb("The request is not valid.") != "The request is not valid."
    assert [error["message"] for error in refused["errors"]] == [
        nb("This field is not known."),
        nb("This field must be a string."),
    ]
    refused = problem(Api(Client()).me(headers={"Accept-Language": "nb"}), 401, "login_required")
    assert refused["message"] == nb("Please log in to verify your identity.")


# -- a gate's demand --------------------------------------------------------------------------------
def test_a_gate_narrows_the_providers_of_a_start_for_its_page(
    api: Api, broker: ScriptedBroker, eid: Callable[..., None]
) -> None:
    eid(ALLOWED_PROVIDERS=["NO_BANKID_WEB", "SWE_BANKID"])
    gated = api.client.get("/gated/contract/")  # providers=["NO_BANKID_WEB"]
    assert gated.status_code == 302
    refused = problem(
        api.start({"provider": "SWE_BANKID", "next": "/gated/contract/"}),
        400,
        "provider_not_offered",
    )
    assert fields_of(refused) == [("provider", "provider_not_offered")]
    started = api_start(api, broker, {"next": "/gated/contract/"})
    assert started.sent["IdentityProvider"] == "NO_BANKID_WEB"
    # Another destination: the gate's demand does not apply.
    problem(api.start({"next": "/elsewhere/"}), 400, "provider_required")


def test_a_gate_s_same_person_demand_is_kept_on_the_row(api: Api, broker: ScriptedBroker) -> None:
    assert api.client.get("/gated/payout/").status_code == 302  # same_person=True
    assert api_start(api, broker, {"next": "/gated/payout/"}).row.same_person is True
    assert api_start(api, broker, {"next": "/account/"}).row.same_person is False


def test_a_gate_s_demand_in_another_browser_does_not_apply(
    api: Api, broker: ScriptedBroker, alice: Any
) -> None:
    other = Client()
    other.force_login(alice)
    assert other.get("/gated/payout/").status_code == 302
    assert api_start(api, broker, {"next": "/gated/payout/"}).row.same_person is False


@pytest.mark.parametrize("pattern", ["*", ".example.com"])
def test_host_patterns_are_refused(
    api: Api, broker: ScriptedBroker, eid: Callable[..., None], pattern: str
) -> None:
    """A pattern is a configuration error (E025), and the API does not run on it."""
    eid(FRONTEND_ALLOWED_HOSTS=[pattern])
    origin = {"Origin": "https://evil.example.com"}
    problem(api.start({"display": "iframe"}, headers=origin), 503, "not_available")
    assert not broker.counts


def test_a_host_name_matches_only_itself(
    api: Api, broker: ScriptedBroker, eid: Callable[..., None]
) -> None:
    """``FRONTEND_ALLOWED_HOSTS`` names hosts, as for ``next`` and ``FRONTEND_URLS``: not
    ``ALLOWED_HOSTS`` patterns that would let any page frame the broker."""
    eid(FRONTEND_ALLOWED_HOSTS=["example.com"])
    origin = {"Origin": "https://evil.example.com"}
    assert api_start(api, broker, {"display": "iframe"}, headers=origin).sent["iFrame"] == {
        "Domain": "testserver",
        "WebMessaging": False,
    }
    problem(api.start({"next": "https://evil.example.com/"}), 400, "next_not_allowed")


@pytest.mark.parametrize("origin", ["http://[::1", "null", "not a url", "https://"])
def test_a_malformed_origin_frames_from_the_api_s_own_host(
    app: Api, broker: ScriptedBroker, origin: str
) -> None:
    """With a token there is no CSRF check to refuse it first; the start goes on, framed by
    the API's own host as without an ``Origin``."""
    started = api_start(app, broker, {"display": "iframe"}, headers={"Origin": origin})
    assert started.sent["iFrame"]["Domain"] == "testserver"


@pytest.mark.parametrize(
    "raw",
    [
        rb'{"next": "/done/\ud800"}',
        rb'{"provider": "\udfff"}',
        rb'{"display": "iframe\ud800"}',
        rb'{"\ud800": "redirect"}',
    ],
    ids=["next", "provider", "display", "a key"],
)
def test_a_lone_surrogate_is_a_400_not_a_500(api: Api, broker: ScriptedBroker, raw: bytes) -> None:
    """Legal JSON, but no text: refused as the body it is, before anything is stored."""
    refused = problem(api.start(raw=raw), 400, "invalid_body")
    assert "lone surrogate" in refused["message"]
    assert broker.create_requests == []
    assert not Identification.objects.exists()
