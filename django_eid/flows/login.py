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
import logging
from typing import TYPE_CHECKING, Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import connections, router
from django.utils import timezone

from django_eid import outcomes
from django_eid.brokers import broker_api, published_level
from django_eid.brokers.oidc_presets import level_rank
from django_eid.conf import eid_settings
from django_eid.flows.pending import RowReader
from django_eid.models import Identification, LinkedIdentity
from django_eid.person_keys import uid_key, uid_key_of

if TYPE_CHECKING:
    pass

logger = logging.getLogger("django_eid")

Status = Identification.Status


def account_of(row: Identification, fields: dict[str, Any]) -> Any | None:
    """The account linked to the person ``row`` verified (its columns about to be
    ``fields``), or ``None``: by the person's ``uid:`` key alone. The link's
    ``last_used_at`` is now: an identification at the door reached the account by it.

    One statement on PostgreSQL (``UPDATE ... FROM ... RETURNING`` the user's columns),
    two elsewhere; raw SQL read by the ORM, made once, for every login runs it
    (docs/benchmarks.md, benchmark 8). The login checks again that the link is there
    (:func:`account_to_log_in`), so a link removed meanwhile logs nobody in.
    """
    provider = fields.get("identity_provider") or row.identity_provider
    key = uid_key_of(provider, fields.get("identity_provider_unique_id"))
    if key is None:
        return None
    users = get_user_model()._default_manager
    db = connections[router.db_for_write(LinkedIdentity)]
    now = timezone.now()
    if db.vendor == "postgresql" and not get_user_model()._meta.parents:
        with db.cursor() as cursor:
            cursor.execute(_account_sql(db), [db.ops.adapt_datetimefield_value(now), key])
            values = cursor.fetchone()
        names = tuple(f.name for f in get_user_model()._meta.concrete_fields)
        return (
            None if values is None else RowReader.of(db, get_user_model(), names).read(db, values)
        )
    # Elsewhere, and for a user model with a parent table (its columns are not all the user
    # table's): the ORM's join, then the link's last use.
    account = users.db_manager(db.alias).filter(eid_links__key=key).first()
    if account is not None:
        LinkedIdentity.objects.using(db.alias).filter(key=key).update(last_used_at=now)
    return account


_ACCOUNT_SQL: dict[str, str] = {}


def _account_sql(db: Any) -> str:
    """PostgreSQL's ``UPDATE ... FROM``: the link's ``last_used_at`` set (the first ``%s``),
    returning the columns of the account linked to the key (the second)."""
    sql = _ACCOUNT_SQL.get(settings.AUTH_USER_MODEL)
    if sql is None:
        q = db.ops.quote_name
        users = get_user_model()._meta
        links = LinkedIdentity._meta
        user_table, link_table = q(users.db_table), q(links.db_table)
        user_columns = [q(f.column or f.name) for f in users.concrete_fields]
        columns = ", ".join(f"{user_table}.{column}" for column in user_columns)
        link_column = {f.name: q(f.column or f.name) for f in links.concrete_fields}
        link_user, link_key = link_column["user"], link_column["key"]
        used = link_column["last_used_at"]
        user_pk = q(users.pk.column or users.pk.name)
        # Names from the models' _meta, never input.
        sql = _ACCOUNT_SQL[settings.AUTH_USER_MODEL] = (
            f"UPDATE {link_table} SET {used} = %s FROM {user_table} "  # noqa: S608
            f"WHERE {link_table}.{link_key} = %s "
            f"AND {link_table}.{link_user} = {user_table}.{user_pk} "
            f"RETURNING {columns}"
        )
    return sql


def level_of(stated: str, provider: str) -> str:
    """The level of assurance of a login: the one the broker ``stated``, else (an API whose
    records state none) ``provider``'s published one, else ``""`` (unknown)."""
    if stated or broker_api().states_level:
        return stated
    return published_level(provider) or ""


def can_authenticate(user: Any) -> bool:
    """Whether ``user`` may log in: not inactive (as Django's ``ModelBackend`` asks; a user
    model without ``is_active`` is active)."""
    return getattr(user, "is_active", None) is not False


def refusal(level: str, provider: str, account: Any | None) -> str | None:
    """The rules of the door, before an identification is stored ``SUCCESS``: the ``level``
    the broker stated (or ``""``), the ``provider`` the person used, the ``account`` linked
    to them (``None``: none); a rejection code or ``None``.

    ``LOA_TOO_LOW`` for a level below ``LOGIN_MIN_LOA`` (or unknown), also when no account
    is linked (a sign-up opens an account as surely as a login); ``ACCOUNT_INACTIVE`` when
    the linked account may not log in. Decided before the ``SUCCESS`` is written: nobody
    ever sees such a row verified.
    """
    minimum = eid_settings.LOGIN_MIN_LOA
    if minimum is not None and level_rank(level_of(level, provider)) < level_rank(minimum):
        return outcomes.LOA_TOO_LOW
    if account is not None and not can_authenticate(account):
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
    key = uid_key(row)
    if key is None:
        return None  # only a person key logs in
    user: Any
    if row.finished_here and row.user is not None:
        # Finished by this very request, which found the account by the link and checked
        # it moments ago (finish.complete): not read again.
        user = row.user
    else:
        # One query, from the primary (a replica may not have the row bound yet), read
        # afresh: the row still verified and this account's, the person still linked to it.
        db = router.db_for_write(Identification)
        user = (
            get_user_model()
            ._default_manager.db_manager(db)
            .filter(
                pk=row.user_id,
                eid_identifications__pk=row.pk,
                eid_identifications__status=Status.SUCCESS,
                eid_identifications__anonymized_at__isnull=True,
                eid_links__key=key,
            )
            .first()
        )
    return user if user is not None and can_authenticate(user) else None
