"""The audit trail's admin (``AuditEventAdmin``): view only, filters whose choices need no
query, a search of exact ids, bounded queries as for the identifications; and a deletion of
identifications in the admin leaves a ``purged`` event each (outcome ``admin``)."""

from __future__ import annotations

import datetime
from typing import Any

import pytest
from django.contrib.auth.models import Permission
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from django_eid import admin as eid_admin
from django_eid.models import AuditEvent, Identification

pytestmark = pytest.mark.django_db

Kind = AuditEvent.Kind
CHANGELIST = "/admin/django_eid/auditevent/"
TABLE = AuditEvent._meta.db_table


@pytest.fixture
def events() -> list[AuditEvent]:
    now = timezone.now()
    rows = [
        (Kind.STARTED, 101, "42", "PENDING", "verify"),
        (Kind.RETURNED, 101, "42", "SUCCESS", "verify"),
        (Kind.STARTED, 102, "", "PENDING", "login"),
        (Kind.EXPIRED, 102, "", "EXPIRED", "login"),
        (Kind.PURGED, 77, "43", "ERROR", "signup"),
    ]
    return AuditEvent.objects.bulk_create(
        AuditEvent(
            at=now - datetime.timedelta(minutes=len(rows) - i),
            kind=kind,
            identification_id=ident,
            user_id=user,
            status=status,
            purpose=purpose,
            provider="no_bankid",
        )
        for i, (kind, ident, user, status, purpose) in enumerate(rows)
    )


def listed(response: Any) -> list[int]:
    return [obj.pk for obj in response.context["cl"].result_list]


def test_the_list_is_newest_first_and_filters_by_kind(
    superuser_client: Client, events: list[AuditEvent]
) -> None:
    response = superuser_client.get(CHANGELIST)
    assert response.status_code == 200
    assert listed(response) == [e.pk for e in reversed(events)]
    assert "date_hierarchy" not in response.content.decode()
    for params, expected in [
        ({"kind__exact": "started"}, [events[2], events[0]]),
        ({"kind__exact": "returned"}, [events[1]]),
    ]:
        assert listed(superuser_client.get(CHANGELIST, params)) == [e.pk for e in expected]


def test_the_filters_choices_need_no_query(
    superuser_client: Client, events: list[AuditEvent]
) -> None:
    with CaptureQueriesContext(connection) as captured:
        response = superuser_client.get(CHANGELIST)
    assert not [q for q in captured.captured_queries if "DISTINCT" in q["sql"].upper()]
    cl = response.context["cl"]
    titles = {
        str(spec.title): [str(c["display"]) for c in spec.choices(cl)] for spec in cl.filter_specs
    }
    assert titles == {"event": ["All", *[str(label) for label in Kind.labels]]}
    assert titles["event"] == ["All", *[str(label) for label in Kind.labels]]


def test_the_search_matches_an_identification_or_a_user_exactly(
    superuser_client: Client, events: list[AuditEvent]
) -> None:
    assert listed(superuser_client.get(CHANGELIST, {"q": "101"})) == [events[1].pk, events[0].pk]
    assert listed(superuser_client.get(CHANGELIST, {"q": " 43 "})) == [events[4].pk]
    assert listed(superuser_client.get(CHANGELIST, {"q": "4"})) == []  # no partial match
    assert listed(superuser_client.get(CHANGELIST, {"q": "9" * 30})) == []  # not a bigint
    with CaptureQueriesContext(connection) as captured:
        superuser_client.get(CHANGELIST, {"q": "42"})
    assert not [q for q in captured.captured_queries if "LIKE" in q["sql"].upper()]


@pytest.mark.parametrize(
    "lookup", ["outcome", "status", "purpose", "provider__icontains", "at__year", "user_id"]
)
def test_a_url_filters_only_by_the_filters_lookups(
    superuser_client: Client, events: list[AuditEvent], lookup: str
) -> None:
    assert superuser_client.get(CHANGELIST, {lookup: "x"}).status_code == 400


@pytest.mark.parametrize(
    "params", [{}, {"kind__exact": "started"}, {"q": "42"}, {"o": "1"}, {"p": "2"}], ids=str
)
def test_the_list_runs_a_fixed_number_of_bounded_queries(
    superuser_client: Client,
    events: list[AuditEvent],
    params: dict[str, str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(eid_admin, "COUNT_LIMIT", 2)
    monkeypatch.setattr(eid_admin.AuditEventAdmin, "list_per_page", 1)
    superuser_client.get(CHANGELIST)
    with CaptureQueriesContext(connection) as captured:
        response = superuser_client.get(CHANGELIST, params)
    assert response.status_code == 200
    statements = [q["sql"] for q in captured.captured_queries if f'"{TABLE}"' in q["sql"]]
    assert len(statements) == 2, statements  # the count, capped, and the page
    (count,) = [sql for sql in statements if "COUNT(" in sql.upper()]
    assert " LIMIT 3" in count


def test_nobody_adds_changes_or_deletes_an_event(
    superuser_client: Client, events: list[AuditEvent]
) -> None:
    event = events[0]
    page = f"{CHANGELIST}{event.pk}/change/"
    response = superuser_client.get(page)
    assert response.status_code == 200  # viewed
    html = response.content.decode()
    assert 'name="_save"' not in html
    assert 'name="action"' not in superuser_client.get(CHANGELIST).content.decode()
    assert superuser_client.get(f"{CHANGELIST}add/").status_code == 403
    assert superuser_client.post(page, {"kind": "purged"}).status_code == 403
    assert (
        superuser_client.post(f"{CHANGELIST}{event.pk}/delete/", {"post": "yes"}).status_code == 403
    )
    assert AuditEvent.objects.get(pk=event.pk).kind == Kind.STARTED


def test_a_staff_user_sees_the_trail_with_the_view_permission_only(
    django_user_model: Any, events: list[AuditEvent]
) -> None:
    staff = django_user_model.objects.create_user("staff", password="pw", is_staff=True)
    client = Client()
    client.force_login(staff)
    assert client.get(CHANGELIST).status_code == 403
    staff.user_permissions.add(Permission.objects.get(codename="view_auditevent"))
    assert client.get(CHANGELIST).status_code == 200


# -- a deletion of identifications in the admin ---------------------------------------------------
def make(user: Any) -> Identification:
    row: Identification = Identification.objects.create(
        user=user,
        status=Identification.Status.SUCCESS,
        name="Nordmann, Kari",
        identity_provider="NO_BANKID_WEB",
        level_of_assurance="high",
        completed_at=timezone.now(),
    )
    return row


def purged() -> list[tuple[Any, ...]]:
    return sorted(
        AuditEvent.objects.filter(kind=Kind.PURGED).values_list(
            "identification_id", "user_id", "status", "outcome", "provider"
        )
    )


def test_a_deletion_in_the_admin_leaves_a_purged_event(
    superuser_client: Client, alice: Any
) -> None:
    row = make(alice)
    url = f"/admin/django_eid/identification/{row.pk}/delete/"
    assert superuser_client.post(url, {"post": "yes"}).status_code == 302
    assert not Identification.objects.filter(pk=row.pk).exists()
    assert purged() == [(row.pk, str(alice.pk), "SUCCESS", "admin", "NO_BANKID_WEB")]


def test_the_delete_action_leaves_a_purged_event_for_each_row(
    superuser_client: Client, alice: Any, bob: Any
) -> None:
    rows = [make(alice), make(bob), make(alice)]
    kept = make(bob)
    response = superuser_client.post(
        "/admin/django_eid/identification/",
        {"action": "delete_selected", "post": "yes", "_selected_action": [r.pk for r in rows]},
    )
    assert response.status_code == 302
    assert purged() == sorted(
        (r.pk, str(r.user_id), "SUCCESS", "admin", "NO_BANKID_WEB") for r in rows
    )
    assert list(Identification.objects.values_list("pk", flat=True)) == [kept.pk]


def test_a_deletion_that_fails_in_the_admin_leaves_no_event(
    superuser_client: Client, alice: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The event and the deletion share a transaction."""
    rows = [make(alice), make(alice)]

    class Refused(Exception):
        pass

    def fail(self: Any, request: Any, queryset: Any) -> None:
        raise Refused

    monkeypatch.setattr("django.contrib.admin.ModelAdmin.delete_queryset", fail)
    with pytest.raises(Refused):
        superuser_client.post(
            "/admin/django_eid/identification/",
            {"action": "delete_selected", "post": "yes", "_selected_action": [r.pk for r in rows]},
        )
    assert purged() == []
    assert Identification.objects.count() == 2
