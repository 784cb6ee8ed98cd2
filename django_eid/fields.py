"""A text field stored encrypted (Fernet) and read back as plain text."""

from __future__ import annotations

from typing import Any

from django.db import models

from django_eid import crypto


class EncryptedTextField(models.TextField):  # type: ignore[type-arg]
    """Plain ``str`` in Python, Fernet ciphertext in the database.

    Not searchable: store a :func:`django_eid.crypto.lookup_hash` beside it.
    """

    description = "Text encrypted at rest"

    def from_db_value(self, value: str | None, expression: Any, connection: Any) -> str | None:
        if value is None or value == "":
            return value
        return crypto.SensitiveText(crypto.decrypt(value))

    def get_prep_value(self, value: Any) -> Any:
        value = super().get_prep_value(value)
        if value is None or value == "":
            return value
        return crypto.encrypt(str(value))
