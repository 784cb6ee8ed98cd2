"""``eid_required``: a view only for users with a (recent, adult, ...) verified identity.

A logged-out user goes to the login page, as with ``login_required``. A logged-in user who
does not pass goes to ``django_eid:start``, which says why, and comes back afterwards; a
form they had sent is kept and sent again after the verification. A request asking for
JSON gets a 403 (or 401) JSON answer naming the start URL instead of a redirect. A user who
passes finds the verified identification on ``request.eid_identification``.
"""

from __future__ import annotations

import datetime
from collections.abc import Callable, Iterable
from functools import wraps
from typing import Any, TypeVar, overload
from urllib.parse import urlencode

from django.conf import settings
from django.contrib.auth.views import redirect_to_login
from django.http import HttpRequest, HttpResponseBase, JsonResponse
from django.http.response import HttpResponseRedirect
from django.shortcuts import resolve_url
from django.urls import reverse
from django.utils.functional import Promise
from django.utils.translation import gettext

from django_eid import state
from django_eid.forms import safe_next
from django_eid.requirements import Requirements, Verdict

_View = TypeVar("_View", bound=Callable[..., HttpResponseBase])

#: The content types of a form that can be kept and sent again (files cannot).
_FORM_TYPES = ("application/x-www-form-urlencoded", "multipart/form-data")


def wants_json(request: HttpRequest) -> bool:
    """The client asked for JSON: it sent JSON, or JSON is the first type it accepts."""
    if request.content_type == "application/json":
        return True
    for media in request.META.get("HTTP_ACCEPT", "").split(","):
        kind = media.split(";")[0].strip().lower()
        if kind in ("", "*/*"):
            continue
        return bool(kind == "application/json" or kind.endswith("+json"))
    return False


def gate(
    request: HttpRequest,
    requirements: Requirements,
    *,
    login_url: str | None = None,
    keep_form: bool = True,
    login: bool = False,
) -> HttpResponseBase | None:
    """``None`` when ``request.user`` meets ``requirements`` (the verified identification is
    then ``request.eid_identification``); else the answer that turns them away (to the login
    page, or to verify their identity). ``keep_form``: keep a POSTed form over the
    verification. ``login``: a visitor who is not logged in logs in with their eID
    (``django_eid:login``) rather than at ``login_url``."""
    if not request.user.is_authenticated:
        if login and login_url is None:
            login_url = reverse("django_eid:login")
        if wants_json(request):
            body = {
                "code": "login_required",
                "message": gettext("Please log in."),
                "login_url": resolve_url(login_url or settings.LOGIN_URL),
            }
            return JsonResponse(body, status=401)
        return redirect_to_login(request.get_full_path(), login_url)
    verdict = requirements.check(request.user)
    if verdict.passed:
        request.eid_identification = verdict.identification  # type: ignore[attr-defined]
        return None
    return turn_away(request, requirements, verdict, keep_form=keep_form)


def turn_away(
    request: HttpRequest, requirements: Requirements, verdict: Verdict, *, keep_form: bool = True
) -> HttpResponseBase:
    """Send a logged-in user who failed ``requirements`` to verify their identity."""
    start = reverse("django_eid:start")
    demand = requirements.demand(verdict)
    if wants_json(request):
        # Its front end decides where the user goes afterwards: not back to an API URL.
        return JsonResponse(demand.as_json(start), status=403)
    next_url = request.get_full_path()
    if request.method == "POST" and keep_form:
        token = _keep_form(request)
        if token is not None:
            next_url = reverse("django_eid:resume", args=[token])
    # The start page reads it back: why the user is there, and what the gate requires.
    state.require(request, next_url, demand)
    return HttpResponseRedirect(f"{start}?{urlencode({'next': next_url})}")


def _keep_form(request: HttpRequest) -> str | None:
    """Keep the POSTed form for after the verification; its token, or ``None`` if it can't be.

    Only a form that Django's CSRF middleware accepted (not one to a ``csrf_exempt`` view),
    without files, small enough (:data:`django_eid.state.MAX_KEPT_SIZE`), sent to a path on
    this site, and only where the session is kept on the server (a signed-cookie session
    would carry the form to the browser).
    """
    if request.content_type not in _FORM_TYPES or request.FILES:
        return None
    if not getattr(request, "csrf_processing_done", False):
        return None
    if settings.SESSION_ENGINE == "django.contrib.sessions.backends.signed_cookies":
        return None
    path = request.get_full_path()
    if safe_next(request, path) != path:
        # "//evil.example/x" is a path to Django, and another host to a browser's form.
        return None
    fields = [
        (name, value)
        for name, values in request.POST.lists()
        if name != "csrfmiddlewaretoken"
        for value in values
    ]
    return state.keep(request, path, fields)


@overload
def eid_required(view: _View, /) -> _View: ...


@overload
def eid_required(
    view: None = None,
    /,
    *,
    max_age: int | float | datetime.timedelta | None = None,
    min_age: int | None = None,
    min_loa: str | None = None,
    providers: Iterable[str] | str | None = None,
    same_person: bool = False,
    message: str | Promise | None = None,
    login_url: str | None = None,
    keep_form: bool = True,
    login: bool = False,
) -> Callable[[_View], _View]: ...


def eid_required(
    view: _View | None = None,
    /,
    *,
    max_age: int | float | datetime.timedelta | None = None,
    min_age: int | None = None,
    min_loa: str | None = None,
    providers: Iterable[str] | str | None = None,
    same_person: bool = False,
    message: str | Promise | None = None,
    login_url: str | None = None,
    keep_form: bool = True,
    login: bool = False,
) -> _View | Callable[[_View], _View]:
    """Let the view run only for users whose verified identity meets the conditions.

    Usable bare (``@eid_required``: any verified identity) or with keyword arguments:
    ``max_age`` (seconds or ``timedelta``: verified at most this long ago), ``min_age``
    (whole years; an unknown age does not pass), ``min_loa`` (``"low"``, ``"substantial"``
    or ``"high"``: verified at this level of assurance or a higher one; a level the broker
    did not state does not pass), ``providers`` (verified with one of these),
    ``same_person`` (the person already verified on the account), ``message`` (what the
    start page says instead of the defaults), ``login_url``, ``keep_form`` (``False``: a
    form posted before verifying is not kept, e.g. one with a password), ``login``
    (``True``: a visitor who is not logged in logs in with their eID at ``django_eid:login``,
    and passes with that same identification when it meets the conditions).
    Only the user's latest verification is judged. A user who passes finds it on
    ``request.eid_identification``.
    """
    requirements = Requirements.of(
        max_age=max_age,
        min_age=min_age,
        min_loa=min_loa,
        providers=providers,
        same_person=same_person,
        message=message,
    )

    def decorator(view_func: _View) -> _View:
        @wraps(view_func)
        def wrapper(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponseBase:
            refusal = gate(
                request, requirements, login_url=login_url, keep_form=keep_form, login=login
            )
            if refusal is not None:
                return refusal
            return view_func(request, *args, **kwargs)

        return wrapper  # type: ignore[return-value]

    return decorator(view) if view is not None else decorator
