"""One account per person, and the identification that says who an account is.

``ONE_ACCOUNT_PER_PERSON`` holds each key of a verified person
(:mod:`django_eid.person_keys`) in a :class:`~django_eid.models.PersonClaim` row with a
unique key, written in the transaction of the ``SUCCESS``; this module is the whole of that
rule: claiming, releasing and re-keying after a key rotation. :func:`account_person` finds
the identification a ``same_person`` gate compares a new one with.
"""

from __future__ import annotations

from typing import Any

from django.db import IntegrityError, connection, transaction
from django.db.models import Q, QuerySet

from django_eid import crypto
from django_eid.brokers import family_names
from django_eid.models import ENCRYPTED_FIELDS, Identification, PersonClaim
from django_eid.person_keys import SSN, keys, number_of, ssn_key

Status = Identification.Status


class PersonTaken(Exception):
    """Another account holds a successful identification of this person."""


def account_person(user: Any, *, before: Identification | None = None) -> Identification | None:
    """The identification that says who the account ``user`` is, or ``None``.

    That is the account's first verified identification still stored (anonymized ones do
    not count) among those a ``same_person`` gate accepted, or else among all: a later
    verification of somebody else must not become the reference that the next
    ``same_person`` check compares against, also once retention has removed the account's
    very first one. ``before`` leaves that row out.
    """
    rows = Identification.objects.verified().filter(user=user)
    if before is not None:
        rows = rows.exclude(pk=before.pk)
    # Its number is compared through the stored hash: no need to decrypt it (or to fail
    # on a row under a removed key).
    rows = rows.defer(*ENCRYPTED_FIELDS)
    return rows.order_by("-same_person", "completed_at", "pk").first()


def claim(row: Identification) -> None:
    """Claim the person of ``row`` (just made ``SUCCESS``) for its account.

    Call it inside the transaction of the ``SUCCESS`` transition. Raises
    :class:`PersonTaken` when another account holds a successful identification of the
    person; the caller's rollback then undoes the claims written here (another account's
    claim overwritten below is restored with it). The claims' unique key makes this hold
    for two accounts finishing at once: the second INSERT waits for the first transaction
    and, once that committed, the query below sees its row. The query itself finds what
    has no claim of the current key: rows from before the setting was on, or from before a
    key rotation. Claiming a key this account already holds moves it to the new row.
    """
    found = keys(row)
    if not found:
        return
    PersonClaim.objects.bulk_create(
        [PersonClaim(key=key, identification=row) for key in found],
        update_conflicts=True,
        update_fields=["identification"],
        # MySQL's ON DUPLICATE KEY UPDATE takes no conflict target.
        unique_fields=["key"]
        if connection.features.supports_update_conflicts_with_target
        else None,
    )
    if _verified_elsewhere(row):
        raise PersonTaken


def _verified_elsewhere(row: Identification) -> bool:
    """Another account holds a successful identification of the person ``row`` stores.

    Matches what is stored (truncated values), and the number's lookup hash under every
    configured key, so rows from before a key rotation count.
    """
    match = Q()
    if row.identity_provider and row.identity_provider_unique_id:
        match |= Q(
            identity_provider__in=family_names(row.identity_provider),
            identity_provider_unique_id=row.identity_provider_unique_id,
        )
    number = number_of(row)
    if number:
        match |= Q(social_security_number_hash__in=crypto.lookup_hashes(number))
    if not match:
        return False
    # A row without an account (verified at the door, not bound yet) holds no account.
    others = Identification.objects.filter(match, status=Status.SUCCESS, user__isnull=False)
    if row.user_id is not None:
        others = others.exclude(user_id=row.user_id)
    return others.exists()


def release(identifications: QuerySet[Identification] | Identification) -> int:
    """Free the persons of ``identifications``: they no longer hold the identity."""
    if isinstance(identifications, Identification):
        claims = PersonClaim.objects.filter(identification=identifications)
    else:
        claims = PersonClaim.objects.filter(identification__in=identifications)
    deleted, _ = claims.delete()
    return deleted


def rekey(row: Identification) -> None:
    """Move ``row``'s claim on its number to the key under the current encryption key.

    Call it after the row was saved under the current key (``eid_reencrypt``), so that new
    identifications, which claim under the current key, still collide with it.
    """
    key = ssn_key(str(row.social_security_number_hash))
    stale = PersonClaim.objects.filter(identification=row, key__startswith=SSN)
    try:
        with transaction.atomic():
            stale.exclude(key=key).update(key=key)
    except IntegrityError:
        # Already claimed under the new key, by a newer identification of the same account
        # (one claim is enough), or of another one verified while the setting was off
        # (whose claim then stands; the query of ONE_ACCOUNT_PER_PERSON sees both rows).
        stale.exclude(key=key).delete()
