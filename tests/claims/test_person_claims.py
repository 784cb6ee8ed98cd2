"""ONE_ACCOUNT_PER_PERSON (``django_eid/claims.py``): one person, one account.

A person already verified on another account (the same provider and unique id, or the same
national identity number through its keyed hash, also across a key rotation) is stored
REJECTED with a message for the user, and ``identification_failed`` is sent; other people,
and the same account again, verify. The guarantee is the person's claims
(``PersonClaim``): a success with the setting on claims the person's keys (provider and
unique id; the number's lookup hash under the current key) in the transaction of its
SUCCESS transition. The claims go when the row stops holding the identity, follow a key
rotation through ``eid_reencrypt``, and cost nothing with the setting off. Two accounts
finishing at the same instant: ``tests/production/test_one_account_race.py``.
"""

from __future__ import annotations

import base64
import io
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from django.dispatch import receiver
from django.test import Client

from django_eid import crypto
from django_eid import signals as eid_signals
from django_eid.exceptions import IdentificationRejected
from django_eid.models import Identification, PersonClaim, max_length
from tests.audit_sql import event_statements
from tests.fixtures_broker import (
    API_SETTINGS,
    SSN,
    ScriptedBroker,
)
from tests.fixtures_views import Signals, Started

pytestmark = pytest.mark.django_db

Status = Identification.Status
OTHER_UID = "another-id"
OLD_KEY, NEW_KEY = (base64.urlsafe_b64encode(c * 32).decode() for c in (b"o", b"n"))


@pytest.fixture
def one_account(eid: Callable[..., None]) -> None:
    eid(ONE_ACCOUNT_PER_PERSON=True, GET_SOCIAL_SECURITY_NUMBER=True)


def claims() -> dict[str, int]:
    """Every claim: key -> identification pk."""
    return dict(PersonClaim.objects.values_list("key", "identification_id"))


def assert_claimed_by(row: Identification) -> None:
    keys = PersonClaim.keys_for(row)
    assert len(keys) == 2
    assert claims() == dict.fromkeys(keys, row.pk)


# -- claiming ----------------------------------------------------------------------------------


@pytest.mark.usefixtures("one_account")
def test_a_success_claims_the_provider_id_and_the_number(
    broker_api: str,
    verify: Callable[..., Identification],
) -> None:
    # Each API's record: its provider and unique id (mapped per API) make the uid key.
    row = verify()
    assert row.status == Status.SUCCESS
    assert_claimed_by(row)
    uid, ssn = sorted(claims(), reverse=True)
    assert ssn == PersonClaim.SSN + crypto.lookup_hash(SSN)
    assert uid.startswith(PersonClaim.UID)
    # The key holds no number and no unique id in clear.
    assert SSN not in uid + ssn
    assert "9578-6000-4-12345" not in uid
    assert row.identity_provider_unique_id
    assert row.identity_provider_unique_id not in uid


@pytest.mark.usefixtures("one_account")
def test_the_same_account_verifying_again_moves_its_claims_to_the_new_row(
    verify: Callable[..., Identification], signals: Signals
) -> None:
    first, second = verify(), verify()
    assert (first.status, second.status) == (Status.SUCCESS, Status.SUCCESS)
    assert_claimed_by(second)
    assert signals.names.count("identification_succeeded") == 2
    # Purging the older row leaves the account holding the person.
    first.delete()
    assert_claimed_by(second)


#: Records of the person ``bob`` holds, as another account's identification brings them.
SAME_PERSON = {
    "same provider and unique id": {"SocialSecurityNumber": "01010112345"},
    "same national identity number": {"IdentityProviderUniqueId": OTHER_UID},
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


@pytest.mark.usefixtures("one_account")
@pytest.mark.parametrize("case", list(SAME_PERSON))
def test_a_person_verified_on_another_account_is_rejected(
    verify: Callable[..., Identification],
    start: Callable[..., Started],
    broker: ScriptedBroker,
    alice: User,
    alice_client: Client,
    bob: User,
    bob_client: Client,
    signals: Signals,
    case: str,
) -> None:
    bobs = verify(client=bob_client)
    started = start()
    signals.clear()
    broker.will_return(started.request_id, **SAME_PERSON[case])
    response = alice_client.get(started.success_url())
    assert response.status_code == 200
    assert "This person is already verified on another account." in response.content.decode()
    alices = started.refresh()
    assert (alices.status, alices.error_code) == (Status.REJECTED, "ONE_ACCOUNT_PER_PERSON")
    assert alices.error_message == "This person is already verified on another account."
    assert alices.completed_at is not None
    assert signals.calls == [("identification_failed", alices.pk, Status.REJECTED, alice.pk)]
    assert Identification.objects.verified_for(alice) is None
    assert Identification.objects.verified_for(bob) == bobs
    assert_claimed_by(bobs)  # alice's claimed nothing


@pytest.mark.usefixtures("one_account")
@pytest.mark.parametrize("case", [*OTHER_PERSON, "setting off"])
def test_other_people_are_not_rejected(
    verify: Callable[..., Identification],
    bob_client: Client,
    signals: Signals,
    eid: Callable[..., None],
    case: str,
) -> None:
    verify(client=bob_client)
    if case == "setting off":
        eid(ONE_ACCOUNT_PER_PERSON=False)
    signals.clear()
    alices = verify(**OTHER_PERSON.get(case, {}))
    assert alices.status == Status.SUCCESS
    assert signals.names == ["identification_started", "identification_succeeded"]


@pytest.mark.usefixtures("one_account")
def test_a_record_without_provider_id_or_number_claims_nothing(
    verify: Callable[..., Identification],
) -> None:
    row = verify(IdentityProviderUniqueId=None, SocialSecurityNumber=None)
    assert row.status == Status.SUCCESS
    assert claims() == {}


# -- what is stored is what is matched ---------------------------------------------------------


# Each API carries the unique id in its own field (and OpenID's presets each in their own
# claim, a record without a number too): each is stored cut, and matched as stored.
@pytest.mark.apis(
    *(api for api in API_SETTINGS if api != "oidc-vipps"),
    reason="Vipps: the unique id is its pairwise sub, a hash: no record field makes it long",
)
@pytest.mark.usefixtures("one_account")
@pytest.mark.parametrize(
    "tail",
    [
        "",
        pytest.param(
            "-but-different-after-the-cut",
            marks=pytest.mark.apis("v1", reason="the cut is the model's, whatever the API"),
        ),
    ],
)
def test_a_unique_id_longer_than_its_column_matches_as_stored(
    broker_api: str,
    verify: Callable[..., Identification],
    eid: Callable[..., None],
    bob_client: Client,
    tail: str,
) -> None:
    eid(GET_SOCIAL_SECURITY_NUMBER=False)  # the unique id alone says who it is
    limit = max_length("identity_provider_unique_id")
    assert limit is not None
    long_id = "u" * (limit + 45)
    bobs = verify(client=bob_client, IdentityProviderUniqueId=long_id, SocialSecurityNumber=None)
    assert bobs.identity_provider_unique_id == long_id[:limit]
    assert bobs.status == Status.SUCCESS
    alices = verify(IdentityProviderUniqueId=long_id + tail, SocialSecurityNumber=None)
    assert (alices.status, alices.error_code) == (Status.REJECTED, "ONE_ACCOUNT_PER_PERSON")


@pytest.mark.usefixtures("one_account")
def test_a_record_without_a_provider_is_matched_on_the_provider_stored(
    start: Callable[..., Started],
    broker: ScriptedBroker,
    alice_client: Client,
    verify: Callable[..., Identification],
    bob_client: Client,
) -> None:
    # v1's provider names (the default API): NO_BANKID_WEB, stored as such.
    verify(client=bob_client, SocialSecurityNumber=None)
    started = start(provider="NO_BANKID_WEB")
    broker.will_return(started.request_id, IdentityProvider=None, SocialSecurityNumber=None)
    assert alice_client.get(started.success_url()).status_code == 200
    row = started.refresh()
    assert (row.identity_provider, row.status) == ("NO_BANKID_WEB", Status.REJECTED)


# -- claims go with the identity ---------------------------------------------------------------


@pytest.fixture
def receiver_rejects() -> Iterator[None]:
    @receiver(eid_signals.identification_succeeded, dispatch_uid="test-claims-reject")
    def reject(identification: Identification, **kwargs: Any) -> None:
        if identification.user.get_username() == "bob":
            raise IdentificationRejected("Bob may not.")

    yield
    eid_signals.identification_succeeded.disconnect(dispatch_uid="test-claims-reject")


@pytest.mark.usefixtures("one_account", "receiver_rejects")
def test_a_receivers_rejection_frees_the_person(
    verify: Callable[..., Identification], bob_client: Client
) -> None:
    bobs = verify(client=bob_client)
    assert (bobs.status, bobs.error_code) == (Status.REJECTED, "REJECTED")
    assert claims() == {}
    alices = verify()
    assert alices.status == Status.SUCCESS
    assert_claimed_by(alices)


@pytest.mark.usefixtures("one_account")
@pytest.mark.parametrize("options", [{}, {"anonymize": True}], ids=["delete", "anonymize"])
def test_eid_purge_frees_the_person(
    verify: Callable[..., Identification],
    bob_client: Client,
    options: dict[str, Any],
) -> None:
    bobs = verify(client=bob_client)
    assert_claimed_by(bobs)
    out = io.StringIO()
    call_command("eid_purge", older_than="0s", force=True, stdout=out, **options)
    assert "d 1 finished identification(s)" in out.getvalue()  # the claims are not counted
    assert claims() == {}
    assert verify().status == Status.SUCCESS


@pytest.mark.usefixtures("one_account")
def test_eid_purge_keeps_the_claims_of_rows_younger_than_the_cutoff(
    verify: Callable[..., Identification],
) -> None:
    row = verify()
    call_command("eid_purge", older_than="1d", anonymize=True)
    call_command("eid_purge", older_than="1d")
    assert_claimed_by(row)


@pytest.mark.usefixtures("one_account")
def test_deleting_the_user_frees_the_person(
    verify: Callable[..., Identification], bob: User, bob_client: Client
) -> None:
    verify(client=bob_client)
    bob.delete()
    assert claims() == {}
    assert verify().status == Status.SUCCESS


@pytest.mark.usefixtures("one_account")
def test_a_claim_left_behind_rejects_nobody_and_is_taken_over(
    verify: Callable[..., Identification], bob_client: Client
) -> None:
    """The decision is made from the identifications; a claim only serialises."""
    bobs = verify(client=bob_client)
    Identification.objects.filter(pk=bobs.pk).update(status=Status.REJECTED)  # site's own UPDATE
    alices = verify()
    assert alices.status == Status.SUCCESS
    assert_claimed_by(alices)


# -- key rotation ------------------------------------------------------------------------------


def test_the_number_is_matched_under_an_older_key_before_eid_reencrypt(
    verify: Callable[..., Identification],
    bob_client: Client,
    eid: Callable[..., None],
) -> None:
    eid(ONE_ACCOUNT_PER_PERSON=True, GET_SOCIAL_SECURITY_NUMBER=True, ENCRYPTION_KEYS=[OLD_KEY])
    verify(client=bob_client)
    eid(ENCRYPTION_KEYS=[NEW_KEY, OLD_KEY])  # rotated; bob's row is still under the old key
    alices = verify(IdentityProviderUniqueId=OTHER_UID)
    assert (alices.status, alices.error_code) == (Status.REJECTED, "ONE_ACCOUNT_PER_PERSON")


def test_eid_reencrypt_moves_the_claim_on_the_number_to_the_new_key(
    verify: Callable[..., Identification],
    bob_client: Client,
    eid: Callable[..., None],
) -> None:
    eid(ONE_ACCOUNT_PER_PERSON=True, GET_SOCIAL_SECURITY_NUMBER=True, ENCRYPTION_KEYS=[OLD_KEY])
    bobs = verify(client=bob_client)
    eid(ENCRYPTION_KEYS=[NEW_KEY, OLD_KEY])
    assert PersonClaim.SSN + crypto.lookup_hash(SSN) not in claims()
    call_command("eid_reencrypt")
    eid(ENCRYPTION_KEYS=[NEW_KEY])  # the old key is gone
    bobs.refresh_from_db()
    assert_claimed_by(bobs)
    assert PersonClaim.SSN + crypto.lookup_hash(SSN) in claims()
    alices = verify(IdentityProviderUniqueId=OTHER_UID)
    assert (alices.status, alices.error_code) == (Status.REJECTED, "ONE_ACCOUNT_PER_PERSON")


def test_eid_reencrypt_drops_a_claim_the_account_already_holds_under_the_new_key(
    verify: Callable[..., Identification], eid: Callable[..., None]
) -> None:
    eid(ONE_ACCOUNT_PER_PERSON=True, GET_SOCIAL_SECURITY_NUMBER=True, ENCRYPTION_KEYS=[OLD_KEY])
    first = verify()
    eid(ENCRYPTION_KEYS=[NEW_KEY, OLD_KEY])
    second = verify()  # claims the number under the new key; the old-key claim stays on first
    assert set(claims().values()) == {first.pk, second.pk}
    call_command("eid_reencrypt")
    assert_claimed_by(second)


# -- what it costs ----------------------------------------------------------------------------


# Off: session and user, the row, its UPDATE, the link's INSERT (LINK_ON_VERIFY) and the
# session's UPDATE, each of these two in a savepoint pair in the test's transaction
# (docs/benchmarks.md: 8 queries per callback outside one). On: six more, SAVEPOINT for the
# transaction of the SUCCESS and a SAVEPOINT for its rules, the INSERT of both claims, the
# SELECT for other accounts, and the two RELEASEs (outside a caller's transaction: BEGIN ...
# COMMIT around the UPDATE, a SAVEPOINT ... RELEASE around the INSERT and the SELECT).
@pytest.mark.parametrize(
    ("one_account", "queries"), [(False, 10), (True, 10 + 6)], ids=["off", "on"]
)
def test_what_the_claims_cost_in_queries(
    start: Callable[..., Started],
    broker: ScriptedBroker,
    alice_client: Client,
    eid: Callable[..., None],
    django_assert_num_queries: Any,
    one_account: bool,
    queries: int,
) -> None:
    eid(ONE_ACCOUNT_PER_PERSON=one_account, GET_SOCIAL_SECURITY_NUMBER=True)
    started = start()
    broker.will_return(started.request_id)
    # The UPDATE's and the link's audit events with them.
    with django_assert_num_queries(queries + event_statements(2)):  # the API: test_site_rules.py
        assert alice_client.get(started.success_url()).status_code == 302
    row = started.refresh()
    assert row.status == Status.SUCCESS
    if one_account:
        assert_claimed_by(row)
    else:
        assert claims() == {}
