"""The HTML views: thin adapters over :mod:`django_eid.flow`.

Each view reads the request, calls the flow, and maps what it returns (or the
:class:`~django_eid.flow.Refused` it raises) to a page or a redirect; what to tell the user
comes from :mod:`django_eid.outcomes`. State lives in the database (the ``Identification``
row) and in the user's Django session (:mod:`django_eid.state`), never in module globals.
Transactions are managed by the flow, so the views opt out of ``ATOMIC_REQUESTS``: signals
must see committed rows. Every page is ``never_cache`` (``Cache-Control: no-store`` ...): they
show who the user is, and the return URLs carry the session's ids.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from functools import wraps
from typing import Any, ClassVar
from urllib.parse import urlencode, urlsplit

from django.apps import apps
from django.conf import settings
from django.contrib.auth.mixins import LoginRequiredMixin
from django.contrib.auth.views import redirect_to_login
from django.core.exceptions import SuspiciousOperation
from django.db import transaction
from django.http import (
    HttpRequest,
    HttpResponse,
    HttpResponseBase,
    HttpResponseRedirect,
    JsonResponse,
)
from django.shortcuts import resolve_url
from django.template.response import TemplateResponse
from django.urls import reverse
from django.utils.decorators import method_decorator
from django.utils.module_loading import import_string
from django.utils.translation import gettext
from django.views import View
from django.views.decorators.cache import never_cache
from django.views.decorators.clickjacking import xframe_options_deny, xframe_options_sameorigin
from django.views.decorators.debug import sensitive_variables

from django_eid import backends, door, flow, outcomes, state
from django_eid.adapter import get_adapter
from django_eid.brokers import ReturnUrls, broker_api
from django_eid.conf import eid_settings
from django_eid.exceptions import EidConfigurationError, EidError
from django_eid.flows import signup
from django_eid.forms import StartForm, safe_next
from django_eid.models import Identification, fit
from django_eid.outcomes import Outcome
from django_eid.requirements import Demand

logger = logging.getLogger("django_eid")

#: Query parameter that marks the interstitial's second request.
RETRY_PARAM = "eid_retry"


def login_not_required(view: Callable[..., HttpResponseBase]) -> Callable[..., HttpResponseBase]:
    """Django's ``login_not_required`` (5.1+; nothing to do before it): for the views that
    answer an anonymous visitor themselves, so ``LoginRequiredMiddleware`` does not send
    them to the login page. A return URL must work without the session (the interstitial,
    another browser), a JSON answer is a 401, never a redirect."""
    try:
        from django.contrib.auth.decorators import login_not_required as exempt
    except ImportError:  # Django < 5.1: there is no LoginRequiredMiddleware
        return view
    return exempt(view)


def same_origin_referrer(view: Callable[..., HttpResponseBase]) -> Callable[..., HttpResponseBase]:
    """Send ``Referrer-Policy: same-origin`` whatever the site's own policy.

    Callback URLs carry the reference and the broker's ids: they must not reach a third
    party that the site's templates load (analytics, fonts), and a site may replace
    ``django_eid/base.html`` (whose meta tag says the same) with its own layout.
    """

    @wraps(view)
    def wrapper(*args: Any, **kwargs: Any) -> HttpResponseBase:
        response = view(*args, **kwargs)
        response["Referrer-Policy"] = "same-origin"
        return response

    return wrapper


def render_outcome(
    request: HttpRequest,
    outcome: Outcome,
    *,
    message: str | None = None,
    identification: Identification | None = None,
    start_url: str | None = None,
) -> TemplateResponse:
    """The page of ``outcome`` (its status, title and message), with a way to try again
    (``start_url``; by default where ``identification`` was started, see
    :func:`start_url_of`)."""
    return TemplateResponse(
        request,
        "django_eid/error.html",
        {
            "title": outcome.title,
            "message": message if message is not None else outcome.message,
            "code": outcome.code,
            "identification": identification,
            "start_url": start_url or start_url_of(identification),
        },
        status=outcome.status,
    )


def start_url_of(identification: Identification | None) -> str:
    """Where "Try again" leads: the login page (for the same purpose) after an
    identification at the door, else the start page."""
    if identification is None or not identification.at_the_door:
        return reverse("django_eid:start")
    login_url = reverse("django_eid:login")
    if identification.purpose == Identification.Purpose.SIGNUP:
        return f"{login_url}?{urlencode({'purpose': identification.purpose})}"
    return login_url


def render_refusal(request: HttpRequest, refused: flow.Refused) -> TemplateResponse:
    return render_outcome(
        request, refused.outcome, message=refused.message, identification=refused.identification
    )


def leave(request: HttpRequest, row: Identification) -> HttpResponse:
    """Send the user of a finished row where it sends them (a page, or a redirect)."""
    url, is_result = outcomes.destination(row)
    if is_result:
        return render_outcome(request, outcomes.of(row), identification=row)
    return HttpResponseRedirect(url)


class Starting(View):
    """What the start and login pages share: starting with a valid form."""

    def start(
        self,
        request: HttpRequest,
        form: StartForm,
        *,
        demand: Demand | None = None,
        purpose: str = Identification.Purpose.VERIFY,
    ) -> HttpResponse:
        """Start with the valid ``form`` (and what a gate asked: ``demand``), then send the
        browser to the broker, or to the page that frames it."""
        demand = demand or Demand()
        try:
            started = flow.start(
                request.user,
                return_urls=self.return_urls,
                host=request.get_host(),
                secure=request.is_secure(),
                provider=form.cleaned_data["provider"],
                display=form.cleaned_data["display"],
                next_url=form.cleaned_data["next"],
                user_agent=request.META.get("HTTP_USER_AGENT", ""),
                client_ip=request.META.get("REMOTE_ADDR"),
                same_person=demand.same_person,
                providers=demand.providers,
                request=request,
                purpose=purpose,
                browser_key=(
                    state.browser_key(request) if purpose != Identification.Purpose.VERIFY else None
                ),
            )
        except flow.Refused as refused:
            return self.refused(request, refused, purpose)
        reference = started.identification.reference
        if started.identification.display == Identification.Display.IFRAME:
            state.remember(request, reference, frame_url=started.url)
            # Post/Redirect/Get: reloading the page that embeds the broker must show the
            # same session, not POST again and start (and pay for) another one.
            frame = reverse("django_eid:frame", args=[reference])
            return HttpResponseRedirect(frame, status=303)
        state.remember(request, reference)
        return HttpResponseRedirect(started.url)

    def refused(self, request: HttpRequest, refused: flow.Refused, purpose: str) -> HttpResponse:
        """The page of a refused start."""
        return render_refusal(request, refused)

    def return_urls(self, reference: str) -> ReturnUrls:
        """The three return URLs for ``reference``; the broker fills the placeholders."""
        return flow.return_urls(reference, self.request.build_absolute_uri)


@method_decorator(never_cache, name="dispatch")
@method_decorator(transaction.non_atomic_requests, name="dispatch")
@method_decorator(xframe_options_deny, name="dispatch")
@method_decorator(sensitive_variables(), name="dispatch")
@method_decorator(same_origin_referrer, name="dispatch")
class StartView(LoginRequiredMixin, Starting):
    """GET shows the form (and why a gate sent the user); POST starts (never GET: login-CSRF)."""

    http_method_names: ClassVar[list[str]] = ["get", "post"]  # type: ignore[misc]
    template_name = "django_eid/start.html"

    def get(self, request: HttpRequest) -> HttpResponse:
        next_url = safe_next(request, request.GET.get("next"))
        finished = flow.finished_elsewhere(
            request.user,
            state.held(request),
            # Asked for a destination (a gate): only an identification started for it.
            next_url=next_url if request.GET.get("next") else None,
        )
        if finished is not None:
            # It ended without this browser (identified in an app, back in another browser),
            # recently: show where it went, once.
            state.consume(request, finished.reference)
            return leave(request, finished)
        demand = state.demand(request, next_url)
        initial = {
            "next": next_url,
            "provider": fit("identity_provider", request.GET.get("provider") or ""),
        }
        form = StartForm(initial=initial, request=request, restrict=demand.providers)
        return self.render_form(form, demand=demand)

    def render_form(
        self, form: StartForm, status: int = 200, *, demand: Demand | None = None
    ) -> TemplateResponse:
        context = {"form": form, "reasons": demand.reasons() if demand else []}
        return TemplateResponse(self.request, self.template_name, context, status=status)

    def post(self, request: HttpRequest) -> HttpResponse:
        if not hasattr(request, "session"):
            # Without the session the callback could never be accepted: do not start
            # a billed session (system check E019 names the missing middleware).
            logger.error("django-eid needs SessionMiddleware (system check E019).")
            return render_outcome(request, outcomes.NOT_AVAILABLE)
        next_url = safe_next(request, request.POST.get("next"))
        demand = state.demand(request, next_url)
        form = StartForm(request.POST, request=request, restrict=demand.providers)
        if not form.is_valid():
            return self.render_form(form, status=400, demand=demand)
        return self.start(request, form, demand=demand)


@method_decorator(login_not_required, name="dispatch")
@method_decorator(never_cache, name="dispatch")
@method_decorator(transaction.non_atomic_requests, name="dispatch")
@method_decorator(xframe_options_deny, name="dispatch")
@method_decorator(sensitive_variables(), name="dispatch")
@method_decorator(same_origin_referrer, name="dispatch")
class LoginView(Starting):
    """Log in (or sign up) with an eID: GET shows the form, POST starts at the door.

    For a visitor who is not logged in; a logged-in user is sent to verify instead (the
    flow makes their start a verification: no switching accounts through the back door).
    POST only (login CSRF). ``purpose`` (``login``, ``signup``) is what the visitor came
    for; either logs in a linked person and signs up one without an account, as ``SIGNUP``
    allows.
    """

    http_method_names: ClassVar[list[str]] = ["get", "post"]  # type: ignore[misc]
    template_name = "django_eid/login.html"

    def get(self, request: HttpRequest) -> HttpResponse:
        next_url = safe_next(request, request.GET.get("next"))
        if not backends.door_open():
            again = self.again(_purpose(request.GET.get("purpose")))
            return render_outcome(request, outcomes.NOT_AVAILABLE, start_url=again)
        if request.user.is_authenticated:
            start = reverse("django_eid:start")
            return HttpResponseRedirect(
                f"{start}?{urlencode({'next': next_url})}" if next_url else start
            )
        finished = flow.finished_elsewhere(request.user, state.held(request))
        if finished is not None:
            # Finished without this browser (the broker's app, the frame's status poll):
            # this browser started it, so it is this browser that logs in, once.
            state.consume(request, finished.reference)
            return self.arrived(request, finished)
        initial = {
            "next": next_url,
            "provider": fit("identity_provider", request.GET.get("provider") or ""),
        }
        form = StartForm(initial=initial, request=request, restrict=eid_settings.LOGIN_PROVIDERS)
        return self.render_form(form, purpose=_purpose(request.GET.get("purpose")))

    def arrived(self, request: HttpRequest, row: Identification) -> HttpResponse:
        arrived = arrive(request, row)
        if isinstance(arrived, str):
            return HttpResponseRedirect(arrived)
        return arrived if arrived is not None else leave(request, row)

    def render_form(self, form: StartForm, status: int = 200, *, purpose: str) -> TemplateResponse:
        context = {"form": form, "purpose": purpose}
        return TemplateResponse(self.request, self.template_name, context, status=status)

    def post(self, request: HttpRequest) -> HttpResponse:
        purpose = _purpose(request.POST.get("purpose"))
        if not hasattr(request, "session"):
            logger.error("django-eid needs SessionMiddleware (system check E019).")
            return render_outcome(request, outcomes.NOT_AVAILABLE, start_url=self.again(purpose))
        restrict = None if request.user.is_authenticated else eid_settings.LOGIN_PROVIDERS
        form = StartForm(request.POST, request=request, restrict=restrict)
        if not form.is_valid():
            return self.render_form(form, status=400, purpose=purpose)
        return self.start(request, form, purpose=purpose)

    def refused(self, request: HttpRequest, refused: flow.Refused, purpose: str) -> HttpResponse:
        """A refused start at the door (429, 503 ...): "Try again" leads back here."""
        if refused.identification is not None:
            return render_refusal(request, refused)
        return render_outcome(
            request, refused.outcome, message=refused.message, start_url=self.again(purpose)
        )

    @staticmethod
    def again(purpose: str) -> str:
        """This page, for ``purpose`` (a sign-up's keeps saying so)."""
        login_url = reverse("django_eid:login")
        if purpose == Identification.Purpose.SIGNUP:
            return f"{login_url}?{urlencode({'purpose': purpose})}"
        return login_url


def _purpose(value: str | None) -> str:
    """The door's purpose a form names; a login unless it says sign-up."""
    signup_ = Identification.Purpose.SIGNUP
    return signup_ if value == signup_ else Identification.Purpose.LOGIN


def arrive(
    request: HttpRequest, row: Identification, *, fresh: bool = False
) -> HttpResponse | str | None:
    """A visitor's identification at the door finished, in the browser that started it
    (its one-time state just used): where they go, as a URL or a page; ``None`` for an
    identification that did not succeed (its outcome page, as any). See
    :func:`django_eid.door.arrive`."""
    try:
        arrival = door.arrive(request, row, fresh=fresh)
    except flow.Refused as refused:
        return render_refusal(request, refused)
    if arrival is None:
        return None
    if arrival.arrived is door.Arrived.SIGNUP_FORM:
        return reverse("django_eid:signup")
    if arrival.arrived is door.Arrived.NO_ACCOUNT:
        signup_url = outcomes.configured_url("SIGNUP_URL") if eid_settings.SIGNUP_URL else None
        if signup_url and row.purpose == Identification.Purpose.SIGNUP:
            return signup_url  # the site's own sign-up, which binds the pending identification
        login_url = resolve_url(settings.LOGIN_URL)
        context = {
            "outcome": outcomes.NO_ACCOUNT,
            "signup_url": signup_url,
            # Another way to log in: not this page again (LOGIN_URL may be it).
            "login_url": None if login_url == reverse("django_eid:login") else login_url,
        }
        return TemplateResponse(request, "django_eid/no_account.html", context)
    return arrival.next_url


@method_decorator(login_not_required, name="dispatch")
@method_decorator(never_cache, name="dispatch")
@method_decorator(transaction.non_atomic_requests, name="dispatch")
@method_decorator(xframe_options_deny, name="dispatch")
@method_decorator(sensitive_variables(), name="dispatch")
@method_decorator(same_origin_referrer, name="dispatch")
class SignupView(View):
    """``SIGNUP = "form"``: the new account of the person this browser verified at the door.

    GET shows ``SIGNUP_FORM``, pre-filled with the verified name; POST makes the account
    (:func:`django_eid.flows.signup.sign_up`), logs it in and goes on.
    """

    http_method_names: ClassVar[list[str]] = ["get", "post"]  # type: ignore[misc]
    template_name = "django_eid/signup.html"

    row: Identification

    def dispatch(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponseBase:
        if request.user.is_authenticated:
            # An account is logged in here: nobody signs up as somebody else in its browser.
            return HttpResponseRedirect(get_adapter().login_redirect_url(request))
        row = signup.pending(state.verified(request))
        if row is None:
            # "Try again": signing up with an eID.
            again = f"{reverse('django_eid:login')}?{urlencode({'purpose': 'signup'})}"
            return render_outcome(request, outcomes.NOTHING_TO_BIND, start_url=again)
        self.row = row
        self.adapter = get_adapter()
        if eid_settings.SIGNUP != "form" or not self.adapter.is_open_for_signup(request, self.row):
            return render_outcome(request, outcomes.SIGNUP_CLOSED, identification=self.row)
        return super().dispatch(request, *args, **kwargs)

    def form(self, data: Any = None) -> Any:
        return import_string(eid_settings.SIGNUP_FORM)(data, identification=self.row)

    def get(self, request: HttpRequest) -> HttpResponse:
        return self.render(self.form())

    def render(self, form: Any, status: int = 200, refused: Any = None) -> TemplateResponse:
        context = {"form": form, "identification": self.row, "refused": refused}
        return TemplateResponse(self.request, self.template_name, context, status=status)

    def post(self, request: HttpRequest) -> HttpResponse:
        form = self.form(request.POST)
        if not form.is_valid():
            return self.render(form, status=400)
        try:
            signup.sign_up(self.row, adapter=self.adapter, request=request, form=form)
        except flow.Refused as refused:
            if refused.outcome is outcomes.SIGNUP_TAKEN:
                return self.render(form, status=refused.outcome.status, refused=refused)
            # Nothing this identification can sign up any more: not offered again.
            state.forget_verified(request)
            return render_outcome(
                request, refused.outcome, message=refused.message, identification=self.row
            )
        state.forget_verified(request)
        try:
            door.log_in(request, self.row)
        except flow.Refused as refused:
            return render_refusal(request, refused)
        return HttpResponseRedirect(self.row.next_url or self.adapter.signup_redirect_url(request))


def _finished_row(request: HttpRequest, reference: str) -> Identification | None:
    """The user's row ``reference``, as it is.

    A stale pending row is not expired here, without asking the broker: the identification
    may have succeeded (paid for) however late it is looked at. Who finishes it asks the
    broker first (:func:`django_eid.flow.settle`, :func:`django_eid.flow.return_to`).
    """
    return flow.find(request.user, reference)


#: How long the frame page goes on asking beyond ``SESSION_MAX_AGE``, in seconds: long
#: enough for the status call to settle a row that has just become stale (and send the page
#: to its outcome). Then the page stops asking.
FRAME_POLL_GRACE = 15


@method_decorator(login_not_required, name="dispatch")
@method_decorator(never_cache, name="dispatch")
@method_decorator(xframe_options_deny, name="dispatch")
@method_decorator(same_origin_referrer, name="dispatch")
class FrameView(View):
    """The page embedding the broker (iframe display); a reload shows the same session.

    A visitor who is not logged in sees only the identification at the door their browser
    started; anyone else is sent to log in.
    """

    http_method_names: ClassVar[list[str]] = ["get"]  # type: ignore[misc]
    template_name = "django_eid/iframe.html"

    def get(self, request: HttpRequest, reference: str) -> HttpResponse:
        row = flow.find(request.user, reference)
        if not request.user.is_authenticated and (
            row is None or not state.holds(request, reference)
        ):
            return redirect_to_login(request.get_full_path())
        if row is None:
            return render_outcome(request, outcomes.INVALID_LINK)
        if not row.is_finished and flow.is_expired(row) and state.holds(request, reference):
            # Past SESSION_MAX_AGE: the broker's record decides (a same-device SUCCESS is
            # stored, a session still at the broker expires), never the clock alone.
            try:
                flow.settle(row, request=request)
            except (EidError, EidConfigurationError) as err:
                logger.warning("Checking identification %s at the broker: %s", row.pk, err)
                return render_outcome(request, outcomes.RETRIEVE_UNREACHABLE)
            if row.is_finished:
                state.consume(request, reference)
        if row.is_finished:
            # Finished in the frame meanwhile (the back button), or expired: where it went.
            if row.at_the_door and not request.user.is_authenticated:
                return HttpResponseRedirect(reverse("django_eid:login"))
            return leave(request, row)
        broker_url = state.frame_url(request, reference)
        if broker_url is None:
            return render_outcome(request, outcomes.NOT_THIS_BROWSER)
        broker = urlsplit(broker_url)
        broker_origin = f"{broker.scheme}://{broker.netloc}"
        messaging = eid_settings.IFRAME_WEB_MESSAGING and broker_api().web_messaging
        script = eid_settings.IFRAME_WEB_MESSAGING_SCRIPT if messaging else None
        context = {
            "broker_url": broker_url,
            "broker_origin": broker_origin,
            "identification": row,
            "status_url": reverse("django_eid:status", args=[reference]),
            "poll_interval": int(STATUS_POLL_INTERVAL * 1000),
            # From the page's load; constant, so a reload shows the same page.
            "poll_for": (eid_settings.SESSION_MAX_AGE + FRAME_POLL_GRACE) * 1000,
            "web_messaging_script": script,
        }
        response = TemplateResponse(request, self.template_name, context)
        # With django-csp installed, allow framing the broker and nothing else (and the
        # broker's web-messaging script when it is used).
        csp: dict[str, list[str]] = {"frame-src": [broker_origin]}
        if script:
            parts = urlsplit(script)
            csp["script-src"] = [f"{parts.scheme}://{parts.netloc}"]
        response._csp_update = csp  # type: ignore[attr-defined]
        return response


@method_decorator(login_not_required, name="dispatch")
@method_decorator(never_cache, name="dispatch")
@method_decorator(transaction.non_atomic_requests, name="dispatch")
@method_decorator(same_origin_referrer, name="dispatch")
class StatusView(View):
    """``GET``: whether an identification is finished, and where its user goes then (JSON).

    For the page embedding the broker, which the broker may not be able to move on
    (browsers restrict a cross-origin frame navigating its parent): it polls this. Only
    the owner, in the browser that started, gets an answer; it holds no personal data. A
    pending row is settled from the broker's status call (:func:`django_eid.flow.settle`,
    the same-device rule included) at most every
    :data:`~django_eid.flow.SETTLE_INTERVAL` seconds, however often it is asked.
    """

    http_method_names: ClassVar[list[str]] = ["get"]  # type: ignore[misc]

    def get(self, request: HttpRequest, reference: str) -> HttpResponse:
        row = _finished_row(request, reference)
        if not request.user.is_authenticated and (
            row is None or not state.holds(request, reference)
        ):
            return JsonResponse({"code": "login_required"}, status=401)
        if row is None:
            return JsonResponse({"code": outcomes.INVALID_LINK.code}, status=404)
        if not row.is_finished and not state.holds(request, reference):
            return JsonResponse({"code": outcomes.NOT_THIS_BROWSER.code}, status=403)
        flow.settle_if_due(row, request=request)
        if not row.is_finished:
            return JsonResponse({"finished": False, "destination": None})
        if row.at_the_door and not request.user.is_authenticated:
            # The login page logs this browser in (the top window's request, not this poll):
            # the state stays for it.
            return JsonResponse({"finished": True, "destination": reverse("django_eid:login")})
        state.consume(request, reference)
        return JsonResponse({"finished": True, "destination": outcomes.destination(row)[0]})


def query_params(request: HttpRequest) -> dict[str, list[str]] | None:
    """A return's query parameters, each a list of values; ``None`` for more parameters
    than ``DATA_UPLOAD_MAX_NUMBER_FIELDS`` (never a broker's)."""
    try:
        return dict(request.GET.lists())
    except SuspiciousOperation:
        return None


#: How often the frame page asks :class:`StatusView`, in seconds.
STATUS_POLL_INTERVAL = 2.0


@method_decorator(login_not_required, name="dispatch")
@method_decorator(never_cache, name="dispatch")
@method_decorator(transaction.non_atomic_requests, name="dispatch")
@method_decorator(xframe_options_sameorigin, name="dispatch")
@method_decorator(sensitive_variables(), name="dispatch")
@method_decorator(same_origin_referrer, name="dispatch")
class CallbackView(View):
    """Base of the three return URLs: hand the return to :func:`django_eid.flow.return_to`.

    Subclasses set ``kind`` and may override :meth:`on_finished`.
    """

    http_method_names: ClassVar[list[str]] = ["get"]  # type: ignore[misc]
    kind: str
    interstitial_template_name = "django_eid/interstitial.html"
    frame_exit_template_name = "django_eid/frame_exit.html"
    elsewhere_template_name = "django_eid/elsewhere.html"

    def get(self, request: HttpRequest, reference: str) -> HttpResponse:
        if not flow.REFERENCE_RE.match(reference):
            return render_outcome(request, outcomes.INVALID_LINK)
        params = query_params(request)
        if params is None:
            return render_outcome(request, outcomes.MALFORMED_LINK)
        return self.handle(request, self.kind, reference, params)

    def handle(
        self, request: HttpRequest, kind: str, reference: str, params: dict[str, list[str]]
    ) -> HttpResponse:
        """The return ``kind`` of ``reference``, with the URL's query ``params``."""
        self.kind = kind
        if not request.user.is_authenticated and not state.holds(request, reference):
            # Not logged in, and not the browser that started at the door either.
            return self.without_session(request, reference, params)
        try:
            returned = flow.return_to(
                self.kind,
                user=request.user,
                reference=reference,
                params=params,
                browser_holds=state.holds(request, reference),
                request=request,
                return_url=request.build_absolute_uri(request.path),
            )
        except flow.Refused as refused:
            if refused.outcome is outcomes.NOT_THIS_BROWSER:
                # The owner, in another browser than the one that started (the app switch)?
                elsewhere = self.elsewhere(request, reference, params)
                if elsewhere is not None:
                    return elsewhere
            # Pending still (the user may reload), or not this user's or browser's.
            return render_refusal(request, refused)
        # Finished, here or before: the one-time state is used up.
        state.consume(request, reference)
        row = returned.identification
        if returned.acted:
            self.on_finished(request, row)
        if row.at_the_door and not request.user.is_authenticated:
            arrived = arrive(request, row, fresh=returned.acted)
            if isinstance(arrived, str):
                return self.go(request, row, arrived)
            if arrived is not None:
                return arrived
        return self.finish(request, row)

    def on_finished(self, request: HttpRequest, row: Identification) -> None:
        """Called once, by the request that finished ``row``; a hook for subclasses."""

    def without_session(
        self, request: HttpRequest, reference: str, params: dict[str, list[str]]
    ) -> HttpResponse:
        """No session cookie came with the callback (SameSite, a cleared cookie ...).

        Re-request the same URL from our own page, so a Lax/Strict cookie is sent; if it is
        still missing, this is another browser than the one that started (the app switch).
        """
        if eid_settings.CALLBACK_INTERSTITIAL and RETRY_PARAM not in request.GET:
            query = request.GET.copy()
            query[RETRY_PARAM] = "1"
            retry_url = f"{request.path}?{query.urlencode(safe='[]')}"
            return TemplateResponse(
                request, self.interstitial_template_name, {"retry_url": retry_url}
            )
        elsewhere = self.elsewhere(request, reference, params)
        return elsewhere or render_outcome(request, outcomes.SESSION_LOST)

    def elsewhere(
        self, request: HttpRequest, reference: str, params: dict[str, list[str]]
    ) -> HttpResponse | None:
        """The page for a genuine return in another browser, or ``None`` if it is not one.

        The row is settled without its browser (the same-device rule applies); the page
        says only that the identification ended, and where to go on: nothing of the
        identity, to whoever holds this browser.
        """
        # Not the request of the owner's browser (maybe nobody's, maybe another user's): the
        # signals get no request, as for eid_reconcile.
        settled = flow.return_elsewhere(self.kind, reference=reference, params=params)
        if settled is None:
            return None
        forward = self.forward(settled.identification, params)
        if forward is not None:
            return self.go(request, settled.identification, forward)
        context = {"kind": self.kind, "outcome": settled.outcome}
        return TemplateResponse(request, self.elsewhere_template_name, context)

    def forward(self, row: Identification, params: dict[str, list[str]]) -> str | None:
        """Where a return of a JSON front end's identification goes from another browser.

        Finished: to the front end's URL of its outcome. Still pending (the same-device rule
        did not let it finish): to the front end's URL of this return, with the broker's ids,
        so that the front end, authenticated as the owner, finishes it (``api-return``).
        ``None`` for an identification of the HTML pages, or without ``FRONTEND_URLS``.
        """
        if row.channel != Identification.Channel.API or not eid_settings.FRONTEND_URLS:
            return None
        if row.is_finished:
            return outcomes.destination(row)[0]
        return outcomes.forwarded_return(self.kind, row.reference, params)

    def go(self, request: HttpRequest, row: Identification, url: str) -> HttpResponse:
        """Send the browser to ``url``: the top window's, from inside the iframe."""
        if row.display == Identification.Display.IFRAME:
            return TemplateResponse(request, self.frame_exit_template_name, {"destination": url})
        return HttpResponseRedirect(url)

    def finish(self, request: HttpRequest, row: Identification) -> HttpResponse:
        url, is_result = outcomes.destination(row)
        if row.display == Identification.Display.IFRAME or not is_result:
            return self.go(request, row, url)
        return render_outcome(request, outcomes.of(row), identification=row)


class SuccessView(CallbackView):
    """The user identified at the broker: the flow fetches the record and stores it."""

    kind = flow.SUCCESS

    def on_finished(self, request: HttpRequest, row: Identification) -> None:
        tell_linked_elsewhere(request, row)


class AbortView(CallbackView):
    """The user cancelled at the broker."""

    kind = flow.ABORT

    def on_finished(self, request: HttpRequest, row: Identification) -> None:
        # Only the request that aborted says so: a lost race (success in another tab)
        # must not tell the user they cancelled.
        tell_aborted(request, row)


def tell_aborted(request: HttpRequest, row: Identification) -> None:
    """The start page's message that the user cancelled (the HTML pages only)."""
    if row.channel == Identification.Channel.API:
        return  # the front end tells the user
    if apps.is_installed("django.contrib.messages") and not eid_settings.ABORT_URL:
        from django.contrib import messages

        messages.info(request, str(outcomes.ABORTED.message))


def tell_linked_elsewhere(request: HttpRequest, row: Identification) -> None:
    """The warning that a success did not link the account, its person being linked to
    another one (``LINK_ON_VERIFY``; the HTML pages only)."""
    if row.channel == Identification.Channel.API:
        return  # the front end tells the user
    if apps.is_installed("django.contrib.messages") and flow.linked_elsewhere(row):
        from django.contrib import messages

        messages.warning(request, str(outcomes.LINKED_ELSEWHERE))


class ErrorView(CallbackView):
    """The broker ended the session with an error; ``status`` carries ``[0]``."""

    kind = flow.ERROR

    def on_finished(self, request: HttpRequest, row: Identification) -> None:
        # The broker's record decides: it may say the person identified after all.
        tell_linked_elsewhere(request, row)


class OidcCallbackView(CallbackView):
    """The one redirect URI of an OpenID provider (``BROKER_API = "oidc"``): the return's
    ``state`` names the identification, its ``code`` or ``error`` which return it is."""

    kind = flow.SUCCESS

    def get(self, request: HttpRequest, reference: str = "") -> HttpResponse:
        params = query_params(request)
        if params is None:
            return render_outcome(request, outcomes.MALFORMED_LINK)
        found = flow.callback_return(params)
        if found is None:
            return render_outcome(request, outcomes.INVALID_LINK)
        kind, reference = found
        return self.handle(request, kind, reference, params)

    def on_finished(self, request: HttpRequest, row: Identification) -> None:
        if self.kind == flow.ABORT:
            tell_aborted(request, row)
        else:
            tell_linked_elsewhere(request, row)


@method_decorator(login_not_required, name="dispatch")
@method_decorator(never_cache, name="dispatch")
@method_decorator(same_origin_referrer, name="dispatch")
@method_decorator(xframe_options_deny, name="dispatch")
class ResultView(View):
    """The outcome page of a finished identification (errors, rejections, expiry); for a
    visitor who is not logged in, of an identification at the door (nothing personal)."""

    http_method_names: ClassVar[list[str]] = ["get"]  # type: ignore[misc]

    def get(self, request: HttpRequest, reference: str) -> HttpResponse:
        row = flow.find(request.user, reference)
        if row is None and not request.user.is_authenticated:
            return redirect_to_login(request.get_full_path())
        if row is not None and not request.user.is_authenticated:
            # Anyone with the link: the outcome's words, nothing of the row.
            if not row.is_finished or row.status == Identification.Status.SUCCESS:
                return render_outcome(request, outcomes.INVALID_LINK)
            outcome = outcomes.of(row)
            if row.error_code == outcomes.RECEIVER_REJECTED:
                outcome = outcomes.REJECTED  # the site's own words may describe the person
            return render_outcome(request, outcome, start_url=start_url_of(row))
        if row is None or not row.is_finished:
            return render_outcome(request, outcomes.INVALID_LINK)
        if row.status == Identification.Status.SUCCESS:
            # Not a failure page: send the user where the success sent them.
            return HttpResponseRedirect(outcomes.destination(row)[0])
        return render_outcome(request, outcomes.of(row), identification=row)


@method_decorator(never_cache, name="dispatch")
@method_decorator(xframe_options_deny, name="dispatch")
@method_decorator(same_origin_referrer, name="dispatch")
class ResumeView(LoginRequiredMixin, View):
    """Send again the form a gate kept while the user verified their identity.

    The kept form is used once: this page posts it to where it was first sent, with a
    fresh CSRF token, so the site's view (and its CSRF check) handles it as any other.
    """

    http_method_names: ClassVar[list[str]] = ["get"]  # type: ignore[misc]
    template_name = "django_eid/resume.html"

    def get(self, request: HttpRequest, token: str) -> HttpResponse:
        kept = state.resume(request, token)
        # The kept path was checked when it was kept; the session may be older than that.
        if kept is None or safe_next(request, kept.path) != kept.path:
            return render_outcome(request, outcomes.RESUME_INVALID)
        return TemplateResponse(
            request, self.template_name, {"action": kept.path, "fields": kept.fields}
        )


@method_decorator(never_cache, name="dispatch")
@method_decorator(transaction.non_atomic_requests, name="dispatch")
@method_decorator(xframe_options_deny, name="dispatch")
@method_decorator(same_origin_referrer, name="dispatch")
class LinksView(LoginRequiredMixin, View):
    """The user's eID links: GET lists them, POST (``link``: a link's id) removes one.

    The last way the user has to log in (the only link of an account without a usable
    password) is not removed: the page says why, with the status of the refusal.
    """

    http_method_names: ClassVar[list[str]] = ["get", "post"]  # type: ignore[misc]
    template_name = "django_eid/links.html"

    def get(self, request: HttpRequest) -> HttpResponse:
        return self.render_links()

    def post(self, request: HttpRequest) -> HttpResponse:
        try:
            flow.unlink(request.user, request.POST.get("link"))
        except flow.Refused as refused:
            return self.render_links(refused)
        if apps.is_installed("django.contrib.messages"):
            from django.contrib import messages

            messages.success(request, gettext("The eID link was removed."))
        # Post/Redirect/Get: a reload shows the page, and removes nothing again.
        return HttpResponseRedirect(reverse("django_eid:links"), status=303)

    def render_links(self, refused: flow.Refused | None = None) -> TemplateResponse:
        """The page, with what was refused (its status; else ``200``)."""
        context = {"links": flow.links_of(self.request.user), "refused": refused}
        status = refused.outcome.status if refused is not None else 200
        return TemplateResponse(self.request, self.template_name, context, status=status)
