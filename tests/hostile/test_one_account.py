"""ONE_ACCOUNT_PER_PERSON: a person already verified on another account (same provider and
unique id, or the same national identity number via the keyed hash, also across a key
rotation) is stored REJECTED with a message for the user, and ``identification_failed`` fires.
"""

from __future__ import annotations

import base64
from collections.abc import Callable
from typing import Any

import pytest
from django.contrib.auth.models import AbstractBaseUser
from django.test import Client

from django_eid.models import Identification
from tests.hostile.conftest import (
    UNIQUE_ID,
    FakeBroker,
    Fired,
    Started,
    Status,
    logged_in,
    make_user,
    record,
)

pytestmark = pytest.mark.django_db


# -- ONE_ACCOUNT_PER_PERSON --------------------------------------------------------------------
SAME_PERSON = {
    "same provider and unique id": {"SocialSecurityNumber": "01010112345"},
    "same national identity number": {"IdentityProviderUniqueId": "other-uid"},
    "same both": {},
    "same number, other provider": {
        "IdentityProvider": "NO_BUYPASS",
        "IdentityProviderUniqueId": "x",
    },
}
OTHER_PERSON = {
    "other uid and number": {"IdentityProviderUniqueId": "x", "SocialSecurityNumber": "0" * 11},
    "same uid at another provider": {
        "IdentityProvider": "NO_BUYPASS",
        "SocialSecurityNumber": "0" * 11,
    },
}


@pytest.fixture
def verified_elsewhere(
    start: Callable[..., Started], django_user_model: Any, eid: Callable[..., None]
) -> AbstractBaseUser:
    """Carol holds a successful identification of the record's person (uid and number)."""
    eid(ONE_ACCOUNT_PER_PERSON=True, GET_SOCIAL_SECURITY_NUMBER=True)
    carol = make_user(django_user_model, "carol")
    client = logged_in(carol)
    started = start(client=client)
    assert client.get(started.success_url()).status_code == 302
    assert started.row.status == Status.SUCCESS
    return carol


@pytest.mark.parametrize("case", list(SAME_PERSON))
def test_a_person_verified_on_another_account_is_rejected(
    verified_elsewhere: AbstractBaseUser,
    start: Callable[..., Started],
    alice_client: Client,
    alice: AbstractBaseUser,
    broker: FakeBroker,
    fired: Fired,
    case: str,
) -> None:
    started = start()
    fired.clear()
    broker.answer_record(started.request_id, record(started.request_id, **SAME_PERSON[case]))
    response = alice_client.get(started.success_url())
    assert response.status_code == 200
    assert "already verified on another account" in response.content.decode()
    row = started.row
    assert (row.status, row.error_code) == (Status.REJECTED, "ONE_ACCOUNT_PER_PERSON")
    assert Identification.objects.verified_for(alice) is None
    assert fired.calls == [("failed", started.pk, Status.REJECTED, alice.pk)]
    assert Identification.objects.verified_for(verified_elsewhere) is not None


@pytest.mark.parametrize("case", [*OTHER_PERSON, "same account again", "setting off"])
def test_other_people_and_the_same_account_are_not_rejected(
    verified_elsewhere: AbstractBaseUser,
    start: Callable[..., Started],
    alice_client: Client,
    broker: FakeBroker,
    fired: Fired,
    eid: Callable[..., None],
    case: str,
) -> None:
    client = alice_client
    if case == "same account again":
        client = logged_in(verified_elsewhere)
    if case == "setting off":
        eid(ONE_ACCOUNT_PER_PERSON=False)
    started = start(client=client)
    fired.clear()
    broker.answer_record(
        started.request_id, record(started.request_id, **OTHER_PERSON.get(case, {}))
    )
    assert client.get(started.success_url()).status_code == 302
    assert started.row.status == Status.SUCCESS
    assert fired.names == ["succeeded"]


def test_one_account_per_person_holds_across_a_key_rotation(
    start: Callable[..., Started],
    alice_client: Client,
    broker: FakeBroker,
    django_user_model: Any,
    eid: Callable[..., None],
) -> None:
    old, new = (base64.urlsafe_b64encode(c * 32).decode() for c in (b"o", b"n"))
    eid(ONE_ACCOUNT_PER_PERSON=True, GET_SOCIAL_SECURITY_NUMBER=True, ENCRYPTION_KEYS=[old])
    carol = logged_in(make_user(django_user_model, "carol"))
    first = start(client=carol)
    carol.get(first.success_url())
    eid(ENCRYPTION_KEYS=[new, old])  # rotated; carol's row is still under the old key
    started = start()
    other_uid = record(started.request_id, IdentityProviderUniqueId="not-" + UNIQUE_ID)
    broker.answer_record(started.request_id, other_uid)
    assert alice_client.get(started.success_url()).status_code == 200
    assert started.row.status == Status.REJECTED
