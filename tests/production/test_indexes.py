"""The indexes on PostgreSQL (migration 0009): only those the app's queries use, and every
query a verification runs on the identification table is served by one.

The second test runs the flow through its public entry points, captures each statement it
sends, and asks PostgreSQL for the plan with sequential scans priced out: a ``Seq Scan`` on
the table is then a query that no index can serve (at a million rows, a full scan).
"""

from __future__ import annotations

from io import StringIO
from typing import Any

import pytest
from django.core.management import call_command
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from django_eid.models import Identification, PersonClaim
from django_eid.sandbox.persons import builtin_persons
from tests.production.helpers import fresh_clients, start, success_url
from tests.production.stub import BrokerStub

pytestmark = [pytest.mark.production, pytest.mark.django_db(transaction=True)]

IDENTIFICATIONS = Identification._meta.db_table
CLAIMS = PersonClaim._meta.db_table
#: The columns of each index, as docs/reference/models.md lists them.
EXPECTED = {
    IDENTIFICATIONS: {
        ("id",),
        ("reference",),
        ("request_id",),
        ("user_id", "status"),
        ("created_at",),
        ("created_at", "claimed_until"),
        ("identity_provider", "created_at"),
        ("identity_provider_unique_id",),
        ("social_security_number_hash",),
    },
    CLAIMS: {("id",), ("key",), ("identification_id",)},
}


def index_definitions(table: str) -> list[str]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT indexdef FROM pg_indexes WHERE tablename = %s", [table])
        return [definition for (definition,) in cursor.fetchall()]


def indexed_columns(table: str) -> list[tuple[str, ...]]:
    with connection.cursor() as cursor:
        found = connection.introspection.get_constraints(cursor, table)
    return [tuple(c["columns"]) for c in found.values() if c["index"] or c["unique"]]


@pytest.mark.parametrize("table", sorted(EXPECTED))
def test_each_table_has_only_the_indexes_its_queries_use(table: str) -> None:
    assert connection.vendor == "postgresql"
    columns = indexed_columns(table)
    assert sorted(columns) == sorted(EXPECTED[table])  # no index twice either
    assert len(index_definitions(table)) == len(EXPECTED[table])
    # Django's LIKE twins of indexed CharFields: no query of the app is a LIKE.
    assert not [d for d in index_definitions(table) if "pattern_ops" in d]


def test_the_person_lookups_index_only_the_rows_they_search() -> None:
    definitions = " ".join(index_definitions(IDENTIFICATIONS))
    assert "(identity_provider_unique_id) WHERE ((status)::text = 'SUCCESS'::text)" in definitions
    assert "(social_security_number_hash) WHERE (social_security_number_hash IS NOT NULL)" in (
        definitions
    )


def seq_scans(statements: list[str]) -> dict[str, str]:
    """Each statement on the identification table that PostgreSQL would scan in full."""
    scanned: dict[str, str] = {}
    with connection.cursor() as cursor:
        cursor.execute("SET enable_seqscan = off")
        try:
            for sql in statements:
                cursor.execute(f"EXPLAIN {sql}")
                plan = "\n".join(line for (line,) in cursor.fetchall())
                if f"Seq Scan on {IDENTIFICATIONS}" in plan:
                    scanned[sql] = plan
        finally:
            cursor.execute("RESET enable_seqscan")
    return scanned


def test_every_query_of_a_verification_uses_an_index(settings: Any, django_user_model: Any) -> None:
    kari = builtin_persons().NORWEGIAN
    with BrokerStub(person=kari) as stub:
        settings.DJANGO_EID = stub.settings(ONE_ACCOUNT_PER_PERSON=True)
        fresh_clients()
        with CaptureQueriesContext(connection) as captured:
            for name in ("kari", "kari-again"):  # the second account is refused
                browser = Client()
                user = django_user_model.objects.create_user(name, password="pw")
                browser.force_login(user)
                row = start(browser)
                assert browser.get(success_url(row, stub)).status_code in (200, 302)
                Identification.objects.verified_for(user, max_age=3600, min_age=18)
            Identification.objects.with_social_security_number(
                kari.national_identity_number
            ).exists()
            call_command("eid_reconcile", stdout=StringIO())
            call_command("eid_purge", "--older-than", "30d", stdout=StringIO())
            call_command("eid_purge", "--older-than", "30d", "--anonymize", stdout=StringIO())
            user.delete()
        fresh_clients()
    assert list(Identification.objects.values_list("status", flat=True)) == ["SUCCESS"]
    statements = [
        q["sql"]
        for q in captured.captured_queries
        if q["sql"].lstrip().startswith(("SELECT", "UPDATE", "DELETE"))
        and f'"{IDENTIFICATIONS}"' in q["sql"]
        and " WHERE " in q["sql"]
    ]
    assert len(statements) > 10  # the flow's queries were captured
    scanned = seq_scans(statements)
    assert not scanned, "\n\n".join(f"{sql}\n{plan}" for sql, plan in scanned.items())
