"""Migration 0008: the ``uid:`` person claims are keyed by the provider's eID scheme.

A claim written under the provider's name gets the key ``person_keys.uid_key`` gives today; of
two claims that now share a key (one person held by two accounts under two spellings of
the provider), the first written stands. Runs as test_0003.py does: back
to 0007, rows written through the historical models, 0008 applied, then the latest again.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator

import pytest
from django.db.migrations.state import StateApps
from django.utils import timezone

from django_eid.person_keys import uid_key_of
from tests.migrations.test_0003 import APP, latest, migrate

BEFORE = [(APP, "0007_level_of_assurance")]
AFTER = [(APP, "0008_person_keys_by_scheme")]
PID = "9578-6000-4-112233"


def old_key(provider: str, unique_id: str) -> str:
    """The key of a ``uid:`` claim before 0008: the provider's name, as stored."""
    return "uid:" + hashlib.sha256(json.dumps([provider, unique_id]).encode()).hexdigest()


@pytest.fixture
def at_0007() -> Iterator[StateApps]:
    try:
        yield migrate(BEFORE)
    finally:
        migrate(latest())


@pytest.mark.django_db(transaction=True)
def test_0008_rekeys_uid_claims_by_scheme_and_keeps_the_first_of_a_clash(
    at_0007: StateApps,
) -> None:
    apps = at_0007
    User = apps.get_model("auth", "User")
    Identification = apps.get_model(APP, "Identification")
    PersonClaim = apps.get_model(APP, "PersonClaim")
    now = timezone.now()

    def verified(user: object, number: int, provider: str, unique_id: str) -> object:
        return Identification.objects.create(
            user=user,
            reference=f"ref{number:029d}",
            external_id=f"{number:032x}",
            status="SUCCESS",
            identity_provider=provider,
            identity_provider_unique_id=unique_id,
            created_at=now,
            completed_at=now,
        )

    kari, ola, per = (User.objects.create(username=name) for name in ("kari", "ola", "per"))
    first = verified(kari, 1, "NO_BANKID_WEB", PID)
    # The same PID through the eID Hub on another account: undetected under the old keys.
    clash = verified(ola, 2, "nbid", PID)
    other = verified(per, 3, "SWE_BANKID", "se-unique-1")
    for row in (first, clash, other):
        PersonClaim.objects.create(
            key=old_key(row.identity_provider, row.identity_provider_unique_id),
            identification=row,
        )
    number_claim = PersonClaim.objects.create(key="ssn:" + "0" * 64, identification=other)

    migrate(AFTER)

    claims = dict(PersonClaim.objects.values_list("key", "identification_id"))
    assert claims == {
        uid_key_of("NO_BANKID_WEB", PID): first.pk,  # the first written stands
        uid_key_of("SWE_BANKID", "se-unique-1"): other.pk,
        number_claim.key: other.pk,  # number keys are not touched
    }
    assert (
        uid_key_of("nbid", PID)
        == uid_key_of("no_bankid_mobile", PID)
        == uid_key_of("NO_BANKID_WEB", PID)
    )
