"""The wire of Express identification v2 (``/identification/v2/sessions``), over the sandbox.

One thin layer: it reads a v2 create request into the common
:class:`~django_eid.sandbox.wire.CreateRequest`, renders a
:class:`~django_eid.sandbox.wire.Session` as the v2 session resource (camelCase, lower
snake-case statuses, ISO dates), renders v2 errors and builds the v2 return URL
(``sessionId`` appended, no placeholders). The behaviour stays in
:class:`~django_eid.sandbox.broker.SandboxBroker`, which keeps statuses in v1 terms.
"""

from __future__ import annotations

import base64
import binascii
import datetime
import hashlib
import json
from typing import Any, Final
from urllib.parse import parse_qsl

from django_eid import vocabulary
from django_eid.records import is_http_url
from django_eid.sandbox.wire import (
    DOMAIN_RE,
    MAX_FIELDS,
    CreateRequest,
    Refused,
    Reply,
    Session,
    append_session_id,
    provider_named,
)

API: Final = "v2"
FLOWS: Final = ("redirect", "iframe", "headless")
LANGUAGES: Final = ("en", "no", "sv", "da", "fi")
#: The attributes ``include`` may ask for (the vendor's list).
INCLUDES: Final = frozenset(
    {
        "name",
        "phone_number",
        "date_of_birth",
        "nin",
        "email",
        "resource.vipps_aml_person",
        "organization",
        "nin_consent",
    }
)
#: Seconds after creation: the session's ``url`` works for 10 minutes, the identity is
#: kept for an hour; the session itself (without personal data) a while longer.
LOGIN_LIFETIME: Final = 600
IDENTITY_LIFETIME: Final = 3600
SESSION_LIFETIME: Final = 2 * 3600
#: Sessions per page of the list call.
DEFAULT_LIMIT: Final = 20
MAX_LIMIT: Final = 100
#: The v2 name of the v1 providers the persons use (the vendor's rough equivalents).
PROVIDERS: Final = {
    "NO_BANKID_WEB": "no_bankid_netcentric",
    "NO_BANKID_MOBILE": "no_bankid_mobile",
    "SWE_BANKID": "se_bankid",
    "SWE_BANKID_MOBILE": "se_bankid",
    "NO_BUYPASS": "no_buypass",
    "DA_NEMID": "mitid",
    "DK_MITID": "mitid",
    "FI_TUPAS": "ftn",
    "FI_MOBIILIVARMENNE": "ftn",
}
#: The v1 provider the login page uses for a single allowed v2 provider.
FROM_V2: Final = {
    "no_bankid_netcentric": "NO_BANKID_WEB",
    "no_bankid": "NO_BANKID_WEB",
    "no_bankid_mobile": "NO_BANKID_MOBILE",
    "se_bankid": "SWE_BANKID",
    "no_buypass": "NO_BUYPASS",
    "dk_nemid": "DA_NEMID",
    "mitid": "DA_NEMID",
    "ftn": "FI_TUPAS",
    "fi_eid": "FI_TUPAS",
}
STATUSES: Final = {
    vocabulary.CREATED: "created",
    vocabulary.USER_INITIATED: "user_initiated",
    vocabulary.SUCCESS: "success",
    vocabulary.ERROR: "failed",
    vocabulary.USER_ABORTED: "user_aborted",
    vocabulary.TIMEOUT: "timed_out",
    vocabulary.INVALIDATED: "invalidated",
}
#: The request fields echoed in the session resource.
ECHOED: Final = (
    "flow",
    "allowedProviders",
    "include",
    "language",
    "redirectSettings",
    "iframeSettings",
    "externalReference",
    "departmentId",
    "ui",
    "prefilledInput",
)


def error(status: int, message: str, code: str) -> Refused:
    """A v2 error: ``{"message", "code"}``."""
    return Refused(Reply(status, {"message": message, "code": code}))


def not_found() -> Refused:
    """The 404 of an unknown (or another client's) session id."""
    return error(404, "Session not found", "ID-1000")


def invalid(errors: list[dict[str, str]]) -> Refused:
    """A v2 validation error: ``{"message", "errors": [{"field", "message"}]}``."""
    return Refused(Reply(400, {"message": "The request is invalid.", "errors": errors}))


def iso(timestamp: float) -> str:
    """``2025-03-04T10:15:00Z``."""
    moment = datetime.datetime.fromtimestamp(timestamp, tz=datetime.UTC)
    return moment.replace(microsecond=0).isoformat().replace("+00:00", "Z")


def _strings(value: Any, *, max_length: int = 100) -> bool:
    return isinstance(value, list) and all(
        isinstance(v, str) and 0 < len(v) <= max_length for v in value
    )


def parse_create_request(raw: bytes) -> tuple[CreateRequest, dict[str, Any]]:
    """A v2 create body read into the common request, and the fields to echo.

    Raises :class:`Refused` with every bad field named. Names are camelCase and matched
    exactly (v2 is not v1's case-insensitive PascalCase); unknown fields are ignored.
    """
    try:
        body = json.loads(raw)
    except (ValueError, UnicodeDecodeError):
        body = None
    if not isinstance(body, dict):
        raise Refused(
            Reply(400, {"message": "The request body must be a JSON object.", "errors": []})
        )
    errors: list[dict[str, str]] = []

    def bad(field: str, message: str) -> None:
        errors.append({"field": field, "message": message})

    flow = body.get("flow")
    if flow is None:
        bad("flow", "The flow field is required.")
    elif flow not in FLOWS:
        bad("flow", f"One of {', '.join(FLOWS)}.")
    allowed = body.get("allowedProviders")
    if allowed is not None and not _strings(allowed, max_length=64):
        bad("allowedProviders", "A list of provider names.")
        allowed = None
    include = body.get("include")
    if include is not None and not (_strings(include) and set(include) <= INCLUDES):
        bad("include", f"A list of: {', '.join(sorted(INCLUDES))}.")
        include = None
    language = body.get("language")
    if language is not None and language not in LANGUAGES:
        bad("language", f"One of {', '.join(LANGUAGES)}.")
    urls: dict[str, str] = {}
    redirect = body.get("redirectSettings")
    # The sandbox ends an iframe session by moving the parent page to these URLs too.
    if redirect is not None or flow in ("redirect", "iframe"):
        if isinstance(redirect, dict):
            for name, key in (
                ("Success", "successUrl"),
                ("Abort", "abortUrl"),
                ("Error", "errorUrl"),
            ):
                value = redirect.get(key)
                if is_http_url(value):
                    urls[name] = value
                else:
                    bad(f"redirectSettings.{key}", "Required: an absolute http(s) URL.")
        else:
            bad("redirectSettings", "Required: {successUrl, abortUrl, errorUrl}.")
    domain, messaging = _parse_iframe(body.get("iframeSettings"), flow, bad)
    reference = body.get("externalReference")
    if reference is not None and not (isinstance(reference, str) and len(reference) <= 255):
        bad("externalReference", "A string of at most 255 characters.")
    prefilled = body.get("prefilledInput")
    nin = prefilled.get("nin") if isinstance(prefilled, dict) else None
    if (prefilled is not None and not isinstance(prefilled, dict)) or (
        nin is not None and not (isinstance(nin, str) and 0 < len(nin) <= 20)
    ):
        bad("prefilledInput.nin", "A national identity number, as a string.")
        nin = None
    if errors:
        raise invalid(errors)
    single = allowed[0] if allowed and len(allowed) == 1 else None
    request = CreateRequest(
        return_urls=urls if flow != "headless" else {},
        external_reference=reference,
        identity_provider=FROM_V2.get(single or ""),
        language=language.upper() if language else None,
        get_social_security_number="nin" in (include or ()),
        iframe_domain=domain if flow == "iframe" else None,
        iframe_web_messaging=messaging and flow == "iframe",
        prefilled_social_security_number=nin,
    )
    echo = {key: body[key] for key in ECHOED if body.get(key) is not None}
    return request, echo


def _parse_iframe(settings: Any, flow: Any, bad: Any) -> tuple[str | None, bool]:
    if settings is None and flow != "iframe":
        return None, False
    if not isinstance(settings, dict):
        bad("iframeSettings", "Required for the iframe flow: {parentDomains, ...}.")
        return None, False
    domains = settings.get("parentDomains")
    if not (_strings(domains, max_length=255) and domains and all(map(DOMAIN_RE.match, domains))):
        # It ends up in a Content-Security-Policy header: host names only.
        bad("iframeSettings.parentDomains", "A list of host names without scheme or path.")
        return None, False
    origin = settings.get("postMessageTargetOrigin")
    if origin is not None and not is_http_url(origin):
        bad("iframeSettings.postMessageTargetOrigin", "An http(s) origin.")
    return str(domains[0]).lower(), origin is not None


def status_of(session: Session) -> str:
    """The v2 status; a failure whose code is ``TIMEOUT`` reads as ``timed_out``."""
    if session.status == vocabulary.ERROR and (session.error or {}).get("ErrorCode") == "TIMEOUT":
        return "timed_out"
    return STATUSES.get(session.status, session.status.lower())


def provider_of(session: Session) -> str | None:
    """The v2 provider: the one allowed provider, else the v1 provider's v2 name."""
    return provider_named(session, PROVIDERS)


def security_reference(session: Session) -> str:
    """What the user compares in a headless flow (stable for the session)."""
    return hashlib.sha256(session.request_id.encode()).hexdigest()[:8].upper()


def render(session: Session, url: str) -> dict[str, Any]:
    """The v2 session resource of ``session``; ``url`` is its login page."""
    resource: dict[str, Any] = {"id": session.request_id}
    if session.wire.get("flow") == "headless":
        resource["securityReference"] = security_reference(session)
    else:
        resource["url"] = url
    resource["status"] = status_of(session)
    resource["created"] = iso(session.created_at)
    resource["expires"] = iso(session.created_at + LOGIN_LIFETIME)
    provider = provider_of(session)
    if provider and not session.in_progress:
        resource["provider"] = provider
    identity = session.identity
    if identity is not None:
        given = " ".join(
            p for p in (identity["FirstName"], identity["MiddleName"], identity["LastName"]) if p
        )
        resource["identity"] = {
            "providerId": identity["IdentityProviderUniqueId"],
            "fullName": given,
            "firstName": identity["FirstName"],
            "middleName": identity["MiddleName"],
            "lastName": identity["LastName"],
            "dateOfBirth": session.birth_date,
        }
        if "SocialSecurityNumber" in identity:
            resource["identity"]["nin"] = identity["SocialSecurityNumber"]
        environment = identity.get("EnvironmentInfo") or {}
        resource["environment"] = {
            "userAgent": environment.get("UserAgent"),
            "ipAddress": environment.get("IPAddress"),
        }
    if session.status == vocabulary.ERROR and session.error:
        resource["error"] = {
            "code": session.error["ErrorCode"].lower(),
            "message": session.error["ErrorMessage"],
            "providerCode": session.error["NativeErrorCode"],
        }
    resource.update(session.wire)
    return resource


def summary(session: Session) -> dict[str, Any]:
    """A session as the list call shows it: no personal data."""
    item: dict[str, Any] = {
        "id": session.request_id,
        "status": status_of(session),
        "created": iso(session.created_at),
        "expires": iso(session.created_at + LOGIN_LIFETIME),
    }
    provider = provider_of(session)
    if provider:
        item["provider"] = provider
    for key in ("flow", "externalReference"):
        if key in session.wire:
            item[key] = session.wire[key]
    return item


def cursor(offset: int) -> str:
    """The opaque cursor of the page starting at ``offset``."""
    return base64.urlsafe_b64encode(f"sessions:{offset}".encode()).decode().rstrip("=")


def parse_list_query(query: str) -> tuple[int, int]:
    """The offset and limit of a list call (``cursor``, ``limit`` 1-100, default 20)."""
    params = dict(parse_qsl(query, max_num_fields=MAX_FIELDS))
    errors = []
    offset, limit = 0, DEFAULT_LIMIT
    if "limit" in params:
        given = params["limit"]
        if given.isdigit() and 0 < int(given) <= MAX_LIMIT:
            limit = int(given)
        else:
            errors.append({"field": "limit", "message": f"A number from 1 to {MAX_LIMIT}."})
    if params.get("cursor"):
        try:
            text = base64.urlsafe_b64decode(params["cursor"] + "=" * 4).decode()
            prefix, _, number = text.partition(":")
            if prefix != "sessions" or not number.isdigit():
                raise ValueError(text)
            offset = int(number)
        except (ValueError, UnicodeDecodeError, binascii.Error):
            errors.append({"field": "cursor", "message": "Not a cursor of this list."})
    if errors:
        raise invalid(errors)
    return offset, limit


def return_url(session: Session) -> str:
    """The redirect URL of the session's outcome with ``sessionId`` appended."""
    if session.status == vocabulary.SUCCESS:
        url = session.return_urls.get("Success")
    elif session.status == vocabulary.USER_ABORTED:
        url = session.return_urls.get("Abort")
    else:
        url = session.return_urls.get("Error")
    return append_session_id(url, session.request_id) if url else ""
