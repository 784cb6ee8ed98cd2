"""The JSON API: the flow for single-page apps and mobile apps, under ``<mount>/api/``.

Thin adapters over :mod:`django_eid.flow`, as the HTML views are: the same rules, limits
and refusals, answered as JSON (``{"code", "message"}``, plus ``errors`` naming the fields
at fault) with the status of each :mod:`django_eid.outcomes` outcome. The shipped OpenAPI
document (``openapi.json``, served by :class:`SchemaView`) describes every answer.

Who is asking: the user of the site's session (CSRF enforced on ``POST`` and ``DELETE``),
or, with ``API_AUTHENTICATION_CLASSES``, whoever Django REST framework's authentication
classes accept (a token, a JWT). An unauthenticated request gets ``401``, never a redirect
to a login page; another user's reference (or link) is ``404``, as one that does not exist.

The broker still returns the browser to django-eid's own return URLs: they finish the
identification and then send the browser to the front end (``FRONTEND_URLS``). A return
that reaches a browser without the session that started it (a mobile app's browser, a
token-authenticated front end) is forwarded to the front end with the broker's ids, and
the front end finishes it with :class:`ReturnView`, showing with the one-time ``secret``
of its start that the return reached the front end that started it.
"""

from __future__ import annotations

import copy
import datetime
import functools
import json
import logging
import secrets
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from importlib import resources
from typing import Any, ClassVar, Final
from urllib.parse import urlsplit

from django.contrib.auth import SESSION_KEY
from django.contrib.auth.models import AnonymousUser
from django.core.exceptions import RequestDataTooBig, SuspiciousOperation
from django.core.serializers.json import DjangoJSONEncoder
from django.db import transaction
from django.http import (
    HttpRequest,
    HttpResponse,
    HttpResponseBase,
    HttpResponseForbidden,
    JsonResponse,
    QueryDict,
)
from django.http.request import RawPostDataException
from django.middleware.csrf import CsrfViewMiddleware
from django.urls import reverse
from django.utils.decorators import method_decorator
from django.utils.module_loading import import_string
from django.utils.translation import gettext
from django.views import View
from django.views.decorators.cache import never_cache
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.debug import sensitive_variables

from django_eid import __version__, crypto, door, flow, outcomes, state
from django_eid.brokers import ANY_PROVIDER_RE
from django_eid.brokers.oidc_presets import LEVELS
from django_eid.conf import eid_settings
from django_eid.models import Identification, LinkedIdentity, fit, max_length
from django_eid.outcomes import Outcome
from django_eid.requirements import MAX_AGE_LIMIT, Demand
from django_eid.views import login_not_required, same_origin_referrer

logger = logging.getLogger("django_eid")

#: The fields ``api-start`` takes.
START_FIELDS: Final = ("provider", "display", "next", "purpose")
#: The longest provider name (what the row stores; the HTML start form's ``max_length``).
PROVIDER_MAX_LENGTH: Final = max_length("identity_provider") or 0


# -- answers ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class FieldError:
    """One input at fault: its name, the outcome's code and message."""

    field: str
    outcome: Outcome
    message: str = ""

    def as_json(self) -> dict[str, str]:
        return {
            "field": self.field,
            "code": self.outcome.code,
            "message": self.message or str(self.outcome.message),
        }


class Problem(Exception):
    """Stop and answer ``outcome`` (its status, code and message) as JSON."""

    def __init__(
        self,
        outcome: Outcome,
        *,
        message: str | None = None,
        errors: Sequence[FieldError] = (),
        headers: Mapping[str, str] | None = None,
        credentials_refused: bool = False,
    ) -> None:
        super().__init__(outcome.code)
        self.outcome = outcome
        #: Credentials were sent and refused (a bad token): never a visitor at the door.
        self.credentials_refused = credentials_refused
        self.message = message
        self.errors = list(errors)
        self.headers = dict(headers or {})

    @classmethod
    def invalid(cls, errors: Sequence[FieldError]) -> Problem:
        """``400``: the one field error's code, or ``invalid_request`` for several."""
        if len(errors) == 1:
            return cls(errors[0].outcome, message=errors[0].as_json()["message"], errors=errors)
        return cls(outcomes.INVALID_REQUEST, errors=errors)

    @classmethod
    def refused(cls, refused: flow.Refused) -> Problem:
        """What the flow refused, field named when it is one."""
        errors = []
        if refused.field:
            errors.append(FieldError(refused.field, refused.outcome, refused.message))
        return cls(refused.outcome, message=refused.message, errors=errors)

    def response(self) -> JsonResponse:
        body: dict[str, Any] = {
            "code": self.outcome.code,
            "message": self.message if self.message is not None else str(self.outcome.message),
        }
        if self.errors:
            body["errors"] = [error.as_json() for error in self.errors]
        response = JsonResponse(body, status=self.outcome.status)
        for name, value in self.headers.items():
            response[name] = value
        return response


def answer(data: Any, status: int = 200, headers: Mapping[str, str] | None = None) -> HttpResponse:
    """A JSON answer; ``data`` may be ``None`` (``null``), dates become ISO 8601."""
    response = HttpResponse(
        json.dumps(data, cls=DjangoJSONEncoder), status=status, content_type="application/json"
    )
    for name, value in (headers or {}).items():
        response[name] = value
    return response


def identity_json(row: Identification) -> dict[str, Any]:
    """The verified identity of ``row``, as the front end sees it.

    The national identity number only with ``API_EXPOSE_SOCIAL_SECURITY_NUMBER``, and then
    masked; never in full.
    """
    data: dict[str, Any] = {
        "name": row.name,
        "first_name": row.first_name,
        "middle_name": row.middle_name,
        "last_name": row.last_name,
        "date_of_birth": row.date_of_birth,
        "age": row.age,
        "provider": row.identity_provider,
        "verified_at": row.completed_at,
    }
    if eid_settings.API_EXPOSE_SOCIAL_SECURITY_NUMBER:
        # None too when no configured key decrypts it any more.
        data["social_security_number"] = row.masked_social_security_number or None
    return data


def identification_json(row: Identification) -> dict[str, Any]:
    """An identification of the user asking: its status, what it means, its identity."""
    outcome = outcomes.of(row)
    described: dict[str, Any] = {"code": outcome.code, "message": str(outcome.message)}
    if row.status == Identification.Status.REJECTED and row.error_code in outcomes.REJECTION_CODES:
        described["reason"] = row.error_code
    data: dict[str, Any] = {
        "reference": row.reference,
        "status": row.status,
        "display": row.display,
        "outcome": described,
        "created_at": row.created_at,
        "completed_at": row.completed_at,
    }
    if row.is_verified:
        data["identity"] = identity_json(row)
    return data


def door_json(request: HttpRequest, row: Identification, *, fresh: bool = False) -> dict[str, Any]:
    """An identification at the door that came back to this browser: logs it in (or signs
    up, ``SIGNUP = "auto"``) and says who is logged in now (``user``, else ``null``) and what
    happened (``door``: ``logged_in``, ``signed_up``, ``signup_form``, ``no_account``)."""
    try:
        arrival = door.arrive(request, row, fresh=fresh)
    except flow.Refused as refused:
        if refused.identification is None:
            raise Problem.refused(refused) from None
        arrival = None  # rejected late (a receiver, at the sign-up): the row says so
    data = identification_json(row)
    data["purpose"] = row.purpose
    data["door"] = arrival.arrived.value if arrival is not None else None
    user = arrival.user if arrival is not None else None
    data["user"] = (
        {"id": str(user.pk), "username": user.get_username()} if user is not None else None
    )
    return data


def link_json(link: LinkedIdentity) -> dict[str, Any]:
    """One of the user's eID links (never its ``key``: it names the person)."""
    return {
        "id": link.pk,
        "provider": link.provider,
        "scheme": link.scheme,
        "linked_at": link.linked_at,
        "last_used_at": link.last_used_at,
    }


def links_json(user: Any) -> list[dict[str, Any]]:
    """``user``'s eID links, the oldest first."""
    return [link_json(link) for link in flow.links_of(user)]


# -- who is asking --------------------------------------------------------------------------------
@dataclass(frozen=True)
class Caller:
    """The authenticated user, and whether the site's session authenticated them (then the
    browser's one-time state applies, as in the HTML flow)."""

    user: Any
    via_session: bool
    #: A visitor at the door (not logged in): the ``401`` to answer anything else with.
    refusal: Problem | None = None


class _CsrfCheck(CsrfViewMiddleware):
    """Django's CSRF middleware, refusing with the reason instead of the failure page."""

    def _reject(self, request: HttpRequest, reason: str) -> HttpResponseForbidden:
        return HttpResponseForbidden(reason)


#: Stateless, as middleware instances are: shared by all threads.
_CSRF_CHECK: Final = _CsrfCheck(lambda _request: HttpResponse())


def _csrf_refusal(request: HttpRequest) -> str | None:
    """Why Django's CSRF check refuses ``request``, or ``None`` when it passes.

    Django's own middleware, run by hand as REST framework does: the views are exempt from
    it so that a refusal is answered as JSON, not as the site's CSRF failure page.
    """
    _CSRF_CHECK.process_request(request)
    refusal = _CSRF_CHECK.process_view(request, lambda _request: HttpResponse(), (), {})
    return None if refusal is None else refusal.content.decode()


@functools.lru_cache(maxsize=8)
def _authentication_classes(paths: tuple[str, ...]) -> tuple[type, ...]:
    try:
        return tuple(import_string(path) for path in paths)
    except ImportError as err:
        logger.error("DJANGO_EID['API_AUTHENTICATION_CLASSES'] cannot be imported (E026): %s", err)
        raise Problem(outcomes.NOT_AVAILABLE) from err


def authenticate(request: HttpRequest, *, unsafe: bool) -> Caller:
    """Who sends ``request``; :class:`Problem` (``401``, ``403``) when nobody is, or when the
    CSRF check of a session-authenticated ``unsafe`` request fails."""
    paths = eid_settings.API_AUTHENTICATION_CLASSES
    if paths is None:
        user = getattr(request, "user", None)
        if not getattr(user, "is_authenticated", False):
            raise Problem(outcomes.LOGIN_REQUIRED)
        if unsafe:
            require_csrf(request)
        return Caller(user, via_session=True)
    return _authenticate_with_rest_framework(request, paths)


def visitor(request: HttpRequest, *, refusal: Problem) -> Caller:
    """A visitor who is not logged in, at the door: their browser's session is all there is
    (the return must reach it); else ``refusal`` (``401``). The handler checks CSRF
    (:func:`require_csrf`) once it knows the call is one at the door.

    A browser logged in by the site's session is no visitor, even where the API accepts
    only tokens: it would otherwise log in as somebody else through the door."""
    if not hasattr(request, "session"):
        raise refusal
    # The session's own word: REST framework's classes replace request.user when they
    # find no credentials of theirs.
    if request.session.get(SESSION_KEY):
        raise refusal
    return Caller(AnonymousUser(), via_session=True, refusal=refusal)


def require_csrf(request: HttpRequest) -> None:
    """Refuse (``403 csrf_failed``) an unsafe call the site's session makes without Django's
    CSRF token: a logged-in user's, and a visitor's at the door (another site could
    otherwise start a login in the visitor's browser, or log it in as somebody else)."""
    reason = _csrf_refusal(request)
    if reason is not None:
        logger.warning("Refused a django-eid API call: CSRF check failed (%s).", reason)
        raise Problem(outcomes.CSRF_FAILED)


def _authenticate_with_rest_framework(request: HttpRequest, paths: tuple[str, ...]) -> Caller:
    """Authenticate with REST framework's classes (their own CSRF rules included)."""
    from rest_framework import exceptions
    from rest_framework.authentication import SessionAuthentication
    from rest_framework.parsers import JSONParser
    from rest_framework.request import Request

    authenticators = [cls() for cls in _authentication_classes(paths)]
    # SessionAuthentication's CSRF check reads the form fields (request.POST), which REST
    # framework parses with these parsers: JSON bodies must parse (the view reads the body
    # again from Django's cache of it).
    wrapped = Request(request, authenticators=authenticators, parsers=[JSONParser()])
    challenge = authenticators[0].authenticate_header(wrapped) if authenticators else None
    headers = {"WWW-Authenticate": challenge} if challenge else {}
    try:
        user = wrapped.user
    except exceptions.PermissionDenied as err:
        # SessionAuthentication's CSRF check.
        logger.warning("Refused a django-eid API call: %s", err.detail)
        raise Problem(outcomes.CSRF_FAILED) from err
    except exceptions.NotAuthenticated as err:
        raise Problem(outcomes.LOGIN_REQUIRED, headers=headers) from err
    except exceptions.AuthenticationFailed as err:
        raise Problem(outcomes.LOGIN_REQUIRED, headers=headers, credentials_refused=True) from err
    except (exceptions.ParseError, exceptions.UnsupportedMediaType) as err:
        raise Problem(outcomes.INVALID_BODY) from err
    except exceptions.APIException as err:  # a class's own refusal (throttling ...)
        logger.warning("An API_AUTHENTICATION_CLASSES class refused a call: %s", err.detail)
        raise Problem(outcomes.LOGIN_REQUIRED, headers=headers) from err
    if not getattr(user, "is_authenticated", False):
        raise Problem(outcomes.LOGIN_REQUIRED, headers=headers)
    # Receivers of the signals read request.user, as in any other view.
    request.user = user
    via_session = isinstance(wrapped.successful_authenticator, SessionAuthentication)
    return Caller(user, via_session=via_session)


# -- the views ----------------------------------------------------------------------------------
@method_decorator(csrf_exempt, name="dispatch")  # checked in authenticate(), answered as JSON
@method_decorator(login_not_required, name="dispatch")  # 401 JSON, never the login page
@method_decorator(never_cache, name="dispatch")
@method_decorator(transaction.non_atomic_requests, name="dispatch")
@method_decorator(sensitive_variables(), name="dispatch")
@method_decorator(same_origin_referrer, name="dispatch")
class ApiView(View):
    """Base of the API views: JSON refusals, authentication, no caching.

    Subclasses set ``http_method_names`` and implement the handlers with
    ``(request, caller, **kwargs)``; a handler raises :class:`Problem` to refuse.
    """

    http_method_names: ClassVar[list[str]] = ["get"]  # type: ignore[misc]
    #: Whether the endpoint answers without a logged-in user.
    public: ClassVar[bool] = False
    #: Whether a visitor who is not logged in may call it, at the door (log in, sign up):
    #: as a browser of the site's session, CSRF checked.
    door: ClassVar[bool] = False

    def dispatch(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponseBase:
        method = (request.method or "").lower()
        if method not in self.http_method_names:
            allowed = ", ".join(m.upper() for m in self.http_method_names)
            return Problem(outcomes.METHOD_NOT_ALLOWED, headers={"Allow": allowed}).response()
        handler: Callable[..., HttpResponse] = getattr(self, method)
        unsafe = method not in ("get", "head")
        try:
            if unsafe:
                # Read (and keep) the body before any CSRF check parses form fields from
                # its stream: the view reads it afterwards.
                _body(request)
            caller = None
            if not self.public:
                try:
                    caller = authenticate(request, unsafe=unsafe)
                except Problem as problem:
                    if not self.door or problem.credentials_refused:
                        raise
                    if problem.outcome is not outcomes.LOGIN_REQUIRED:
                        raise
                    caller = visitor(request, refusal=problem)
            return handler(request, caller, *args, **kwargs)
        except Problem as problem:
            return problem.response()
        except SuspiciousOperation as err:
            # More query fields than DATA_UPLOAD_MAX_NUMBER_FIELDS and the like: JSON too.
            logger.warning("Refused a django-eid API call: %s", type(err).__name__)
            return Problem(outcomes.INVALID_REQUEST).response()

    @staticmethod
    def own_row(caller: Caller, reference: str) -> Identification:
        """The caller's identification ``reference``; else ``404``.

        A stale pending one is not expired here: the broker's record decides
        (:func:`flow.settle_if_due`), as for the pages.
        """
        row = flow.find(caller.user, reference)
        if row is None:
            raise Problem(outcomes.INVALID_LINK)
        return row


def _body(request: HttpRequest) -> bytes:
    """``request.body``, or :class:`Problem` when Django will not read it."""
    try:
        return request.body
    except (RequestDataTooBig, SuspiciousOperation) as err:
        raise Problem(outcomes.INVALID_BODY) from err
    except RawPostDataException as err:
        # A multipart form whose stream was read already (request.POST): not JSON.
        raise Problem(
            outcomes.INVALID_BODY, message=gettext("Send the body as application/json.")
        ) from err


def read_object(request: HttpRequest) -> dict[str, Any]:
    """The JSON object of ``request``'s body (no body at all is ``{}``; anything else that is
    not a JSON object of Unicode text, blanks included, is :class:`Problem` ``invalid_body``)."""
    content_type = (request.content_type or "").lower()
    raw = _body(request)
    if not raw:
        return {}
    if content_type != "application/json":
        raise Problem(outcomes.INVALID_BODY, message=gettext("Send the body as application/json."))
    try:
        data = json.loads(raw)
    except (ValueError, UnicodeDecodeError, RecursionError) as err:
        # RecursionError: nested too deep ("[[[[..."), within DATA_UPLOAD_MAX_MEMORY_SIZE.
        raise Problem(outcomes.INVALID_BODY) from err
    if not isinstance(data, dict):
        raise Problem(outcomes.INVALID_BODY)
    try:
        # Legal JSON ("\ud800"), but no text: the database, a hash or a URL would fail on it.
        json.dumps(data, ensure_ascii=False).encode()
    except UnicodeEncodeError as err:
        raise Problem(
            outcomes.INVALID_BODY,
            message=gettext(
                "The request body holds a character that is not text (a lone surrogate)."
            ),
        ) from err
    return data


def _strings(
    data: Mapping[str, Any], names: Sequence[str]
) -> tuple[dict[str, str], list[FieldError]]:
    """The string fields ``names`` of ``data`` (``null`` is absent); errors for the others."""
    errors = [FieldError(str(name), outcomes.UNKNOWN_FIELD) for name in data if name not in names]
    values: dict[str, str] = {}
    for name in names:
        value = data.get(name)
        if value is None:
            continue
        if not isinstance(value, str):
            errors.append(FieldError(name, outcomes.NOT_A_STRING))
            continue
        values[name] = value
    return values, errors


def _parent_host(request: HttpRequest) -> str | None:
    """The host of the front end that will frame the broker, from the ``Origin`` header,
    when it is one of ``FRONTEND_ALLOWED_HOSTS``; else ``None`` (the API's own host).

    Matched as ``next`` and ``FRONTEND_URLS`` are: the exact host, with its port when that
    is not the default (``localhost:3000``).
    """
    origin = request.headers.get("Origin")
    if not origin:
        return None
    try:
        netloc = urlsplit(origin).netloc.lower()
    except ValueError:  # "http://[::1": not an origin
        return None
    allowed = {host.lower() for host in eid_settings.FRONTEND_ALLOWED_HOSTS}
    return netloc if netloc and netloc in allowed else None


def _provider_error(provider: str | None, demand: Demand) -> FieldError | None:
    """Why the start's ``provider`` cannot be asked for (:func:`flow.choose_provider`), or
    ``None``. A name longer than any provider's is malformed, as in the HTML start form."""
    if provider is not None and len(provider) > PROVIDER_MAX_LENGTH:
        message = str(outcomes.PROVIDER_MALFORMED.message) % {
            "provider": fit("identity_provider", provider)
        }
        return FieldError("provider", outcomes.PROVIDER_MALFORMED, message)
    try:
        flow.choose_provider(provider, restrict=demand.providers)
    except flow.Refused as refused:
        return FieldError(refused.field or "provider", refused.outcome, refused.message)
    return None


class StartView(ApiView):
    """``POST {"provider"?, "display"?, "next"?}``: start an identification, ``201``.

    The front end sends the user to ``url`` (or frames it, ``display: "iframe"``).
    """

    http_method_names: ClassVar[list[str]] = ["post"]  # type: ignore[misc]
    door: ClassVar[bool] = True

    def post(self, request: HttpRequest, caller: Caller) -> HttpResponse:
        values, errors = _strings(read_object(request), START_FIELDS)
        purpose = values.get("purpose") or Identification.Purpose.VERIFY
        if purpose not in Identification.Purpose.values:
            errors.append(FieldError("purpose", outcomes.PURPOSE_INVALID))
        elif caller.refusal is not None:
            if purpose == Identification.Purpose.VERIFY:
                raise caller.refusal
            require_csrf(request)
        display = values.get("display", Identification.Display.REDIRECT)
        if display not in Identification.Display.values:
            errors.append(FieldError("display", outcomes.DISPLAY_INVALID))
        next_url = values.get("next", "")
        secure = request.is_secure()
        frontends = eid_settings.FRONTEND_ALLOWED_HOSTS
        if next_url and not flow.safe_next(
            next_url, host=request.get_host(), secure=secure, also=frontends
        ):
            errors.append(FieldError("next", outcomes.NEXT_NOT_ALLOWED))
        demand = state.demand(request, next_url) if caller.via_session else Demand()
        at_the_door = not caller.user.is_authenticated
        if at_the_door:
            demand = Demand(providers=eid_settings.LOGIN_PROVIDERS)
        if "provider" not in {error.field for error in errors}:
            # Judged beside the other fields, so that every field at fault is named.
            error = _provider_error(values.get("provider"), demand)
            if error is not None:
                errors.append(error)
        if errors:
            raise Problem.invalid(errors)
        # The front end keeps it (as the browser keeps its session): a return that reaches
        # the front end with it is one the front end that started received (api-return).
        secret = secrets.token_urlsafe(32)
        try:
            started = flow.start(
                caller.user,
                return_urls=lambda reference: flow.return_urls(
                    reference, request.build_absolute_uri
                ),
                host=request.get_host(),
                secure=secure,
                provider=values.get("provider"),
                display=display,
                next_url=next_url,
                user_agent=request.META.get("HTTP_USER_AGENT", ""),
                client_ip=request.META.get("REMOTE_ADDR"),
                same_person=demand.same_person,
                providers=demand.providers,
                channel=Identification.Channel.API,
                next_hosts=frontends,
                parent_host=_parent_host(request),
                return_key=crypto.secret_hash(secret),
                request=request,
                purpose=purpose,
                browser_key=state.browser_key(request) if at_the_door else None,
            )
        except flow.Refused as refused:
            raise Problem.refused(refused) from None
        row = started.identification
        if caller.via_session:
            # The return URL accepts this browser, as after the HTML start.
            state.remember(request, row.reference)
        expires_at = row.created_at + datetime.timedelta(seconds=eid_settings.SESSION_MAX_AGE)
        location = reverse("django_eid:api-identification", args=[row.reference])
        body = {
            "reference": row.reference,
            "url": started.url,
            "display": row.display,
            "expires_at": expires_at,
            "secret": secret,
        }
        return answer(body, status=201, headers={"Location": location})


class IdentificationView(ApiView):
    """``GET``: an identification of the caller (its identity once ``SUCCESS``).

    A pending one is settled from the broker's status (the same-device rule applies) at
    most every :data:`~django_eid.flow.SETTLE_INTERVAL` seconds, however often it is asked:
    poll it.
    """

    def get(self, request: HttpRequest, caller: Caller, reference: str) -> HttpResponse:
        row = self.own_row(caller, reference)
        flow.settle_if_due(row, request=request)
        if row.is_finished and caller.via_session:
            state.consume(request, reference)
        return answer(identification_json(row))


class CancelView(ApiView):
    """``POST``: the user gave up; a pending identification ends ``ABORTED`` and its broker
    session is invalidated. ``409`` when it had ended otherwise."""

    http_method_names: ClassVar[list[str]] = ["post"]  # type: ignore[misc]

    def post(self, request: HttpRequest, caller: Caller, reference: str) -> HttpResponse:
        row = self.own_row(caller, reference)
        if not row.is_finished:
            flow.cancel(row, request)
        if row.status != Identification.Status.ABORTED:
            raise Problem(outcomes.ALREADY_FINISHED)
        if caller.via_session:
            state.consume(request, reference)
        return answer(identification_json(row))


class ReturnView(ApiView):
    """``POST {"query": "...", "secret": "..."}``: finish an identification started through
    the API from a return the front end was forwarded (its query string as received:
    ``eid_return`` and the broker's ids).

    The return must reach the front end that started, as a return URL must reach the
    browser that started: ``secret`` is the one ``api-start`` answered (a session-
    authenticated browser that started it may leave it out). Being logged in as the owner
    is not enough: a browser logged into the owner's account by somebody else would finish
    that somebody's identification with the identity of whoever holds the browser.
    """

    http_method_names: ClassVar[list[str]] = ["post"]  # type: ignore[misc]
    door: ClassVar[bool] = True

    def post(self, request: HttpRequest, caller: Caller, reference: str) -> HttpResponse:
        if caller.refusal is not None:
            # A visitor: only a return of an identification at the door is theirs to send.
            if not flow.REFERENCE_RE.match(reference) or flow.find(caller.user, reference) is None:
                raise caller.refusal
            require_csrf(request)
        values, errors = _strings(read_object(request), ("query", "secret"))
        if errors:
            raise Problem.invalid(errors)
        try:
            params = dict(QueryDict(values.get("query", "").lstrip("?")).lists())
        except SuspiciousOperation:  # more fields than DATA_UPLOAD_MAX_NUMBER_FIELDS
            params = {}
        kinds = params.get(outcomes.RETURN_PARAM, [])
        if len(kinds) != 1 or kinds[0] not in (flow.SUCCESS, flow.ABORT, flow.ERROR):
            raise Problem(outcomes.MALFORMED_LINK)
        row = self.own_row(caller, reference)
        held = caller.via_session and state.holds(request, reference)
        # Started from the HTML pages: only its own return URL, in its browser, ends it.
        started_here = row.channel == Identification.Channel.API and (
            crypto.same_secret(values.get("secret"), row.return_key) or held
        )
        try:
            returned = flow.return_to(
                kinds[0],
                user=caller.user,
                reference=reference,
                params=params,
                browser_holds=started_here,
                request=request,
                # The one redirect URI of OpenID Connect, as the start sent it.
                return_url=request.build_absolute_uri(reverse("django_eid:oidc-callback")),
            )
        except flow.Refused as refused:
            raise Problem.refused(refused) from None
        if caller.via_session:
            state.consume(request, reference)
        row = returned.identification
        if not caller.user.is_authenticated:
            # At the door: this browser logs in (its session), or signs up; only the request
            # that finished it, or the browser that still holds its one-time state. The
            # secret alone again (a replay, a restored tab after a logout) logs nobody in.
            if not (returned.acted or held):
                raise Problem(outcomes.NOT_THIS_BROWSER)
            return answer(door_json(request, row, fresh=returned.acted))
        return answer(identification_json(row))


class MeView(ApiView):
    """``GET ?max_age=&min_age=&min_loa=&provider=``: the caller's verified identity if it meets
    these conditions (those of ``verified_for``; ``provider`` may repeat), with the account's
    eID ``links``, else ``null``."""

    def get(self, request: HttpRequest, caller: Caller) -> HttpResponse:
        errors: list[FieldError] = []
        max_age = _whole_number(request.GET, "max_age", 1, MAX_AGE_SECONDS, errors)
        min_age = _whole_number(request.GET, "min_age", 0, 149, errors)
        min_loa = _level(request.GET, "min_loa", errors)
        providers = request.GET.getlist("provider") or None
        for provider in providers or ():
            # Stored rows keep the name of the API they came through: any API's syntax.
            if not ANY_PROVIDER_RE.match(provider):
                message = str(outcomes.PROVIDER_MALFORMED.message) % {"provider": provider[:64]}
                errors.append(FieldError("provider", outcomes.PROVIDER_MALFORMED, message))
        if errors:
            raise Problem.invalid(errors)
        row = Identification.objects.verified_for(
            caller.user, max_age=max_age, min_age=min_age, min_loa=min_loa, providers=providers
        )
        if row is None:
            return answer(None)
        return answer({**identity_json(row), "links": links_json(caller.user)})


class LinksView(ApiView):
    """``GET``: the caller's eID links, ``{"links": [...]}``, the oldest first."""

    def get(self, request: HttpRequest, caller: Caller) -> HttpResponse:
        return answer({"links": links_json(caller.user)})


class LinkView(ApiView):
    """``DELETE``: remove the caller's link ``pk``, ``204``. ``404 link_not_found`` for one
    that is not the caller's (or no link id at all), ``409 last_login_method`` for the last
    way the caller has to log in."""

    http_method_names: ClassVar[list[str]] = ["delete"]  # type: ignore[misc]

    def delete(self, request: HttpRequest, caller: Caller, pk: str) -> HttpResponse:
        try:
            flow.unlink(caller.user, pk)
        except flow.Refused as refused:
            raise Problem.refused(refused) from None
        return HttpResponse(status=204)


#: The longest ``max_age`` of ``api-me``, in seconds (that of a gate).
MAX_AGE_SECONDS: Final = int(MAX_AGE_LIMIT.total_seconds())
_NUMBER_OUTCOMES: Final = {"max_age": outcomes.MAX_AGE_INVALID, "min_age": outcomes.MIN_AGE_INVALID}


def _whole_number(
    query: QueryDict, name: str, low: int, high: int, errors: list[FieldError]
) -> int | None:
    """The query parameter ``name`` as a whole number from ``low`` to ``high``, or ``None``
    when it is absent; an error in ``errors`` when it is anything else."""
    values = query.getlist(name)
    if not values:
        return None
    value = values[0]
    # The length first: int() refuses more than 4300 digits (ValueError), and need not try.
    if (
        len(values) == 1
        and len(value) <= len(str(high))
        and value.isascii()
        and value.isdigit()
        and low <= int(value) <= high
    ):
        return int(value)
    errors.append(FieldError(name, _NUMBER_OUTCOMES[name]))
    return None


def _level(query: QueryDict, name: str, errors: list[FieldError]) -> str | None:
    """The query parameter ``name`` as a level of assurance, or ``None`` when it is absent;
    an error in ``errors`` when it is anything else (a misspelt level must not be ignored)."""
    values = query.getlist(name)
    if not values:
        return None
    if len(values) == 1 and values[0] in LEVELS:
        return values[0]
    errors.append(FieldError(name, outcomes.MIN_LOA_INVALID))
    return None


@functools.lru_cache(maxsize=1)
def openapi_document() -> dict[str, Any]:
    """The OpenAPI 3.1 document of this API, as shipped in the package."""
    text = resources.files("django_eid").joinpath("openapi.json").read_text(encoding="utf-8")
    document: dict[str, Any] = json.loads(text)
    return document


class SchemaView(ApiView):
    """``GET``: the OpenAPI 3.1 document of this API, its server the API's mount point."""

    public = True

    def get(self, request: HttpRequest, caller: None) -> HttpResponse:
        document = copy.deepcopy(openapi_document())
        mount = reverse("django_eid:api-schema").removesuffix("schema/").rstrip("/")
        document["servers"] = [{"url": mount}]
        document["info"]["version"] = __version__
        return answer(document)
