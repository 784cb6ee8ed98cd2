"""The site's rules, applied to a ``SUCCESS`` before anyone sees it.

The provider the broker let the user pick (:func:`provider_refusal`, before the
transaction), then, inside it (:func:`apply_rules`, called by
:func:`django_eid.flows.finish.complete`): the same person as the account's
(``same_person`` gates), one account per person, ``MIN_LOA``, ``MIN_AGE`` and the site's
``identification_verifying`` receivers. A rule that says no raises :class:`Refusal`, which
rolls the ``SUCCESS`` back and stores the refusal instead.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from django.utils.translation import gettext

from django_eid import claims, outcomes, person_keys, signals
from django_eid.brokers import broker_api
from django_eid.brokers.oidc_presets import level_rank
from django_eid.conf import eid_settings
from django_eid.exceptions import IdentificationRejected
from django_eid.models import Identification
from django_eid.records import IdentificationRecord

if TYPE_CHECKING:
    from django.http import HttpRequest

logger = logging.getLogger("django_eid")

Status = Identification.Status


class Refusal(Exception):
    """A site rule refused the identity: roll back the ``SUCCESS``, store ``status``."""

    def __init__(self, status: str, code: str, message: str) -> None:
        super().__init__(code)
        self.status = status
        self.code = code
        self.message = message


def has_rules(row: Identification) -> bool:
    """Whether any site rule applies; without one the SUCCESS is a single UPDATE."""
    return bool(
        row.same_person
        or eid_settings.ONE_ACCOUNT_PER_PERSON
        or eid_settings.MIN_AGE is not None
        or eid_settings.MIN_LOA is not None
        or signals.identification_verifying.has_listeners(Identification)
    )


def apply_rules(row: Identification, request: HttpRequest | None) -> None:
    """The site's rules, on the uncommitted ``SUCCESS`` row; raise :class:`Refusal`."""

    def reject(code: str) -> Refusal:
        return Refusal(Status.REJECTED, code, outcomes.rejection_message(code) or "")

    if row.same_person:
        person = claims.account_person(row.user_id, before=row)
        if person is not None and not person_keys.same_person(row, person):
            raise reject(outcomes.NOT_SAME_PERSON)
    if eid_settings.ONE_ACCOUNT_PER_PERSON and row.user_id is not None:
        # A person without an account yet is claimed when an account is bound to them.
        try:
            claims.claim(row)
        except claims.PersonTaken:
            raise reject(outcomes.ONE_ACCOUNT_PER_PERSON) from None
    min_loa = eid_settings.MIN_LOA
    if min_loa is not None and level_rank(row.level_of_assurance) < level_rank(min_loa):
        # A level the broker did not state is not high enough either.
        raise reject(outcomes.LOA_TOO_LOW)
    min_age = eid_settings.MIN_AGE
    if min_age is not None:
        age = row.age
        if age is None:
            raise reject(outcomes.AGE_UNKNOWN)
        if age < min_age:
            raise reject(outcomes.MIN_AGE)
    try:
        # send(), not send_robust(): the first receiver that says no stops the others.
        signals.identification_verifying.send(
            sender=Identification,
            identification=row,
            user=row.user,
            request=request,
            purpose=row.purpose,
        )
    except IdentificationRejected as rejection:
        reason = rejection.reason or gettext("Your identification was not accepted.")
        raise Refusal(Status.REJECTED, outcomes.RECEIVER_REJECTED, reason) from None
    except Exception as err:
        # A rule that cannot run lets nobody through. Its message may describe the person:
        # only the type is logged.
        logger.error(
            "A receiver of identification_verifying failed (identification %s): %s; "
            "the identification is refused.",
            row.pk,
            type(err).__name__,
        )
        raise Refusal(Status.ERROR, outcomes.RULES_FAILED, "") from None


def provider_refusal(row: Identification, record: IdentificationRecord) -> str | None:
    """Why ``record`` is not the identity the site asked for, as a rejection code, or ``None``.

    ``PROVIDER_NOT_ALLOWED`` when the broker let the user pick a provider not accepted, or
    the provider asked for (or allowed) came back at another level than it gives (an acr
    its API does not list for it: MitID ``low`` for ``dk-mitid``); else the broker API's
    own ``refusal`` (a scope not granted, the number missing).
    """
    used = record.identity_provider
    allowed = eid_settings.ALLOWED_PROVIDERS
    if used and (
        (row.identity_provider and used != row.identity_provider)
        or (allowed is not None and used not in allowed)
    ):
        return outcomes.PROVIDER_NOT_ALLOWED
    # The provider asked for, or allowed, at the level it gives; asked for none, any.
    named = row.identity_provider or (used if allowed is not None else None)
    expected = broker_api().provider_level(named)
    if expected is not None and record.level_of_assurance != expected:
        return outcomes.PROVIDER_NOT_ALLOWED
    return record.refusal
