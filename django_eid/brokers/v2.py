"""Express identification v2 (``BROKER_API = "v2"``), the successor of v1.

``{base_url}/identification/v2/sessions``: camelCase JSON, lower-case snake statuses, the
session id appended to the return URLs as ``sessionId`` (no placeholders), no status call
without personal data, ``POST .../invalidate``. Facts from the vendor's SDKs
(``broker-generations.md`` section 1); those it marks unconfirmed are read tolerantly:
either casing of a status, an unknown status left pending, a date of birth with a time.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar, Final
from urllib.parse import quote

from django_eid.brokers import BrokerApi, ReturnedIds, ReturnUrls, SessionRequest, with_query
from django_eid.exceptions import EidProtocolError
from django_eid.records import (
    CreatedSession,
    EnvironmentInfo,
    IdentificationRecord,
    Progress,
    RecordError,
    is_http_url,
    opt_object,
    opt_str,
    storable_object,
)
from django_eid.transport import Answer

#: Under ``BASE_URL``: ``POST`` creates, ``GET /{id}`` retrieves, ``POST /{id}/invalidate``.
SESSIONS_PATH: Final = "/identification/v2/sessions"
#: The query parameter the broker appends to the return URLs.
SESSION_ID_PARAM: Final = "sessionId"
#: The query parameter django-eid adds to its return URLs: the external reference, a secret
#: only the broker and the returning browser see (the session id alone is not: it travels
#: in the broker's own URLs).
EXTERNAL_ID_PARAM: Final = "externalId"

_PROGRESS: Final = {
    "success": Progress.SUCCESS,
    "created": Progress.IN_PROGRESS,
    "user_initiated": Progress.IN_PROGRESS,
    "user_aborted": Progress.ABORTED,
    "timed_out": Progress.TIMED_OUT,
    "failed": Progress.FAILED,
    "invalidated": Progress.FAILED,
}
#: The persons' country by the prefix of a v2 provider name.
_COUNTRIES: Final = {"no": "NO", "se": "SE", "dk": "DK", "mitid": "DK", "ftn": "FI", "fi": "FI"}
#: Properties of a session kept out of ``raw``: the echo of the pre-filled input may hold
#: the expected person's number, and the audit trail holds the user's certificate (whose
#: subject names the person and, for Swedish BankID, carries the personnummer).
PERSONAL_ECHOES: Final = frozenset({"prefilledInput", "auditTrail"})
#: A session id as django-eid puts it in a URL path: what the vendors' ids look like (hex,
#: UUIDs), never a path segment of its own such as ``..``.
SESSION_ID_RE: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,199}")
#: What ``include`` asks for: the identity, and the number when the site keeps it.
INCLUDE: Final = ("name", "date_of_birth")


def progress_of(status: str | None) -> Progress:
    """A v2 status in either casing; an unknown one is treated as not over yet (logged by
    the flow, expired by age), since its meaning is not published."""
    if not status:
        return Progress.UNKNOWN
    return _PROGRESS.get(status.lower(), Progress.UNKNOWN)


def environment_of(body: Mapping[str, Any], what: str) -> EnvironmentInfo:
    """The browser the person identified in, as a successor API's session names it."""
    environment = opt_object(body, "environment", what)
    return EnvironmentInfo(
        user_agent=opt_str(environment, "userAgent", what),
        ip_address=opt_str(environment, "ipAddress", what),
    )


def iso_date(value: str | None) -> str | None:
    """``YYYY-MM-DD`` from a date that may carry a time (``1971-12-31T00:00:00``)."""
    return value.split("T", 1)[0] if value else value


class V2Api(BrokerApi):
    """``{base_url}/identification/v2/sessions``, returning with ``?sessionId=``."""

    name: ClassVar[str] = "v2"
    token_path: ClassVar[str] = "/oauth/connect/token"  # noqa: S105  (a path)
    default_base_url: ClassVar[str | None] = "https://api.signicat.io"
    default_auth_url: ClassVar[str | None] = "https://api.signicat.io"
    default_scopes: ClassVar[tuple[str, ...]] = ("identify",)
    request_id_param: ClassVar[str] = SESSION_ID_PARAM
    external_id_param: ClassVar[str] = EXTERNAL_ID_PARAM
    return_params: ClassVar[tuple[str, ...]] = (SESSION_ID_PARAM, EXTERNAL_ID_PARAM)
    provider_re: ClassVar[re.Pattern[str]] = re.compile(r"^[a-z0-9]+(?:_[a-z0-9]+)*\Z")
    provider_example: ClassVar[str] = "no_bankid_mobile"
    #: The union of the vendor's SDKs' enums (``broker-generations.md`` 1.5).
    published_providers: ClassVar[tuple[str, ...]] = (
        "no_bankid_netcentric",
        "no_bankid_mobile",
        "no_bankid",
        "se_bankid",
        "no_buypass",
        "dk_nemid",
        "mitid",
        "ftn",
        "fi_eid",
        "sms_otp",
        "email_otp",
        "freja",
        "github",
        "google",
        "linkedin",
        "microsoft",
        "itsme",
        "idin",
        "digid",
        "eherkenning",
    )
    provider_families: ClassVar[Mapping[str, str]] = {
        "no_bankid": "no-bankid",
        "no_bankid_netcentric": "no-bankid",
        "no_bankid_mobile": "no-bankid",
        "no_buypass": "no-buypass",
        "se_bankid": "se-bankid",
        "dk_nemid": "dk-nemid",
        "mitid": "dk-mitid",
        "ftn": "fi-ftn",
    }

    @classmethod
    def return_urls(cls, urls: ReturnUrls, *, external_reference: str) -> ReturnUrls:
        def url(base: str) -> str:
            return with_query(base, EXTERNAL_ID_PARAM, external_reference)

        return ReturnUrls(success=url(urls.success), abort=url(urls.abort), error=url(urls.error))

    @classmethod
    def returned_ids(cls, params: Mapping[str, Sequence[str]]) -> ReturnedIds:
        return ReturnedIds(
            request_id=list(params.get(SESSION_ID_PARAM, ())),
            external_id=list(params.get(EXTERNAL_ID_PARAM, ())),
        )

    @classmethod
    def provider_country(cls, provider: str | None) -> str | None:
        if not provider:
            return None
        return _COUNTRIES.get(provider.lower().split("_", 1)[0])

    #: Under ``BASE_URL``: the sessions resource.
    sessions_path: ClassVar[str] = SESSIONS_PATH
    #: The property of a created session that holds where to send the user.
    url_property: ClassVar[str] = "url"

    def session_label(self, suffix: str = "") -> str:
        """A session's URL as messages and logs name it: ``{id}`` for the session id."""
        return f"{self.base_url}{self.sessions_path}/{{id}}{suffix}"

    def session_url(self, request_id: str = "") -> str:
        url = f"{self.base_url}{self.sessions_path}"
        return f"{url}/{quote(request_id, safe='')}" if request_id else url

    def created(self, answer: Answer) -> CreatedSession:
        """The created session's id and where to send the user."""
        what = answer.what
        body = storable_object(answer.json(), what)
        url = opt_str(body, self.url_property, what)
        session_id = opt_str(body, "id", what)
        if not is_http_url(url):
            raise EidProtocolError(f"{what}: the answer has no absolute {self.url_property!r}")
        if not session_id:
            raise EidProtocolError(f"{what}: the answer has no 'id'")
        if not SESSION_ID_RE.fullmatch(session_id):
            # It goes into the path of every later call (".." would change which).
            raise EidProtocolError(f"{what}: the answer's 'id' is not a session id")
        return CreatedSession(url=url, request_id=session_id)

    def create_body(self, request: SessionRequest) -> dict[str, Any]:
        urls = self.return_urls(request.return_urls, external_reference=request.external_reference)
        include = [*INCLUDE, "nin"] if request.get_social_security_number else list(INCLUDE)
        body: dict[str, Any] = {
            "flow": "iframe" if request.iframe_domain else "redirect",
            "include": include,
            "redirectSettings": {
                "successUrl": urls.success,
                "abortUrl": urls.abort,
                "errorUrl": urls.error,
            },
            "externalReference": request.external_reference,
        }
        if request.identity_provider:
            body["allowedProviders"] = [request.identity_provider]
        if request.language:
            body["language"] = request.language.lower()
        if request.iframe_domain:
            # The frame's message format is not published: django-eid's frame page polls.
            body["iframeSettings"] = {"parentDomains": [request.iframe_domain]}
        if request.prefilled_social_security_number:
            body["prefilledInput"] = {"nin": request.prefilled_social_security_number}
        return body

    def create_session(self, request: SessionRequest) -> CreatedSession:
        answer = self.call(
            "POST",
            self.session_url(),
            retry=False,  # not idempotent: a resent create could open a second session
            data=json.dumps(self.create_body(request)).encode(),
            headers={"Content-Type": "application/json"},
        )
        return self.created(answer)

    def get_session(self, request_id: str, *, metadata: bool = False) -> IdentificationRecord:
        answer = self.call(
            "GET", self.session_url(request_id), retry=True, label=self.session_label()
        )
        return parse_record(answer.json(), what=answer.what, api=type(self))

    def session_done(self, request_id: str) -> None:
        # v2 lists finished sessions without personal data, but not active ones, and not by
        # id: the record itself is asked.
        return None

    def cancel_session(self, request_id: str) -> None:
        self.call(
            "POST",
            f"{self.session_url(request_id)}/invalidate",
            retry=True,
            label=self.session_label("/invalidate"),
        )


def parse_record(body: Any, *, what: str, api: type[BrokerApi] = V2Api) -> IdentificationRecord:
    """A v2 session resource as django-eid's record; :class:`EidProtocolError` otherwise."""
    body = storable_object(body, what)
    identity = opt_object(body, "identity", what)
    error = opt_object(body, "error", what)
    status = opt_str(body, "status", what)
    provider = opt_str(body, "provider", what)
    received = {k: v for k, v in body.items() if k not in PERSONAL_ECHOES}
    if "nin" in identity:
        received["identity"] = {k: v for k, v in identity.items() if k != "nin"}
    known = {"id", "status", "provider", "identity", "environment", "error"}
    progress = progress_of(status)
    if progress is Progress.SUCCESS and not identity:
        # v2 drops the identity an hour after the session began but still says "success":
        # a success without a person proves nobody (it would pass gates and let one person
        # verify a second account).
        progress = Progress.FAILED
    return IdentificationRecord(
        request_id=opt_str(body, "id", what),
        status=status,
        progress=progress,
        identity_provider=provider,
        identity_provider_unique_id=opt_str(identity, "providerId", what),
        name=opt_str(identity, "fullName", what),
        first_name=opt_str(identity, "firstName", what),
        middle_name=opt_str(identity, "middleName", what),
        last_name=opt_str(identity, "lastName", what),
        date_of_birth=iso_date(opt_str(identity, "dateOfBirth", what)),
        social_security_number=opt_str(identity, "nin", what),
        national_id_country=api.provider_country(provider),
        environment_info=environment_of(body, what),
        error=RecordError(
            native_error_code=opt_str(error, "providerCode", what),
            error_code=opt_str(error, "code", what),
            error_message=opt_str(error, "message", what),
        )
        if error
        else None,
        extra={k: v for k, v in received.items() if k not in known},
        received=received,
    )
