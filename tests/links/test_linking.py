"""Linking accounts to persons (``django_eid/flows/link.py``, ``LinkedIdentity``).

A verified identification links its account to the person (``LINK_ON_VERIFY``), one link
per person at an eID scheme, held by one account only; the link outlives the
identification rows (``eid_purge``, both modes), key rotations and ``eid_reencrypt``, and
goes with the user. Removing links: ``test_links_page.py`` and ``tests/api/test_links.py``;
two accounts linking one person at once: ``tests/production/test_link_race.py``.
"""

from __future__ import annotations

import base64
import logging
from collections.abc import Callable
from typing import Any

import pytest
from django.contrib.auth.models import AbstractBaseUser
from django.core.management import call_command
from django.db import connection
from django.dispatch import receiver
from django.test import Client

from django_eid import flow
from django_eid import signals as eid_signals
from django_eid.brokers import provider_family
from django_eid.exceptions import IdentificationRejected
from django_eid.models import Identification, LinkedIdentity
from django_eid.person_keys import uid_key
from tests.fixtures_broker import SAMPLE, SSN
from tests.flow.faults import FailingStatement

pytestmark = pytest.mark.django_db

Status = Identification.Status
OLD_KEY, NEW_KEY = (base64.urlsafe_b64encode(c * 32).decode() for c in (b"o", b"n"))


def links() -> dict[str, Any]:
    """Every link: key -> user pk."""
    return dict(LinkedIdentity.objects.values_list("key", "user_id"))


def test_a_verification_links_the_account_to_the_person(
    broker_api: str, verify: Callable[..., Identification], alice: AbstractBaseUser
) -> None:
    """Every API and preset: the link is made of what the API reported, the person's eID
    scheme and unique id there, and holds nothing of the person in clear."""
    row = verify()
    assert row.status == Status.SUCCESS
    (link,) = LinkedIdentity.objects.all()
    assert (link.user_id, link.key) == (alice.pk, uid_key(row))
    assert link.key.startswith("uid:")
    assert link.scheme == provider_family(row.identity_provider)
    assert link.provider == row.identity_provider
    assert link.last_used_at is None
    stored = repr(LinkedIdentity.objects.values().get())
    for personal in (SSN, SAMPLE.last_name, SAMPLE.first_name, row.identity_provider_unique_id):
        assert personal not in stored


def test_verifying_again_keeps_the_one_link(verify: Callable[..., Identification]) -> None:
    verify()
    first = LinkedIdentity.objects.get()
    verify()
    assert list(LinkedIdentity.objects.all()) == [first]
    assert LinkedIdentity.objects.get().linked_at == first.linked_at


def test_another_person_is_a_second_link(
    verify: Callable[..., Identification], alice: AbstractBaseUser
) -> None:
    verify()
    verify(IdentityProviderUniqueId="someone-else")
    assert list(links().values()) == [alice.pk, alice.pk]


@pytest.mark.parametrize("one_account", [False, True], ids=["rule off", "one account per person"])
def test_a_second_account_verifying_the_same_person_gets_no_link(
    verify: Callable[..., Identification],
    eid: Callable[..., None],
    alice: AbstractBaseUser,
    bob_client: Client,
    one_account: bool,
) -> None:
    """The link stays with the first account; the second account's identification follows
    the rules of the day (verified, or rejected under ONE_ACCOUNT_PER_PERSON)."""
    eid(ONE_ACCOUNT_PER_PERSON=one_account, GET_SOCIAL_SECURITY_NUMBER=True)
    alices = verify()
    bobs = verify(client=bob_client)
    assert bobs.status == (Status.REJECTED if one_account else Status.SUCCESS)
    assert links() == {uid_key(alices): alice.pk}
    assert flow.linked_elsewhere(bobs) is (not one_account)
    assert flow.linked_elsewhere(alices) is False


def test_with_link_on_verify_off_nothing_is_linked(
    verify: Callable[..., Identification], eid: Callable[..., None], bob_client: Client
) -> None:
    eid(LINK_ON_VERIFY=False)
    bobs = verify(client=bob_client)
    assert bobs.status == Status.SUCCESS
    assert links() == {}
    assert flow.linked_elsewhere(bobs) is False


def test_a_record_without_a_unique_id_links_nothing(
    verify: Callable[..., Identification],
) -> None:
    row = verify(IdentityProviderUniqueId="")
    assert row.status == Status.SUCCESS
    assert links() == {}


def test_a_receivers_late_rejection_links_nothing(
    verify: Callable[..., Identification],
) -> None:
    @receiver(eid_signals.identification_succeeded, dispatch_uid="test-late-no")
    def late_no(**kwargs: Any) -> None:
        raise IdentificationRejected("not this one")

    try:
        row = verify()
    finally:
        eid_signals.identification_succeeded.disconnect(dispatch_uid="test-late-no")
    assert row.status == Status.REJECTED
    assert links() == {}


def test_a_database_failing_at_the_link_costs_the_link_only(
    verify: Callable[..., Identification],
    caplog: pytest.LogCaptureFixture,
    alice: AbstractBaseUser,
) -> None:
    """The SUCCESS is stored already: the user goes on, the failure is logged without the
    person, and ``eid_link`` makes the link afterwards."""
    fault = FailingStatement("INSERT", table="django_eid_linkedidentity")
    with connection.execute_wrapper(fault), caplog.at_level(logging.ERROR, "django_eid"):
        row = verify()
    assert fault.failed == 1
    assert row.status == Status.SUCCESS
    assert links() == {}
    assert f"Linking the account of identification {row.pk}" in caplog.text
    assert SSN not in caplog.text
    call_command("eid_link", stdout=None)
    assert links() == {uid_key(row): alice.pk}


# -- what a link outlives, and what it does not -------------------------------------------------
@pytest.mark.parametrize("options", [{}, {"anonymize": True}], ids=["delete", "anonymize"])
def test_the_link_outlives_eid_purge(
    verify: Callable[..., Identification], alice: AbstractBaseUser, options: dict[str, Any]
) -> None:
    row = verify()
    key = uid_key(row)
    call_command("eid_purge", older_than="0s", force=True, stdout=None, **options)
    assert not Identification.objects.verified().exists()
    assert links() == {key: alice.pk}


def test_the_link_outlives_a_key_rotation_and_eid_reencrypt(
    verify: Callable[..., Identification], eid: Callable[..., None], alice: AbstractBaseUser
) -> None:
    """The key depends on no encryption key: nothing to re-key, nothing lost."""
    eid(GET_SOCIAL_SECURITY_NUMBER=True, ENCRYPTION_KEYS=[OLD_KEY])
    row = verify()
    before = links()
    eid(ENCRYPTION_KEYS=[NEW_KEY, OLD_KEY])
    call_command("eid_reencrypt", stdout=None)
    eid(ENCRYPTION_KEYS=[NEW_KEY])
    assert links() == before == {uid_key(row): alice.pk}


def test_the_link_goes_with_the_user(
    verify: Callable[..., Identification], bob: AbstractBaseUser, bob_client: Client
) -> None:
    verify(client=bob_client)
    bob.delete()
    assert links() == {}
