"""``manage.py eid_audit --verify ID``: the evidence of an OpenID Connect identification
(``KEEP_EVIDENCE``) checked years later against the provider's keys kept with it, its
summary printed without personal data; what failed as the command's error
(:mod:`django_eid.evidence`'s own cases: ``tests/brokers/oidc/test_evidence.py``).
"""

from __future__ import annotations

import base64
import datetime
import json
from collections.abc import Callable

import pytest
import time_machine
from django.core.management.base import CommandError

from django_eid.models import Identification
from tests.commands.helpers import run
from tests.fixtures_broker import OIDC_APIS, SAMPLE, ScriptedBroker, jwts_in

pytestmark = pytest.mark.django_db

#: Why the evidence's success is an OpenID Connect case only.
SIGNED_ONLY = "only an OpenID provider signs the identity it returns: the evidence"


@pytest.fixture
def kept(
    broker_api: str, eid: Callable[..., None], verify: Callable[..., Identification]
) -> Identification:
    """Alice verified through the test's OpenID provider, the evidence kept."""
    eid(KEEP_EVIDENCE=True)
    row = verify()
    assert row.status == Identification.Status.SUCCESS
    assert row.evidence
    return row


@pytest.mark.apis(*OIDC_APIS, reason=SIGNED_ONLY)
def test_prints_the_summary_years_later(
    kept: Identification, broker: ScriptedBroker, broker_api: str
) -> None:
    broker.rotate_keys()
    broker.rotate_keys()  # the token's key is no longer the provider's
    later = datetime.datetime.now(tz=datetime.UTC) + datetime.timedelta(days=3 * 365)
    with time_machine.travel(later, tick=False):
        out = run("eid_audit", "--verify", str(kept.pk))
    assert out.startswith(f"Identification {kept.pk} (SUCCESS)")
    assert "The signature is valid" in out
    assert "the subject matches the stored identity" in out
    assert "(exp) is not checked" in out
    token = json.loads(str(kept.evidence))["id_token"]
    assert not jwts_in(out)
    for secret in (
        token,
        *token.split("."),
        SAMPLE.national_identity_number,
        SAMPLE.last_name,
        kept.identity_provider_unique_id,
    ):
        assert secret not in out


@pytest.mark.apis("oidc-idura", reason=SIGNED_ONLY)
def test_a_changed_token_is_the_commands_error(kept: Identification, broker_api: str) -> None:
    value = json.loads(str(kept.evidence))
    head, payload, signature = value["id_token"].split(".")
    claims = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    claims["acr"] = "urn:grn:authn:no:bankid:high"
    forged = base64.urlsafe_b64encode(json.dumps(claims).encode()).rstrip(b"=").decode()
    value["id_token"] = f"{head}.{forged}.{signature}"
    Identification.objects.filter(pk=kept.pk).update(evidence=json.dumps(value))
    with pytest.raises(CommandError, match=f"identification {kept.pk} is not valid") as caught:
        run("eid_audit", "--verify", str(kept.pk))
    assert not jwts_in(str(caught.value))
    assert not any(part in str(caught.value) for part in (head, payload, forged, signature))


@pytest.mark.apis("oidc-idura", reason=SIGNED_ONLY)
def test_another_person_on_the_row_is_the_commands_error(
    kept: Identification, broker_api: str
) -> None:
    Identification.objects.filter(pk=kept.pk).update(identity_provider_unique_id="someone-else")
    with pytest.raises(CommandError, match="names another person") as caught:
        run("eid_audit", "--verify", str(kept.pk))
    assert "someone-else" not in str(caught.value)


@pytest.mark.apis("oidc-idura", reason=SIGNED_ONLY)
def test_anonymized_there_is_nothing_to_verify(kept: Identification, broker_api: str) -> None:
    old = kept.created_at - datetime.timedelta(days=100)
    Identification.objects.filter(pk=kept.pk).update(created_at=old, completed_at=old)
    run("eid_purge", "--older-than", "90d", "--anonymize")
    with pytest.raises(CommandError, match="no evidence kept: it was anonymized"):
        run("eid_audit", "--verify", str(kept.pk))


def test_a_rest_apis_identification_has_none(
    eid: Callable[..., None], verify: Callable[..., Identification]
) -> None:
    eid(KEEP_EVIDENCE=True)
    row = verify()
    with pytest.raises(CommandError, match="no evidence kept: KEEP_EVIDENCE was off"):
        run("eid_audit", "--verify", str(row.pk))


def test_no_such_identification() -> None:
    with pytest.raises(CommandError, match="There is no identification 424242"):
        run("eid_audit", "--verify", "424242")


def test_the_id_is_a_number() -> None:
    with pytest.raises(CommandError, match="invalid int value"):
        run("eid_audit", "--verify", "latest")
