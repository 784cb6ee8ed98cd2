"""A text field stored encrypted (Fernet) and read back as plain text."""

from __future__ import annotations

from typing import Any

from django.core.exceptions import FieldError
from django.db import models
from django.db.models.lookups import Exact

from django_eid import crypto

_NOT_SEARCHABLE = (
    "An encrypted field can only be tested for NULL (isnull). Search the national identity "
    "number with Identification.objects.with_social_security_number()."
)


class _ExactNone(Exact):
    """``field=None`` only: Django turns it into ``IS NULL``.

    Any other value would be encrypted under a fresh random IV and never match.
    """

    def __init__(self, lhs: Any, rhs: Any) -> None:
        if rhs is not None:
            raise FieldError(_NOT_SEARCHABLE)
        super().__init__(lhs, rhs)


class EncryptedTextField(models.TextField):  # type: ignore[type-arg]
    """Plain ``str`` in Python, Fernet ciphertext in the database.

    Not searchable: store a :func:`django_eid.crypto.lookup_hash` beside it. Lookups
    other than ``isnull`` raise ``FieldError``: an ``exact`` match could never hit, and
    pattern lookups (``startswith``, ``contains`` ...) would send digits of the number
    to the database in clear.
    """

    description = "Text encrypted at rest"

    def get_lookup(self, lookup_name: str) -> Any:
        if lookup_name == "exact":
            return _ExactNone
        if lookup_name == "isnull":
            return super().get_lookup(lookup_name)
        raise FieldError(_NOT_SEARCHABLE)

    def get_transform(self, name: str) -> Any:
        raise FieldError(_NOT_SEARCHABLE)

    def from_db_value(self, value: str | None, expression: Any, connection: Any) -> str | None:
        if value is None or value == "":
            return value
        return crypto.SensitiveText(crypto.decrypt(value))

    def get_prep_value(self, value: Any) -> Any:
        value = super().get_prep_value(value)
        if value is None or value == "":
            return value
        return crypto.encrypt(str(value))
