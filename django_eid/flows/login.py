"""Logging in with an eID: which account a verified person opens, and the rules of the door.

An identification started at the door (``purpose`` ``"login"`` or ``"signup"``) has no user.
When it finishes, the person it verified is looked up by their ``uid:`` key among the
links (:class:`~django_eid.models.LinkedIdentity`, :mod:`django_eid.flows.link`):
:func:`account_of`, inside the transaction that stores the ``SUCCESS``, so the site's rules
and receivers see the account. Only that key opens an account: never a name, a date of
birth or an e-mail address. The rules of the door (:func:`refusal`) run with the site's
others: the level of assurance (``LOGIN_MIN_LOA``, the provider's published level where the
broker API states none) and an account that may not log in.

The login itself is the front end's: it asks Django's ``authenticate()``, which asks
:class:`django_eid.backends.EidBackend`, which asks :func:`account_to_log_in`, then calls
``login()`` and :func:`logged_in`. A person without an account is left with a verified
identification without a user, which signing up binds (:mod:`django_eid.flows.signup`).
"""

from __future__ import annotations

import datetime
import functools
import logging
from typing import TYPE_CHECKING, Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.utils import timezone
from django.utils.module_loading import import_string

from django_eid import outcomes, signals
from django_eid.brokers import broker_api, published_level
from django_eid.brokers.oidc_presets import level_rank
from django_eid.conf import eid_settings
from django_eid.models import Identification, LinkedIdentity
from django_eid.person_keys import uid_key, uid_key_of

if TYPE_CHECKING:
    from django.http import HttpRequest

logger = logging.getLogger("django_eid")

Status = Identification.Status


def door_open() -> bool:
    """Whether the site logs people in by eID: ``django_eid.backends.EidBackend`` (or a
    subclass) is in ``AUTHENTICATION_BACKENDS``. Until it is, nobody starts at the door
    (each start would be a billed session that logs nobody in): upgrading opens nothing."""
    return _has_eid_backend(tuple(getattr(settings, "AUTHENTICATION_BACKENDS", ())))


@functools.lru_cache(maxsize=4)
def _has_eid_backend(paths: tuple[str, ...]) -> bool:
    from django_eid.backends import EidBackend

    for path in paths:
        try:
            backend = import_string(path)
        except ImportError:
            continue  # Django's own check names it
        if isinstance(backend, type) and issubclass(backend, EidBackend):
            return True
    return False


def account_of(row: Identification, fields: dict[str, Any]) -> Any | None:
    """The account linked to the person ``row`` verified (its columns about to be
    ``fields``), or ``None``: by the person's ``uid:`` key alone."""
    provider = fields.get("identity_provider") or row.identity_provider
    key = uid_key_of(provider, fields.get("identity_provider_unique_id"))
    if key is None:
        return None
    # Locked: a removal of the link waits for this login's outcome to commit.
    link = LinkedIdentity.objects.select_for_update().filter(key=key).only("user_id").first()
    if link is None:
        return None
    return get_user_model()._default_manager.filter(pk=link.user_id).first()


def level_of(row: Identification) -> str:
    """The level of assurance a login by ``row`` has: the one the broker stated, else (an
    API whose records state none) the provider's published one, else ``""`` (unknown)."""
    if row.level_of_assurance or broker_api().states_level:
        return row.level_of_assurance
    return published_level(row.identity_provider) or ""


def can_authenticate(user: Any) -> bool:
    """Whether ``user`` may log in: not inactive (as Django's ``ModelBackend`` asks; a user
    model without ``is_active`` is active)."""
    return getattr(user, "is_active", None) is not False


def refusal(row: Identification) -> str | None:
    """The rules of the door, on ``row`` about to be ``SUCCESS``: a rejection code or ``None``.

    ``LOA_TOO_LOW`` for a level below ``LOGIN_MIN_LOA`` (or unknown), also when no account
    is linked (a sign-up opens an account as surely as a login); ``ACCOUNT_INACTIVE`` when
    the linked account may not log in.
    """
    minimum = eid_settings.LOGIN_MIN_LOA
    if minimum is not None and level_rank(level_of(row)) < level_rank(minimum):
        return outcomes.LOA_TOO_LOW
    if row.user is not None and not can_authenticate(row.user):
        return outcomes.ACCOUNT_INACTIVE
    return None


def account_to_log_in(row: object) -> Any | None:
    """The account ``row`` logs in, or ``None``: ``row`` is an identification at the door,
    verified (``SUCCESS``, not anonymized) in the last ``SESSION_MAX_AGE`` seconds, of a
    person linked to an account that may log in.

    What :class:`~django_eid.backends.EidBackend` answers. It does not say that this browser
    started ``row``: the front ends ask that first (the one-time state of the start).
    """
    if not isinstance(row, Identification) or not row.at_the_door or not row.is_verified:
        return None
    if row.user_id is None or row.completed_at is None:
        return None
    age = timezone.now() - row.completed_at
    if age > datetime.timedelta(seconds=eid_settings.SESSION_MAX_AGE):
        return None
    # Read again: the row may have been bound or rejected since it was loaded.
    fresh = (
        Identification.objects.filter(pk=row.pk, status=Status.SUCCESS, anonymized_at__isnull=True)
        .values_list("user_id", flat=True)
        .first()
    )
    if fresh is None or fresh != row.user_id:
        return None
    user = get_user_model()._default_manager.filter(pk=row.user_id).first()
    return user if user is not None and can_authenticate(user) else None


def logged_in(row: Identification, request: HttpRequest | None) -> None:
    """After Django's ``login()`` by ``row``: the link's last use, and ``eid_login``."""
    key = uid_key(row)
    if key is not None and row.user_id is not None:
        LinkedIdentity.objects.filter(key=key, user_id=row.user_id).update(
            last_used_at=timezone.now()
        )
    logger.info("User %s logged in by identification %s.", row.user_id, row.pk)
    from django_eid.flows.finish import send

    send(signals.eid_login, row, request)
