"""(d) Migrations: complete, and they apply on SQLite and PostgreSQL, forwards and back."""

from __future__ import annotations

import io
import os
import secrets
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings
from django.core.management import call_command
from django.db import connection

ROOT = Path(__file__).resolve().parents[2]
TABLE = "django_eid_identification"


@pytest.mark.django_db
def test_models_and_migrations_agree() -> None:
    """``makemigrations --check --dry-run`` is clean (exits 0, writes nothing)."""
    out = io.StringIO()
    call_command("makemigrations", "--check", "--dry-run", stdout=out, stderr=out)
    assert "No changes detected" in out.getvalue()


#: Fresh database: migrate everything, verify, unapply django-eid, reapply, verify.
STEPS = (
    ("migrate", "--noinput"),
    ("migrate", "--check"),  # exits 1 if anything is left unapplied
    ("migrate", "django_eid", "zero", "--noinput"),
    ("migrate", "django_eid", "--noinput"),
    ("migrate", "--check"),
)
#: The steps in one fresh interpreter (one Django start-up instead of one per step). The
#: system checks are not what this is about (tests.settings runs the sandbox with DEBUG off,
#: which a check refuses): ``call_command`` skips them.
DRIVER = """
import sys
import django
from django.core.management import call_command

django.setup()
for args in STEPS:
    try:
        call_command(*args, verbosity=0)
    except SystemExit as exit:
        if exit.code:
            sys.exit(f"{args}: exit status {exit.code}")
"""


def migrate_from_scratch_and_back(database_url: str) -> None:
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "tests.settings",
        "DATABASE_URL": database_url,
        "EID_TEST_REDIS_URL": "",
        "PYTHONPATH": str(ROOT),
    }
    done = subprocess.run(  # noqa: S603 - our own interpreter and arguments
        [sys.executable, "-c", f"STEPS = {STEPS!r}\n{DRIVER}"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, (done.stdout[-2000:], done.stderr[-2000:])


@pytest.mark.own_process
def test_migrations_apply_on_a_fresh_sqlite_database(tmp_path: Path) -> None:
    db = tmp_path / "fresh.sqlite3"
    migrate_from_scratch_and_back(f"sqlite:///{db}")
    import sqlite3
    from contextlib import closing

    # A sqlite3 connection's "with" ends the transaction but does not close it.
    with closing(sqlite3.connect(db)) as conn:
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    assert TABLE in tables


@pytest.fixture
def fresh_postgres_database() -> Iterator[str]:
    """A new, empty PostgreSQL database next to the test database; dropped afterwards."""
    import psycopg

    db = settings.DATABASES["default"]
    name = f"eid_migrate_{secrets.token_hex(4)}"
    params: dict[str, Any] = {
        "host": db["HOST"] or "127.0.0.1",
        "port": int(db["PORT"] or 5432),
        "user": db["USER"],
        "password": db["PASSWORD"],
        "dbname": "postgres",
        "autocommit": True,
    }
    with psycopg.connect(**params) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    try:
        yield (f"postgres://{db['USER']}:{db['PASSWORD']}@{params['host']}:{params['port']}/{name}")
    finally:
        with psycopg.connect(**params) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}"')


@pytest.mark.production
def test_migrations_apply_on_a_fresh_postgresql_database(fresh_postgres_database: str) -> None:
    migrate_from_scratch_and_back(fresh_postgres_database)


@pytest.mark.production
@pytest.mark.django_db(transaction=True)
def test_the_test_database_has_the_migrated_schema_on_postgresql() -> None:
    """The schema the migrations built on PostgreSQL: unique keys and indexes in place."""
    assert connection.vendor == "postgresql"
    with connection.cursor() as cursor:
        constraints = connection.introspection.get_constraints(cursor, TABLE)
        cursor.execute(
            "SELECT character_maximum_length FROM information_schema.columns "
            "WHERE table_name = %s AND column_name = 'request_id'",
            [TABLE],
        )
        (request_id_length,) = cursor.fetchone()
        cursor.execute(
            "SELECT indexdef FROM pg_indexes WHERE tablename = %s AND indexname = %s",
            [TABLE, "django_eid_pending_due"],
        )
        (pending_due,) = cursor.fetchone()
    unique = {tuple(c["columns"]) for c in constraints.values() if c["unique"]}
    assert {("reference",), ("request_id",)} <= unique  # external_id: 0009
    indexed = {tuple(c["columns"]) for c in constraints.values() if c["index"]}
    assert ("user_id", "status") in indexed
    # eid_reconcile's claim: pending rows only (migration 0005).
    assert "(created_at, claimed_until) WHERE ((status)::text = 'PENDING'::text)" in pending_due
    # The broker's request id is long (200 characters in the public sample).
    assert request_id_length >= 255
