"""The sandbox broker over HTTP: the token endpoint, the session API, the login page.

Thin views over :class:`~django_eid.sandbox.broker.SandboxBroker`; state lives
in the cache named by ``DJANGO_EID["SANDBOX_CACHE"]``. Every view answers 404
unless ``DEBUG`` is on or ``SANDBOX_ALLOW_WITHOUT_DEBUG`` is set, and unless the site's
``BASE_URL`` and ``AUTH_URL`` are this sandbox (with ``BROKER_API = "oidc"``: unless its
``OIDC_ISSUER`` is one of this sandbox's issuers, ``<mount>/oidc/<preset>``). Its token endpoint knows one client, the
sandbox's own (``sandbox-client``, ``sandbox-secret``), never the site's credentials.
"""

from __future__ import annotations

import time
from typing import Any, ClassVar
from urllib.parse import urlsplit

from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.http.response import HttpResponseBase
from django.shortcuts import render
from django.urls import NoReverseMatch, reverse
from django.utils import translation
from django.utils.decorators import method_decorator
from django.utils.translation import gettext as _
from django.views import View
from django.views.decorators.cache import never_cache
from django.views.decorators.clickjacking import xframe_options_exempt
from django.views.decorators.csrf import csrf_exempt

from django_eid.conf import eid_settings
from django_eid.sandbox.apis import EidHubSandbox, V2Sandbox
from django_eid.sandbox.broker import (
    CLIENT_ID,
    CLIENT_SECRET,
    SandboxBroker,
    SessionError,
    UnknownSession,
)
from django_eid.sandbox.checks import oidc_issuer, refusal
from django_eid.sandbox.forms import ABORT, FAIL, IDENTIFY, LoginForm
from django_eid.sandbox.persons import builtin_persons
from django_eid.sandbox.store import CacheStore
from django_eid.sandbox.wire import Reply, Session
from django_eid.sandbox.wire_oidc import PRESETS, OpenIdProvider
from django_eid.views import login_not_required
from django_eid.vocabulary import BROKER_TO_DJANGO_LANGUAGE


@method_decorator(login_not_required, name="dispatch")  # the broker's pages: no site login
class SandboxView(View):
    """Base of the sandbox views: the DEBUG gate and the broker."""

    def dispatch(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponseBase:
        refused = refusal(request)
        if refused:
            raise Http404(refused)
        return super().dispatch(request, *args, **kwargs)

    def get_broker(self) -> SandboxBroker:
        """The broker of the sandbox's own client, with ``DJANGO_EID``'s sandbox settings."""
        s = eid_settings
        request = self.request
        namespace = request.resolver_match.namespace if request.resolver_match else None

        def login_url(request_id: str) -> str:
            path = reverse("django_eid_sandbox:login", args=[request_id], current_app=namespace)
            return request.build_absolute_uri(path)

        return SandboxBroker(
            CacheStore(s.SANDBOX_CACHE),
            # Never the site's CLIENT_ID and CLIENT_SECRET: those may be a real broker's.
            client_id=CLIENT_ID,
            client_secret=CLIENT_SECRET,
            login_url=login_url,
            token_lifetime=s.SANDBOX_TOKEN_LIFETIME,
            account_id=s.ACCOUNT_ID or None,
        )


def json_response(reply: Reply) -> HttpResponse:
    response = HttpResponse(reply.content, status=reply.status, content_type="application/json")
    if reply.body is None:  # a 204: no body, so no content type either
        del response["Content-Type"]
    for name, value in reply.headers.items():
        response[name] = value
    return response


def simulate_latency() -> None:
    """Sleep ``SANDBOX_LATENCY`` seconds, to benchmark against a slow broker."""
    if eid_settings.SANDBOX_LATENCY > 0:
        time.sleep(eid_settings.SANDBOX_LATENCY)


@method_decorator(csrf_exempt, name="dispatch")
class TokenView(SandboxView):
    """``POST <mount>/oauth/connect/token``."""

    http_method_names: ClassVar[list[str]] = ["post"]  # type: ignore[misc]

    def post(self, request: HttpRequest) -> HttpResponse:
        simulate_latency()
        reply = self.get_broker().token(
            authorization=request.headers.get("Authorization"),
            content_type=request.content_type,
            body=request.body,
        )
        return json_response(reply)


@method_decorator(csrf_exempt, name="dispatch")
class SessionView(SandboxView):
    """``POST`` (create) and ``GET ?requestId=`` (retrieve) ``<mount>/identification/session``."""

    http_method_names: ClassVar[list[str]] = ["get", "post"]  # type: ignore[misc]

    def post(self, request: HttpRequest) -> HttpResponse:
        simulate_latency()
        reply = self.get_broker().create_session(
            authorization=request.headers.get("Authorization"), body=request.body
        )
        return json_response(reply)

    def get(self, request: HttpRequest) -> HttpResponse:
        simulate_latency()
        reply = self.get_broker().get_session(
            authorization=request.headers.get("Authorization"),
            query=request.META.get("QUERY_STRING", ""),
        )
        return json_response(reply)


class WebMessagingScriptView(SandboxView):
    """The script a page embedding the sandbox includes for ``iFrame.WebMessaging``.

    It listens for the sandbox's message at the end of a session and, when the message
    comes from the sandbox's own origin and names a URL of the embedding page's origin,
    goes there. (The deployed service's own script and message format are not published.)
    """

    http_method_names: ClassVar[list[str]] = ["get"]  # type: ignore[misc]

    def get(self, request: HttpRequest) -> HttpResponse:
        origin = request.build_absolute_uri("/").rstrip("/")
        script = render(
            request,
            "django_eid_sandbox/web_messaging.js",
            {"sandbox_origin": origin},
            content_type="text/javascript",
        )
        script["Cache-Control"] = "no-cache"
        script["Cross-Origin-Resource-Policy"] = "cross-origin"
        return script


@method_decorator(csrf_exempt, name="dispatch")
class SessionStatusView(SandboxView):
    """``GET <mount>/identification/session/status?requestId=``: ``{"Done": bool}``."""

    http_method_names: ClassVar[list[str]] = ["get"]  # type: ignore[misc]

    def get(self, request: HttpRequest) -> HttpResponse:
        simulate_latency()
        reply = self.get_broker().session_status(
            authorization=request.headers.get("Authorization"),
            query=request.META.get("QUERY_STRING", ""),
        )
        return json_response(reply)


@method_decorator(csrf_exempt, name="dispatch")
class InvalidateView(SandboxView):
    """``PUT <mount>/identification/session/invalidate`` with ``{"RequestId": ...}``."""

    http_method_names: ClassVar[list[str]] = ["put"]  # type: ignore[misc]

    def put(self, request: HttpRequest) -> HttpResponse:
        simulate_latency()
        reply = self.get_broker().invalidate(
            authorization=request.headers.get("Authorization"),
            query=request.META.get("QUERY_STRING", ""),
            body=request.body,
        )
        return json_response(reply)


@method_decorator(csrf_exempt, name="dispatch")
class V2SessionsView(SandboxView):
    """``POST`` (create) and ``GET`` (list) ``<mount>/identification/v2/sessions``."""

    http_method_names: ClassVar[list[str]] = ["get", "post"]  # type: ignore[misc]

    def get(self, request: HttpRequest) -> HttpResponse:
        simulate_latency()
        reply = V2Sandbox(self.get_broker()).list_sessions(
            authorization=request.headers.get("Authorization"),
            query=request.META.get("QUERY_STRING", ""),
        )
        return json_response(reply)

    def post(self, request: HttpRequest) -> HttpResponse:
        simulate_latency()
        reply = V2Sandbox(self.get_broker()).create_session(
            authorization=request.headers.get("Authorization"), body=request.body
        )
        return json_response(reply)


@method_decorator(csrf_exempt, name="dispatch")
class V2SessionView(SandboxView):
    """``GET <mount>/identification/v2/sessions/<id>``."""

    http_method_names: ClassVar[list[str]] = ["get"]  # type: ignore[misc]

    def get(self, request: HttpRequest, session_id: str) -> HttpResponse:
        simulate_latency()
        reply = V2Sandbox(self.get_broker()).get_session(
            authorization=request.headers.get("Authorization"), session_id=session_id
        )
        return json_response(reply)


@method_decorator(csrf_exempt, name="dispatch")
class V2InvalidateView(SandboxView):
    """``POST <mount>/identification/v2/sessions/<id>/invalidate``: 204."""

    http_method_names: ClassVar[list[str]] = ["post"]  # type: ignore[misc]

    def post(self, request: HttpRequest, session_id: str) -> HttpResponse:
        simulate_latency()
        reply = V2Sandbox(self.get_broker()).invalidate(
            authorization=request.headers.get("Authorization"), session_id=session_id
        )
        return json_response(reply)


@method_decorator(csrf_exempt, name="dispatch")
class HubTokenView(SandboxView):
    """``POST <mount>/auth/open/connect/token`` (eID Hub)."""

    http_method_names: ClassVar[list[str]] = ["post"]  # type: ignore[misc]

    def post(self, request: HttpRequest) -> HttpResponse:
        simulate_latency()
        reply = EidHubSandbox(self.get_broker()).token(
            authorization=request.headers.get("Authorization"),
            content_type=request.content_type,
            body=request.body,
        )
        return json_response(reply)


@method_decorator(csrf_exempt, name="dispatch")
class HubSessionsView(SandboxView):
    """``POST <mount>/auth/rest/sessions?signicat-accountId=`` (eID Hub)."""

    http_method_names: ClassVar[list[str]] = ["post"]  # type: ignore[misc]

    def post(self, request: HttpRequest) -> HttpResponse:
        simulate_latency()
        reply = EidHubSandbox(self.get_broker()).create_session(
            authorization=request.headers.get("Authorization"),
            query=request.META.get("QUERY_STRING", ""),
            body=request.body,
        )
        return json_response(reply)


@method_decorator(csrf_exempt, name="dispatch")
class HubSessionView(SandboxView):
    """``GET <mount>/auth/rest/sessions/<id>``."""

    http_method_names: ClassVar[list[str]] = ["get"]  # type: ignore[misc]

    def get(self, request: HttpRequest, session_id: str) -> HttpResponse:
        simulate_latency()
        reply = EidHubSandbox(self.get_broker()).get_session(
            authorization=request.headers.get("Authorization"),
            query=request.META.get("QUERY_STRING", ""),
            session_id=session_id,
        )
        return json_response(reply)


@method_decorator(csrf_exempt, name="dispatch")
class HubCancelView(SandboxView):
    """``POST <mount>/auth/rest/sessions/<id>/cancel``: 200 with the session."""

    http_method_names: ClassVar[list[str]] = ["post"]  # type: ignore[misc]

    def post(self, request: HttpRequest, session_id: str) -> HttpResponse:
        simulate_latency()
        reply = EidHubSandbox(self.get_broker()).cancel(
            authorization=request.headers.get("Authorization"),
            query=request.META.get("QUERY_STRING", ""),
            session_id=session_id,
        )
        return json_response(reply)


def frame_ancestors(domain: str) -> str:
    """The CSP ``frame-ancestors`` sources for a parent ``domain`` (any scheme, any port)."""
    hosts = [domain] if ":" in domain.rsplit("]", 1)[-1] else [domain, f"{domain}:*"]
    sources = ["'self'"]
    for host in hosts:
        sources += [host, f"https://{host}", f"http://{host}"]
    return "frame-ancestors " + " ".join(sources)


# Exempt from the site's X-Frame-Options; each response sets its own framing policy.
# Exempt from CSRF: inside a third-party iframe the browser neither sets nor sends
# Django's CSRF cookie, and, as at the real broker, the unguessable session id in
# the URL is what authorises the POST.
@method_decorator(csrf_exempt, name="dispatch")
@method_decorator(xframe_options_exempt, name="dispatch")
@method_decorator(never_cache, name="dispatch")
class LoginView(SandboxView):
    """The page the person is sent to: pick a person, then identify, abort or fail."""

    http_method_names: ClassVar[list[str]] = ["get", "post"]  # type: ignore[misc]
    template_name = "django_eid_sandbox/login.html"
    ended_template_name = "django_eid_sandbox/ended.html"
    leave_template_name = "django_eid_sandbox/leave_frame.html"

    def get(self, request: HttpRequest, request_id: str) -> HttpResponse:
        broker = self.get_broker()
        try:
            session = broker.open(request_id)
        except UnknownSession:
            return self.ended(None, status=404)
        if not session.in_progress:
            return self.ended(session, status=410)
        return self.render_page(session, LoginForm(persons=builtin_persons(), api=session.api))

    def post(self, request: HttpRequest, request_id: str) -> HttpResponse:
        broker = self.get_broker()
        session = broker.session(request_id)
        if session is None:
            return self.ended(None, status=404)
        if not session.in_progress:
            return self.ended(session, status=410)
        form = LoginForm(request.POST, persons=builtin_persons(), api=session.api)
        if not form.is_valid():
            return self.render_page(session, form, status=400)
        action = form.cleaned_data["action"]
        try:
            if action == IDENTIFY:
                url = broker.identify(
                    request_id,
                    form.chosen_person(),
                    provider=form.cleaned_data["provider"] or None,
                    # The real environment of the browser at the sandbox, as a broker reports it.
                    user_agent=request.headers.get("User-Agent"),
                    ip_address=request.META.get("REMOTE_ADDR"),
                )
            elif action == ABORT:
                url = broker.abort(request_id)
            else:
                assert action == FAIL
                url = broker.fail(
                    request_id,
                    form.cleaned_data["error_status"] or "TIMEOUT",
                    record_status=form.cleaned_data["record_status"] or "ERROR",
                )
        except SessionError:
            # A double click: the first POST ended the session between our check and now.
            return self.ended(broker.session(request_id), status=410)
        if not url:
            # A session without return URLs (headless): the site learns the end by polling.
            return self.ended(broker.session(request_id), status=200)
        if session.iframe_domain:
            return self.leave_frame(session, url)
        return HttpResponseRedirect(url)

    def leave_frame(self, session: Session, url: str) -> HttpResponse:
        """End an iframe session as the deployed service does: from inside the frame, a
        script moves the *parent* page to the return URL (browsers may refuse that to a
        frame of another site), or, with ``iFrame.WebMessaging``, tells the parent page by
        ``postMessage`` (to the return URL's origin only)."""
        target = urlsplit(url)
        context = {
            "url": url,
            "parent_origin": f"{target.scheme}://{target.netloc}",
            "web_messaging": session.iframe_web_messaging,
        }
        response = render(self.request, self.leave_template_name, context)
        response["Content-Security-Policy"] = frame_ancestors(session.iframe_domain or "")
        return response

    def render_page(self, session: Session, form: LoginForm, status: int = 200) -> HttpResponse:
        context = {"session": session, "form": form, "persons": form.persons}
        return self.render_for(session, self.template_name, context, status)

    def ended(self, session: Session | None, status: int) -> HttpResponse:
        if session is None:
            message = _("This identification session does not exist or has expired.")
        else:
            message = _("This identification session has already ended.")
        context = {"session": session, "message": message}
        return self.render_for(session, self.ended_template_name, context, status)

    def render_for(
        self, session: Session | None, template: str, context: dict[str, Any], status: int
    ) -> HttpResponse:
        """Render in the session's language, with the session's framing policy."""
        language = BROKER_TO_DJANGO_LANGUAGE.get((session.language or "") if session else "")
        # Render now, inside the override: a TemplateResponse would render after it ends.
        with translation.override(language or translation.get_language()):
            response = render(self.request, template, context, status=status)
            response["Content-Language"] = translation.get_language() or "en"
        domain = session.iframe_domain if session and session.in_progress else None
        if domain:
            response["Content-Security-Policy"] = frame_ancestors(domain)
        else:
            response["Content-Security-Policy"] = "frame-ancestors 'none'"
            response["X-Frame-Options"] = "DENY"
        return response


def registered_redirect_uris(request: HttpRequest) -> tuple[str, ...]:
    """The redirect URIs registered for the sandbox's client: the site's
    ``OIDC_REDIRECT_URI`` when it sets one, else its ``django_eid:oidc-callback`` on the
    host ``request`` came to, as the relying party builds it for its start (the sandbox
    serves only on its issuer's host: the site's own callback). Nothing else: the OP
    serves on the site's origin and must not redirect anywhere else."""
    configured = eid_settings.OIDC_REDIRECT_URI
    if configured:
        return (configured,)
    try:
        return (request.build_absolute_uri(reverse("django_eid:oidc-callback")),)
    except NoReverseMatch:  # the site does not include django_eid.urls: no callback
        return ()


class OidcView(SandboxView):
    """Base of the OpenID provider's views: the OP of the URL's preset, at its issuer."""

    def get_provider(self) -> OpenIdProvider:
        preset = self.kwargs["preset"]
        if preset not in PRESETS:
            raise Http404("No such OpenID provider preset.")
        s = eid_settings
        return OpenIdProvider(
            self.get_broker(),
            preset=preset,
            issuer=oidc_issuer(self.request, preset),
            redirect_uris=registered_redirect_uris(self.request),
            # The site's own key pair stands in for the client's registered public key.
            client_key=s.OIDC_PRIVATE_KEY or None,
            client_key_id=s.OIDC_PRIVATE_KEY_ID or None,
        )


class OidcDiscoveryView(OidcView):
    """``GET <mount>/oidc/<preset>/.well-known/openid-configuration``."""

    http_method_names: ClassVar[list[str]] = ["get"]  # type: ignore[misc]

    def get(self, request: HttpRequest, preset: str) -> HttpResponse:
        simulate_latency()
        return json_response(self.get_provider().discovery())


class OidcJwksView(OidcView):
    """``GET <mount>/oidc/<preset>/jwks``."""

    http_method_names: ClassVar[list[str]] = ["get"]  # type: ignore[misc]

    def get(self, request: HttpRequest, preset: str) -> HttpResponse:
        simulate_latency()
        return json_response(self.get_provider().jwks())


@method_decorator(never_cache, name="dispatch")
class OidcAuthorizeView(OidcView):
    """``GET <mount>/oidc/<preset>/authorize``: to the picker page, or an error."""

    http_method_names: ClassVar[list[str]] = ["get"]  # type: ignore[misc]

    def get(self, request: HttpRequest, preset: str) -> HttpResponse:
        outcome = self.get_provider().authorize(request.META.get("QUERY_STRING", ""))
        if outcome.location is not None:
            return HttpResponseRedirect(outcome.location)
        # The redirect_uri is not to be trusted: the error stays here (RFC 6749 4.1.2.1).
        context = {"session": None, "message": outcome.error}
        response = render(request, "django_eid_sandbox/ended.html", context, status=400)
        response["Content-Security-Policy"] = "frame-ancestors 'none'"
        return response


class OidcFormView(OidcView):
    """A POST of a form with the client's authentication, answered by the provider's
    ``operation`` (``par`` or ``token``)."""

    http_method_names: ClassVar[list[str]] = ["post"]  # type: ignore[misc]
    operation: ClassVar[str]

    def post(self, request: HttpRequest, preset: str) -> HttpResponse:
        simulate_latency()
        reply = getattr(self.get_provider(), self.operation)(
            authorization=request.headers.get("Authorization"),
            content_type=request.content_type,
            body=request.body,
        )
        return json_response(reply)


@method_decorator(csrf_exempt, name="dispatch")
class OidcParView(OidcFormView):
    """``POST <mount>/oidc/<preset>/par``: 201 ``{"request_uri", "expires_in"}``."""

    operation = "par"


@method_decorator(csrf_exempt, name="dispatch")
class OidcTokenView(OidcFormView):
    """``POST <mount>/oidc/<preset>/token``."""

    operation = "token"


@method_decorator(csrf_exempt, name="dispatch")
class OidcUserinfoView(OidcView):
    """``GET`` or ``POST <mount>/oidc/<preset>/userinfo`` with a Bearer access token."""

    http_method_names: ClassVar[list[str]] = ["get", "post"]  # type: ignore[misc]

    def get(self, request: HttpRequest, preset: str) -> HttpResponse:
        simulate_latency()
        reply = self.get_provider().userinfo(authorization=request.headers.get("Authorization"))
        return json_response(reply)

    post = get
