"""django-eid: identify a Django site's users through an electronic-identity broker."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from django.http import HttpRequest

    from django_eid.models import Identification

__version__ = "0.1.0"


def pending_identification(request: HttpRequest) -> Identification | None:
    """The identification this browser verified at the door without an account: at most
    ``SESSION_MAX_AGE`` old and bound to no account yet; else ``None``.

    For a site's own sign-up view: require it, show who was verified, and bind it to the
    account the view creates with :func:`bind_pending_identification`.
    """
    from django_eid import state
    from django_eid.flows import signup

    return signup.pending(state.verified(request))


def bind_pending_identification(request: HttpRequest, user: Any) -> Identification:
    """Bind :func:`pending_identification` to ``user`` (saved), once: the identification
    gets the user, the account is linked to the person, ``ONE_ACCOUNT_PER_PERSON`` claims
    them, and ``identification_succeeded`` and ``identification_bound`` are sent
    (``purpose="signup"``).

    Raises :class:`~django_eid.exceptions.BindRefused`: ``nothing_to_bind`` when this
    browser has none (another browser, bound already, too old), ``person_has_account``
    when the person's eID is linked to another account. It writes nothing then, and rolls
    back the caller's transaction's savepoint only: call it inside ``transaction.atomic()``
    with the account's creation so that a refusal undoes that too.
    """
    from django_eid import state
    from django_eid.exceptions import BindRefused
    from django_eid.flows import signup
    from django_eid.flows.refused import Refused

    row = signup.pending(state.verified(request))
    try:
        if row is None:
            from django_eid import outcomes

            raise Refused(outcomes.NOTHING_TO_BIND)
        signup.bind(row, user, request=request)
    except Refused as refused:
        raise BindRefused(refused.outcome.code, refused.message) from None
    state.forget_verified(request)
    return row
