"""The views: start page, the three return callbacks, and the result page.

State lives in the database (the ``Identification`` row) and in the user's
Django session (the one-time pending references of :mod:`django_eid.state`),
never in module globals. Transactions are managed by :mod:`django_eid.flow`,
so the views opt out of ``ATOMIC_REQUESTS``: signals must see committed rows.
"""

from __future__ import annotations

import hmac
import logging
import re
from collections.abc import Callable
from functools import wraps
from typing import Any, ClassVar
from urllib.parse import urlencode, urlsplit

from django.apps import apps
from django.contrib.auth.mixins import LoginRequiredMixin
from django.core.exceptions import SuspiciousOperation
from django.db import transaction
from django.http import HttpRequest, HttpResponse, HttpResponseBase, HttpResponseRedirect
from django.http.request import split_domain_port
from django.shortcuts import resolve_url
from django.template.response import TemplateResponse
from django.urls import NoReverseMatch, reverse
from django.utils.decorators import method_decorator
from django.utils.translation import gettext as _
from django.views import View
from django.views.decorators.clickjacking import xframe_options_deny, xframe_options_sameorigin
from django.views.decorators.debug import sensitive_variables

from django_eid import flow, state
from django_eid.client import ReturnUrls, get_client
from django_eid.conf import eid_settings
from django_eid.exceptions import (
    EidConfigurationError,
    EidError,
    EidProtocolError,
    EidUnavailable,
)
from django_eid.forms import StartForm, safe_next
from django_eid.models import Identification, fit
from django_eid.records import IN_PROGRESS

logger = logging.getLogger("django_eid")

Status = Identification.Status
#: Shape of a reference made by ``models.new_reference`` (url-safe base64).
REFERENCE_RE = re.compile(r"^[A-Za-z0-9_-]{16,64}\Z")
#: Query parameter that marks the interstitial's second request.
RETRY_PARAM = "eid_retry"
#: Placeholder values longer than this cannot be ours.
PLACEHOLDER_MAX = 512


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


def _messages_installed() -> bool:
    return apps.is_installed("django.contrib.messages")


def render_error(
    request: HttpRequest,
    message: str,
    *,
    status: int,
    identification: Identification | None = None,
    title: str | None = None,
) -> TemplateResponse:
    """The error page, with a way to try again."""
    return TemplateResponse(
        request,
        "django_eid/error.html",
        {
            "title": title or _("Identification failed"),
            "message": message,
            "identification": identification,
            "start_url": reverse("django_eid:start"),
        },
        status=status,
    )


@method_decorator(transaction.non_atomic_requests, name="dispatch")
@method_decorator(xframe_options_deny, name="dispatch")
@method_decorator(same_origin_referrer, name="dispatch")
class StartView(LoginRequiredMixin, View):
    """GET shows the form; POST starts a session (never GET: login-CSRF)."""

    http_method_names: ClassVar[list[str]] = ["get", "post"]  # type: ignore[misc]
    template_name = "django_eid/start.html"

    def get(self, request: HttpRequest) -> HttpResponse:
        initial = {
            "next": safe_next(request, request.GET.get("next")),
            "provider": fit("identity_provider", request.GET.get("provider") or ""),
        }
        form = StartForm(initial=initial, request=request)
        return self.render_form(form)

    def render_form(self, form: StartForm, status: int = 200) -> TemplateResponse:
        return TemplateResponse(self.request, self.template_name, {"form": form}, status=status)

    def post(self, request: HttpRequest) -> HttpResponse:
        if not hasattr(request, "session"):
            # Without the session the callback could never be accepted: do not start
            # a billed session (system check E019 names the missing middleware).
            logger.error("django-eid needs SessionMiddleware (system check E019).")
            return render_error(
                request, _("Identification is not available at the moment."), status=503
            )
        form = StartForm(request.POST, request=request)
        if not form.is_valid():
            return self.render_form(form, status=400)
        if flow.pending_count(request.user) >= eid_settings.MAX_PENDING_PER_USER:
            return render_error(
                request,
                _(
                    "You have started too many identifications that are not finished. "
                    "Finish one of them, or wait a while and try again."
                ),
                title=_("Too many identifications in progress"),
                status=429,
            )
        display = form.cleaned_data["display"]
        iframe_domain = None
        if display == Identification.Display.IFRAME:
            iframe_domain = eid_settings.IFRAME_DOMAIN or split_domain_port(request.get_host())[0]
        try:
            started = flow.start(
                request,
                return_urls=self.return_urls,
                provider=form.cleaned_data["provider"],
                next_url=form.cleaned_data["next"],
                display=display,
                iframe_domain=iframe_domain,
            )
        except flow.BrokerFailed as failed:
            unavailable = isinstance(failed.error, EidUnavailable)
            return render_error(
                request,
                _("The identification service could not be reached. Please try again in a moment.")
                if unavailable
                else _("The identification service refused to start. Please try again later."),
                identification=failed.identification,
                status=503 if unavailable else 502,
            )
        except EidConfigurationError:
            logger.exception("django-eid is not configured; see the system checks.")
            return render_error(
                request, _("Identification is not available at the moment."), status=503
            )
        reference = started.identification.reference
        if display == Identification.Display.IFRAME:
            state.remember(request, reference, frame_url=started.url)
            # Post/Redirect/Get: reloading the page that embeds the broker must show the
            # same session, not POST again and start (and pay for) another one.
            frame = reverse("django_eid:frame", args=[reference])
            return HttpResponseRedirect(frame, status=303)
        state.remember(request, reference)
        return HttpResponseRedirect(started.url)

    def return_urls(self, reference: str) -> ReturnUrls:
        """The three return URLs for ``reference``; the broker fills the placeholders."""

        def url(name: str) -> str:
            return self.request.build_absolute_uri(reverse(f"django_eid:{name}", args=[reference]))

        # Built as text so the brackets reach the broker unencoded.
        return ReturnUrls(
            success=url("success") + "?requestId=[1]&externalId=[2]",
            abort=url("abort") + "?requestId=[1]&externalId=[2]",
            error=url("error") + "?status=[0]",
        )


def _configured_url(key: str) -> str:
    """``SUCCESS_URL``/``ABORT_URL``/``ERROR_URL`` resolved.

    A name that does not reverse (check ``E018``) must not turn a stored identification
    into a 500 on every reload: the user goes to the site's root instead.
    """
    value = getattr(eid_settings, key)
    try:
        return resolve_url(value)
    except NoReverseMatch:
        logger.error("DJANGO_EID[%r] does not resolve (system check E018); sent to /.", key)
        return "/"


def users_row(request: HttpRequest, reference: str) -> Identification | None:
    """The logged-in user's identification ``reference``; another user's is ``None`` too."""
    if not REFERENCE_RE.match(reference):
        return None
    row = Identification.objects.filter(reference=reference, user=request.user).first()  # type: ignore[misc]  # login required
    if row is not None:
        row.user = request.user  # type: ignore[assignment]  # the views require login
    return row


def expire_if_stale(request: HttpRequest, row: Identification) -> None:
    """A pending row older than ``SESSION_MAX_AGE`` becomes EXPIRED; its state is used up."""
    if not row.is_finished and flow.is_expired(row):
        flow.expire(row)
        state.consume(request, row.reference)


def leave(request: HttpRequest, row: Identification) -> HttpResponse:
    """Send the user of a finished row where it sends them (a page, or a redirect)."""
    url, is_result = destination(row)
    return outcome_page(request, row) if is_result else HttpResponseRedirect(url)


@method_decorator(xframe_options_deny, name="dispatch")
@method_decorator(same_origin_referrer, name="dispatch")
class FrameView(LoginRequiredMixin, View):
    """The page embedding the broker (iframe display); a reload shows the same session."""

    http_method_names: ClassVar[list[str]] = ["get"]  # type: ignore[misc]
    template_name = "django_eid/iframe.html"

    def get(self, request: HttpRequest, reference: str) -> HttpResponse:
        row = users_row(request, reference)
        if row is None:
            return render_error(request, _("This identification link is not valid."), status=404)
        expire_if_stale(request, row)
        if row.is_finished:
            # Finished in the frame meanwhile (the back button), or expired: where it went.
            return leave(request, row)
        broker_url = state.frame_url(request, reference)
        if broker_url is None:
            return render_error(
                request,
                _("This identification was not started in this browser. Please start again."),
                status=403,
            )
        response = TemplateResponse(
            request, self.template_name, {"broker_url": broker_url, "identification": row}
        )
        # With django-csp installed, allow framing the broker and nothing else.
        broker = urlsplit(broker_url)
        response._csp_update = {"frame-src": [f"{broker.scheme}://{broker.netloc}"]}  # type: ignore[attr-defined]
        return response


def destination(row: Identification) -> tuple[str, bool]:
    """Where a finished row sends its user: ``(url, is_result_page)``."""
    if row.status == Status.SUCCESS:
        return row.next_url or _configured_url("SUCCESS_URL"), False
    if row.status == Status.ABORTED:
        if eid_settings.ABORT_URL:
            return _configured_url("ABORT_URL"), False
        start = reverse("django_eid:start")
        return (f"{start}?{urlencode({'next': row.next_url})}" if row.next_url else start), False
    if row.status == Status.ERROR and eid_settings.ERROR_URL:
        return _configured_url("ERROR_URL"), False
    return reverse("django_eid:result", args=[row.reference]), True


def outcome_page(request: HttpRequest, row: Identification) -> TemplateResponse:
    """The page shown for a failed, rejected or expired identification."""
    if row.status == Status.REJECTED:
        refusal = flow.REFUSALS.get(row.error_code)
        # django-eid's own reasons in the reader's language; a receiver's reason as stored.
        message = str(refusal) if refusal else row.error_message
        message = message or _("Your identification was not accepted.")
        title = _("Identification not accepted")
    elif row.status == Status.EXPIRED:
        message = _("The identification took too long and has expired. Please start again.")
        title = _("Identification expired")
    elif row.status == Status.ABORTED:
        message = _("You cancelled the identification.")
        title = _("Identification cancelled")
    else:
        message = _("The identification did not succeed. Please try again.")
        title = _("Identification failed")
    # An expired session is a refusal; the others are outcomes the user asked for.
    status = 410 if row.status == Status.EXPIRED else 200
    return render_error(request, message, title=title, identification=row, status=status)


@method_decorator(transaction.non_atomic_requests, name="dispatch")
@method_decorator(xframe_options_sameorigin, name="dispatch")
@method_decorator(sensitive_variables(), name="dispatch")
@method_decorator(same_origin_referrer, name="dispatch")
class CallbackView(View):
    """Base of the three return URLs: checks, then one transition.

    Subclasses implement :meth:`handle` and set ``uses_placeholders``.
    """

    http_method_names: ClassVar[list[str]] = ["get"]  # type: ignore[misc]
    #: Success and Abort carry ``[1]`` (request id) and ``[2]`` (external id).
    uses_placeholders = True
    interstitial_template_name = "django_eid/interstitial.html"
    frame_exit_template_name = "django_eid/frame_exit.html"

    def get(self, request: HttpRequest, reference: str) -> HttpResponse:
        if not REFERENCE_RE.match(reference):
            return render_error(request, _("This identification link is not valid."), status=404)
        try:
            request.GET  # noqa: B018  (parsed lazily; some Django versions raise here)
        except SuspiciousOperation:
            # More parameters than DATA_UPLOAD_MAX_NUMBER_FIELDS: never a broker's.
            return render_error(request, _("This identification link is not valid."), status=400)
        if not request.user.is_authenticated:
            return self.without_session(request)
        row = users_row(request, reference)
        if row is None:
            # Another user's row is indistinguishable from none at all.
            return render_error(request, _("This identification link is not valid."), status=404)
        expire_if_stale(request, row)
        if row.is_finished:
            # Reload, back button, double click, or expired: the same destination, nothing
            # sent again.
            return self.finish(request, row)
        if not state.holds(request, reference):
            return render_error(
                request,
                _("This identification was not started in this browser. Please start again."),
                status=403,
            )
        if self.uses_placeholders:
            problem = self.check_placeholders(request, row)
            if problem:
                logger.warning("Refused a callback of identification %s: %s", row.pk, problem)
                return render_error(
                    request,
                    _("The answer from the identification service did not match."),
                    status=400,
                )
        response = self.handle(request, row)
        if response is not None:
            return response  # the row stays pending: the user may reload to try again
        # A transition happened, here or in a concurrent request: the row is finished.
        state.consume(request, reference)
        return self.finish(request, row)

    def handle(self, request: HttpRequest, row: Identification) -> HttpResponse | None:
        """Act on the callback: ``None`` once ``row`` is finished, or the page to show instead."""
        raise NotImplementedError

    def check_placeholders(self, request: HttpRequest, row: Identification) -> str | None:
        """Why ``[1]``/``[2]`` do not identify ``row``, or ``None`` when they do."""
        for param, expected, placeholder in (
            ("requestId", row.request_id or "", "[1]"),
            ("externalId", row.external_id, "[2]"),
        ):
            values = request.GET.getlist(param)
            if len(values) != 1:
                return f"{param} given {len(values)} times"
            value = values[0]
            if not value or value == placeholder:
                return f"{param} missing"
            if len(value) > PLACEHOLDER_MAX:
                return f"{param} too long"
            # A broker that substitutes without percent-encoding turns a "+" of the id
            # into a space on the way through the query string; accept that spelling too.
            spellings = {value, value.replace(" ", "+")}
            if not any(hmac.compare_digest(v.encode(), expected.encode()) for v in spellings):
                return f"{param} does not match"
        return None

    def without_session(self, request: HttpRequest) -> HttpResponse:
        """No session cookie came with the callback (SameSite, a cleared cookie ...).

        Re-request the same URL from our own page, so a Lax/Strict cookie is
        sent; refuse only if it is still missing.
        """
        if eid_settings.CALLBACK_INTERSTITIAL and RETRY_PARAM not in request.GET:
            query = request.GET.copy()
            query[RETRY_PARAM] = "1"
            retry_url = f"{request.path}?{query.urlencode(safe='[]')}"
            return TemplateResponse(
                request, self.interstitial_template_name, {"retry_url": retry_url}
            )
        return render_error(
            request,
            _(
                "Your session was lost on the way back from the identification service. "
                "Please log in and start again."
            ),
            title=_("Session expired"),
            status=403,
        )

    def finish(self, request: HttpRequest, row: Identification) -> HttpResponse:
        if row.display == Identification.Display.IFRAME:
            # We are inside the iframe: move the top window.
            url = destination(row)[0]
            return TemplateResponse(request, self.frame_exit_template_name, {"destination": url})
        return leave(request, row)


class SuccessView(CallbackView):
    """The user identified at the broker: fetch the record and store it."""

    # Every variable, here and in the frames below (flow, ORM): the record's personal data.
    # (Naming only "record" would narrow dispatch's all-variables cleansing for those frames.)
    @method_decorator(sensitive_variables())
    def handle(self, request: HttpRequest, row: Identification) -> HttpResponse | None:
        assert row.request_id is not None
        try:
            record = get_client().get_session(row.request_id)
        except EidError as err:
            logger.warning("Retrieving identification %s failed: %s", row.pk, err)
            if isinstance(err, EidProtocolError):  # answered, but not what the contract says
                message = _(
                    "The identification service sent an unexpected answer. Reload this page to try again."
                )
            else:
                message = _(
                    "The identification service could not be reached. Reload this page to try again."
                )
            return render_error(
                request, message, status=503 if isinstance(err, EidUnavailable) else 502
            )
        if record.status in IN_PROGRESS:
            return render_error(
                request,
                _(
                    "Your identification is not finished yet. Please complete it at your eID provider, "
                    "then reload this page."
                ),
                title=_("Identification in progress"),
                status=409,
            )
        flow.succeed(row, request, record)
        return None


class AbortView(CallbackView):
    """The user cancelled at the broker."""

    def handle(self, request: HttpRequest, row: Identification) -> HttpResponse | None:
        # Only the request that aborted says so: a lost race (success in another tab)
        # must not tell the user they cancelled.
        if flow.abort(row, request) and _messages_installed() and not eid_settings.ABORT_URL:
            from django.contrib import messages

            messages.info(request, _("You cancelled the identification."))
        return None


class ErrorView(CallbackView):
    """The broker ended the session with an error; ``status`` carries ``[0]``."""

    uses_placeholders = False

    def handle(self, request: HttpRequest, row: Identification) -> HttpResponse | None:
        values = request.GET.getlist("status")
        value = values[0] if len(values) == 1 else ""
        if value == "[0]":
            value = ""
        # An opaque short code: keep printable ASCII only.
        code = fit("error_status", "".join(c for c in value if 32 < ord(c) < 127))
        flow.fail(row, request, code or "UNKNOWN")
        return None


@method_decorator(same_origin_referrer, name="dispatch")
class ResultView(LoginRequiredMixin, View):
    """The outcome page of a finished identification (errors, rejections, expiry)."""

    http_method_names: ClassVar[list[str]] = ["get"]  # type: ignore[misc]

    @method_decorator(xframe_options_deny)
    def get(self, request: HttpRequest, reference: str) -> HttpResponse:
        row = users_row(request, reference)
        if row is None or not row.is_finished:
            return render_error(request, _("This identification link is not valid."), status=404)
        if row.status == Status.SUCCESS:
            # Not a failure page: send the user where the success sent them.
            return HttpResponseRedirect(destination(row)[0])
        return outcome_page(request, row)
