"""Who a verified identification is: its person keys, and whether two are the same person.

A person has up to two keys: their eID scheme and unique id there (``uid:``), and their
national identity number's lookup hash (``ssn:``). Two identifications are the same person
when they share a key. The keys hold no personal data in clear: the unique id is hashed
with its scheme, the number is its keyed lookup hash (:func:`django_eid.crypto.lookup_hash`).

What is done with the keys is elsewhere: one account per person
(:mod:`django_eid.claims`), the ``same_person`` gates (:mod:`django_eid.requirements`).
This module reads identifications and touches no table.
"""

from __future__ import annotations

import hashlib
import json
from typing import Final, Protocol

from django_eid import crypto
from django_eid.brokers import provider_family

#: Prefix of a key made of the eID scheme and the unique id there.
UID: Final = "uid:"
#: Prefix of a key made of the national identity number's lookup hash.
SSN: Final = "ssn:"


class StoredIdentity(Protocol):
    """What the keys are made of: the columns of an identification that name its person."""

    identity_provider: str
    identity_provider_unique_id: str
    social_security_number_hash: str | None

    @property
    def social_security_number(self) -> object: ...


def uid_key(identification: StoredIdentity) -> str | None:
    """The ``uid:`` key: the provider's eID scheme and the unique id there, as stored (or
    ``None``).

    The scheme, not the provider's name (:func:`~django_eid.brokers.provider_family`): the
    same person's PID at NO BankID gives one key whether v1 (``NO_BANKID_WEB``), v2 or the
    eID Hub (``nbid``) reported it. The unique id is stored in clear on the identification,
    so its key is a plain SHA-256 (stable across key rotations).
    """
    return uid_key_of(identification.identity_provider, identification.identity_provider_unique_id)


def uid_key_of(provider: str | None, unique_id: str | None) -> str | None:
    """The ``uid:`` key of a provider name (of any API) and a unique id there."""
    if not (provider and unique_id):
        return None
    pair = json.dumps([provider_family(provider), unique_id]).encode()
    return UID + hashlib.sha256(pair).hexdigest()


def ssn_key(lookup_hash: str) -> str:
    """The ``ssn:`` key of a national identity number, from its stored lookup hash."""
    return SSN + lookup_hash


def keys(identification: StoredIdentity) -> list[str]:
    """The keys of the person ``identification`` stores (its stored, truncated values).

    Sorted, so that two transactions claiming the same keys lock them in the same order.
    """
    found = [uid_key(identification)]
    if identification.social_security_number_hash:
        found.append(ssn_key(identification.social_security_number_hash))
    return sorted(key for key in found if key)


def same_person(new: StoredIdentity, old: StoredIdentity) -> bool:
    """Whether ``new`` and ``old`` share a person key.

    ``new`` must hold its number in clear (it was just received, or loaded and decrypted);
    ``old``'s number is matched through its stored hash under every configured key, so an
    identification from before a key rotation still matches.
    """
    key = uid_key(new)
    if key is not None and key == uid_key(old):
        return True
    stored = old.social_security_number_hash
    if not stored:
        return False
    if stored == new.social_security_number_hash:
        return True  # both under the current key: no need to decrypt
    # Another key wrote one of them (a rotation): compare under every configured key.
    number = number_of(new)
    return number is not None and stored in crypto.lookup_hashes(number)


def number_of(identification: StoredIdentity) -> str | None:
    """The number ``identification`` holds in clear, or ``None``.

    A number no configured key decrypts (:class:`~django_eid.crypto.Unreadable`, falsy)
    proves nothing: never a match; the provider's unique id may still tell.
    """
    number = identification.social_security_number
    # The SensitiveText itself: its repr() stays masked wherever it travels.
    return number if isinstance(number, str) and number else None
