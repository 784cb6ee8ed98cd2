"""Linking accounts to persons: the lasting tie that a login by eID stands on.

A verified identification of a logged-in user links their account to the person
(``LINK_ON_VERIFY``): one :class:`~django_eid.models.LinkedIdentity` per eID scheme, keyed
by the person's ``uid:`` key (:mod:`django_eid.person_keys`). One person at one scheme links
one account: the key is unique, so of two accounts that verify the same person the first
keeps the link and the second gets none (its identification still follows the rules of
the day: ``ONE_ACCOUNT_PER_PERSON`` decides whether it is ``SUCCESS``). The user sees and
removes their links (:func:`links_of`, :func:`unlink`), but not the last way they have to
log in.
"""

from __future__ import annotations

import logging
from typing import Any

from django.db import connections, router, transaction
from django.db.models import QuerySet
from django.db.models.constants import OnConflict

from django_eid import audit, outcomes
from django_eid.brokers import provider_family
from django_eid.conf import eid_settings
from django_eid.flows.refused import Refused
from django_eid.models import Identification, LinkedIdentity
from django_eid.person_keys import uid_key

logger = logging.getLogger("django_eid")


def new_link(row: Identification) -> LinkedIdentity | None:
    """The link ``row`` would make for its account, or ``None`` when it names no person at
    an eID scheme (no provider or no unique id there) or has no account."""
    key = uid_key(row)
    if key is None or row.user_id is None:
        return None
    return LinkedIdentity(
        user_id=row.user_id,
        key=key,
        scheme=provider_family(row.identity_provider)[:64],
        provider=row.identity_provider,
    )


def link(row: Identification, *, always: bool = False) -> None:
    """Link the account of ``row``, a ``SUCCESS`` just stored, to its person
    (``LINK_ON_VERIFY``; ``always``: whatever it says, for an account made or bound at the
    door, which the link is what logs in).

    One ``INSERT`` that does nothing when the person is linked already, to this account (a
    verification again) or to another one (:func:`linked_elsewhere` tells the page). The
    unique key decides between two accounts finishing at once: the second waits for the
    first and then inserts nothing. Not through the ORM's ``bulk_create``, whose
    transaction around one statement costs two more round trips on every success.
    """
    if not (always or eid_settings.LINK_ON_VERIFY) or row.status != Identification.Status.SUCCESS:
        return
    made = new_link(row)
    if made is None:
        return
    db = connections[router.db_for_write(LinkedIdentity)]
    meta = LinkedIdentity._meta
    names = ("user", "key", "scheme", "provider", "linked_at")
    fields = [f for f in meta.concrete_fields if f.name in names]
    columns = ", ".join(db.ops.quote_name(f.column or f.name) for f in fields)
    marks = ", ".join(["%s"] * len(fields))
    ignore = OnConflict.IGNORE
    # Names from the model's _meta, never input.
    sql = (
        f"{db.ops.insert_statement(on_conflict=ignore)} {db.ops.quote_name(meta.db_table)} "
        f"({columns}) VALUES ({marks}) "
        f"{db.ops.on_conflict_suffix_sql(fields, ignore, None, None)}"
    )
    values = [f.get_db_prep_save(f.pre_save(made, add=True), db) for f in fields]
    recorded = audit.values_of(row, audit.Kind.LINKED)
    # Linked now: the page needs no question whether another account holds the person.
    row.linked_now = audit.change_with_event(db, sql, values, recorded) == 1


def linked_elsewhere(row: Identification) -> bool:
    """Whether the person ``row`` verified is linked to another account than ``row``'s, so
    that verifying them did not link ``row``'s account (``LINK_ON_VERIFY``)."""
    if not eid_settings.LINK_ON_VERIFY or row.status != Identification.Status.SUCCESS:
        return False
    if row.at_the_door:
        return False  # the door links nothing: the link is what found the account
    if row.linked_now:
        return False  # this very finish linked it (no query)
    key = uid_key(row)
    if key is None or row.user_id is None:
        return False
    return LinkedIdentity.objects.filter(key=key).exclude(user_id=row.user_id).exists()


def links_of(user: Any) -> QuerySet[LinkedIdentity]:
    """``user``'s links, the oldest first."""
    return LinkedIdentity.objects.filter(user=user).order_by("linked_at", "pk")


#: The longest id of a link read as sent (a bigint's digits): a longer one is no link.
LINK_ID_MAX_DIGITS = 19


def link_id(value: object) -> int | None:
    """The id of a link as a front end received it (a form field, a URL segment, a number):
    ASCII digits only, else ``None`` (``int()`` would also take ``" 7"``, ``"+7"`` and
    other scripts' digits)."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if (
        isinstance(value, str)
        and 0 < len(value) <= LINK_ID_MAX_DIGITS
        and value.isascii()
        and value.isdigit()
    ):
        return int(value)
    return None


def unlink(user: Any, pk: object) -> None:
    """Remove ``user``'s link ``pk`` (its id as sent: see :func:`link_id`).

    Raises :class:`~django_eid.flows.refused.Refused`: ``link_not_found`` for a link that
    is not ``user``'s (or none at all), ``last_login_method`` for the only link of an
    account without a usable password, which could then no longer log in. The account's
    links are locked while it decides, so two removals at once cannot both pass.
    """
    wanted = link_id(pk)
    if wanted is None:
        raise Refused(outcomes.LINK_NOT_FOUND)
    alias = router.db_for_write(LinkedIdentity)
    with transaction.atomic(using=alias):
        links = list(links_of(user).using(alias).select_for_update().values_list("pk", flat=True))
        if wanted not in links:
            raise Refused(outcomes.LINK_NOT_FOUND)
        has_password = getattr(user, "has_usable_password", lambda: False)()
        if len(links) == 1 and not has_password:
            raise Refused(outcomes.LAST_LOGIN_METHOD)
        LinkedIdentity.objects.using(alias).filter(pk=wanted).delete()
    logger.info("Link %s of user %s removed.", wanted, getattr(user, "pk", user))
