"""What the front ends do when an identification at the door comes back to its browser.

The HTML views and the JSON API share it: :func:`arrive` logs the browser in as the account
linked to the person (Django's ``login()``: a new session key, ``user_logged_in``; then
``eid_login``), or signs the person up as ``SIGNUP`` and the adapter allow, or keeps the
verified person in the session for a sign-up (:func:`django_eid.pending_identification`).
Only for the browser whose one-time state shows it started the identification: the
callers have checked and used that state before.
"""

from __future__ import annotations

import enum
import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from django.contrib.auth import load_backend
from django.contrib.auth import login as auth_login

from django_eid import backends, outcomes, signals, state
from django_eid.adapter import get_adapter
from django_eid.conf import eid_settings
from django_eid.flows import finish, signup
from django_eid.flows.refused import Refused
from django_eid.models import Identification

if TYPE_CHECKING:
    from django.http import HttpRequest

logger = logging.getLogger("django_eid")


class Arrived(enum.Enum):
    """Where a verified person at the door got."""

    #: Logged in as the linked account.
    LOGGED_IN = "logged_in"
    #: An account was made (``SIGNUP = "auto"``) and logged in.
    SIGNED_UP = "signed_up"
    #: No account yet: the sign-up form is next (``SIGNUP = "form"``).
    SIGNUP_FORM = "signup_form"
    #: No account, and none is made here (``SIGNUP = "closed"``, or the adapter said no).
    NO_ACCOUNT = "no_account"


@dataclass(frozen=True)
class Arrival:
    """What :func:`arrive` did; ``next_url``: where the browser goes on (logged in)."""

    arrived: Arrived
    user: Any = None
    next_url: str = ""


def arrive(request: HttpRequest, row: Identification, *, fresh: bool = False) -> Arrival | None:
    """``row``, an identification at the door this browser started, finished: ``None`` if it
    did not succeed (its outcome is what the browser sees), else the :class:`Arrival`.
    ``fresh``: this request finished it (see :func:`log_in`).

    Raises :class:`~django_eid.flows.refused.Refused`: ``login_failed`` when the backend is
    not installed or refuses the account, or what an automatic sign-up refuses.
    """
    if row.status != Identification.Status.SUCCESS:
        return None
    adapter = get_adapter()
    if row.user_id is not None:
        user = log_in(request, row, fresh=fresh)
        return Arrival(Arrived.LOGGED_IN, user, _next(request, row, adapter.login_redirect_url))
    state.keep_verified(request, row.reference)
    if adapter.is_open_for_signup(request, row):
        if eid_settings.SIGNUP == "auto":
            try:
                signup.sign_up(row, adapter=adapter, request=request)
            finally:
                # Signed up, or refused for good (the person has an account): either way
                # nothing is left for a sign-up to bind.
                state.forget_verified(request)
            user = log_in(request, row)
            return Arrival(
                Arrived.SIGNED_UP, user, _next(request, row, adapter.signup_redirect_url)
            )
        if eid_settings.SIGNUP == "form":
            return Arrival(Arrived.SIGNUP_FORM)
    return Arrival(Arrived.NO_ACCOUNT)


def log_in(request: HttpRequest, row: Identification, *, fresh: bool = False) -> Any:
    """Log this browser in as the account ``row`` verified, through ``authenticate()``
    (:class:`~django_eid.backends.EidBackend`); the user. ``Refused`` (``login_failed``)
    when no backend answers.

    ``fresh``: this very request finished ``row`` (:func:`django_eid.flows.finish.complete`
    found the linked account, checked that it may log in, and stored the ``SUCCESS``
    moments ago): the backend answers from that without asking the database again
    (:func:`django_eid.flows.login.account_to_log_in`); a site's subclass still decides.
    """
    if fresh:
        # The backend's check of what this request checked moments ago is answered without
        # asking the database again (account_to_log_in); the site's subclass still decides.
        row.finished_here = True
    # The site's EidBackend (or its subclass) itself, as authenticate() would reach it: the
    # other backends have nothing to say about an identification.
    path = backends.backend_path()
    user = load_backend(path).authenticate(request, identification=row) if path else None
    if user is None:
        logger.error(
            "Identification %s could not log in: django_eid.backends.EidBackend is not in "
            "AUTHENTICATION_BACKENDS, or refused the account.",
            row.pk,
        )
        raise Refused(outcomes.LOGIN_FAILED)
    auth_login(request, user, backend=path)
    # Whoever it was waiting to sign up in this browser, it is this account's now.
    state.forget_verified(request)
    logger.info("User %s logged in by identification %s.", row.user_id, row.pk)
    finish.send(signals.eid_login, row, request)
    return user


def _next(request: HttpRequest, row: Identification, default: Any) -> str:
    """The start's ``next``; else, for a JSON front end's start, its success URL; else the
    adapter's ``default(request)``."""
    if row.next_url:
        return row.next_url
    if row.channel == Identification.Channel.API:
        return outcomes.destination(row)[0]
    return str(default(request))
