"""The door's audit trail: a login names the account it opened, a sign-up is bound and
linked; a start refused by the caps leaves nothing (django_eid/audit.py)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from django_eid.models import AuditEvent, Identification
from tests.door.conftest import row_of
from tests.fixtures_views import Started

pytestmark = pytest.mark.django_db

Status = Identification.Status
Kind = AuditEvent.Kind


def events(started: Started) -> list[tuple[str, str, str]]:
    rows = AuditEvent.objects.filter(identification_id=started.pk).order_by("at", "id")
    return list(rows.values_list("kind", "status", "user_id"))


def test_a_login_names_the_account_it_opened(
    identify_at_door: Callable[..., tuple[Started, Any]],
    verify: Callable[..., Identification],
    alice: Any,
) -> None:
    verify()  # alice's account linked to the person
    started, _ = identify_at_door(purpose="login")
    user = str(row_of(started).user_id)
    assert user == str(alice.pk)
    assert events(started) == [
        (Kind.STARTED, Status.PENDING, ""),  # nobody yet: a visitor
        (Kind.RETURNED, Status.SUCCESS, user),
    ]
    door = AuditEvent.objects.filter(identification_id=started.pk)
    assert set(door.values_list("purpose", flat=True)) == {"login"}


def test_a_sign_up_is_bound_and_linked(
    identify_at_door: Callable[..., tuple[Started, Any]], visitor: Client, eid: Callable[..., None]
) -> None:
    eid(SIGNUP="auto")
    started, _ = identify_at_door(purpose="signup")
    user = str(get_user_model().objects.get(username__startswith="eid-").pk)
    assert events(started) == [
        (Kind.STARTED, Status.PENDING, ""),
        (Kind.RETURNED, Status.SUCCESS, ""),  # verified, no account yet
        (Kind.BOUND, Status.SUCCESS, user),
        (Kind.LINKED, Status.SUCCESS, user),
    ]


def test_a_start_refused_by_the_caps_writes_nothing(
    door: Callable[..., Started], visitor: Client, eid: Callable[..., None]
) -> None:
    eid(LOGIN_MAX_PENDING_PER_SESSION=1)
    door()
    assert visitor.post("/eid/login/").status_code == 429
    assert AuditEvent.objects.filter(kind=Kind.STARTED).count() == 1
