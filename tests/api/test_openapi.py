"""The shipped OpenAPI document: valid, complete, true to the code; and the check that
holds every answer of the suite to it does fail when an answer breaks it."""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from typing import Any

import openapi_spec_validator
import pytest
from django.http import HttpResponse
from django.test import Client, RequestFactory
from django.urls import URLPattern, URLResolver, get_resolver, resolve, reverse

import django_eid
from django_eid import outcomes
from django_eid.api import openapi_document
from django_eid.outcomes import Outcome
from tests.openapi_check import OpenAPIMismatch, check_response

API_NAMES = {
    "api-start",
    "api-identification",
    "api-cancel",
    "api-return",
    "api-me",
    "api-links",
    "api-link",
    "api-schema",
}
METHODS = {"get", "put", "post", "delete", "options", "head", "patch", "trace"}
REFERENCE = "A" * 32
LINK = "7"
#: The OpenAPI path and methods of each URL name of the API.
OPERATIONS = {
    "api-start": ("/identifications/", {"post"}),
    "api-identification": ("/identifications/{reference}/", {"get"}),
    "api-cancel": ("/identifications/{reference}/cancel/", {"post"}),
    "api-return": ("/identifications/{reference}/return/", {"post"}),
    "api-me": ("/me/", {"get"}),
    "api-links": ("/links/", {"get"}),
    "api-link": ("/links/{pk}/", {"delete"}),
    "api-schema": ("/schema/", {"get"}),
}


def document() -> dict[str, Any]:
    return copy.deepcopy(openapi_document())


def outcomes_by_code() -> dict[str, Outcome]:
    found = {value.code: value for value in vars(outcomes).values() if isinstance(value, Outcome)}
    assert len(found) > 30
    return found


def problem_codes(doc: dict[str, Any]) -> Iterator[tuple[str, str, int, str]]:
    """``(path, method, status, code)`` of every code a ``Problem`` answer may carry."""
    for path, item in doc["paths"].items():
        for method, operation in item.items():
            if method not in METHODS:
                continue
            for status, response in operation["responses"].items():
                schema = response.get("content", {}).get("application/json", {}).get("schema", {})
                for part in schema.get("allOf", []):
                    for code in part.get("properties", {}).get("code", {}).get("enum", []):
                        yield path, method, int(status), code


def pattern_names() -> dict[str, str]:
    """The URL name of every ``django_eid`` pattern, by name, with its route."""
    found: dict[str, str] = {}

    def walk(patterns: list[Any], prefix: str, namespace: str | None) -> None:
        for pattern in patterns:
            if isinstance(pattern, URLResolver):
                walk(pattern.url_patterns, prefix + str(pattern.pattern), pattern.namespace)
            elif isinstance(pattern, URLPattern) and namespace == "django_eid" and pattern.name:
                found[pattern.name] = prefix + str(pattern.pattern)

    walk(get_resolver().url_patterns, "", None)
    return found


# -- the document itself ----------------------------------------------------------------------
def test_the_document_is_valid_openapi_3_1() -> None:
    doc = document()
    assert doc["openapi"].startswith("3.1.")
    openapi_spec_validator.validate(doc)


def test_its_version_is_the_package_s() -> None:
    assert document()["info"]["version"] == django_eid.__version__


def test_the_shipped_file_is_what_is_served() -> None:
    from importlib import resources

    text = resources.files("django_eid").joinpath("openapi.json").read_text(encoding="utf-8")
    assert json.loads(text) == openapi_document()


def test_every_operation_is_served_and_every_api_url_documented() -> None:
    doc = document()
    served = {(path, method) for path, methods in OPERATIONS.values() for method in sorted(methods)}
    documented = {
        (path, method)
        for path, item in doc["paths"].items()
        for method in item
        if method in METHODS
    }
    assert documented == served
    names = {name for name in pattern_names() if name.startswith("api-")}
    assert names == API_NAMES == set(OPERATIONS)
    for name, (path, _methods) in OPERATIONS.items():
        args = [REFERENCE] if "{reference}" in path else [LINK] if "{pk}" in path else []
        url = reverse(f"django_eid:{name}", args=args)
        assert url == "/eid/api" + path.replace("{reference}", REFERENCE).replace("{pk}", LINK)
        assert resolve(url).url_name == name


def test_every_operation_has_a_unique_operation_id() -> None:
    ids = [
        operation["operationId"]
        for item in document()["paths"].values()
        for method, operation in item.items()
        if method in METHODS
    ]
    assert len(ids) == len(set(ids)) == 8


def test_every_problem_code_is_an_outcome_with_that_status() -> None:
    known = outcomes_by_code()
    found = list(problem_codes(document()))
    assert len(found) > 30
    for path, method, status, code in found:
        assert code in known, (path, method, code)
        assert known[code].status == status, (path, method, status, code)


def test_every_outcome_code_of_an_identification_is_an_outcome() -> None:
    known = outcomes_by_code()
    schema = document()["components"]["schemas"]["Outcome"]["properties"]
    for code in schema["code"]["enum"]:
        assert known[code].status in (200, 410)
    # Every code an identification is rejected with, which a front end may act on.
    assert set(schema["reason"]["enum"]) == outcomes.REJECTION_CODES


def test_the_api_s_own_outcomes_are_all_documented() -> None:
    """Every refusal django_eid.outcomes defines for the API appears in the document."""
    documented = {code for _path, _method, _status, code in problem_codes(document())}
    api_outcomes = {
        outcomes.LOGIN_REQUIRED,
        outcomes.CSRF_FAILED,
        outcomes.INVALID_BODY,
        outcomes.INVALID_REQUEST,
        outcomes.UNKNOWN_FIELD,
        outcomes.NOT_A_STRING,
        outcomes.NEXT_NOT_ALLOWED,
        outcomes.MAX_AGE_INVALID,
        outcomes.MIN_AGE_INVALID,
        outcomes.MIN_LOA_INVALID,
        outcomes.ALREADY_FINISHED,
    }
    assert {outcome.code for outcome in api_outcomes} <= documented


# -- the check of the answers ------------------------------------------------------------------------
def api_request(method: str, path: str) -> Any:
    request = RequestFactory().generic(method, "/eid/api" + path)
    request.resolver_match = resolve(request.path)
    return request


def json_response(body: Any, status: int = 200, **headers: str) -> HttpResponse:
    response = HttpResponse(json.dumps(body), status=status, content_type="application/json")
    for name, value in headers.items():
        response[name] = value
    return response


PENDING: dict[str, Any] = {
    "reference": REFERENCE,
    "status": "PENDING",
    "display": "redirect",
    "outcome": {"code": "pending", "message": "The identification is not finished yet."},
    "created_at": "2026-01-01T12:00:00.000Z",
    "completed_at": None,
}


def test_the_check_accepts_what_the_document_describes() -> None:
    check_response(api_request("GET", f"/identifications/{REFERENCE}/"), json_response(PENDING))
    check_response(api_request("GET", "/me/"), json_response(None))
    refusal = {"code": "invalid_link", "message": "This identification link is not valid."}
    check_response(
        api_request("POST", f"/identifications/{REFERENCE}/cancel/"), json_response(refusal, 404)
    )


@pytest.mark.parametrize(
    ("method", "path", "response"),
    [
        pytest.param(
            "GET",
            f"/identifications/{REFERENCE}/",
            json_response({k: v for k, v in PENDING.items() if k != "status"}),
            id="a-required-property-missing",
        ),
        pytest.param(
            "GET",
            f"/identifications/{REFERENCE}/",
            json_response({**PENDING, "social_security_number": "01018512345"}),
            id="an-undocumented-property",
        ),
        pytest.param(
            "GET",
            f"/identifications/{REFERENCE}/",
            json_response({**PENDING, "status": "DONE"}),
            id="a-value-not-in-the-enum",
        ),
        pytest.param(
            "GET",
            f"/identifications/{REFERENCE}/",
            json_response({"code": "x", "message": "y"}, 418),
            id="an-undocumented-status",
        ),
        pytest.param(
            "GET",
            f"/identifications/{REFERENCE}/",
            json_response({"code": "csrf_failed", "message": "m"}, 404),
            id="a-code-not-of-that-status",
        ),
        pytest.param(
            "GET", "/me/", json_response({"name": "Kari"}), id="an-identity-missing-fields"
        ),
        pytest.param(
            "GET",
            f"/identifications/{REFERENCE}/",
            HttpResponse("<html>500</html>", status=500),
            id="a-server-error-page",
        ),
        pytest.param(
            "DELETE",
            "/me/",
            json_response({"code": "login_required", "message": "m"}, 401),
            id="an-undocumented-method-not-405",
        ),
        pytest.param(
            "DELETE",
            "/me/",
            json_response({"detail": "Method not allowed"}, 405),
            id="a-405-that-is-not-a-problem",
        ),
        pytest.param(
            "POST",
            "/identifications/",
            json_response({"reference": REFERENCE, "url": "https://x", "display": "redirect"}, 201),
            id="a-start-without-expires-at",
        ),
    ],
)
def test_the_check_refuses_an_answer_the_document_does_not_describe(
    method: str, path: str, response: HttpResponse
) -> None:
    with pytest.raises(OpenAPIMismatch):
        check_response(api_request(method, path), response)


@pytest.mark.django_db
def test_the_check_runs_on_every_answer_of_the_api(
    alice: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Through the middleware of the test settings: an answer that breaks the document
    fails the request, and so the test that made it."""
    from django_eid import api

    client = Client()
    client.force_login(alice)
    assert client.get("/eid/api/me/").status_code == 200
    monkeypatch.setattr(api.MeView, "get", lambda self, request, caller: api.answer({"a": 1}))
    with pytest.raises(OpenAPIMismatch, match="GET /eid/api/me/ answered 200"):
        client.get("/eid/api/me/")


# -- the schema endpoint --------------------------------------------------------------------------
def test_the_schema_is_served_with_the_mount_as_its_server() -> None:
    response = Client().get("/eid/api/schema/")
    assert response.status_code == 200
    assert response["Content-Type"] == "application/json"
    served = response.json()
    assert served["servers"] == [{"url": "/eid/api"}]
    assert served == {**document(), "servers": [{"url": "/eid/api"}]}


def test_the_schema_names_where_the_site_mounts_the_api(settings: Any) -> None:
    settings.ROOT_URLCONF = "tests.api.urls_elsewhere"
    served = Client().get("/accounts/verify/api/schema/").json()
    assert served["servers"] == [{"url": "/accounts/verify/api"}]
    # The shipped document is not changed by serving it.
    assert openapi_document()["servers"] == [{"url": "/eid/api"}]
