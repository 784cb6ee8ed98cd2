"""Evidence of an OpenID Connect identification (``KEEP_EVIDENCE``, ``django_eid.evidence``):
the signed id_token and the provider's keys kept, encrypted, only when asked for and only
with ``BROKER_API = "oidc"``; verified years later against the kept keys (not the live
ones), and refused, naming what failed, when the token, its key, its issuer or the stored
identity was changed, or when there is nothing to verify. Never in ``raw``, the admin or the
JSON API; gone with the row's personal data.
"""

from __future__ import annotations

import base64
import datetime
import functools
import json
from collections.abc import Callable
from typing import Any

import pytest
import time_machine
from cryptography.fernet import Fernet
from django.db import connection
from django.test import Client
from joserfc import jwt
from joserfc.jwk import KeySet, OctKey, RSAKey

from django_eid import crypto, evidence
from django_eid.exceptions import EidError, EvidenceError
from django_eid.models import Identification
from django_eid.sandbox.fake import EidBroker
from tests.brokers.oidc.conftest import NORWEGIAN, PRESET_NAMES, PRESETS, Status, begin
from tests.brokers.oidc.conftest import verify as identify
from tests.commands.helpers import run
from tests.fixtures_broker import jwts_in
from tests.fixtures_client import SettingsWrapper

pytestmark = pytest.mark.django_db


@pytest.fixture
def kept(serve: Callable[..., EidBroker], alice_client: Client) -> Identification:
    """Alice verified as Kari at Idura's OP, the evidence kept."""
    op = serve(KEEP_EVIDENCE=True)
    row = identify(alice_client, op)
    assert row.status == Status.SUCCESS
    return row


def evidence_of(row: Identification) -> dict[str, Any]:
    row.refresh_from_db()
    assert isinstance(row.evidence, str)
    value: dict[str, Any] = json.loads(row.evidence)
    return value


def stored_evidence(row: Identification) -> str | None:
    """The evidence column as the database has it."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT evidence FROM django_eid_identification WHERE id = %s", [row.pk])
        (value,) = cursor.fetchone()
    return None if value is None else str(value)


def replace_evidence(row: Identification, **changes: Any) -> None:
    """The row's evidence with ``changes``, encrypted again with the site's key: what someone
    holding the key (the site itself) could write."""
    value = {**evidence_of(row), **changes}
    Identification.objects.filter(pk=row.pk).update(evidence=json.dumps(value))


def b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def unb64(part: str) -> dict[str, Any]:
    value: dict[str, Any] = json.loads(base64.urlsafe_b64decode(part + "=" * (-len(part) % 4)))
    return value


def parts_of(token: str) -> tuple[dict[str, Any], dict[str, Any], str]:
    """A compact JWS's header, claims and signature."""
    head, payload, signature = token.split(".")
    return unb64(head), unb64(payload), signature


@functools.cache
def stranger() -> RSAKey:
    """A key the provider never had (made once: an RSA key takes some 70 ms)."""
    return RSAKey.generate_key(2048)


def fails(row: Identification, code: str) -> EvidenceError:
    with pytest.raises(EvidenceError) as caught:
        evidence.verify(row.pk)
    assert caught.value.code == code, str(caught.value)
    assert isinstance(caught.value, EidError)
    assert f"identification {row.pk}" in str(caught.value).lower()
    return caught.value


# -- kept, or not ---------------------------------------------------------------------------------
def test_kept_when_asked_for_encrypted_and_apart_from_raw(kept: Identification) -> None:
    value = evidence_of(kept)
    token = value["id_token"]
    header, claims, _ = parts_of(token)
    assert value["issuer"] == PRESETS["idura"][0] == claims["iss"]
    assert value["preset"] == "idura"
    assert datetime.datetime.fromisoformat(value["kept_at"]).tzinfo is not None
    # The public keys the token was verified with, the one it names among them; no private
    # parameter of any.
    assert header["kid"] in {k["kid"] for k in value["jwks"]["keys"]}
    assert all(not {"d", "p", "q", "dp", "dq", "qi"} & set(k) for k in value["jwks"]["keys"])
    # Encrypted at rest: the column holds a Fernet token of the JSON, no part of the id_token.
    stored = stored_evidence(kept)
    assert stored is not None
    assert crypto.decrypt(stored) == kept.evidence
    # (Each part whole: a Fernet token, random base64, may hold any three letters by chance.)
    for part in token.split("."):
        assert part not in stored
    # raw holds the claims as received, never the token itself.
    assert not jwts_in(json.dumps(kept.raw))
    assert "id_token" not in kept.raw


def test_not_kept_unless_asked_for(serve: Callable[..., EidBroker], alice_client: Client) -> None:
    row = identify(alice_client, serve())
    assert row.status == Status.SUCCESS
    assert row.evidence is None
    assert stored_evidence(row) is None
    fails(row, "no_evidence")


def test_a_rest_api_keeps_nothing(
    eid: Callable[..., None], verify: Callable[..., Identification]
) -> None:
    """The REST session APIs return no signed token (check W029 says so)."""
    eid(KEEP_EVIDENCE=True)
    row = verify()
    assert row.status == Status.SUCCESS
    assert row.evidence is None
    error = fails(row, "no_evidence")
    assert "KEEP_EVIDENCE" in str(error)


def test_a_failed_identification_keeps_nothing(
    serve: Callable[..., EidBroker], alice_client: Client
) -> None:
    op = serve(KEEP_EVIDENCE=True)
    row, _ = begin(alice_client)
    url = op.complete()
    op.tamper_next_token(signing="bad-signature")
    alice_client.get(url)
    row.refresh_from_db()
    assert row.status == Status.ERROR
    assert row.evidence is None


# -- verified --------------------------------------------------------------------------------------
@pytest.mark.parametrize("preset", [*PRESET_NAMES, "generic"])
def test_each_presets_evidence_verifies_without_personal_data(
    serve: Callable[..., EidBroker], alice_client: Client, preset: str
) -> None:
    op = serve(preset, KEEP_EVIDENCE=True)
    row = identify(alice_client, op)
    calls = len(op.mock.calls)
    summary = evidence.verify(row.pk)

    assert f"Identification {row.pk} (SUCCESS)" in summary
    assert PRESETS[preset][0] in summary  # the issuer
    assert repr(PRESETS[preset][1]) in summary  # the audience
    assert "The signature is valid" in summary
    assert "the subject matches the stored identity" in summary
    assert "(exp) is not checked" in summary
    assert "issued for this identification" in summary  # its nonce
    assert " UTC" in summary  # issued at
    value = evidence_of(row)
    _, claims, _ = parts_of(value["id_token"])
    for secret in (
        value["id_token"],
        claims["sub"],
        row.identity_provider_unique_id,
        NORWEGIAN.national_identity_number,
        NORWEGIAN.first_name,
        NORWEGIAN.last_name,
        row.name,
    ):
        assert secret not in summary
    # Nothing asked of the provider: the kept keys are the ones that count.
    assert len(op.mock.calls) == calls


def test_a_signature_of_the_unique_id_is_said_to_be_one(kept: Identification) -> None:
    """Idura signs the unique id itself; Signicat's comes from userinfo, and the summary
    says that only the subject is signed then."""
    assert "the provider signed it." in evidence.verify(kept.pk)


def test_signicats_unique_id_from_userinfo_is_said_to_be_unsigned(
    serve: Callable[..., EidBroker], alice_client: Client
) -> None:
    row = identify(alice_client, serve("signicat", KEEP_EVIDENCE=True))
    assert "which it did not sign" in evidence.verify(row.pk)


def test_years_later_after_the_provider_rotated_its_keys(
    serve: Callable[..., EidBroker], alice_client: Client
) -> None:
    """The token expired long ago and its key is no longer published: the kept keys verify
    it, and the live JWKS is not asked."""
    op = serve(KEEP_EVIDENCE=True)
    row = identify(alice_client, op)
    kid = parts_of(evidence_of(row)["id_token"])[0]["kid"]
    op.rotate_keys()
    op.rotate_keys()  # the previous keys stay one rotation: the token's are gone now
    assert op.oidc is not None
    assert kid not in json.dumps(op.oidc.jwks().body)
    calls = len(op.mock.calls)
    later = datetime.datetime.now(tz=datetime.UTC) + datetime.timedelta(days=5 * 365)
    with time_machine.travel(later, tick=False):
        assert "The signature is valid" in evidence.verify(row.pk)
    assert len(op.mock.calls) == calls


def test_the_token_of_another_login_of_the_person_is_refused(
    serve: Callable[..., EidBroker], alice_client: Client
) -> None:
    """Another identification's token, of the same person, signed and naming them: its
    nonce is not this identification's."""
    op = serve(KEEP_EVIDENCE=True)
    first, second = identify(alice_client, op), identify(alice_client, op)
    Identification.objects.filter(pk=second.pk).update(evidence=str(first.evidence))
    assert "nonce" in str(fails(second, "nonce_mismatch"))


@pytest.mark.parametrize("fallback", [True, False])
def test_a_rotated_secret_key(
    kept: Identification, settings: SettingsWrapper, fallback: bool
) -> None:
    """The nonce is derived again with SECRET_KEY_FALLBACKS; without the old key it cannot
    be, and the error says to put it back (the encryption keys are ENCRYPTION_KEYS here, so
    the evidence still reads)."""
    plain = str(kept.evidence)
    key = Fernet.generate_key().decode()
    settings.DJANGO_EID = {**settings.DJANGO_EID, "ENCRYPTION_KEYS": [key]}
    Identification.objects.filter(pk=kept.pk).update(evidence=plain)
    old = settings.SECRET_KEY
    settings.SECRET_KEY = "another-secret-key-" + "x" * 40
    settings.SECRET_KEY_FALLBACKS = [old] if fallback else []
    if fallback:
        assert "issued for this identification" in evidence.verify(kept.pk)
    else:
        assert "SECRET_KEY_FALLBACKS" in str(fails(kept, "nonce_mismatch"))


def test_a_token_issued_to_another_client(kept: Identification) -> None:
    replace_evidence(kept, client_id="another-client")
    fails(kept, "audience_mismatch")


def test_a_token_issued_at_another_time(kept: Identification) -> None:
    """A token of the same person and client from another day (the nonce aside)."""
    later = kept.created_at + datetime.timedelta(days=120)
    Identification.objects.filter(pk=kept.pk).update(created_at=later, completed_at=later)
    fails(kept, "time_mismatch")


def test_the_summary_names_the_key_to_compare(kept: Identification) -> None:
    summary = evidence.verify(kept.pk)
    thumbprint = KeySet.import_key_set(evidence_of(kept)["jwks"]).keys[0].thumbprint()
    assert f"thumbprint (RFC 7638) is {thumbprint}" in summary


# -- refused ---------------------------------------------------------------------------------------
def test_a_token_whose_claims_were_changed(kept: Identification) -> None:
    token = evidence_of(kept)["id_token"]
    head, _, signature = token.split(".")
    claims = parts_of(token)[1]
    changed = b64(json.dumps({**claims, "iat": claims["iat"] + 3600}).encode())
    replace_evidence(kept, id_token=f"{head}.{changed}.{signature}")
    error = fails(kept, "signature_invalid")
    assert "changed" in str(error)


def test_a_token_signed_by_another_key_under_the_kept_keys_name(kept: Identification) -> None:
    header, claims, _ = parts_of(evidence_of(kept)["id_token"])
    replace_evidence(kept, id_token=jwt.encode(header, claims, stranger(), algorithms=["RS256"]))
    fails(kept, "signature_invalid")


def test_a_token_signed_by_a_key_not_kept(kept: Identification) -> None:
    header, claims, _ = parts_of(evidence_of(kept)["id_token"])
    token = jwt.encode({**header, "kid": "another-key"}, claims, stranger(), algorithms=["RS256"])
    replace_evidence(kept, id_token=token)
    error = fails(kept, "unknown_key")
    assert "'another-key'" in str(error)


def test_a_kept_key_set_without_the_tokens_key(kept: Identification) -> None:
    """The kept keys replaced by the provider's later ones: the token's is not among them."""
    replace_evidence(kept, jwks={"keys": []})
    fails(kept, "unknown_key")


@pytest.mark.parametrize("alg", ["none", "HS256"])
def test_a_token_without_an_asymmetric_signature(kept: Identification, alg: str) -> None:
    header, claims, _ = parts_of(evidence_of(kept)["id_token"])
    if alg == "none":
        unsigned = [b64(json.dumps(part).encode()) for part in ({**header, "alg": "none"}, claims)]
        token = ".".join([*unsigned, ""])
    else:
        secret = OctKey.import_key("a-secret-anyone-could-hold-0123456789")
        token = jwt.encode({**header, "alg": "HS256"}, claims, secret, algorithms=["HS256"])
    replace_evidence(kept, id_token=token)
    fails(kept, "signature_invalid")


def test_another_issuer_kept(kept: Identification) -> None:
    replace_evidence(kept, issuer="https://evil.example")
    fails(kept, "issuer_mismatch")


def test_another_person_stored_on_the_row(kept: Identification) -> None:
    Identification.objects.filter(pk=kept.pk).update(identity_provider_unique_id="someone-else")
    fails(kept, "subject_mismatch")


def test_another_person_stored_and_kept(kept: Identification) -> None:
    """The row and the kept unique id changed together: the provider's signature does not
    name that person."""
    Identification.objects.filter(pk=kept.pk).update(identity_provider_unique_id="someone-else")
    replace_evidence(kept, unique_id="someone-else")
    fails(kept, "subject_mismatch")


def test_another_person_on_signicats_row(
    serve: Callable[..., EidBroker], alice_client: Client
) -> None:
    """Signicat's unique id is not in its token: the one kept with the evidence holds."""
    row = identify(alice_client, serve("signicat", KEEP_EVIDENCE=True))
    Identification.objects.filter(pk=row.pk).update(identity_provider_unique_id="someone-else")
    fails(row, "subject_mismatch")


def test_evidence_no_configured_key_decrypts(
    kept: Identification, settings: SettingsWrapper
) -> None:
    settings.DJANGO_EID = {
        **settings.DJANGO_EID,
        "ENCRYPTION_KEYS": [Fernet.generate_key().decode()],
    }
    error = fails(kept, "unreadable")
    assert "ENCRYPTION_KEYS" in str(error)


def test_evidence_that_is_not_evidence(kept: Identification) -> None:
    Identification.objects.filter(pk=kept.pk).update(evidence='{"id_token": 1}')
    fails(kept, "unreadable")


def test_no_such_identification(kept: Identification) -> None:
    with pytest.raises(EvidenceError) as caught:
        evidence.verify(kept.pk + 1000)
    assert caught.value.code == "not_found"
    assert str(kept.pk + 1000) in str(caught.value)


def test_anonymized_it_is_gone(kept: Identification) -> None:
    old = kept.created_at - datetime.timedelta(days=100)
    Identification.objects.filter(pk=kept.pk).update(created_at=old, completed_at=old)
    run("eid_purge", "--older-than", "90d", "--anonymize")
    assert stored_evidence(kept) is None
    error = fails(kept, "no_evidence")
    assert "anonymized" in str(error)


def test_the_messages_hold_neither_the_token_nor_the_person(kept: Identification) -> None:
    token = evidence_of(kept)["id_token"]
    Identification.objects.filter(pk=kept.pk).update(identity_provider_unique_id="someone-else")
    message = str(fails(kept, "subject_mismatch"))
    for secret in (token, *token.split("."), "someone-else", kept.identity_provider_unique_id):
        assert secret not in message
    assert not jwts_in(message)


# -- never shown -----------------------------------------------------------------------------------
def test_the_admin_does_not_show_it(kept: Identification, admin_client: Client) -> None:
    page = admin_client.get(f"/admin/django_eid/identification/{kept.pk}/change/")
    assert page.status_code == 200
    text = page.content.decode()
    assert not [part for part in evidence_of(kept)["id_token"].split(".") if part in text]
    assert 'name="evidence"' not in text
    assert "field-evidence" not in text


def test_the_json_api_does_not_show_it(kept: Identification, alice_client: Client) -> None:
    for url in ("/eid/api/me/", f"/eid/api/identifications/{kept.reference}/"):
        response = alice_client.get(url)
        assert response.status_code == 200, url
        text = response.content.decode()
        assert not [part for part in evidence_of(kept)["id_token"].split(".") if part in text]
        assert "evidence" not in text, url
