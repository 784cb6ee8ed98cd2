"""Migration 0003: rows that ``eid_purge --anonymize`` stripped before ``anonymized_at`` existed
get it; no other row does.

Runs on the test database (SQLite by default, PostgreSQL in the production tier), as
tests/production/test_migrations.py's SQLite test does without a marker: the schema goes back
to 0002, rows are written through the historical model, 0003 is applied, and the schema is
brought back to the latest migration whatever happens, so the other tests are unaffected.
"""

from __future__ import annotations

import datetime
from collections.abc import Iterator
from typing import Any

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.db.migrations.state import StateApps
from django.utils import timezone

APP = "django_eid"
BEFORE = [(APP, "0002_person_claims")]
AFTER = [(APP, "0003_gates_and_national_id")]


def migrate(targets: list[tuple[str, str]]) -> StateApps:
    """Migrate the test database to ``targets``; the historical apps there."""
    executor = MigrationExecutor(connection)
    executor.migrate(targets)
    executor.loader.build_graph()  # the applied set changed
    return executor.loader.project_state(targets).apps


def latest() -> list[tuple[str, str]]:
    return MigrationExecutor(connection).loader.graph.leaf_nodes(APP)


@pytest.fixture
def at_0002() -> Iterator[StateApps]:
    """The schema at 0002, and the latest again after the test."""
    try:
        yield migrate(BEFORE)
    finally:
        migrate(latest())


@pytest.mark.django_db(transaction=True)
def test_0003_marks_only_the_rows_anonymized_before_it(at_0002: StateApps) -> None:
    apps = at_0002
    User = apps.get_model("auth", "User")
    Identification = apps.get_model(APP, "Identification")
    assert "anonymized_at" not in {f.name for f in Identification._meta.get_fields()}

    user = User.objects.create(username="kari")
    then = timezone.now() - datetime.timedelta(days=400)
    finished: dict[str, Any] = {"user": user, "created_at": then, "completed_at": then}
    # What eid_purge --anonymize of 0.1.0 left: a finished row, every personal field blank,
    # the statistics kept.
    anonymized = Identification.objects.create(
        **finished, status="SUCCESS", identity_provider="NO_BANKID_WEB"
    )
    anonymized_failure = Identification.objects.create(
        **finished, status="ERROR", error_status="TIMEOUT", error_code="TIMEOUT"
    )
    # A finished row the flow left: it keeps its broker request id.
    kept = Identification.objects.create(
        **finished,
        status="SUCCESS",
        request_id="1234567890123456789abc",
        identity_provider="NO_BANKID_WEB",
    )
    # A start that failed at the broker: no request id, but its error message.
    failed_start = Identification.objects.create(
        **finished,
        status="ERROR",
        error_code="EidUnavailable",
        error_message="create_session: the broker could not be reached",
    )
    # A pending row has no request id yet either... and must stay unmarked.
    pending = Identification.objects.create(user=user, created_at=then, status="PENDING")
    rows = {
        "anonymized": anonymized.pk,
        "anonymized_failure": anonymized_failure.pk,
        "kept": kept.pk,
        "failed_start": failed_start.pk,
        "pending": pending.pk,
    }
    assert pending.request_id is None
    assert pending.error_message == ""

    before = timezone.now()
    apps = migrate(AFTER)
    after = timezone.now()

    Identification = apps.get_model(APP, "Identification")
    marked = dict(Identification.objects.values_list("pk", "anonymized_at"))
    assert {name for name, pk in rows.items() if marked[pk] is not None} == {
        "anonymized",
        "anonymized_failure",
    }
    for name in ("anonymized", "anonymized_failure"):
        assert before <= marked[rows[name]] <= after
    # Nothing else about the rows changed, and the new fields start empty.
    row = Identification.objects.get(pk=rows["kept"])
    assert (row.status, row.request_id, row.national_id_country, row.national_id_kind) == (
        "SUCCESS",
        "1234567890123456789abc",
        "",
        "",
    )
    assert row.same_person is False
    assert Identification.objects.get(pk=rows["pending"]).status == "PENDING"
