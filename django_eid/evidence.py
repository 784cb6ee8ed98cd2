"""Evidence of an OpenID Connect identification (``KEEP_EVIDENCE``), and its verification.

An OpenID provider signs the identity it returns (the ``id_token``). With ``KEEP_EVIDENCE``
the row keeps that token exactly as it came (:func:`django_eid.brokers.oidc.evidence_of`
writes it), with the provider's public keys it was
verified with (a provider rotates its keys: years later they are no longer published), in
its ``evidence`` column, encrypted like the national identity number. :func:`verify`
(``eid_audit --verify ID``) checks the provider's signature again with those keys, and that
the token names the identity stored on the row: proof that survives the site's own word,
as long as the row is kept (``eid_purge`` removes it with the personal data).

What it does not prove: that the kept keys were the provider's (they were fetched over TLS
from its ``jwks_uri`` when the token was verified; compare them with the provider's own
record of its keys), nor anything the provider did not sign (a userinfo answer, the site's
rules).
"""

from __future__ import annotations

import base64
import datetime
import hmac
import json
from collections.abc import Mapping
from typing import Any, Final

from django.conf import settings
from joserfc import jwt
from joserfc.errors import JoseError
from joserfc.jwk import KeySet

from django_eid import crypto
from django_eid.brokers.oidc import ALGORITHMS, _key_for, derived
from django_eid.brokers.oidc_presets import preset
from django_eid.exceptions import EvidenceError

#: How far, in seconds, a token's ``iat`` may lie outside its identification's start and
#: finish (the clocks of the provider and the site, the person's minutes at the broker).
ISSUED_LEEWAY: Final = 300


def verify(identification_id: int) -> str:
    """Check the evidence kept with identification ``identification_id``: the provider's
    signature against the keys kept with it (the key the token names, an asymmetric
    algorithm), its issuer, and that it names the identity stored on the row. Its expiry is
    not checked: evidence is read long after the token's minutes of validity.

    A summary without personal data; :class:`~django_eid.exceptions.EvidenceError` naming
    what failed.
    """
    # Here, not at the top: the models are read only once the app registry is ready.
    from django_eid.models import Identification, fit

    pk = identification_id
    row = (
        Identification.objects.filter(pk=pk)
        .only(
            "status",
            "external_id",
            "identity_provider_unique_id",
            "level_of_assurance",
            "evidence",
            "anonymized_at",
            "created_at",
            "completed_at",
        )
        .first()
    )
    if row is None:
        raise EvidenceError("not_found", f"There is no identification {pk}.")
    stored = row.evidence
    if isinstance(stored, crypto.Unreadable):
        raise EvidenceError(
            "unreadable",
            f"The evidence of identification {pk} is unreadable: no configured key decrypts "
            "it (ENCRYPTION_KEYS, or SECRET_KEY and SECRET_KEY_FALLBACKS).",
        )
    if not stored:
        why = (
            "it was anonymized (eid_purge --anonymize)"
            if row.anonymized_at is not None
            else "KEEP_EVIDENCE was off, or its broker API was not 'oidc'"
        )
        raise EvidenceError("no_evidence", f"Identification {pk} has no evidence kept: {why}.")
    kept_ = _read(stored, pk)
    token: str = kept_["id_token"]
    header = _header(token, pk)
    alg, kid = header.get("alg"), header.get("kid")
    if not isinstance(alg, str) or alg not in ALGORITHMS:
        raise EvidenceError(
            "signature_invalid",
            f"The id_token of identification {pk} is not signed with an asymmetric algorithm "
            f"({_shown(alg)}): no signature of the provider's to verify.",
        )
    try:
        keys = KeySet.import_key_set(kept_["jwks"])
        key = _key_for(keys, kid, alg)
    except (JoseError, ValueError, TypeError, KeyError) as err:
        raise EvidenceError(
            "unknown_key",
            f"The id_token of identification {pk} names a key ({_shown(kid)}, {alg}) that is "
            "not among the provider's keys kept with it.",
        ) from err
    try:
        claims: Mapping[str, Any] = jwt.decode(token, key, algorithms=[alg]).claims
    except (JoseError, ValueError) as err:
        raise EvidenceError(
            "signature_invalid",
            f"The signature of the id_token of identification {pk} is not valid with the "
            f"provider's key {_shown(kid)} kept with it: the token was changed.",
        ) from err
    issuer = kept_["issuer"]
    if claims.get("iss") != issuer:
        raise EvidenceError(
            "issuer_mismatch",
            f"The id_token of identification {pk} was not issued by {issuer}, the issuer kept "
            "with it.",
        )
    stored_id = row.identity_provider_unique_id
    kept_id = fit("identity_provider_unique_id", kept_["unique_id"])
    mismatch = EvidenceError(
        "subject_mismatch",
        f"The id_token of identification {pk} names another person than the identity stored "
        "on it (its unique id at the provider).",
    )
    if not stored_id or not hmac.compare_digest(stored_id.encode(), kept_id.encode()):
        raise mismatch
    # The unique id as the preset of the time read it from the signed claims. A preset that
    # reads the identity from userinfo may find it only there (Signicat's idp_id): the row
    # is then held to the unique id kept with the evidence, which the encryption protects.
    reader = preset(kept_["preset"])
    signed_id = fit("identity_provider_unique_id", reader.read(claims).unique_id or "")
    subject_signed = hmac.compare_digest(signed_id.encode(), kept_id.encode())
    if not subject_signed and not reader.userinfo:
        raise mismatch
    audiences = claims.get("aud")
    audiences = [audiences] if isinstance(audiences, str) else audiences
    if not isinstance(audiences, list) or kept_["client_id"] not in audiences:
        raise EvidenceError(
            "audience_mismatch",
            f"The id_token of identification {pk} was not issued to this site's client (the "
            "client id kept with it).",
        )
    issued = claims.get("iat")
    started, ended = row.created_at, row.completed_at or row.created_at
    if not isinstance(issued, int | float) or not (
        started.timestamp() - ISSUED_LEEWAY <= issued <= ended.timestamp() + ISSUED_LEEWAY
    ):
        raise EvidenceError(
            "time_mismatch",
            f"The id_token of identification {pk} was not issued while the identification "
            "was under way: it is another login's.",
        )
    # The nonce was derived from this row's state under SECRET_KEY: a key the site still has
    # must derive it, or the token was issued for another login (of the same person, say).
    nonce = claims.get("nonce")
    secrets = [settings.SECRET_KEY, *getattr(settings, "SECRET_KEY_FALLBACKS", ())]
    if not isinstance(nonce, str) or not any(
        hmac.compare_digest(nonce.encode(), derived("nonce", row.external_id, secret=s).encode())
        for s in secrets
    ):
        raise EvidenceError(
            "nonce_mismatch",
            f"The nonce of the id_token of identification {pk} is not this identification's: "
            "it was issued for another login, or SECRET_KEY was rotated since without the old "
            "key in SECRET_KEY_FALLBACKS (put it back there to verify).",
        )
    return _summary(
        pk,
        row.status,
        claims,
        issuer=issuer,
        kid=kid,
        alg=alg,
        level=row.level_of_assurance,
        kept_at=kept_["kept_at"],
        subject_signed=subject_signed,
        thumbprint=key.thumbprint(),
    )


def _read(stored: str, pk: int) -> dict[str, Any]:
    """The evidence's JSON, checked for the fields :func:`verify` reads."""
    try:
        value = json.loads(stored)
    except ValueError:
        value = None
    fields = {
        "id_token": str,
        "jwks": dict,
        "issuer": str,
        "client_id": str,
        "preset": str,
        "unique_id": str,
    }
    if not isinstance(value, dict) or not all(
        isinstance(value.get(name), kind) for name, kind in fields.items()
    ):
        raise EvidenceError(
            "unreadable", f"The evidence of identification {pk} is not evidence django-eid kept."
        )
    value.setdefault("kept_at", "")
    return value


def _header(token: str, pk: int) -> dict[str, Any]:
    try:
        head = token.split(".")[0]
        value = json.loads(base64.urlsafe_b64decode(head + "=" * (-len(head) % 4)))
    except (ValueError, UnicodeDecodeError):
        value = None
    if not isinstance(value, dict) or token.count(".") != 2:
        raise EvidenceError(
            "signature_invalid", f"The id_token of identification {pk} is not a signed JWT."
        )
    return value


def _shown(value: object) -> str:
    """A header value or claim of the token, as the summary may show it: printable ASCII,
    short (the token is the provider's text, not the site's)."""
    if not isinstance(value, str):
        return "none" if value is None else type(value).__name__
    text = "".join(c for c in value if 32 <= ord(c) < 127)[:100]
    return repr(text)


def _utc(value: object) -> str | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    try:
        moment = datetime.datetime.fromtimestamp(value, tz=datetime.UTC)
    except (OverflowError, OSError, ValueError):
        return None
    return moment.strftime("%Y-%m-%d %H:%M:%S UTC")


def _kept_on(kept_at: str) -> str | None:
    try:
        moment = datetime.datetime.fromisoformat(kept_at)
    except (TypeError, ValueError):
        return None
    return _utc(moment.timestamp())


def _summary(
    pk: int,
    status: str,
    claims: Mapping[str, Any],
    *,
    issuer: str,
    kid: object,
    alg: str,
    level: str,
    kept_at: str,
    subject_signed: bool,
    thumbprint: str,
) -> str:
    aud = claims.get("aud")
    audiences = [aud] if isinstance(aud, str) else aud if isinstance(aud, list) else []
    parts = [
        f"Identification {pk} ({status}): an id_token issued by {issuer} to "
        f"{', '.join(_shown(a) for a in audiences) or 'no audience'}, signed with {alg} "
        f"by the key {_shown(kid)}",
    ]
    issued = _utc(claims.get("iat"))
    if issued:
        parts.append(f"issued at {issued}")
    authenticated = _utc(claims.get("auth_time"))
    if authenticated:
        parts.append(f"the person authenticated at {authenticated}")
    if isinstance(claims.get("acr"), str):
        parts.append(f"acr {_shown(claims['acr'])}")
    if level:
        parts.append(f"level of assurance {_shown(level)}")
    text = ", ".join(parts) + ". "
    text += "The signature is valid with the provider's keys kept with it"
    text += f" on {_kept_on(kept_at)}" if _kept_on(kept_at) else ""
    if subject_signed:
        text += ", and the subject matches the stored identity: the provider signed it."
    else:
        text += (
            ", and the subject matches the stored identity as kept with the evidence: the "
            "provider signed its subject (sub); the unique id came from its userinfo answer "
            "to the same login, which it did not sign."
        )
    text += (
        " It was issued to this site's client while the identification was under way, and its "
        "nonce shows it was issued for this identification."
        f" The key's thumbprint (RFC 7638) is {thumbprint}: compare it with the keys the "
        "provider published at the time, since whoever holds the encryption key could have "
        "replaced both the token and the keys."
    )
    text += (
        " The token's expiry (exp) is not checked: evidence is verified long after the "
        "token's minutes of validity."
    )
    return text
