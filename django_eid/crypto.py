"""Encryption at rest of the national identity number, and its lookup hash.

Keys come from ``DJANGO_EID["ENCRYPTION_KEYS"]``: a list of Fernet keys, the
first encrypts, all decrypt (rotation: put a new key first, run
``manage.py eid_reencrypt``, then drop the old key). When unset, the key is
derived from ``SECRET_KEY`` with HKDF, so a site works out of the box; keys
derived from ``SECRET_KEY_FALLBACKS`` decrypt and find rows too, so rotating
``SECRET_KEY`` the Django way (old key moved to the fallbacks) keeps every row
readable until ``eid_reencrypt`` has moved it to the new key.

Fernet is randomised, so equal numbers encrypt differently; exact lookups use a
keyed hash (HMAC-SHA256 under a key derived from each encryption key). A lookup
tries the hash under every configured key, so rows written before a rotation
are still found.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import ipaddress
import json
from functools import lru_cache
from typing import Literal

from cryptography.fernet import Fernet, InvalidToken, MultiFernet
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.kdf.hkdf import HKDF
from django.conf import settings

from django_eid.conf import eid_settings


class SensitiveText(str):
    """A ``str`` whose ``repr()`` shows only its last two characters.

    Django's technical 500 page, the error e-mails to ``ADMINS`` and ``%r`` log arguments
    render values with ``repr()``; the national identity number travels as this type, so
    none of them shows it, whatever frame or dict holds it. ``str()``, formatting,
    comparison, hashing and JSON give the plain value.
    """

    __slots__ = ()

    def __repr__(self) -> str:
        shown = self[-2:] if len(self) > 4 else ""
        return f"'{chr(0x2022) * (len(self) - len(shown))}{shown}'"


def _hkdf(material: bytes, info: bytes) -> bytes:
    return HKDF(algorithm=hashes.SHA256(), length=32, salt=b"django-eid", info=info).derive(
        material
    )


@lru_cache(maxsize=16)
def derived_key(secret_key: str) -> str:
    """The Fernet key used when ``ENCRYPTION_KEYS`` is unset."""
    return base64.urlsafe_b64encode(_hkdf(secret_key.encode(), b"django-eid:encryption")).decode()


def invalid_keys(keys: list[object]) -> list[int]:
    """Positions of the entries that are not Fernet keys."""
    bad = []
    for i, key in enumerate(keys):
        try:
            Fernet(key)  # type: ignore[arg-type]
        except (ValueError, TypeError):
            bad.append(i)
    return bad


def configured_keys() -> tuple[str, ...]:
    """``ENCRYPTION_KEYS``, or the keys derived from ``SECRET_KEY`` and its fallbacks."""
    if eid_settings.ENCRYPTION_KEYS:
        return eid_settings.ENCRYPTION_KEYS
    secrets = [settings.SECRET_KEY, *getattr(settings, "SECRET_KEY_FALLBACKS", ())]
    return tuple(derived_key(str(secret)) for secret in secrets)


@lru_cache(maxsize=8)
def _fernet(keys: tuple[str, ...]) -> MultiFernet:
    return MultiFernet([Fernet(k) for k in keys])


@lru_cache(maxsize=8)
def _hash_keys(keys: tuple[str, ...]) -> tuple[bytes, ...]:
    return tuple(_hkdf(base64.urlsafe_b64decode(k), b"django-eid:lookup") for k in keys)


def encrypt(plaintext: str) -> str:
    """``plaintext`` encrypted under the current (first) key, as a Fernet token."""
    return _fernet(configured_keys()).encrypt(plaintext.encode()).decode()


class DecryptionError(Exception):
    """No configured key decrypts the value (a key was removed before re-encryption)."""


def decrypt(token: str) -> str:
    """The plaintext of ``token``, under whichever configured key encrypted it.

    Raises :class:`DecryptionError` when none does.
    """
    try:
        return _fernet(configured_keys()).decrypt(token.encode()).decode()
    except InvalidToken as err:
        raise DecryptionError(
            "Cannot decrypt a stored national identity number with DJANGO_EID['ENCRYPTION_KEYS']; "
            "was a key removed before running eid_reencrypt?"
        ) from err


#: What to do about numbers no configured key decrypts (for ``eid_check`` and
#: ``eid_reencrypt``): the key is only missing from the settings until proven lost.
LOST_KEY_ADVICE = (
    "Put the key they were encrypted with back: the old SECRET_KEY into "
    "SECRET_KEY_FALLBACKS (ENCRYPTION_KEYS unset), or the removed key after the first in "
    "DJANGO_EID['ENCRYPTION_KEYS']; then run eid_reencrypt before removing it again. "
    "Without that key the numbers are lost: the rows still work without them, and "
    "eid_purge deletes or anonymizes them."
)


def unreadable_summary(pks: list[int], *, shown: int = 20, count: int | None = None) -> str:
    """``"N identification(s) cannot be decrypted ... (ids: 1, 2, ...)"``: ids, no data.

    ``count``: how many there are, when ``pks`` holds only the first of them.
    """
    total = len(pks) if count is None else count
    ids = ", ".join(str(pk) for pk in pks[:shown])
    more = f" and {total - shown} more" if total > shown else ""
    return (
        f"{total} identification(s) cannot be decrypted with the configured keys "
        f"(ids: {ids}{more})."
    )


class Unreadable:
    """A stored national identity number that no configured key decrypts.

    What :class:`~django_eid.fields.EncryptedTextField` reads instead of raising, so that a
    key removed too early (``SECRET_KEY`` rotated without ``SECRET_KEY_FALLBACKS``, a key
    dropped from ``ENCRYPTION_KEYS`` before ``eid_reencrypt``) costs the number, not every
    page that loads the row. It is falsy, as "no number known" is to code that asks
    ``if row.social_security_number``; it is not a ``str``, and it equals nothing but
    itself, so no comparison of persons takes two lost numbers for the same one. Saving
    the row writes the ciphertext back as it was: putting the key back makes it readable.
    """

    __slots__ = ("ciphertext",)

    def __init__(self, ciphertext: str) -> None:
        self.ciphertext = ciphertext

    def __bool__(self) -> Literal[False]:
        return False

    def __repr__(self) -> str:
        return "<Unreadable national identity number>"

    def __str__(self) -> str:
        # What a template showing the number renders: never a value that passes for one.
        return ""


def readable(token: str) -> bool:
    """True when a configured key decrypts ``token`` (a stored Fernet token)."""
    try:
        _fernet(configured_keys()).decrypt(token.encode())
    except InvalidToken:
        return False
    return True


def is_current(token: str) -> bool:
    """True when ``token`` was encrypted under the first (current) key."""
    try:
        _fernet(configured_keys()[:1]).decrypt(token.encode())
    except InvalidToken:
        return False
    return True


def _digest(key: bytes, value: str) -> str:
    return hmac.new(key, value.encode(), hashlib.sha256).hexdigest()


def lookup_hash(value: str) -> str:
    """The keyed hash stored beside the encrypted value (current key)."""
    return _digest(_hash_keys(configured_keys())[0], value)


def lookup_hashes(value: str) -> list[str]:
    """The keyed hash under every configured key, for lookups across a rotation."""
    return [_digest(k, value) for k in _hash_keys(configured_keys())]


@lru_cache(maxsize=8)
def secret_hash(secret: str) -> str:
    """The SHA-256 of a random one-time secret, hex: what is stored of it. (A secret of 256
    random bits needs no key or salt: nothing about it can be guessed from its hash.)"""
    return hashlib.sha256(secret.encode()).hexdigest()


def same_secret(secret: str | None, stored: str) -> bool:
    """Whether ``secret`` is the one whose :func:`secret_hash` is ``stored`` (constant time)."""
    if not secret or not stored:
        return False
    return hmac.compare_digest(secret_hash(secret), stored)


def _device_keys(keys: tuple[str, ...]) -> tuple[bytes, ...]:
    return tuple(_hkdf(base64.urlsafe_b64decode(k), b"django-eid:device") for k in keys)


def address_hash(ip_address: str | None) -> str:
    """A keyed hash of a client's address (current key), for the audit trail: two events of
    one address can be told apart from others without the address being kept. ``""`` for
    no valid address. A rotated key makes new hashes: addresses match within one key's time.
    """
    ip = normalized_ip(ip_address)
    if ip is None:
        return ""
    return _digest(_address_key(configured_keys()[0]), ip)[:32]


@lru_cache(maxsize=8)
def _address_key(key: str) -> bytes:
    return _hkdf(base64.urlsafe_b64decode(key), b"django-eid:address")


def normalized_ip(value: str | None) -> str | None:
    """``value`` as one spelling of its address, or ``None`` when it is not an IP address.

    IPv6 in its compressed, lower-case form; an IPv4-mapped IPv6 address (``::ffff:192.0.2.7``,
    what a dual-stack listener reports for an IPv4 client) as the IPv4 address. So the start's
    ``REMOTE_ADDR`` and the broker's ``EnvironmentInfo.IPAddress`` compare equal however each
    side spells the same address.
    """
    if not value or not isinstance(value, str):
        return None
    try:
        address = ipaddress.ip_address(value)
    except ValueError:
        return None
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return str(address.ipv4_mapped)
    return str(address)


def _device_value(ip_address: str | None, user_agent: str | None) -> str | None:
    """What the device hash is made of, or ``None`` when the device cannot be recognised: an
    address that is not a valid IP address, or no user agent. Missing values never match
    each other."""
    ip = normalized_ip(ip_address)
    if ip is None or not user_agent or not user_agent.strip():
        return None
    return json.dumps([ip, user_agent])


def device_key(ip_address: str | None, user_agent: str | None) -> str:
    """A keyed hash of a browser's IP address and user agent (current key): the device of a
    start, kept instead of the values themselves.

    ``""`` when the device cannot be recognised (no valid IP address, or no user agent):
    :func:`same_device` never matches such a row, so it is finished only by its callback.
    """
    value = _device_value(ip_address, user_agent)
    if value is None:
        return ""
    return _digest(_device_keys(configured_keys())[0], value)


def same_device(stored: str, ip_address: str | None, user_agent: str | None) -> bool:
    """Whether ``stored`` (a :func:`device_key`) is this IP address and user agent, under any
    configured key (a rotation between the start and the check does not break it).

    False unless both sides are a device: ``stored`` is not empty, ``ip_address`` is a valid
    IP address and ``user_agent`` is not empty. Addresses are compared normalised
    (:func:`normalized_ip`).
    """
    if not stored:
        return False
    value = _device_value(ip_address, user_agent)
    if value is None:
        return False
    return any(
        hmac.compare_digest(stored, _digest(key, value)) for key in _device_keys(configured_keys())
    )
