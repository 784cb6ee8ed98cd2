"""What the database holds of the national identity number, read past the model (no
decryption): for the tests of the encrypted field, of a lost key and of the commands that
rewrite it."""

from __future__ import annotations

from django.db import connection


def stored_numbers() -> dict[int, tuple[str | None, str | None]]:
    """Every row's number and its lookup hash as stored, by primary key."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT id, social_security_number, social_security_number_hash "
            "FROM django_eid_identification ORDER BY id"
        )
        return {pk: (number, digest) for pk, number, digest in cursor.fetchall()}


def ciphertexts() -> dict[int, str | None]:
    """Every row's number as stored (its ciphertext, or ``None``), by primary key."""
    return {pk: number for pk, (number, _) in stored_numbers().items()}
