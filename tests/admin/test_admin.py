"""The read-only admin (``django_eid/admin.py``): the changelist's filters, search (with the
site's own user model too), counts and bounded queries, and the change page that shows
everything, the number masked, and edits nothing. A number under a lost key:
``tests/models/test_lost_key.py``; broker texts shown scrubbed: ``tests/privacy/``."""

from __future__ import annotations

import datetime
from collections.abc import Callable
from typing import Any

import pytest
from django.contrib.admin import site
from django.core.exceptions import FieldDoesNotExist
from django.db import connection
from django.db.models import Q
from django.test import Client, RequestFactory
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from django_eid import admin as eid_admin
from django_eid import brokers
from django_eid.models import Identification
from tests.fixtures_broker import API_SETTINGS, SSN

pytestmark = pytest.mark.django_db

Status = Identification.Status
TABLE = Identification._meta.db_table


def make(user: Any, status: str = Status.SUCCESS, **fields: Any) -> Identification:
    fields.setdefault("completed_at", timezone.now())
    row: Identification = Identification.objects.create(user=user, status=status, **fields)
    return row


CHANGELIST = "/admin/django_eid/identification/"


@pytest.fixture
def rows(alice: Any, bob: Any) -> list[Identification]:
    return [
        make(
            alice,
            name="Nordmann, Kari Marie",
            first_name="Kari",
            last_name="Nordmann",
            identity_provider="NO_BANKID_WEB",
            social_security_number=SSN,
            national_id_country="NO",
            date_of_birth=datetime.date(1971, 12, 31),
            request_id="req-1",
            raw={"RequestId": "req-1", "Status": "SUCCESS"},
        ),
        make(
            bob,
            Status.ERROR,
            name="Svensson, Sven",
            identity_provider="SWE_BANKID",
            error_status="TIMEOUT",
            request_id="req-2",
        ),
    ]


def listed(response: Any) -> set[int]:
    return {obj.pk for obj in response.context["cl"].result_list}


def test_the_changelist_lists_filters_and_searches(
    superuser_client: Client, rows: list[Identification]
) -> None:
    kari, sven = rows
    response = superuser_client.get(CHANGELIST)
    assert response.status_code == 200
    assert listed(response) == {kari.pk, sven.pk}
    html = response.content.decode()
    assert "Nordmann, Kari Marie" in html
    assert SSN not in html
    assert listed(superuser_client.get(CHANGELIST, {"status__exact": "ERROR"})) == {sven.pk}
    assert listed(superuser_client.get(CHANGELIST, {"identity_provider": "NO_BANKID_WEB"})) == {
        kari.pk
    }
    assert listed(superuser_client.get(CHANGELIST, {"q": "bob"})) == {sven.pk}
    assert listed(superuser_client.get(CHANGELIST, {"q": SSN})) == set()


def test_the_search_matches_exact_values_of_indexed_columns(
    superuser_client: Client, rows: list[Identification]
) -> None:
    kari, sven = rows
    Identification.objects.filter(pk=kari.pk).update(identity_provider_unique_id="pid-kari")
    Identification.objects.filter(pk=sven.pk).update(identity_provider_unique_id="pid-sven")
    found = {
        kari.reference: {kari.pk},
        "req-2": {sven.pk},
        " req-1 ": {kari.pk},  # pasted with blanks
        "alice": {kari.pk},  # the username
        "bob@example.com": {sven.pk},  # the e-mail address
        "pid-kari": {kari.pk},  # the provider's unique id of a verified identification
        "pid-sven": set(),  # ... and only of a verified one (sven's failed)
        # Not a LIKE over the table: no part of a value, no name, no number.
        kari.reference[:10]: set(),
        "req": set(),
        "ali": set(),
        "ALICE": set(),
        "Nordmann": set(),
        "Nordmann, Kari Marie": set(),
        SSN: set(),
    }
    for term, pks in found.items():
        assert listed(superuser_client.get(CHANGELIST, {"q": term})) == pks, term


def test_the_search_box_says_what_it_matches(
    superuser_client: Client, rows: list[Identification]
) -> None:
    html = superuser_client.get(CHANGELIST).content.decode()
    assert 'id="searchbar"' in html
    assert "Exact match: the reference, the broker request id" in html


def table_queries(captured: CaptureQueriesContext) -> list[str]:
    """The statements that read the table (not PostgreSQL's estimate of its size)."""
    return [
        q["sql"]
        for q in captured.captured_queries
        if f'"{TABLE}"' in q["sql"] and "FROM pg_class" not in q["sql"]
    ]


#: Every kind of changelist page: unfiltered, each filter, a search, sorted, a later page.
PAGES: list[dict[str, str]] = [
    {},
    {"status__exact": "ERROR"},
    {"status__exact": "PENDING"},
    {"identity_provider": "NO_BANKID_WEB"},
    {"user__id__exact": "1"},
    {"created_at__gte": "2000-01-01 00:00:00+00:00", "created_at__lt": "2100-01-01 00:00:00+00:00"},
    {"q": "alice"},
    {"q": "alice@example.com"},
    {"q": "req-1"},
    {"status__exact": "SUCCESS", "identity_provider": "NO_BANKID_WEB", "q": "alice"},
    {"o": "2"},
    {"o": "-1"},
    {"p": "2"},
]


@pytest.mark.parametrize("params", PAGES, ids=lambda p: "&".join(p) or "all")
def test_the_changelist_runs_a_fixed_number_of_bounded_queries(
    superuser_client: Client,
    rows: list[Identification],
    params: dict[str, str],
    django_assert_max_num_queries: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Pages of one row, counted up to two: there is a page 2, and "more than" is reached.
    monkeypatch.setattr(eid_admin, "COUNT_LIMIT", 2)
    monkeypatch.setattr(eid_admin.IdentificationAdmin, "list_per_page", 1)
    superuser_client.get(CHANGELIST)  # the session's and the content types' first reads
    with CaptureQueriesContext(connection) as captured, django_assert_max_num_queries(5):
        response = superuser_client.get(CHANGELIST, params)
    assert response.status_code == 200
    statements = table_queries(captured)
    # The count and the page; nothing that reads the whole table.
    assert len(statements) == 2, statements
    counts = [sql for sql in statements if "COUNT(" in sql.upper()]
    assert len(counts) == 1
    assert " LIMIT 3" in counts[0]  # COUNT_LIMIT + 1: a count that stops
    assert not [sql for sql in statements if "DISTINCT" in sql.upper()]
    assert not [sql for sql in statements if "LIKE" in sql.upper()]
    assert "ORDER BY" in statements[-1]


def test_a_count_past_the_limit_is_shown_as_more_than(
    superuser_client: Client,
    rows: list[Identification],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(eid_admin, "COUNT_LIMIT", 1)
    response = superuser_client.get(CHANGELIST, {"status__exact": "SUCCESS"})
    assert response.context["cl"].paginator.exact
    assert "1 identification" in response.content.decode()
    response = superuser_client.get(CHANGELIST)
    paginator = response.context["cl"].paginator
    assert (paginator.count, paginator.capped, paginator.num_pages) == (2, True, 1)
    html = response.content.decode()
    assert "more than 1 identifications" in html
    # Pages of one row: one page, as the pages end at COUNT_LIMIT rows.
    monkeypatch.setattr(eid_admin.IdentificationAdmin, "list_per_page", 1)
    response = superuser_client.get(CHANGELIST)
    assert response.context["cl"].paginator.num_pages == 1
    assert superuser_client.get(CHANGELIST, {"p": "2"}).status_code == 302  # to ?e=1
    response = superuser_client.get(CHANGELIST, {"q": "alice"})
    assert "1 result" in response.content.decode()


def test_an_unfiltered_list_shows_the_estimate_of_a_large_table(
    superuser_client: Client,
    rows: list[Identification],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # PostgreSQL's estimate is tested in tests/production/test_admin_queries.py.
    monkeypatch.setattr(eid_admin, "COUNT_LIMIT", 1)
    monkeypatch.setattr(eid_admin, "estimated_rows", lambda queryset: 1_000_000)
    with CaptureQueriesContext(connection) as captured:
        response = superuser_client.get(CHANGELIST)
    assert not [sql for sql in table_queries(captured) if "COUNT(" in sql.upper()]
    html = response.content.decode()
    assert "about 1000000 identifications" in html
    assert 'name="action"' in html  # the actions are there, but not across the pages
    assert "Select all 1000000" not in html  # an estimate is not what an action would take
    assert response.context["cl"].paginator.num_pages == 1
    # A filter counts, whatever the estimate.
    response = superuser_client.get(CHANGELIST, {"status__exact": "ERROR"})
    assert response.context["cl"].paginator.exact
    assert listed(response) == {rows[1].pk}


def filter_links(response: Any, title: str) -> dict[str, str]:
    """The choices of the filter called ``title``: their query strings by their names."""
    cl = response.context["cl"]
    (spec,) = [s for s in cl.filter_specs if str(s.title) == title]
    return {str(choice["display"]): choice["query_string"] for choice in spec.choices(cl)}


def filter_choices(response: Any, title: str) -> list[str]:
    return list(filter_links(response, title))


def test_the_provider_filter_offers_the_apis_providers_without_a_query(
    superuser_client: Client,
    rows: list[Identification],
    broker_api: str,
    eid: Callable[..., None],
) -> None:
    published = list(brokers.api_class(API_SETTINGS[broker_api]["BROKER_API"]).published_providers)
    with CaptureQueriesContext(connection) as captured:
        response = superuser_client.get(CHANGELIST)
    assert filter_choices(response, "identity provider") == ["All", *published]
    assert not [sql for sql in table_queries(captured) if "DISTINCT" in sql.upper()]
    # The providers the settings name come first; one chosen by URL is listed too.
    site = published[-1]
    eid(ALLOWED_PROVIDERS=[site])
    Identification.objects.filter(pk=rows[1].pk).update(identity_provider="old-provider")
    response = superuser_client.get(CHANGELIST, {"identity_provider": "old-provider"})
    choices = filter_choices(response, "identity provider")
    assert choices[:2] == ["All", site]
    assert choices[-1] == "old-provider"
    assert len(choices) == len(published) + 2
    assert listed(response) == {rows[1].pk}


def test_the_date_filter_has_fixed_ranges(
    superuser_client: Client, rows: list[Identification]
) -> None:
    kari, sven = rows
    Identification.objects.filter(pk=sven.pk).update(
        created_at=timezone.now() - datetime.timedelta(days=40)
    )
    response = superuser_client.get(CHANGELIST)
    assert filter_choices(response, "created") == [
        "Any date",
        "Today",
        "Past 7 days",
        "This month",
        "This year",
    ]
    assert "date_hierarchy" not in response.content.decode()
    week = filter_links(response, "created")["Past 7 days"]
    assert listed(superuser_client.get(CHANGELIST + week)) == {kari.pk}


@pytest.mark.parametrize(
    "lookup",
    [
        "display__exact",
        "name__icontains",
        "user__username__icontains",
        "social_security_number_hash",
        "created_at__year",
    ],
)
def test_a_url_filters_only_by_the_filters_lookups(
    superuser_client: Client, rows: list[Identification], lookup: str
) -> None:
    # Django's admin takes any local column's lookup from the URL: each a full read.
    assert superuser_client.get(CHANGELIST, {lookup: "x"}).status_code == 400
    kari = rows[0]
    assert listed(superuser_client.get(CHANGELIST, {"user__id__exact": kari.user_id})) == {kari.pk}


def test_the_list_is_newest_first_and_sorts_only_by_indexed_columns(
    superuser_client: Client, rows: list[Identification]
) -> None:
    kari, sven = rows
    Identification.objects.filter(pk=kari.pk).update(
        created_at=timezone.now() - datetime.timedelta(days=1)
    )
    response = superuser_client.get(CHANGELIST)
    assert [r.pk for r in response.context["cl"].result_list] == [sven.pk, kari.pk]
    assert eid_admin.IdentificationAdmin.sortable_by == ("pk", "created_at")
    # A sort by a column without an index is ignored, not run.
    response = superuser_client.get(CHANGELIST, {"o": "4"})  # "name"
    assert response.status_code == 200
    assert [r.pk for r in response.context["cl"].result_list] == [sven.pk, kari.pk]


def test_the_change_page_is_read_only_and_masks_the_number(
    superuser_client: Client, rows: list[Identification]
) -> None:
    kari = rows[0]
    url = f"{CHANGELIST}{kari.pk}/change/"
    response = superuser_client.get(url)
    assert response.status_code == 200
    html = response.content.decode()
    assert SSN not in html
    assert SSN[:6] + "\u2022" * 5 in html  # the date of birth's digits only
    assert SSN[-5:] not in html
    assert "Nordmann, Kari Marie" in html
    assert "req-1" in html
    form = response.context["adminform"].form
    assert list(form.fields) == []  # every field is read-only
    assert 'name="_save"' not in html
    assert "<textarea" not in html
    before = Identification.objects.filter(pk=kari.pk).values().get()
    assert superuser_client.post(url, {"status": "PENDING", "name": "X"}).status_code == 403
    assert Identification.objects.filter(pk=kari.pk).values().get() == before
    assert superuser_client.get(f"{CHANGELIST}add/").status_code == 403


def test_a_staff_user_without_permission_sees_nothing(
    django_user_model: Any, rows: list[Identification]
) -> None:
    staff = django_user_model.objects.create_user("staff", password="pw", is_staff=True)
    client = Client()
    client.force_login(staff)
    assert client.get(CHANGELIST).status_code == 403


def test_the_search_uses_the_user_models_own_fields(monkeypatch: pytest.MonkeyPatch) -> None:
    asked: list[Q] = []

    class Accounts:
        @staticmethod
        def filter(match: Q) -> Any:
            asked.append(match)
            return Identification.objects.none().values_list("pk", flat=True)

    class Meta:
        @staticmethod
        def get_field(name: str) -> object:
            if name != "customer_number":
                raise FieldDoesNotExist(name)
            return object()

    class BankUser:  # USERNAME_FIELD is a customer number, there is no e-mail field
        USERNAME_FIELD = "customer_number"
        _meta = Meta()
        _default_manager = Accounts()

        @classmethod
        def get_email_field_name(cls) -> str:
            return "email"

    monkeypatch.setattr(eid_admin, "get_user_model", lambda: BankUser)
    model_admin = eid_admin.IdentificationAdmin(Identification, site)
    queryset, _ = model_admin.get_search_results(
        RequestFactory().get("/"), Identification.objects.all(), "kari@example.com"
    )
    assert list(queryset) == []
    assert asked == [Q(customer_number="kari@example.com")]
