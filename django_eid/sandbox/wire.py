"""The broker's wire shapes: replies, errors, the session record, the create request.

What both faces of the sandbox share below :class:`~django_eid.sandbox.broker.SandboxBroker`:
how answers and errors look (RFC 6749 for the token endpoint, ``{"message", "code"}``
or ``{"message", "errors"}`` for the API), how a create request is read (PascalCase,
matched case-insensitively, unknown properties ignored) and how the return URLs'
placeholders are filled.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Callable, Mapping
from typing import Any, Final
from urllib.parse import parse_qs, quote, urlsplit, urlunsplit

from django_eid.records import is_http_url, lower_keys
from django_eid.vocabulary import CREATED, IN_PROGRESS, LANGUAGES, PROVIDER_RE, UNKNOWN_PROVIDER

#: Statuses the login page offers for ``[0]``; the real list is not published.
ERROR_STATUSES: Final = ("TIMEOUT", "LOGIN", "PKI_BLOCKED", "INVALIDATED", "INTERNAL_ERROR")
#: A parent domain for iframe display: a host name or IP, optional port, no scheme.
DOMAIN_RE: Final = re.compile(
    r"^(?:[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}"
    r"[A-Za-z0-9])?)*|\[[0-9A-Fa-f:.]+\])(?::[0-9]{1,5})?\Z"
)
#: More query or form fields than this is not a client of ours.
MAX_FIELDS: Final = 50


@dataclasses.dataclass(frozen=True)
class Reply:
    """An HTTP answer without HTTP: status, JSON body, extra headers."""

    status: int
    body: Any
    headers: Mapping[str, str] = dataclasses.field(default_factory=dict)

    @property
    def content(self) -> bytes:
        # ``None`` is "no body" (a 204), never the JSON ``null``.
        return b"" if self.body is None else json.dumps(self.body).encode()


class Refused(Exception):
    """Stop handling an API call and answer ``reply`` (raised by the parsers)."""

    def __init__(self, reply: Reply) -> None:
        super().__init__(reply.status)
        self.reply = reply


@dataclasses.dataclass
class Session:
    """One identification session as the broker keeps it."""

    request_id: str
    client_id: str
    return_urls: dict[str, str]  # keys "Success", "Abort", "Error"
    external_reference: str | None = None
    identity_provider: str | None = None  # as requested; None: the user chooses
    language: str | None = None
    get_social_security_number: bool = False
    iframe_domain: str | None = None
    iframe_web_messaging: bool = False
    #: A hint for the login page only: never part of the record.
    prefilled_social_security_number: str | None = None
    status: str = CREATED
    identity: dict[str, Any] | None = None  # record fields, once identified
    error: dict[str, str] | None = None
    created_at: float = 0.0
    #: Which API created the session (``v1``, ``v2``, ``eid-hub``): its wire layer renders
    #: it and builds its return URL. The fields below are ``None`` for v1, which has none.
    api: str = "v1"
    #: What that API's layer keeps of the request: the echo of its fields, its own options.
    wire: dict[str, Any] = dataclasses.field(default_factory=dict)
    #: After this the login page is closed and a session still in progress timed out.
    login_expires_at: float | None = None
    #: After this the identity (and the date of birth) are no longer served.
    identity_until: float | None = None
    #: After this the session is gone (404).
    delete_at: float | None = None
    #: The person's full date of birth, ISO (the v1 record has ``ddMMyy`` only).
    birth_date: str | None = None
    #: When the person ended the session (identified, aborted, failed): an OIDC code
    #: lives a minute from then.
    ended_at: float | None = None

    @property
    def in_progress(self) -> bool:
        return self.status in IN_PROGRESS

    def record(self) -> dict[str, Any]:
        """The retrieved record, PascalCase, as the wire format shows it."""
        record: dict[str, Any] = {
            "RequestId": self.request_id,
            "Status": self.status,
            # A provider nobody chose yet is the reference's UNKNOWN, not null.
            "IdentityProvider": self.identity_provider or UNKNOWN_PROVIDER,
        }
        record.update(self.identity or {})
        record["Error"] = self.error
        record["MetaData"] = {}
        return record


def oauth_error(error: str, description: str, status: int = 400) -> Refused:
    """An RFC 6749 section 5.2 error of the token endpoint."""
    headers = {"Cache-Control": "no-store", "Pragma": "no-cache"}
    if status == 401:
        headers["WWW-Authenticate"] = 'Basic realm="django-eid-sandbox"'
    body = {"error": error, "error_description": description}
    return Refused(Reply(status, body, headers))


def api_error(status: int, code: str, message: str, bearer_error: str | None = None) -> Refused:
    """A ``{"message", "code"}`` error of the API; 401/403 say why in ``WWW-Authenticate``."""
    headers = {}
    if status in (401, 403):
        value = 'Bearer realm="django-eid-sandbox"'
        if bearer_error:
            value += f', error="{bearer_error}"'
        headers["WWW-Authenticate"] = value
    return Refused(Reply(status, {"message": message, "code": code}, headers))


def parse_form(content_type: str | None, body: bytes) -> dict[str, list[str]]:
    """The token request's form, every value as a list (repeats are an error)."""
    if (content_type or "").split(";")[0].strip().lower() != "application/x-www-form-urlencoded":
        raise oauth_error("invalid_request", "Send application/x-www-form-urlencoded.")
    try:
        return parse_qs(body.decode(), keep_blank_values=True, max_num_fields=MAX_FIELDS)
    except (UnicodeDecodeError, ValueError):
        raise oauth_error("invalid_request", "The form is not valid.") from None


def append_session_id(url: str, session_id: str) -> str:
    """``url`` with ``sessionId=<id>`` appended, after ``?`` or ``&`` (the successors' return)."""
    parts = urlsplit(url)
    added = f"sessionId={quote(session_id, safe='')}"
    query = f"{parts.query.rstrip('&')}&{added}" if parts.query.rstrip("&") else added
    return urlunsplit(parts._replace(query=query))


def fill_placeholders(url: str, values: Mapping[str, str]) -> str:
    """Replace ``[0]``/``[1]``/``[2]`` in ``url``; values are percent-encoded whole."""
    for placeholder, value in values.items():
        url = url.replace(placeholder, quote(value, safe=""))
    return url


@dataclasses.dataclass(frozen=True)
class CreateRequest:
    """A valid create-session request body."""

    return_urls: dict[str, str]
    external_reference: str | None
    identity_provider: str | None
    language: str | None
    get_social_security_number: bool
    iframe_domain: str | None
    iframe_web_messaging: bool = False
    prefilled_social_security_number: str | None = None


def parse_create_request(raw: bytes) -> CreateRequest:
    """Read a create-session body; raise :class:`Refused` (400, every bad field named)."""
    try:
        parsed = json.loads(raw)
    except (ValueError, UnicodeDecodeError):
        parsed = None
    if not isinstance(parsed, dict):
        body = {"message": "The request body must be a JSON object.", "errors": []}
        raise Refused(Reply(400, body))
    obj = lower_keys(parsed)
    errors: list[dict[str, str]] = []

    def error(field: str, message: str) -> None:
        errors.append({"field": field, "message": message})

    urls: dict[str, str] = {}
    given = obj.get("returnurls")
    if isinstance(given, dict):
        members = lower_keys(given)
        for name in ("Success", "Abort", "Error"):
            value = members.get(name.lower())
            if is_http_url(value):
                urls[name] = value
            else:
                error(f"ReturnUrls.{name}", "Required: an absolute http(s) URL.")
    else:
        error("ReturnUrls", "Required: an object with Success, Abort and Error URLs.")
    provider = obj.get("identityprovider")
    if provider is not None and not (isinstance(provider, str) and PROVIDER_RE.match(provider)):
        error("IdentityProvider", "Upper-case words joined by underscores, e.g. NO_BANKID_WEB.")
    language = obj.get("language")
    if language is not None and language not in LANGUAGES:
        error("Language", f"One of {', '.join(LANGUAGES)}.")
    get_ssn = obj.get("getsocialsecuritynumber")
    if get_ssn is not None and not isinstance(get_ssn, bool):
        error("GetSocialSecurityNumber", "Must be true or false.")
    reference = obj.get("externalreference")
    if reference is not None and not (isinstance(reference, str) and len(reference) <= 255):
        error("ExternalReference", "Must be a string of at most 255 characters.")
    domain = _parse_domain(obj, error)
    iframe = obj.get("iframe")
    messaging = lower_keys(iframe).get("webmessaging", False) if isinstance(iframe, dict) else False
    if not isinstance(messaging, bool):
        error("iFrame.WebMessaging", "Must be true or false.")
    prefilled = obj.get("prefilledsocialsecuritynumber")
    if prefilled is not None and not (isinstance(prefilled, str) and 0 < len(prefilled) <= 20):
        error("PreFilledSocialSecurityNumber", "A national identity number, as a string.")
        prefilled = None
    if errors:
        raise Refused(Reply(400, {"message": "The request is not valid.", "errors": errors}))
    return CreateRequest(
        return_urls=urls,
        external_reference=reference,
        identity_provider=provider,
        language=language,
        get_social_security_number=bool(get_ssn),
        iframe_domain=domain,
        iframe_web_messaging=messaging is True,
        prefilled_social_security_number=prefilled,
    )


def _parse_domain(obj: Mapping[str, Any], error: Callable[[str, str], None]) -> str | None:
    # The deployed service reads iFrame.Domain, the interface document a top-level
    # "domain"; the first one given wins. An iFrame object without its Domain is refused,
    # as the published schema requires it (it feeds the frame's Content-Security-Policy).
    iframe = obj.get("iframe")
    if iframe is not None and not isinstance(iframe, dict):
        error("iFrame", "Must be an object.")
        iframe = None
    if iframe is not None and lower_keys(iframe).get("domain") is None:
        error("iFrame.Domain", "Required with iFrame: the parent page's host, e.g. shop.example.")
        return None
    for field, value in (("iFrame.Domain", lower_keys(iframe or {}).get("domain")),
                         ("domain", obj.get("domain"))):  # fmt: skip
        if value is None:
            continue
        if not isinstance(value, str) or not DOMAIN_RE.match(value):
            # It ends up in a Content-Security-Policy header: accept host names only.
            error(field, "A host name without scheme or path, e.g. shop.example.")
            return None
        return value.lower()
    return None


def provider_named(session: Session, names: Mapping[str, str]) -> str | None:
    """The provider a successor API reports for ``session``: the one its request allowed,
    else the name in ``names`` of the (v1) provider the person used."""
    allowed = session.wire.get("allowedProviders") or []
    if len(allowed) == 1:
        return str(allowed[0])
    if not session.identity_provider:
        return None
    return names.get(session.identity_provider, session.identity_provider.lower())
