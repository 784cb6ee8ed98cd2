"""``api-links`` and ``api-link``: the caller's eID links, listed and removed, and the links
in ``api-me``. Removing the last way to log in is refused (``409``); another user's link,
or an id that is none, is ``404`` as one that does not exist. Every answer is checked
against the shipped OpenAPI document (:mod:`tests.openapi_check`)."""

from __future__ import annotations

import datetime
from typing import Any
from urllib.parse import quote

import pytest
from django.contrib.auth.models import AbstractBaseUser
from django.core.serializers.json import DjangoJSONEncoder
from django.test import Client
from django.utils import timezone
from hypothesis import HealthCheck, given
from hypothesis import settings as hsettings
from hypothesis import strategies as st

from django_eid import outcomes
from django_eid.api import openapi_document
from django_eid.models import LinkedIdentity
from tests.api.conftest import (
    SAME_DEVICE,
    UA,
    Api,
    api_start,
    identified,
    problem,
    settled_by_its_return,
)
from tests.examples import examples
from tests.fixtures_broker import ScriptedBroker
from tests.fixtures_views import link, logged_in

pytestmark = pytest.mark.django_db


def iso(moment: datetime.datetime) -> str:
    """ISO 8601 as the API writes it (milliseconds, ``Z``)."""
    written: str = DjangoJSONEncoder().default(moment)
    return written


def passwordless(user: AbstractBaseUser) -> Api:
    """``user``'s browser, ``user`` with no usable password (an account that logs in by eID
    only). Logged in afterwards: changing the password ends the sessions before."""
    user.set_unusable_password()
    user.save()
    return Api(logged_in(user, HTTP_USER_AGENT=UA))


def links(api: Api) -> Any:
    response = api.get("/links/")
    assert response.status_code == 200, response.content
    return response.json()["links"]


def delete(api: Api, pk: object, **headers: str) -> Any:
    return api.client.delete(f"/eid/api/links/{pk}/", headers={**api.headers, **headers})


def kept() -> set[int]:
    return set(LinkedIdentity.objects.values_list("pk", flat=True))


# -- listing -----------------------------------------------------------------------------------
def test_the_caller_s_links_only_the_oldest_first(
    api: Api, alice: AbstractBaseUser, bob: AbstractBaseUser
) -> None:
    used = timezone.now() - datetime.timedelta(hours=1)
    older = link(alice, "SWE_BANKID", "se-bankid", last_used_at=used)
    LinkedIdentity.objects.filter(pk=older.pk).update(linked_at=used - datetime.timedelta(days=1))
    newer = link(alice)
    link(bob, "FI_TUPAS", "fi-tupas")
    older.refresh_from_db()
    newer.refresh_from_db()
    response = api.get("/links/")
    assert response.status_code == 200
    assert "no-store" in response["Cache-Control"]
    assert response.json() == {
        "links": [
            {
                "id": older.pk,
                "provider": "SWE_BANKID",
                "scheme": "se-bankid",
                "linked_at": iso(older.linked_at),
                "last_used_at": iso(used),
            },
            {
                "id": newer.pk,
                "provider": "NO_BANKID_WEB",
                "scheme": "no-bankid",
                "linked_at": iso(newer.linked_at),
                "last_used_at": None,
            },
        ]
    }
    # The key names the person: never in an answer.
    assert older.key not in response.content.decode()
    assert newer.key not in response.content.decode()


def test_no_links_is_an_empty_list(api: Api, bob: AbstractBaseUser) -> None:
    link(bob)
    assert links(api) == []


def test_a_token_caller_sees_its_own_links(app: Api, bob_app: Api, alice: AbstractBaseUser) -> None:
    mine = link(alice)
    assert [found["id"] for found in links(app)] == [mine.pk]
    assert links(bob_app) == []


@pytest.mark.parametrize("method", ["GET", "DELETE"])
def test_nobody_logged_in_is_401(alice: AbstractBaseUser, method: str) -> None:
    mine = link(alice)
    path = "/links/" if method == "GET" else f"/links/{mine.pk}/"
    problem(Api(Client()).request(method, path), 401, "login_required")
    assert kept() == {mine.pk}


# -- removing ----------------------------------------------------------------------------------
def test_removing_one_s_own_link(api: Api, alice: AbstractBaseUser) -> None:
    first, second = link(alice), link(alice, "SWE_BANKID", "se-bankid")
    response = delete(api, first.pk)
    assert response.status_code == 204
    assert response.content == b""
    assert kept() == {second.pk}
    assert [found["id"] for found in links(api)] == [second.pk]


def test_another_user_s_link_is_404_and_stays(
    api: Api, alice: AbstractBaseUser, bob: AbstractBaseUser
) -> None:
    mine, bobs = link(alice), link(bob)
    refused = problem(delete(api, bobs.pk), 404, "link_not_found")
    assert refused["message"] == str(outcomes.LINK_NOT_FOUND.message)
    assert kept() == {mine.pk, bobs.pk}


def test_an_id_that_is_no_link_is_404(api: Api, alice: AbstractBaseUser) -> None:
    """A JSON 404 whatever the segment (the route takes any): never a 500 for a number too
    large for the database, nor a link removed for an id written otherwise."""
    mine = link(alice)
    pk = str(mine.pk)
    arabic = pk.translate(str.maketrans("0123456789", "٠١٢٣٤٥٦٧٨٩"))
    for segment in ("0", "-1", "abc", "9" * 40, f"{pk}.0", f"+{pk}", f" {pk}", arabic):
        problem(delete(api, quote(segment)), 404, "link_not_found")
    assert kept() == {mine.pk}


def test_the_last_way_to_log_in_is_kept(alice: AbstractBaseUser) -> None:
    api = passwordless(alice)
    only = link(alice)
    refused = problem(delete(api, only.pk), 409, "last_login_method")
    assert refused["message"] == str(outcomes.LAST_LOGIN_METHOD.message)
    assert kept() == {only.pk}


def test_the_only_link_of_an_account_with_a_password_goes(
    api: Api, alice: AbstractBaseUser
) -> None:
    assert alice.has_usable_password()
    only = link(alice)
    assert delete(api, only.pk).status_code == 204
    assert kept() == set()


def test_one_of_two_links_of_a_passwordless_account_goes_and_then_not_the_other(
    alice: AbstractBaseUser,
) -> None:
    api = passwordless(alice)
    first, second = link(alice), link(alice, "SWE_BANKID", "se-bankid")
    assert delete(api, first.pk).status_code == 204
    problem(delete(api, second.pk), 409, "last_login_method")
    assert kept() == {second.pk}


@pytest.mark.parametrize("method", ["GET", "POST", "PUT", "PATCH"])
def test_only_delete_removes(api: Api, alice: AbstractBaseUser, method: str) -> None:
    mine = link(alice)
    response = api.request(method, f"/links/{mine.pk}/")
    problem(response, 405, "method_not_allowed")
    assert response["Allow"] == "DELETE"
    assert kept() == {mine.pk}


def test_the_list_takes_only_get(api: Api, alice: AbstractBaseUser) -> None:
    mine = link(alice)
    response = api.request("DELETE", "/links/")
    problem(response, 405, "method_not_allowed")
    assert response["Allow"] == "GET"
    assert kept() == {mine.pk}


def test_a_session_delete_needs_the_csrf_token(alice: AbstractBaseUser) -> None:
    mine = link(alice)
    client = Client(enforce_csrf_checks=True, HTTP_USER_AGENT=UA)
    client.force_login(alice)
    assert client.get("/eid/links/").status_code == 200  # a page with a form sets the cookie
    token = client.cookies["csrftoken"].value
    browser = Api(client)
    assert browser.get("/links/").status_code == 200  # a GET needs none
    problem(delete(browser, mine.pk), 403, "csrf_failed")
    problem(delete(browser, mine.pk, **{"X-CSRFToken": "x" * 32}), 403, "csrf_failed")
    assert kept() == {mine.pk}
    assert delete(browser, mine.pk, **{"X-CSRFToken": token}).status_code == 204
    assert kept() == set()


def test_a_token_caller_needs_no_csrf_token(app: Api, alice: AbstractBaseUser) -> None:
    mine = link(alice)
    assert delete(app, mine.pk).status_code == 204
    assert kept() == set()


@hsettings(
    max_examples=examples(60),
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    method=st.sampled_from(["GET", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"]),
    segment=st.text(st.characters(exclude_characters="/", codec="utf-8"), min_size=1),
)
def test_any_request_to_a_link_is_answered_as_documented(
    api: Api, alice: AbstractBaseUser, method: str, segment: str
) -> None:
    """Schemathesis-style: whatever the method and the segment, a documented JSON answer
    (the OpenAPI check of the test settings holds every one to the document), never a 5xx,
    and a link removed only by a ``DELETE`` of its id."""
    mine = link(alice)
    response = api.client.generic(method, f"/eid/api/links/{quote(segment, safe='')}/")
    assert response.status_code < 500
    removed = method == "DELETE" and segment == str(mine.pk)
    if removed:
        assert (response.status_code, response.content) == (204, b"")
    else:
        assert response["Content-Type"] == "application/json"
    assert kept() == (set() if removed else {mine.pk})
    LinkedIdentity.objects.all().delete()


# -- api-me --------------------------------------------------------------------------------------
def test_api_me_shows_the_account_s_links(
    api: Api, broker: ScriptedBroker, alice: AbstractBaseUser
) -> None:
    started = api_start(api, broker)
    settled_by_its_return(api, started, identified(broker, started, SAME_DEVICE))
    assert api.identification(started.reference).json()["status"] == "SUCCESS"
    other = link(alice, "SWE_BANKID", "se-bankid")
    me = api.me().json()
    made = LinkedIdentity.objects.exclude(pk=other.pk).get()  # LINK_ON_VERIFY
    assert [found["id"] for found in me["links"]] == [made.pk, other.pk]
    assert me["links"] == links(api)
    assert made.key not in api.me().content.decode()


def test_api_me_is_null_without_an_identity_that_qualifies_whatever_the_links(
    api: Api, alice: AbstractBaseUser
) -> None:
    link(alice)
    assert api.me().json() is None


# -- the document --------------------------------------------------------------------------------
def test_the_document_describes_the_refusals_of_a_removal_with_their_status() -> None:
    responses = openapi_document()["paths"]["/links/{pk}/"]["delete"]["responses"]
    codes = {
        int(status): answer["content"]["application/json"]["schema"]["allOf"][1]["properties"][
            "code"
        ]["enum"]
        for status, answer in responses.items()
        if status != "204"
    }
    assert codes[404] == [outcomes.LINK_NOT_FOUND.code]
    assert codes[409] == [outcomes.LAST_LOGIN_METHOD.code]
    assert codes[403] == [outcomes.CSRF_FAILED.code]
    assert "content" not in responses["204"]


def test_the_document_s_me_is_the_identity_and_the_links() -> None:
    schemas = openapi_document()["components"]["schemas"]
    me, identity = schemas["Me"], schemas["Identity"]
    properties = dict(me["properties"])
    assert properties.pop("links")["items"] == {"$ref": "#/components/schemas/Link"}
    assert properties == identity["properties"]
    assert me["required"] == [*identity["required"], "links"]
    assert me["additionalProperties"] is identity["additionalProperties"] is False
    assert "key" not in schemas["Link"]["properties"]
