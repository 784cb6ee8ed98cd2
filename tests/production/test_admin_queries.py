"""The admin's changelist on PostgreSQL: every statement it sends on the identification
table is served by an index (``seq_scans``: a plan with sequential scans priced out that
still reads the table in full is a query no index can serve), and an unfiltered list shows
the planner's estimate rather than counting the table.
"""

from __future__ import annotations

import datetime
from typing import Any

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from django_eid import admin as eid_admin
from django_eid.models import AuditEvent, Identification
from tests.production.test_indexes import IDENTIFICATIONS, seq_scans

pytestmark = [pytest.mark.production, pytest.mark.django_db]

CHANGELIST = "/admin/django_eid/identification/"
#: Every kind of changelist page: unfiltered, each filter, a search, sorted, a later page.
PAGES: list[dict[str, str]] = [
    {},
    {"status__exact": "ERROR"},
    {"status__exact": "PENDING"},
    {"status__exact": "SUCCESS"},
    {"identity_provider": "NO_BANKID_WEB"},
    {"user__id__exact": "1"},
    {"created_at__gte": "2026-01-01 00:00:00+00:00", "created_at__lt": "2026-02-01 00:00:00+00:00"},
    {"status__exact": "ERROR", "identity_provider": "SWE_BANKID"},
    {"q": "user-3"},
    {"q": "user-3@example.com"},
    {"q": "ref-7"},
    {"q": "pid-7"},
    {"q": "Person 7"},
    {"o": "0"},
    {"o": "-5"},
    {"p": "2"},
]


@pytest.fixture
def staff(django_user_model: Any, monkeypatch: pytest.MonkeyPatch) -> Client:
    root = django_user_model.objects.create_superuser("root", "root@example.com", "pw")
    users = [
        django_user_model.objects.create_user(f"user-{i}", f"user-{i}@example.com", "pw")
        for i in range(5)
    ]
    now = timezone.now()
    statuses = ["SUCCESS", "SUCCESS", "ERROR", "PENDING", "ABORTED"]
    Identification.objects.bulk_create(
        Identification(
            user=users[i % 5],
            status=statuses[i % 5],
            identity_provider=["NO_BANKID_WEB", "SWE_BANKID"][i % 2],
            identity_provider_unique_id=f"pid-{i}",
            reference=f"ref-{i}",
            request_id=f"req-{i}",
            name=f"Person {i}",
            created_at=now - datetime.timedelta(hours=i),
        )
        for i in range(40)
    )
    with connection.cursor() as cursor:
        cursor.execute(f"ANALYZE {IDENTIFICATIONS}")
    # Pages of 5 rows, counted up to 10: the estimate, "more than" and page 2 are reached.
    monkeypatch.setattr(eid_admin, "COUNT_LIMIT", 10)
    monkeypatch.setattr(eid_admin.IdentificationAdmin, "list_per_page", 5)
    client = Client()
    client.force_login(root)
    return client


@pytest.mark.parametrize(
    "params", PAGES, ids=lambda p: "&".join(f"{k}={v}" for k, v in p.items()) or "all"
)
def test_every_changelist_query_uses_an_index(staff: Client, params: dict[str, str]) -> None:
    with CaptureQueriesContext(connection) as captured:
        assert staff.get(CHANGELIST, params).status_code == 200
    statements = [q["sql"] for q in captured.captured_queries if f'"{IDENTIFICATIONS}"' in q["sql"]]
    assert statements  # the page's rows were read
    assert seq_scans(statements) == {}


def test_an_unfiltered_list_shows_the_planners_estimate(staff: Client) -> None:
    with CaptureQueriesContext(connection) as captured:
        response = staff.get(CHANGELIST)
    paginator = response.context["cl"].paginator
    assert paginator.estimated
    assert 30 <= paginator.count <= 50  # 40 rows, as ANALYZE saw them
    assert f"about {paginator.count} identifications" in response.content.decode()
    assert paginator.num_pages == 2  # the first COUNT_LIMIT rows
    assert not [q for q in captured.captured_queries if "COUNT(" in q["sql"].upper()]
    # A filter is counted, up to the limit.
    response = staff.get(CHANGELIST, {"status__exact": "SUCCESS"})
    paginator = response.context["cl"].paginator
    assert (paginator.count, paginator.capped) == (11, True)
    assert "more than 10 identifications" in response.content.decode()
    response = staff.get(CHANGELIST, {"status__exact": "ERROR"})
    assert (response.context["cl"].paginator.count, response.context["cl"].paginator.exact) == (
        8,
        True,
    )


EVENTS_CHANGELIST = "/admin/django_eid/auditevent/"
EVENTS = AuditEvent._meta.db_table


@pytest.mark.parametrize(
    "params",
    # The filter by kind by the (kind, at) index.
    [{}, {"q": "42"}, {"q": "user-3"}, {"o": "1"}, {"p": "2"}, {"kind__exact": "returned"}],
    ids=lambda p: "&".join(f"{k}={v}" for k, v in p.items()) or "all",
)
def test_the_audit_trails_list_reads_no_table_in_full(
    staff: Client, params: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Newest first by the (at) index, the search by (identification_id) and (user_id, at),
    the filter by (kind, at)."""
    now = timezone.now()
    AuditEvent.objects.bulk_create(
        AuditEvent(
            at=now - datetime.timedelta(minutes=i),
            kind=["started", "returned"][i % 2],
            identification_id=i,
            user_id=str(i % 7),
        )
        for i in range(60)
    )
    with connection.cursor() as cursor:
        cursor.execute(f"ANALYZE {EVENTS}")
    monkeypatch.setattr(eid_admin.AuditEventAdmin, "list_per_page", 5)
    with CaptureQueriesContext(connection) as captured:
        assert staff.get(EVENTS_CHANGELIST, params).status_code == 200
    statements = [q["sql"] for q in captured.captured_queries if f'"{EVENTS}"' in q["sql"]]
    assert statements
    scanned = {}
    with connection.cursor() as cursor:
        cursor.execute("SET enable_seqscan = off")
        try:
            for sql in statements:
                cursor.execute(f"EXPLAIN {sql}")
                plan = "\n".join(line for (line,) in cursor.fetchall())
                if f"Seq Scan on {EVENTS}" in plan:
                    scanned[sql] = plan
        finally:
            cursor.execute("RESET enable_seqscan")
    assert scanned == {}
