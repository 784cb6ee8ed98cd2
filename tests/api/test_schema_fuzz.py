"""The OpenAPI document says what the API enforces, and the API keeps to its document.

Issue 25, point 10: ``next``, ``provider`` and a return's ``query`` were any string in the
document while the API refused most strings, so generated clients and fuzzers strayed out
of what it takes. Each field's test compares the document (its JSON Schema, read by
``jsonschema`` as openapi-core and schemathesis read it) with what the endpoint does, on
values built around the API's own limits and syntax. Then schemathesis sends every
operation what the document allows, and what it does not, through Django's test client:
never a 5xx, every answer documented (status, headers, body), anything the document refuses
refused, and nothing it allows refused with a ``400`` unless the document cannot say why
(:func:`refusal_beyond_the_document`). Once for the suite, against the default broker API.
"""

from __future__ import annotations

import json
import re
import time
import unicodedata
import zlib
from collections.abc import Iterator, Mapping
from typing import Any
from urllib.parse import urlsplit

import jsonschema
import jsonschema_rs
import pytest
import requests
import schemathesis
from hypothesis import HealthCheck, given
from hypothesis import settings as hsettings
from hypothesis import strategies as st

from django_eid.api import PROVIDER_MAX_LENGTH, openapi_document
from django_eid.brokers import API_NAMES, api_class, broker_api
from django_eid.flows.start import NEXT_MAX_LENGTH
from tests.api.conftest import FRONTEND_HOST, Api, api_start, fields_of
from tests.examples import examples
from tests.fixtures_broker import ScriptedBroker

pytestmark = pytest.mark.django_db

DOCUMENT = openapi_document()
#: A reference no identification has: ``404`` once the request is otherwise one the API reads.
NOBODY_S = "A" * 32
#: The hosts a ``next`` may name in these tests: the test client's and the front end's.
ALLOWED_HOSTS = frozenset({"testserver", FRONTEND_HOST})
#: The field tests: 150 values each, a request per value (about 5 ms each).
FIELD_EXAMPLES = hsettings(
    max_examples=examples(150),
    deadline=None,
    database=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


def schema_of(name: str) -> dict[str, Any]:
    """The component ``name``, resolvable on its own (its ``$ref`` into the components)."""
    return {"components": DOCUMENT["components"], **DOCUMENT["components"]["schemas"][name]}


def parameter(path: str, method: str, name: str) -> dict[str, Any]:
    item = DOCUMENT["paths"][path]
    found = [*item.get("parameters", []), *item[method].get("parameters", [])]
    return next(param for param in found if param["name"] == name)


def allowed(schema: Mapping[str, Any], instance: Any) -> bool:
    """Whether the document's ``schema`` allows ``instance``, as JSON Schema 2020-12 reads it
    with Python's ``re`` (``jsonschema``, as openapi-core) and with an ECMA-262 engine
    (``jsonschema-rs``, as schemathesis and as a JavaScript client): both must agree."""
    python = jsonschema.Draft202012Validator(dict(schema)).is_valid(instance)
    ecma = jsonschema_rs.Draft202012Validator(dict(schema)).is_valid(instance)
    assert python == ecma, (instance, schema)
    return python


def authority_beyond(value: str) -> bool:
    """Whether the URL ``value`` names a host (as Django reads it, ``\\`` as ``/`` too) other
    than :data:`ALLOWED_HOSTS`, or one ``urlsplit`` cannot read."""
    for candidate in (value, value.replace("\\", "/")):
        try:
            netloc = urlsplit(candidate).netloc
        except ValueError:  # "//[::1": not a host
            return True
        if netloc and netloc not in ALLOWED_HOSTS:
            return True
    return False


def next_beyond_the_document(value: str) -> bool:
    """Whether the API may refuse a ``next`` the document allows. Its host: the site's own
    and ``FRONTEND_ALLOWED_HOSTS`` are settings. Its first character of Unicode's category C
    (Django's rule): a portable regex cannot name the category, and its unassigned
    characters change with each Unicode version. The description says both."""
    return authority_beyond(value) or unicodedata.category(value[0])[0] == "C"


def provider_beyond_the_document(code: str, value: Any) -> bool:
    """Whether the API may refuse a ``provider`` the document allows: the document has
    every broker API's syntax, the site speaks one (``BROKER_API``); what the site offers
    (``ALLOWED_PROVIDERS``, ``IDENTITY_PROVIDER``, a gate) is a setting too."""
    if code == "provider_malformed":
        return bool(value) and not broker_api().provider_re.match(value)
    return code in ("provider_not_offered", "provider_required", "provider_none_offered")


def refusal_beyond_the_document(code: str, field: str | None, sent: Mapping[str, Any]) -> bool:
    """Whether a ``400 code`` (about ``field``) of a request the document allows is one the
    document cannot exclude; ``sent`` is the request's JSON body."""
    if code == "next_not_allowed":
        return next_beyond_the_document(sent["next"])
    if field == "provider":
        return provider_beyond_the_document(code, sent.get("provider"))
    # Whether the broker's ids in a return's query are this identification's: its state.
    return code == "answer_mismatch"


# -- each field: the document refuses what the API refuses ----------------------------------
NEXT_PIECES = (
    *("/", "\\", "//", ":", "?", "#", "@", "a", "Z", "0", ".", "-", "+", "%2F", " ", ":80"),
    *("http:", "HTTPS:", "javascript:", "x1+.-:", "1a:", FRONTEND_HOST, "testserver", "e.test"),
    # Control and white-space characters, Python's and JavaScript's
    *("\t", "\n", "\x1f", "\x7f", "\x85", "\x9f", "\xa0", "\u2028", "\u3000", "\ufeff"),
    # Unicode's category C (format, private use, a tag), and text.
    *("\u200b", "\ue000", "\U000e0001", "é", "\U0001d538"),
)
NEXTS = st.builds(
    lambda head, pad, tail: "".join(head) + "a" * pad + "".join(tail),
    st.lists(st.sampled_from(NEXT_PIECES), max_size=6),
    st.sampled_from([0, 0, 0, 0, NEXT_MAX_LENGTH - 3, NEXT_MAX_LENGTH - 1, NEXT_MAX_LENGTH]),
    st.lists(st.sampled_from(NEXT_PIECES), max_size=2),
)


@FIELD_EXAMPLES
@given(value=NEXTS)
def test_a_next_the_document_allows_is_refused_for_its_host_alone(
    api: Api, frontend: dict[str, str], value: str
) -> None:
    """The pattern and ``maxLength`` of ``next``: no control characters, no blanks at
    either end, at most 2,000 characters, not three slashes, no scheme but http(s) with a
    host. Only what JSON Schema cannot say is left to the API. (About 0.8 s: 150 starts.)"""
    # An unknown display: refused whatever next is, with every field at fault; nothing starts.
    body = api.start({"next": value, "display": "-"}).json()
    refused = ("next", "next_not_allowed") in fields_of(body)
    if allowed(schema_of("StartRequest"), {"next": value}):
        assert not refused or next_beyond_the_document(value), value
    else:
        assert refused, value


PROVIDER_PIECES = ("A", "Z", "a", "z", "0", "9", "_", "-", "__", "-_", " ", ".", "\n", "Å")
PROVIDERS = st.builds(
    lambda head, pad, fill: "".join(head) + fill * pad,
    st.lists(st.sampled_from(PROVIDER_PIECES), max_size=8),
    st.sampled_from([0, 0, 0, PROVIDER_MAX_LENGTH - 1, PROVIDER_MAX_LENGTH]),
    st.sampled_from(["A", "a", "0"]),
)


@FIELD_EXAMPLES
@given(value=PROVIDERS)
def test_a_start_s_provider_is_a_name_of_one_of_the_broker_apis(api: Api, value: str) -> None:
    """The document has every broker API's syntax (it does not know the site's), at most
    the 64 characters a row stores; the site's API refuses the others' names. (About
    0.7 s: 150 starts.)"""
    in_any_api = any(api_class(name).provider_re.match(value) for name in API_NAMES)
    in_document = allowed(schema_of("StartRequest"), {"provider": value})
    assert in_document == (value == "" or (in_any_api and len(value) <= PROVIDER_MAX_LENGTH))
    body = api.start({"provider": value, "display": "-"}).json()
    refused = ("provider", "provider_malformed") in fields_of(body)
    assert refused == (not in_document or provider_beyond_the_document("provider_malformed", value))


@FIELD_EXAMPLES
@given(value=PROVIDERS.filter(bool))
def test_api_me_s_provider_is_a_name_in_any_api_s_syntax(api: Api, value: str) -> None:
    """Stored rows keep the name of the API they came through: ``api-me`` takes any.
    (About 0.6 s: 150 calls.)"""
    in_document = allowed(parameter("/me/", "get", "provider")["schema"], [value])
    # An invalid min_age: a 400 naming every field at fault, without a query.
    body = api.me({"provider": value, "min_age": "-"}).json()
    assert (("provider", "provider_malformed") in fields_of(body)) == (not in_document), value


QUERY_PIECES = (
    *("eid_return", "eid%5Freturn", "eid%5freturn", "%65id_return", "eid_retur", "eid_returnx"),
    *("success", "abort", "error", "%73uccess", "succes", "ERROR"),
    *("=", "&", "?", "x", "+", " ", "%", "\n", ";"),
)
QUERIES = st.lists(st.sampled_from(QUERY_PIECES), max_size=8).map("".join)


@FIELD_EXAMPLES
@given(value=QUERIES)
def test_a_return_s_query_is_refused_exactly_when_the_document_refuses_it(
    api: Api, value: str
) -> None:
    """One ``eid_return`` of ``success``, ``abort`` or ``error``, as Django decodes the query
    (``%5F`` is ``_``), a leading ``?`` ignored; an empty query is none. (About 0.6 s: 150
    calls.)"""
    response = api.finish(NOBODY_S, value, secret="")
    in_document = allowed(schema_of("ReturnRequest"), {"query": value})
    # Past the query, the reference: nobody's.
    assert response.status_code == (404 if in_document else 400), value


def test_a_return_s_secret_may_be_null_as_in_the_api(api: Api) -> None:
    """``null`` is no secret (a session that started may leave it out), as for every field."""
    body = {"query": "eid_return=success", "secret": None}
    assert allowed(schema_of("ReturnRequest"), body)
    assert api.post(f"/identifications/{NOBODY_S}/return/", body).status_code == 404


def patterns(node: Any) -> Iterator[str]:
    """Every ``pattern`` of the document."""
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "pattern" and isinstance(value, str):
                yield value
            else:
                yield from patterns(value)
    elif isinstance(node, list):
        for value in node:
            yield from patterns(value)


#: Values the patterns of the document take: a reference, a path, names, a return's query.
MATCHING = ("A" * 16, "/account/", "NO_BANKID_WEB", "no-bankid", "ref=1&eid_return=success")


def test_every_pattern_is_ecma_262_s_and_takes_no_final_newline() -> None:
    """A pattern is ECMA-262's (jsonschema-rs refuses Python's ``\\Z``), where ``$`` is the
    end; Python's ``re`` (jsonschema, openapi-core, hypothesis) also takes ``$`` before a
    final newline, which the API refuses: each pattern ends ``$(?!\\n)``, the end in both."""
    found = set(patterns(DOCUMENT))
    assert len(found) == 5
    for pattern in found:
        jsonschema_rs.Draft202012Validator({"type": "string", "pattern": pattern})
        taken = [value for value in MATCHING if re.search(pattern, value)]
        assert taken, pattern
        assert not [value for value in taken if re.search(pattern, value + "\n")], pattern


# -- every operation: schemathesis --------------------------------------------------------------
#: Schemathesis' checks of an answer, by name. Left out: ``positive_data_acceptance`` (the
#: test's own rule says which refusals the document cannot exclude) and the checks that send
#: requests of their own over HTTP (``ignored_auth``, ``use_after_free``,
#: ``ensure_resource_availability``, ``object_level_authorization``).
CHECKS = (
    "not_a_server_error",
    "status_code_conformance",
    "content_type_conformance",
    "response_headers_conformance",
    "response_schema_conformance",
    # Whatever the document refuses, the API refuses (4xx).
    "negative_data_rejection",
    # A method an endpoint does not take: 405 and its Allow header.
    "unsupported_method",
    "allow_header_conformance",
    "missing_required_header",
)
SCHEMA = schemathesis.openapi.from_dict(
    DOCUMENT,
    config=schemathesis.Config.from_dict(
        {"checks": {"enabled": False, **{name: {"enabled": True} for name in CHECKS}}}
    ),
)
#: What requests.Request takes of schemathesis' transport arguments.
REQUEST_ARGUMENTS = ("method", "url", "headers", "params", "json", "data", "files")
#: Sent by the test client itself (Alice's session) or by Django's test client's own means.
NOT_FORWARDED = {"cookie", "authorization", "content-type", "content-length"}


def send(api: Api, case: Any) -> schemathesis.Response:
    """``case`` sent through Django's test client, as schemathesis would send it over HTTP;
    the answer as schemathesis reads one."""
    kwargs = case.as_transport_kwargs(base_url="http://testserver/eid/api")
    request = requests.Request(**{k: v for k, v in kwargs.items() if k in REQUEST_ARGUMENTS})
    prepared = request.prepare()
    body = prepared.body or b""
    headers = {k: v for k, v in prepared.headers.items() if k.lower() not in NOT_FORWARDED}
    began = time.perf_counter()
    answer = api.client.generic(
        prepared.method or "GET",
        prepared.path_url,
        body.encode() if isinstance(body, str) else body,
        content_type=prepared.headers.get("Content-Type", ""),
        headers=headers,
    )
    return schemathesis.Response(
        status_code=answer.status_code,
        headers={name: [value] for name, value in answer.items()},
        content=answer.content,
        request=prepared,
        elapsed=time.perf_counter() - began,
        verify=True,
    )


@pytest.fixture
def kept() -> dict[str, str]:
    """What the examples of one operation's test share (hypothesis runs them in one test)."""
    return {}


def own_reference(api: Api, broker: ScriptedBroker, kept: dict[str, str]) -> str:
    """One of Alice's identifications (started on first use), so that some requests get
    past the ``404`` of a reference of nobody's."""
    if "reference" not in kept:
        kept["reference"] = api_start(api, broker).reference
    return kept["reference"]


@SCHEMA.parametrize()
@hsettings(
    max_examples=examples(50),
    deadline=None,
    database=None,
    derandomize=True,
    suppress_health_check=[
        HealthCheck.function_scoped_fixture,
        HealthCheck.too_slow,
        HealthCheck.filter_too_much,
    ],
)
def test_every_operation_keeps_to_the_document(
    case: Any,
    api: Api,
    broker: ScriptedBroker,
    frontend: dict[str, str],
    eid: Any,
    kept: dict[str, str],
) -> None:
    """Schemathesis' examples, boundaries (its coverage phase) and fuzzing, positive and
    negative, per operation: about 1.5 s each (hypothesis derandomized: the same requests
    every run)."""
    eid(MAX_PENDING_PER_USER=10_000)  # every start the document allows may start
    positive = case.meta is not None and case.meta.generation.mode.is_positive
    reference = case.path_parameters.get("reference")
    if positive and reference is not None and zlib.crc32(reference.encode()) % 3 == 0:
        case.path_parameters["reference"] = own_reference(api, broker, kept)
    response = send(api, case)
    case.validate_response(response)
    if positive and response.status_code == 400:
        # The document allowed this request: a refusal must be one it cannot say.
        sent = case.body if isinstance(case.body, dict) else {}
        refusal = json.loads(response.content)
        errors = refusal.get("errors") or [{"field": None, "code": refusal["code"]}]
        for error in errors:
            assert refusal_beyond_the_document(error["code"], error["field"], sent), (
                case.operation.label,
                sent,
                refusal,
            )
