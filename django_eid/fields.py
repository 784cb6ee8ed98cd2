"""A text field stored encrypted (Fernet) and read back as plain text."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django.core.exceptions import FieldError
from django.db import models
from django.db.models.lookups import Exact

from django_eid import crypto

_NOT_SEARCHABLE = (
    "An encrypted field can only be tested for NULL (isnull). Search the national identity "
    "number with Identification.objects.with_social_security_number()."
)


if TYPE_CHECKING:
    # What mypy sees a row's value as: a number it decrypted, one it could not, or none.
    _TextField = models.TextField[str | None, str | crypto.Unreadable | None]
else:
    _TextField = models.TextField


class _ExactNone(Exact):
    """``field=None`` only: Django turns it into ``IS NULL``.

    Any other value would be encrypted under a fresh random IV and never match.
    """

    def __init__(self, lhs: Any, rhs: Any) -> None:
        if rhs is not None:
            raise FieldError(_NOT_SEARCHABLE)
        super().__init__(lhs, rhs)


class EncryptedTextField(_TextField):
    """Plain ``str`` in Python, Fernet ciphertext in the database.

    Not searchable: store a :func:`django_eid.crypto.lookup_hash` beside it. Lookups
    other than ``isnull`` raise ``FieldError``: an ``exact`` match could never hit, and
    pattern lookups (``startswith``, ``contains`` ...) would send digits of the number
    to the database in clear. A value no configured key decrypts reads as
    :class:`django_eid.crypto.Unreadable`, and is saved back unchanged.
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

    def from_db_value(
        self, value: str | None, expression: Any, connection: Any
    ) -> str | crypto.Unreadable | None:
        if value is None or value == "":
            return value
        try:
            return crypto.SensitiveText(crypto.decrypt(value))
        except crypto.DecryptionError:
            # A key removed too early costs this value, not every query that loads the row.
            return crypto.Unreadable(value)

    def to_python(self, value: Any) -> Any:
        if isinstance(value, crypto.Unreadable):
            return value  # full_clean() must not turn it into "" (that would then be saved)
        return super().to_python(value)

    def get_prep_value(self, value: Any) -> Any:
        if isinstance(value, crypto.Unreadable):
            # Written back as it was read: an empty value would destroy the number for good,
            # while the ciphertext reads again once its key is back.
            return value.ciphertext
        value = super().get_prep_value(value)
        if value is None or value == "":
            return value
        return crypto.encrypt(str(value))

    def value_to_string(self, obj: Any) -> str:
        value = self.value_from_object(obj)
        if isinstance(value, crypto.Unreadable):
            # dumpdata would write a blank that loaddata stores as "no number".
            raise crypto.DecryptionError(
                f"Cannot serialize the national identity number of identification {obj.pk}: "
                "no configured key decrypts it."
            )
        return super().value_to_string(obj)
