"""``eid_link``: the accounts verified before links existed get theirs.

The oldest stored verification of a person links its account; a person already linked
stays with their account; rows that name no person at a scheme (anonymized, without a
unique id, not verified) link nothing; a second run links only what is new.
"""

from __future__ import annotations

import io
from collections.abc import Callable
from typing import Any

import pytest
from django.contrib.auth.models import AbstractBaseUser
from django.core.management import CommandError, call_command
from django.test import Client

from django_eid.models import Identification, LinkedIdentity
from django_eid.person_keys import uid_key

pytestmark = pytest.mark.django_db

Status = Identification.Status


def links() -> dict[str, Any]:
    return dict(LinkedIdentity.objects.values_list("key", "user_id"))


def eid_link(**options: Any) -> str:
    out = io.StringIO()
    call_command("eid_link", stdout=out, **options)
    return out.getvalue()


@pytest.fixture
def before_links(eid: Callable[..., None]) -> None:
    """Verifications as they were stored before this release: no link made."""
    eid(LINK_ON_VERIFY=False)


@pytest.mark.usefixtures("before_links")
def test_each_person_links_the_account_that_verified_them_first(
    verify: Callable[..., Identification],
    alice: AbstractBaseUser,
    bob: AbstractBaseUser,
    bob_client: Client,
) -> None:
    bobs = verify(client=bob_client)  # bob first: the same person verifies alice later
    verify()
    alices_other = verify(IdentityProviderUniqueId="alice-at-buypass")
    assert links() == {}
    out = eid_link(batch_size=1)
    assert links() == {uid_key(bobs): bob.pk, uid_key(alices_other): alice.pk}
    assert out.endswith("eid_link: 3 verified identification(s) read, 2 link(s) made.\n")
    # Again: nothing new.
    assert eid_link().endswith("3 verified identification(s) read, 0 link(s) made.\n")


@pytest.mark.usefixtures("before_links")
def test_a_person_linked_already_stays_with_their_account(
    verify: Callable[..., Identification],
    eid: Callable[..., None],
    alice: AbstractBaseUser,
    bob_client: Client,
) -> None:
    verify(client=bob_client)  # before links: no link
    eid(LINK_ON_VERIFY=True)
    alices = verify()  # linked now, although bob verified the person first
    eid_link()
    assert links() == {uid_key(alices): alice.pk}


@pytest.mark.usefixtures("before_links")
def test_rows_that_name_no_person_link_nothing(
    verify: Callable[..., Identification], start: Callable[..., Any]
) -> None:
    verify(IdentityProviderUniqueId="")
    start(ends="abort")
    anonymized = verify(IdentityProviderUniqueId="to-be-anonymized")
    call_command("eid_purge", older_than="0s", anonymize=True, force=True, stdout=io.StringIO())
    assert Identification.objects.get(pk=anonymized.pk).anonymized_at is not None
    assert eid_link().endswith("0 verified identification(s) read, 0 link(s) made.\n")
    assert links() == {}


def test_a_batch_size_below_one_is_refused() -> None:
    with pytest.raises(CommandError, match="--batch-size: 0 is not a positive number"):
        eid_link(batch_size=0)
