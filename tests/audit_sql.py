"""What the audit trail adds to a request's statements, for the tests that count them."""

from __future__ import annotations

from django.db import connection


def event_statements(changes: int = 1) -> int:
    """Statements the audit events of ``changes`` changes add: none on PostgreSQL (an event
    is one statement with its change), else each event's ``INSERT`` and the savepoint (or
    transaction) pair around it and its change."""
    return 0 if connection.vendor == "postgresql" else 3 * changes
