"""Signing up with an eID: an account for a verified person, or a verified person for an account.

A person who identified at the door and has no linked account leaves a verified
identification without a user (:mod:`django_eid.flows.login`); the browser that verified it
keeps its reference (:mod:`django_eid.state`). :func:`pending` finds it again, for at most
``SESSION_MAX_AGE``; :func:`bind` gives it its account once: the row gets the user, the
account is linked to the person, ``ONE_ACCOUNT_PER_PERSON`` claims them, in one transaction
that a person linked to another account already rolls back, so of two sign-ups of one
person at the same instant one makes an account. :func:`sign_up` makes the account
(through the site's adapter, :mod:`django_eid.adapter`) and binds it in that transaction.
"""

from __future__ import annotations

import contextlib
import datetime
import logging
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from django.core.exceptions import ValidationError
from django.db import IntegrityError, router, transaction
from django.db.models import QuerySet
from django.utils import timezone

from django_eid import audit, claims, outcomes, signals
from django_eid.conf import eid_settings
from django_eid.flows import finish, link
from django_eid.flows.refused import Refused
from django_eid.models import ENCRYPTED_FIELDS, Identification, LinkedIdentity
from django_eid.person_keys import uid_key

if TYPE_CHECKING:
    from django.http import HttpRequest

    from django_eid.adapter import DefaultAdapter

logger = logging.getLogger("django_eid")

Status = Identification.Status


def unbound() -> QuerySet[Identification]:
    """The verified identifications at the door without an account, recent enough to bind."""
    since = timezone.now() - datetime.timedelta(seconds=eid_settings.SESSION_MAX_AGE)
    return Identification.objects.verified().filter(
        user__isnull=True, completed_at__gte=since, purpose__in=_DOOR
    )


_DOOR = (Identification.Purpose.LOGIN, Identification.Purpose.SIGNUP)


def pending(reference: str | None) -> Identification | None:
    """The identification ``reference`` if it verified a person without an account, at most
    ``SESSION_MAX_AGE`` ago, and no account is bound to it yet; else ``None``.

    ``reference`` comes from the browser's one-time state (the caller's: it proves that
    this browser verified it).
    """
    if not reference:
        return None
    # The primary: a replica may not have the row finished, or bound, yet.
    rows = unbound().using(router.db_for_write(Identification))
    return rows.filter(reference=reference).defer(*ENCRYPTED_FIELDS).first()


def bind(row: Identification, user: Any, *, request: HttpRequest | None = None) -> Identification:
    """Give ``row``, verified without an account, the account ``user``; once.

    Raises :class:`Refused`: ``nothing_to_bind`` when ``row`` is no longer unbound (bound
    already, by a parallel request too, or too old), ``person_has_account`` when the person
    is linked to another account (or held by one, ``ONE_ACCOUNT_PER_PERSON``). Then nothing is
    written, also not what the caller wrote in its own transaction around this one. After
    the commit: ``identification_succeeded`` and ``identification_bound``
    (``purpose="signup"``).
    """
    if getattr(user, "pk", None) is None:
        raise ValueError("bind() needs a saved user")
    with _rolled_back_on_refusal(row):
        _bind(row, user)
    logger.info("Identification %s bound to user %s.", row.pk, user.pk)
    _announce(row, request)
    return row


def sign_up(
    row: Identification,
    *,
    adapter: DefaultAdapter,
    request: HttpRequest | None = None,
    form: Any = None,
) -> Any:
    """Make the account of the person ``row`` verified, and bind it: the new user.

    The adapter makes the user (``new_user``, ``populate_user`` with ``form``, the sign-up
    form's when there is one); it gets an unusable password (the eID is how it logs in). In
    one transaction with :func:`bind`: an account refused there is not made. Raises
    :class:`Refused` as :func:`bind` does, and ``signup_closed`` when the adapter says no.
    """
    if not adapter.is_open_for_signup(request, row):
        raise Refused(outcomes.SIGNUP_CLOSED)
    if uid_key(row) is None:
        # No key to link (an eID without a unique id): the account could never log in.
        raise Refused(outcomes.CANNOT_LINK)
    with _rolled_back_on_refusal(row):
        user = adapter.new_user(request, row)
        adapter.populate_user(user, row, form)
        user.set_unusable_password()
        try:
            with transaction.atomic():
                user.save()
        except IntegrityError as err:
            if not _taken(user):
                raise  # not a value taken meanwhile: the adapter's or the model's bug
            # A username or e-mail address taken by a parallel sign-up, between the form's
            # check and now: the person is told to choose again, nothing is made.
            logger.info("Signing up by identification %s failed: %s", row.pk, type(err).__name__)
            raise Refused(outcomes.SIGNUP_TAKEN) from err
        _bind(row, user)
    logger.info("User %s signed up by identification %s.", user.pk, row.pk)
    try:
        _announce(row, request)
    except Refused:
        # Rejected late by a receiver: the account made for the person goes (the row, kept
        # as the record of the rejection, first lets go of it).
        Identification.objects.filter(pk=row.pk).update(user=None)
        row.user = None
        user.delete()
        raise
    return user


@contextlib.contextmanager
def _rolled_back_on_refusal(row: Identification) -> Iterator[None]:
    """One transaction; a :class:`Refused` inside rolls it back, ``row``'s user with it."""
    try:
        with transaction.atomic(using=router.db_for_write(Identification, instance=row)):
            yield
    except Refused:
        row.user = None
        raise


def _taken(user: Any) -> bool:
    """Whether an unsaved ``user`` collides with an account on a unique field."""
    try:
        user.validate_unique()
    except ValidationError:
        return True
    return False


def _bind(row: Identification, user: Any) -> None:
    """:func:`bind`'s writes, inside the caller's transaction (which a refusal rolls back)."""
    bound = unbound().filter(pk=row.pk).update(user=user)
    if not bound:
        raise Refused(outcomes.NOTHING_TO_BIND)
    row.user = user
    audit.write(row, audit.Kind.BOUND)
    key = uid_key(row)
    if key is not None:
        link.link(row, always=True)
        if (
            not row.linked_now
            and LinkedIdentity.objects.filter(key=key).exclude(user=user).exists()
        ):
            raise Refused(outcomes.PERSON_HAS_ACCOUNT)
    if eid_settings.ONE_ACCOUNT_PER_PERSON:
        try:
            claims.claim(row)
        except claims.PersonTaken:
            raise Refused(outcomes.PERSON_HAS_ACCOUNT) from None


def _announce(row: Identification, request: HttpRequest | None) -> None:
    """After a bind's commit: the receivers of a verification hear of it now that it has an
    account, then ``identification_bound``. A receiver's late rejection (REJECTED) takes
    the link the bind made with it, and raises :class:`Refused` saying so."""
    finish.receive_success(row, request, purpose=Identification.Purpose.SIGNUP)
    if row.status == Status.SUCCESS:
        finish.send(signals.identification_bound, row, request, purpose="signup")
        return
    key = uid_key(row)
    if key is not None and row.user_id is not None:
        LinkedIdentity.objects.filter(key=key, user_id=row.user_id).delete()
    raise Refused(outcomes.of(row), identification=row)
