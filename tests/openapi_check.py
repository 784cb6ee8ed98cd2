"""Every answer of the JSON API in the test suite, checked against the shipped OpenAPI document.

A middleware of the test settings: whichever test calls ``/eid/api/...``, its response is
validated with ``openapi-core`` (status, headers, body against the operation's schema), and
a mismatch fails that test. A method the document does not list must be answered
``405`` with a ``Problem`` body.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from functools import cache
from typing import Any

import jsonschema
from django.core.exceptions import RequestDataTooBig, TooManyFieldsSent
from django.http import HttpRequest, HttpResponse
from django.http.request import RawPostDataException
from django.urls import reverse
from openapi_core import OpenAPI
from openapi_core.contrib.django import DjangoOpenAPIRequest, DjangoOpenAPIResponse

from django_eid.api import openapi_document


class _Request(DjangoOpenAPIRequest):
    """The request as openapi-core reads it; a body Django cannot give again (an oversized
    or a multipart one, read by the CSRF check) is read as empty: only the answer is checked."""

    @property
    def body(self) -> bytes:
        try:
            return super().body
        except (RawPostDataException, RequestDataTooBig):
            return b""


class OpenAPIMismatch(AssertionError):
    """A response of the API that its OpenAPI document does not describe."""


@cache
def openapi(mount: str) -> OpenAPI:
    """The shipped document, its server where the site mounts the API (as the schema view
    serves it)."""
    return OpenAPI.from_dict({**openapi_document(), "servers": [{"url": mount}]})


def api_prefix() -> str:
    return reverse("django_eid:api-schema").removesuffix("schema/")


def check_response(request: HttpRequest, response: HttpResponse) -> None:
    """Raise :class:`OpenAPIMismatch` unless the document describes ``response``."""
    document = openapi_document()
    path = request.path.removeprefix(api_prefix().rstrip("/"))
    operations = _operations(document, request)
    method = (request.method or "").lower()
    if operations is not None and method not in operations:
        if response.status_code != 405:
            raise OpenAPIMismatch(f"{request.method} {path}: {response.status_code}, not 405")
        problem = document["components"]["schemas"]["Problem"]
        _validate_json(response, problem, document, f"{request.method} {path}")
        return
    try:
        checked = _Request(request)
    except TooManyFieldsSent:
        # openapi-core cannot read such a query either: check the answer by hand.
        _check_too_many_fields(document, request, response, path)
        return
    errors = list(
        openapi(api_prefix().rstrip("/")).iter_response_errors(
            checked, DjangoOpenAPIResponse(response)
        )
    )
    if errors:
        details = "; ".join(_describe(error) for error in errors)
        raise OpenAPIMismatch(
            f"{request.method} {request.path} answered {response.status_code} "
            f"{response.content[:500]!r}, which the OpenAPI document does not describe: {details}"
        )


def _check_too_many_fields(
    document: dict[str, Any], request: HttpRequest, response: HttpResponse, path: str
) -> None:
    """The answer to a query of more fields than Django reads: the operation's ``400``."""
    method = (request.method or "").lower()
    operation = next(
        (
            item.get(method)
            for template, item in document["paths"].items()
            if _matches(template, path)
        ),
        None,
    )
    if operation is None or response.status_code != 400 or "400" not in operation["responses"]:
        raise OpenAPIMismatch(f"{request.method} {path}: {response.status_code} undescribed")
    problem = document["components"]["schemas"]["Problem"]
    _validate_json(response, problem, document, f"{request.method} {path}")


def _matches(template: str, path: str) -> bool:
    """Whether ``path`` is one of the document's path ``template`` (``{name}``: a segment)."""
    pattern = "".join(
        "[^/]+" if part.startswith("{") else re.escape(part)
        for part in re.split(r"(\{\w+\})", template)
    )
    return re.fullmatch(pattern, path) is not None


def _operations(document: dict[str, Any], request: HttpRequest) -> set[str] | None:
    """The methods the document lists for ``request``'s path, or ``None`` if it has no path."""
    match = request.resolver_match
    if match is None:
        return None
    route = "/" + match.route
    prefix = api_prefix()
    # Django's <str:reference> is the document's {reference}.
    template = re.sub(r"<(?:\w+:)?(\w+)>", r"{\1}", route.removeprefix(prefix.rstrip("/")))
    item = document["paths"].get(template)
    if item is None:
        return None
    return {key for key in item if key in {"get", "post", "put", "patch", "delete"}}


def _validate_json(response: HttpResponse, schema: Any, document: Any, what: str) -> None:
    import json

    try:
        body = json.loads(response.content)
    except ValueError as err:
        raise OpenAPIMismatch(f"{what}: the body is not JSON") from err
    resolver = {"components": document["components"], **schema}
    try:
        jsonschema.Draft202012Validator(resolver).validate(body)
    except jsonschema.ValidationError as err:
        raise OpenAPIMismatch(f"{what}: {err.message}") from err


def _describe(error: BaseException) -> str:
    causes = []
    cause: BaseException | None = error
    while cause is not None:
        causes.append(f"{type(cause).__name__}: {cause}")
        nested = getattr(cause, "schema_errors", None)
        if nested:
            causes.extend(f"  {e.message} at {list(e.absolute_path)}" for e in nested)
        cause = cause.__cause__
    return " <- ".join(causes)


class OpenAPIResponseCheck:
    """Test middleware: validate each answer under the API's mount point."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        if request.path.startswith(api_prefix()):
            check_response(request, response)
        return response
