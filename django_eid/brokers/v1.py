"""The identification API of the interface document (``BROKER_API = "v1"``).

``{base_url}/identification/session``: PascalCase JSON (matched case-insensitively: the
public reference disagrees with itself on casing), the ``[0]``/``[1]``/``[2]`` placeholders
that the broker fills in the return URLs, a status call without personal data, and
``PUT .../invalidate``. Its names are those of :mod:`django_eid.vocabulary`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import Any, ClassVar, Final

from django_eid import vocabulary
from django_eid.brokers import BrokerApi, ReturnedIds, ReturnUrls, SessionRequest
from django_eid.exceptions import EidProtocolError
from django_eid.records import (
    CreatedSession,
    EnvironmentInfo,
    IdentificationRecord,
    Progress,
    RecordError,
    is_http_url,
    lower_keys,
    opt_str,
    storable_object,
)

#: Record property that holds the national identity number (lower-cased).
SSN_KEY: Final = "socialsecuritynumber"

_STRING_FIELDS: Final = {
    "requestid": "request_id",
    "status": "status",
    "identityprovider": "identity_provider",
    "identityprovideruniqueid": "identity_provider_unique_id",
    "name": "name",
    "firstname": "first_name",
    "middlename": "middle_name",
    "lastname": "last_name",
    "dateofbirth": "date_of_birth",
    SSN_KEY: "social_security_number",
}
_KNOWN: Final = frozenset(_STRING_FIELDS) | {"environmentinfo", "error", "metadata"}

_PROGRESS: Final = {
    vocabulary.SUCCESS: Progress.SUCCESS,
    vocabulary.CREATED: Progress.IN_PROGRESS,
    vocabulary.USER_INITIATED: Progress.IN_PROGRESS,
    vocabulary.USER_ABORTED: Progress.ABORTED,
    vocabulary.TIMEOUT: Progress.TIMED_OUT,
}


def progress_of(status: str | None) -> Progress:
    """Where a record of ``status`` stands; any other final status is a failure."""
    if not status:
        return Progress.UNKNOWN
    return _PROGRESS.get(status, Progress.FAILED)


class V1Api(BrokerApi):
    """``{base_url}/identification/session`` and its placeholders."""

    name: ClassVar[str] = "v1"
    token_path: ClassVar[str] = vocabulary.TOKEN_PATH
    default_scopes: ClassVar[tuple[str, ...]] = ("identify",)
    request_id_param: ClassVar[str] = vocabulary.RETURN_REQUEST_ID
    external_id_param: ClassVar[str] = vocabulary.RETURN_EXTERNAL_ID
    return_params: ClassVar[tuple[str, ...]] = vocabulary.RETURN_PARAMS
    provider_re: ClassVar[re.Pattern[str]] = vocabulary.PROVIDER_RE
    provider_example: ClassVar[str] = "NO_BANKID_WEB"
    published_providers: ClassVar[tuple[str, ...]] = vocabulary.PROVIDERS
    web_messaging: ClassVar[bool] = True
    status_call: ClassVar[bool] = True
    provider_families: ClassVar[Mapping[str, str]] = {
        "NO_BANKID_WEB": "no-bankid",
        "NO_BANKID_MOBILE": "no-bankid",
        "NO_BUYPASS": "no-buypass",
        "SWE_BANKID": "se-bankid",
        "SWE_BANKID_MOBILE": "se-bankid",
        "DA_NEMID": "dk-nemid",
        "DK_MITID": "dk-mitid",
    }

    @classmethod
    def return_urls(cls, urls: ReturnUrls, *, external_reference: str) -> ReturnUrls:
        # As text, so that the placeholders' brackets reach the broker unencoded.
        return ReturnUrls(
            success=urls.success + vocabulary.IDS_QUERY,
            abort=urls.abort + vocabulary.IDS_QUERY,
            error=urls.error + vocabulary.ERROR_QUERY,
        )

    @classmethod
    def returned_ids(cls, params: Mapping[str, Sequence[str]]) -> ReturnedIds:
        def filled(name: str, placeholder: str) -> list[str]:
            # A placeholder the broker left as it was counts as absent.
            return ["" if v == placeholder else v for v in params.get(name, ())]

        statuses = filled(vocabulary.RETURN_ERROR_STATUS, vocabulary.ERROR_STATUS)
        return ReturnedIds(
            request_id=filled(vocabulary.RETURN_REQUEST_ID, vocabulary.REQUEST_ID),
            external_id=filled(vocabulary.RETURN_EXTERNAL_ID, vocabulary.EXTERNAL_ID),
            error_status=statuses[0] if len(statuses) == 1 else "",
        )

    @classmethod
    def provider_country(cls, provider: str | None) -> str | None:
        return vocabulary.provider_country(provider)

    def create_session(self, request: SessionRequest) -> CreatedSession:
        urls = self.return_urls(request.return_urls, external_reference=request.external_reference)
        body: dict[str, Any] = {
            "ReturnUrls": {"Success": urls.success, "Abort": urls.abort, "Error": urls.error},
            "ExternalReference": request.external_reference,
            "GetSocialSecurityNumber": bool(request.get_social_security_number),
        }
        if request.identity_provider:
            body["IdentityProvider"] = request.identity_provider
        if request.language:
            body["Language"] = vocabulary.broker_language(request.language)
        if request.iframe_domain:
            # The interface document reads top-level ``domain``; the deployed service
            # reads ``iFrame.Domain``. Send both.
            body["iFrame"] = {
                "Domain": request.iframe_domain,
                "WebMessaging": request.iframe_web_messaging,
            }
            body["domain"] = request.iframe_domain
        if request.prefilled_social_security_number:
            body["PreFilledSocialSecurityNumber"] = request.prefilled_social_security_number
        answer = self.call(
            "POST",
            f"{self.base_url}{vocabulary.SESSION_PATH}",
            # Not idempotent: a resent create could open (and bill) a second session.
            retry=False,
            data=json.dumps(body).encode(),
            headers={"Content-Type": "application/json"},
        )
        return parse_created(answer.json(), what=answer.what)

    def get_session(self, request_id: str, *, metadata: bool = False) -> IdentificationRecord:
        params = {vocabulary.REQUEST_ID_PARAM: request_id}
        if metadata:
            params[vocabulary.METADATA_PARAM] = "true"
        answer = self.call(
            "GET", f"{self.base_url}{vocabulary.SESSION_PATH}", retry=True, params=params
        )
        return parse_record(answer.json(), what=answer.what)

    def session_done(self, request_id: str) -> bool:
        answer = self.call(
            "GET",
            f"{self.base_url}{vocabulary.STATUS_PATH}",
            retry=True,
            params={vocabulary.REQUEST_ID_PARAM: request_id},
        )
        return parse_done(answer.json(), what=answer.what)

    def cancel_session(self, request_id: str) -> None:
        # A finished SUCCESS session becomes INVALIDATED and its identity is no longer
        # served; the broker refuses to invalidate an ERROR session (an EidApiError).
        self.call(
            "PUT",
            f"{self.base_url}{vocabulary.INVALIDATE_PATH}",
            # Idempotent: invalidating twice leaves the session as invalidating once does.
            retry=True,
            data=json.dumps({vocabulary.INVALIDATE_REQUEST_ID: request_id}).encode(),
            headers={"Content-Type": "application/json"},
        )


def parse_created(body: Any, *, what: str = "create_session") -> CreatedSession:
    """Parse the answer to creating a session; raise :class:`EidProtocolError` for anything else.

    Both ``Url`` (absolute) and ``RequestId`` are required: without them the flow cannot go on.
    """
    body = storable_object(body, what)
    obj = lower_keys(body)
    url = opt_str(obj, "url", what)
    request_id = opt_str(obj, "requestid", what)
    if not is_http_url(url):
        raise EidProtocolError(f"{what}: the answer has no absolute 'Url'")
    if not request_id:
        raise EidProtocolError(f"{what}: the answer has no 'RequestId'")
    return CreatedSession(url=url, request_id=request_id)


def parse_done(body: Any, *, what: str = "get_session_status") -> bool:
    """Parse the status answer ``{"Done": true|false}``; :class:`EidProtocolError` otherwise."""
    if not isinstance(body, Mapping):
        raise EidProtocolError(f"{what}: expected a JSON object, got {type(body).__name__}")
    done = lower_keys(body).get(vocabulary.DONE.lower())
    if not isinstance(done, bool):
        raise EidProtocolError(f"{what}: the answer has no boolean 'Done'")
    return done


def metadata_of(meta: Any) -> dict[str, str | None]:
    """``MetaData`` as strings: add-on data (certificates, provider extras) that the
    identity does not depend on, so a value of another type must not make the whole record
    unreadable. Such a value is kept as its JSON text; a ``MetaData`` that is not an object
    at all is left out (the record as received keeps it)."""
    if not isinstance(meta, Mapping):
        return {}
    return {
        str(key): value if isinstance(value, str) or value is None else json.dumps(value)
        for key, value in meta.items()
    }


def parse_record(body: Any, *, what: str = "get_session") -> IdentificationRecord:
    """Parse a retrieved record; raise :class:`EidProtocolError` for anything else."""
    body = storable_object(body, what)
    obj = lower_keys(body)
    values: dict[str, Any] = {attr: opt_str(obj, key, what) for key, attr in _STRING_FIELDS.items()}
    if values["identity_provider"] == vocabulary.UNKNOWN_PROVIDER:
        # The broker's way of saying it does not know: no provider (the row keeps the
        # one it asked for), not a provider called UNKNOWN.
        values["identity_provider"] = None

    env = obj.get("environmentinfo")
    if env is None:
        values["environment_info"] = EnvironmentInfo()
    elif isinstance(env, Mapping):
        env_l = lower_keys(env)
        values["environment_info"] = EnvironmentInfo(
            user_agent=opt_str(env_l, "useragent", what),
            ip_address=opt_str(env_l, "ipaddress", what),
        )
    else:
        raise EidProtocolError(f"{what}: 'EnvironmentInfo' is {type(env).__name__}, not an object")

    err = obj.get("error")
    if err is None:
        values["error"] = None
    elif isinstance(err, Mapping):
        err_l = lower_keys(err)
        values["error"] = RecordError(
            native_error_code=opt_str(err_l, "nativeerrorcode", what),
            error_code=opt_str(err_l, "errorcode", what),
            error_message=opt_str(err_l, "errormessage", what),
        )
    else:
        raise EidProtocolError(f"{what}: 'Error' is {type(err).__name__}, not an object")

    values["metadata"] = MappingProxyType(metadata_of(obj.get("metadata")))
    values["extra"] = MappingProxyType(
        {k: v for k, v in body.items() if str(k).lower() not in _KNOWN}
    )
    values["progress"] = progress_of(values["status"])
    values["national_id_country"] = vocabulary.provider_country(values["identity_provider"])
    # The record keeps no national identity number outside its own field.
    values["received"] = MappingProxyType(
        {k: v for k, v in body.items() if str(k).lower() != SSN_KEY}
    )
    return IdentificationRecord(**values)
