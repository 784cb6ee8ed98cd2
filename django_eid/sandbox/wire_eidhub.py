"""The wire of the eID Hub Authentication REST API (``/auth/rest/sessions``), over the sandbox.

One thin layer: it reads an eID Hub create request into the common
:class:`~django_eid.sandbox.wire.CreateRequest`, renders a
:class:`~django_eid.sandbox.wire.Session` as the hub's session resource (camelCase,
UPPER_CASE statuses, ``subject`` with the number's country and type), renders errors as
problem+json and builds the return URL (``sessionId`` appended). The behaviour stays in
:class:`~django_eid.sandbox.broker.SandboxBroker`.
"""

from __future__ import annotations

import base64
import datetime
import hashlib
import ipaddress
import json
import secrets
from collections.abc import Callable, Mapping
from typing import Any, Final
from urllib.parse import urlsplit

from django_eid import vocabulary
from django_eid.records import is_http_url
from django_eid.sandbox.wire import (
    DOMAIN_RE,
    CreateRequest,
    Refused,
    Reply,
    Session,
    append_session_id,
    provider_named,
)

API: Final = "eid-hub"
FLOWS: Final = ("redirect", "headless", "embedded")
LOAS: Final = ("low", "substantial", "high")
#: ``sessionLifetime``: the default, and the floor values under it are raised to.
DEFAULT_LIFETIME: Final = 1200
MIN_LIFETIME: Final = 300
PROBLEM: Final = "application/problem+json"
ERROR_TYPE: Final = "https://developer.signicat.com/docs/error-codes/"
#: The hub name of the v1 providers the persons use.
PROVIDERS: Final = {
    "NO_BANKID_WEB": "nbid",
    "NO_BANKID_MOBILE": "nbid",
    "NO_BUYPASS": "nbid",
    "SWE_BANKID": "sbid",
    "SWE_BANKID_MOBILE": "sbid",
    "DA_NEMID": "mitid",
    "DK_MITID": "mitid",
    "FI_TUPAS": "ftn",
    "FI_MOBIILIVARMENNE": "ftn",
}
#: The v1 provider the login page uses for a single allowed hub provider.
FROM_HUB: Final = {
    "nbid": "NO_BANKID_WEB",
    "sbid": "SWE_BANKID",
    "mitid": "DA_NEMID",
    "ftn": "FI_TUPAS",
}
STATUSES: Final = {
    vocabulary.CREATED: "CREATED",
    vocabulary.USER_INITIATED: "WAITING_FOR_USER",
    vocabulary.SUCCESS: "SUCCESS",
    vocabulary.ERROR: "ERROR",
    vocabulary.USER_ABORTED: "ABORT",
    vocabulary.INVALIDATED: "CANCELLED",
    vocabulary.TIMEOUT: "EXPIRED",
}
#: The request fields echoed in the session resource.
ECHOED: Final = (
    "allowedProviders",
    "language",
    "flow",
    "requestedAttributes",
    "requestedLoa",
    "externalReference",
    "usageReference",
    "tags",
    "themeId",
    "requestDomain",
    "embeddedParentDomains",
)


def problem(
    status: int,
    code: str,
    title: str,
    detail: str,
    invalid_params: list[dict[str, str]] | None = None,
    headers: Mapping[str, str] | None = None,
) -> Refused:
    """A problem+json error, as the hub's APIs answer them."""
    body: dict[str, Any] = {
        "type": ERROR_TYPE,
        "title": title,
        "code": code,
        "status": status,
        "detail": detail,
        "traceId": secrets.token_hex(16),
    }
    if invalid_params is not None:
        body["invalidParams"] = invalid_params
    return Refused(Reply(status, body, {**(headers or {}), "Content-Type": PROBLEM}))


def not_found() -> Refused:
    """The 404 of an unknown, expired (deleted) or another account's session."""
    return problem(404, "session_not_found", "Not found", "No session has this id.")


def from_v1_refusal(refused: Refused) -> Refused:
    """The broker's ``{"message", "code"}`` refusal (a bad token) as problem+json."""
    reply = refused.reply
    code = {401: "invalid_token", 403: "insufficient_scope"}.get(reply.status, "invalid_request")
    title = {401: "Unauthorized", 403: "Forbidden"}.get(reply.status, "Bad request")
    detail = str(reply.body.get("message", "")) if isinstance(reply.body, dict) else ""
    return problem(reply.status, code, title, detail, headers=reply.headers)


def is_callback_url(value: Any) -> bool:
    """https, or http to a loopback host or Django's test server (this is the sandbox)."""
    if not is_http_url(value):
        return False
    parts = urlsplit(value)
    if parts.scheme == "https":
        return True
    host = (parts.hostname or "").lower()
    if host in ("localhost", "testserver") or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _strings(value: Any, max_length: int) -> bool:
    return isinstance(value, list) and all(
        isinstance(v, str) and 0 < len(v) <= max_length for v in value
    )


def parse_create_request(raw: bytes) -> tuple[CreateRequest, dict[str, Any], int]:
    """A hub create body read into the common request, the fields to echo, the lifetime.

    Raises :class:`Refused` (problem+json with ``invalidParams``) naming every bad field.
    """
    try:
        body = json.loads(raw)
    except (ValueError, UnicodeDecodeError):
        body = None
    if not isinstance(body, dict):
        raise problem(400, "invalid_request", "Invalid request", "The body must be a JSON object.")
    params: list[dict[str, str]] = []

    def bad(name: str, reason: str) -> None:
        params.append({"name": name, "reason": reason})

    flow = body.get("flow")
    if flow not in FLOWS:
        bad("flow", f"required: one of {', '.join(FLOWS)}")
    given_attributes: Any = body.get("requestedAttributes")
    attributes: list[str] = given_attributes if _strings(given_attributes, 100) else []
    if not _strings(given_attributes, 100):
        bad("requestedAttributes", "required: a list of attribute names (may be empty)")
    urls = _parse_callbacks(body.get("callbackUrls"), flow, bad)
    return_url = body.get("returnUrl")
    if return_url is not None and not (isinstance(return_url, str) and is_callback_url(return_url)):
        bad("returnUrl", "must be an https URL (http only on loopback)")
        return_url = None
    if flow == "embedded":
        # The frame ends at returnUrl whatever the outcome (callbackUrls are the redirect
        # flow's); without one, the frame shows the outcome itself and goes nowhere.
        urls = dict.fromkeys(("Success", "Abort", "Error"), return_url) if return_url else {}
    allowed = body.get("allowedProviders")
    if allowed is not None and not _strings(allowed, 30):
        bad("allowedProviders", "a list of provider ids of at most 30 characters")
        allowed = None
    language = body.get("language")
    if language is not None and not (isinstance(language, str) and len(language) == 2):
        bad("language", "an ISO 639-1 language code")
        language = None
    loa = body.get("requestedLoa")
    if loa is not None and loa not in LOAS:
        bad("requestedLoa", f"one of {', '.join(LOAS)}")
    prefilled = body.get("prefilledInput")
    nin = prefilled.get("nin") if isinstance(prefilled, dict) else None
    if (prefilled is not None and not isinstance(prefilled, dict)) or (
        nin is not None and not (isinstance(nin, str) and 0 < len(nin) <= 20)
    ):
        bad("prefilledInput.nin", "a national identity number, as a string")
        nin = None
    reference = body.get("externalReference")
    if reference is not None and not (isinstance(reference, str) and len(reference) <= 255):
        bad("externalReference", "a string of at most 255 characters")
    lifetime = body.get("sessionLifetime", DEFAULT_LIFETIME)
    if lifetime is None:
        lifetime = DEFAULT_LIFETIME
    if not isinstance(lifetime, int) or isinstance(lifetime, bool):
        bad("sessionLifetime", "a number of seconds")
        lifetime = DEFAULT_LIFETIME
    domains = body.get("embeddedParentDomains")
    if domains is not None and not (_strings(domains, 255) and all(map(DOMAIN_RE.match, domains))):
        # It ends up in a Content-Security-Policy header: host names only.
        bad("embeddedParentDomains", "a list of host names without scheme or path")
        domains = None
    if flow == "embedded" and not domains:
        bad("embeddedParentDomains", "required for the embedded flow")
    if params:
        raise problem(
            400,
            "invalid_request_parameter",
            "Invalid request parameter",
            "Your request body parameters have failed validation.",
            params,
        )
    single = allowed[0] if allowed and len(allowed) == 1 else None
    upper = (language or "").upper()
    request = CreateRequest(
        return_urls=urls,
        external_reference=reference,
        identity_provider=FROM_HUB.get(single or ""),
        # An unavailable language is English, as at the hub.
        language=(upper if upper in vocabulary.LANGUAGES else "EN") if language else None,
        get_social_security_number="nin" in attributes,
        iframe_domain=str(domains[0]).lower() if flow == "embedded" and domains else None,
        prefilled_social_security_number=nin,
    )
    echo = {key: body[key] for key in ECHOED if body.get(key) is not None}
    return request, echo, max(MIN_LIFETIME, lifetime)


def _parse_callbacks(given: Any, flow: Any, bad: Callable[[str, str], None]) -> dict[str, str]:
    if given is None and flow != "redirect":
        return {}
    if not isinstance(given, dict):
        bad("callbackUrls", "required for the redirect flow: {success, abort, error}")
        return {}
    urls: dict[str, str] = {}
    for name, key in (("Success", "success"), ("Abort", "abort"), ("Error", "error")):
        value = given.get(key)
        if isinstance(value, str) and is_callback_url(value):
            urls[name] = value
        else:
            bad(f"callbackUrls.{key}", "must be an https URL (http only on loopback)")
    return urls


def status_of(session: Session) -> str:
    """The hub's UPPER_CASE status."""
    return STATUSES.get(session.status, session.status.upper())


def provider_of(session: Session) -> str | None:
    """The hub provider: the one allowed provider, else the v1 provider's hub name."""
    return provider_named(session, PROVIDERS)


def loa_of(session: Session, provider: str | None) -> str:
    """The level of assurance used: the requested one, else BankID's high, else substantial."""
    requested = session.wire.get("requestedLoa")
    if isinstance(requested, str):
        return requested
    return "high" if provider == "nbid" else "substantial"


def callback_urls(session: Session) -> dict[str, str]:
    """The callback URLs as echoed: ``sessionId`` already appended."""
    return {
        key: append_session_id(session.return_urls[name], session.request_id)
        for name, key in (("Success", "success"), ("Abort", "abort"), ("Error", "error"))
        if name in session.return_urls
    }


def _subject(session: Session, identity: Mapping[str, Any], provider: str | None) -> dict[str, Any]:
    # Signicat's stable pseudonymous id: a hash, base64 in the samples; of the person
    # (name, birth) where the eID gives no unique id (Swedish BankID), never one for all.
    unique = identity["IdentityProviderUniqueId"] or f"{identity['Name']}|{session.birth_date}"
    pseudonym = hashlib.sha256(f"{provider}:{unique}:{session.client_id}".encode()).digest()
    names = (identity["FirstName"], identity["MiddleName"], identity["LastName"])
    subject: dict[str, Any] = {
        "id": base64.b64encode(pseudonym).decode(),
        "idpId": identity["IdentityProviderUniqueId"],
        "name": " ".join(p for p in names if p),
        "firstName": identity["FirstName"],
        "middleName": identity["MiddleName"],
        "lastName": identity["LastName"],
        "dateOfBirth": session.birth_date,
    }
    if "SocialSecurityNumber" in identity:
        country = vocabulary.provider_country(session.identity_provider) or "NO"
        subject["nin"] = {
            "value": identity["SocialSecurityNumber"],
            "issuingCountry": country,
            # NO BankID says BIRTH (D-numbers included); SE, DK and FI say PERSON.
            "type": "BIRTH" if country == "NO" else "PERSON",
        }
    return subject


def iso(timestamp: float) -> str:
    """``2025-03-04T10:25:00.0000000+00:00``, as the hub's samples write it."""
    moment = datetime.datetime.fromtimestamp(timestamp, tz=datetime.UTC).replace(microsecond=0)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.0000000+00:00")


def render(session: Session, url: str, account_id: str) -> dict[str, Any]:
    """The hub session resource of ``session``; ``url`` is its login page."""
    resource: dict[str, Any] = {"id": session.request_id, "accountId": account_id}
    if session.wire.get("flow") != "headless":
        resource["authenticationUrl"] = url
    resource["status"] = status_of(session)
    provider = provider_of(session)
    if provider and not session.in_progress:
        resource["provider"] = provider
    identity = session.identity
    if identity is not None:
        resource["loa"] = loa_of(session, provider)
        resource["subject"] = _subject(session, identity, provider)
        environment = identity.get("EnvironmentInfo") or {}
        resource["environment"] = {
            "ipAddress": environment.get("IPAddress"),
            "userAgent": environment.get("UserAgent"),
        }
    if session.status == vocabulary.ERROR and session.error:
        resource["statusDetail"] = session.error["ErrorMessage"]
        resource["error"] = {
            "type": ERROR_TYPE,
            "title": "Identity provider error",
            "detail": session.error["ErrorMessage"],
            "code": session.error["ErrorCode"].lower(),
        }
    urls = callback_urls(session)
    if urls:
        resource["callbackUrls"] = urls
    resource.update(session.wire)
    lifetime = int(session.wire.get("sessionLifetime", DEFAULT_LIFETIME))
    resource["sessionLifetime"] = lifetime
    resource["expiresAt"] = iso(session.created_at + lifetime)
    return resource


def return_url(session: Session) -> str:
    """The callback URL of the session's outcome with ``sessionId`` appended."""
    name = {vocabulary.SUCCESS: "Success", vocabulary.USER_ABORTED: "Abort"}.get(
        session.status, "Error"
    )
    url = session.return_urls.get(name)
    return append_session_id(url, session.request_id) if url else ""
