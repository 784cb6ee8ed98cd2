"""The eID Hub Authentication REST API (``BROKER_API = "eid-hub"``).

``{base_url}/auth/rest/sessions``: its own token endpoint and scope, camelCase JSON,
UPPER_CASE statuses, the number with its issuing country and type, a level of assurance,
the session id appended to the return URLs as ``sessionId``, ``POST .../cancel``, errors
as problem details, and the account named in every call (``signicat-accountId``). Facts
from the vendor's SDKs and OpenAPI description (``broker-generations.md`` section 2);
those it marks unconfirmed are read tolerantly (either casing of a status, an unknown one
left pending, ``NOR`` as well as ``NO``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any, ClassVar, Final

from django_eid.brokers import SessionRequest
from django_eid.brokers.v2 import PERSONAL_ECHOES, V2Api, environment_of, iso_date
from django_eid.records import (
    CreatedSession,
    IdentificationRecord,
    Progress,
    RecordError,
    opt_object,
    opt_str,
    storable_object,
)

#: Under ``BASE_URL``: ``POST`` creates, ``GET /{id}`` retrieves, ``POST /{id}/cancel``.
SESSIONS_PATH: Final = "/auth/rest/sessions"
#: The query parameter naming the account, on every call.
ACCOUNT_PARAM: Final = "signicat-accountId"
#: What a session asks for when ``REQUESTED_ATTRIBUTES`` is not set; ``nin`` is added
#: when the site keeps the number (``GET_SOCIAL_SECURITY_NUMBER``).
REQUESTED_ATTRIBUTES: Final = (
    "name",
    "firstName",
    "middleName",
    "lastName",
    "dateOfBirth",
    "idpId",
)
#: The shortest and the default session lifetime the API accepts, in seconds.
MIN_SESSION_LIFETIME: Final = 300

_PROGRESS: Final = {
    "SUCCESS": Progress.SUCCESS,
    "CREATED": Progress.IN_PROGRESS,
    "WAITING_FOR_USER": Progress.IN_PROGRESS,
    "ABORT": Progress.ABORTED,
    "CANCELLED": Progress.ABORTED,
    "EXPIRED": Progress.TIMED_OUT,
    "ERROR": Progress.FAILED,
    "INVALID": Progress.FAILED,
}
#: The persons' country of an eID Hub provider.
_COUNTRIES: Final = {"nbid": "NO", "sbid": "SE", "mitid": "DK", "ftn": "FI"}
#: ISO 3166 alpha-3 spellings of ``issuingCountry`` seen in the vendor's examples.
_ALPHA3: Final = {"NOR": "NO", "SWE": "SE", "DNK": "DK", "FIN": "FI"}


def progress_of(status: str | None) -> Progress:
    """An eID Hub status in either casing; an unknown one is treated as not over yet."""
    if not status:
        return Progress.UNKNOWN
    return _PROGRESS.get(status.upper(), Progress.UNKNOWN)


class EidHubApi(V2Api):
    """``{base_url}/auth/rest/sessions``, returning with ``?sessionId=`` as v2 does."""

    name: ClassVar[str] = "eid-hub"
    token_path: ClassVar[str] = "/auth/open/connect/token"  # noqa: S105  (a path)
    default_base_url: ClassVar[str | None] = "https://api.signicat.com"
    default_auth_url: ClassVar[str | None] = "https://api.signicat.com"
    default_scopes: ClassVar[tuple[str, ...]] = ("signicat-api",)
    # The vendor's SDK sends the client's credentials in the form body.
    default_token_auth_method: ClassVar[str] = "post"  # noqa: S105  (a method)
    # Lower-case names, some with a hyphen ("otp-sms"), at most 30 characters.
    provider_re: ClassVar[re.Pattern[str]] = re.compile(r"^[a-z0-9]+(?:[-_][a-z0-9]+)*\Z")
    provider_example: ClassVar[str] = "nbid"
    #: The eIDs the vendor's SDKs, OpenAPI description and guides name (``broker-generations.md``
    #: section 2); its full list is the account's (``GET /id-providers/account``).
    published_providers: ClassVar[tuple[str, ...]] = (
        "nbid",
        "sbid",
        "mitid",
        "ftn",
        "idin",
        "digid",
        "eherkenning",
        "spid",
        "npa",
        "otp-sms",
        "otp-email",
        "sk-smartid",
    )
    provider_families: ClassVar[Mapping[str, str]] = {
        "nbid": "no-bankid",
        "sbid": "se-bankid",
        "mitid": "dk-mitid",
        "ftn": "fi-ftn",
    }
    sessions_path: ClassVar[str] = SESSIONS_PATH
    states_level: ClassVar[bool] = True
    url_property: ClassVar[str] = "authenticationUrl"

    @classmethod
    def provider_country(cls, provider: str | None) -> str | None:
        return _COUNTRIES.get((provider or "").lower())

    @property
    def params(self) -> dict[str, str]:
        return {ACCOUNT_PARAM: self.settings.ACCOUNT_ID}

    def create_body(self, request: SessionRequest) -> dict[str, Any]:
        s = self.settings
        urls = self.return_urls(request.return_urls, external_reference=request.external_reference)
        # An empty list asks for nothing beyond the session (the API allows it).
        given = s.REQUESTED_ATTRIBUTES
        attributes = list(REQUESTED_ATTRIBUTES if given is None else given)
        if request.get_social_security_number and "nin" not in attributes:
            attributes.append("nin")
        body: dict[str, Any] = {
            # The embedded flow is the API's iframe display.
            "flow": "embedded" if request.iframe_domain else "redirect",
            "requestedAttributes": attributes,
            "callbackUrls": {"success": urls.success, "abort": urls.abort, "error": urls.error},
            "externalReference": request.external_reference,
            # The broker deletes a session when it expires: keep it as long as django-eid
            # waits for its return.
            "sessionLifetime": max(MIN_SESSION_LIFETIME, s.SESSION_MAX_AGE),
        }
        if request.identity_provider:
            body["allowedProviders"] = [request.identity_provider]
        if request.language:
            body["language"] = request.language.lower()
        if request.iframe_domain:
            body["embeddedParentDomains"] = [request.iframe_domain]
            # Where the frame goes when done, whatever the outcome (without it the frame
            # ends on the hub's own screen and never comes back): the Success URL, which
            # the session's record decides, as every return.
            body["returnUrl"] = urls.success
        if request.prefilled_social_security_number:
            body["prefilledInput"] = {"nin": request.prefilled_social_security_number}
        return body

    def create_session(self, request: SessionRequest) -> CreatedSession:
        answer = self.call(
            "POST",
            self.session_url(),
            retry=False,  # not idempotent: a resent create could open a second session
            params=self.params,
            data=json.dumps(self.create_body(request)).encode(),
            headers={"Content-Type": "application/json"},
        )
        return self.created(answer)

    def get_session(self, request_id: str, *, metadata: bool = False) -> IdentificationRecord:
        answer = self.call(
            "GET",
            self.session_url(request_id),
            retry=True,
            params=self.params,
            label=self.session_label(),
        )
        return parse_record(answer.json(), what=answer.what)

    def cancel_session(self, request_id: str) -> None:
        self.call(
            "POST",
            f"{self.session_url(request_id)}/cancel",
            retry=True,
            params=self.params,
            label=self.session_label("/cancel"),
        )


def _country(value: str | None) -> str | None:
    if not value:
        return None
    upper = value.upper()
    return _ALPHA3.get(upper, upper if len(upper) == 2 else None)


def parse_record(body: Any, *, what: str) -> IdentificationRecord:
    """An eID Hub session as django-eid's record; :class:`EidProtocolError` otherwise."""
    body = storable_object(body, what)
    subject = opt_object(body, "subject", what)
    nin = opt_object(subject, "nin", what)
    error = opt_object(body, "error", what)
    status = opt_str(body, "status", what)
    provider = opt_str(body, "provider", what)
    received = {k: v for k, v in body.items() if k not in PERSONAL_ECHOES}
    if "nin" in subject:
        # The number's country and type stay; its value does not.
        kept = {k: v for k, v in nin.items() if k != "value"}
        received["subject"] = {**{k: v for k, v in subject.items() if k != "nin"}, "nin": kept}
    message = " - ".join(
        part for part in (opt_str(error, "title", what), opt_str(error, "detail", what)) if part
    ) or opt_str(body, "statusDetail", what)
    known = {"id", "status", "provider", "subject", "environment", "error", "loa"}
    return IdentificationRecord(
        request_id=opt_str(body, "id", what),
        status=status,
        progress=progress_of(status),
        identity_provider=provider,
        # The id at the eID (NO BankID's PID). Never the broker's own pseudonym
        # (``subject.id``, per client: another key for the same person); it stays in ``raw``.
        identity_provider_unique_id=opt_str(subject, "idpId", what),
        name=opt_str(subject, "name", what),
        first_name=opt_str(subject, "firstName", what),
        middle_name=opt_str(subject, "middleName", what),
        last_name=opt_str(subject, "lastName", what),
        date_of_birth=iso_date(opt_str(subject, "dateOfBirth", what)),
        social_security_number=opt_str(nin, "value", what),
        national_id_country=_country(opt_str(nin, "issuingCountry", what))
        or EidHubApi.provider_country(provider),
        national_id_type=opt_str(nin, "type", what),
        level_of_assurance=opt_str(body, "loa", what),
        environment_info=environment_of(body, what),
        error=RecordError(error_code=opt_str(error, "code", what), error_message=message)
        if error or message
        else None,
        extra={k: v for k, v in received.items() if k not in known},
        received=received,
    )
