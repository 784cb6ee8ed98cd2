"""Admin of identifications: everything read-only, the national identity number masked,
the broker's texts scrubbed (:mod:`django_eid.scrub`).

The list stays fast at millions of rows (docs/reference/models.md, "The admin"): no full
``COUNT(*)`` (the planner's estimate, or a count that stops past :data:`COUNT_LIMIT`),
filters whose choices are known without a query, each served by an index, and a search of
exact values on indexed columns only.
"""

from __future__ import annotations

import json
import math
from typing import Any, Final

from django.contrib import admin
from django.contrib.admin.views.main import ChangeList
from django.contrib.auth import get_user_model
from django.core.exceptions import FieldDoesNotExist
from django.core.paginator import Paginator
from django.db import connections, router, transaction
from django.db.models import Q, QuerySet
from django.http import HttpRequest
from django.utils.functional import cached_property
from django.utils.translation import gettext_lazy as _

from django_eid import audit, retention
from django_eid.brokers import broker_api
from django_eid.conf import eid_settings
from django_eid.models import ENCRYPTED_FIELDS, AuditEvent, Identification, LinkedIdentity
from django_eid.scrub import scrub, scrub_json

#: The most rows the list counts, and pages through: a count stops past it (the list shows
#: "more than 10000"), and the pages end there (an ``OFFSET`` reads every row it skips).
#: Narrow the list with a filter or a search to reach older rows.
COUNT_LIMIT: Final = 10_000

#: The lookups a changelist URL may filter by: the filters' and a user's rows, each served by
#: an index. Django's admin allows any column's in the URL (``?name__icontains=``), each a
#: read of the whole table.
FILTER_LOOKUPS: Final = frozenset(
    {
        "status__exact",
        "identity_provider",
        "created_at__gte",
        "created_at__lt",
        "user",
        "user__exact",
        "user__id__exact",
    }
)

#: The most user accounts a search of a username or an e-mail address matches.
MAX_SEARCHED_USERS: Final = 100


def estimated_rows(queryset: QuerySet[Any]) -> int | None:
    """PostgreSQL's estimate of the rows of ``queryset``'s table, or ``None`` elsewhere.

    The planner's own: the row density of the last ``ANALYZE`` (autovacuum runs it) times
    the table's current size, so rows added since count too. ``None`` when the table was
    never analyzed.
    """
    connection = connections[queryset.db]
    if connection.vendor != "postgresql":
        return None
    table = connection.ops.quote_name(queryset.model._meta.db_table)
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT CASE WHEN relpages > 0 THEN reltuples / relpages"
            " * (pg_relation_size(oid) / current_setting('block_size')::integer)"
            " ELSE reltuples END FROM pg_class WHERE oid = %s::regclass",
            [table],
        )
        row = cursor.fetchone()
    if row is None or row[0] is None or row[0] < 0:  # -1: never analyzed
        return None
    return int(row[0])


class CappedPaginator(Paginator):  # type: ignore[type-arg]
    """A paginator that never counts a whole large table.

    Unfiltered on PostgreSQL, :attr:`count` is the planner's estimate of the table's rows
    (:attr:`estimated`); otherwise rows are counted up to ``COUNT_LIMIT + 1`` and no
    further (:attr:`capped` when there are more). Pages end at ``COUNT_LIMIT`` rows.
    """

    _estimated = False

    @cached_property
    def count(self) -> int:
        queryset = self.object_list
        if not isinstance(queryset, QuerySet):
            return super().count
        if not queryset.query.where:
            estimate = estimated_rows(queryset)
            if estimate is not None and estimate > COUNT_LIMIT:
                self._estimated = True
                return estimate
        # COUNT(*) over a LIMITed subquery of primary keys: no join, no sort, and at most
        # COUNT_LIMIT + 1 index entries read.
        counted: int = queryset.order_by().values("pk")[: COUNT_LIMIT + 1].count()
        return counted

    @property
    def estimated(self) -> bool:
        """:attr:`count` is PostgreSQL's estimate of an unfiltered table's rows."""
        self.count  # noqa: B018  (computed first: it decides)
        return self._estimated

    @property
    def capped(self) -> bool:
        """More rows than were counted: :attr:`count` is ``COUNT_LIMIT + 1``."""
        return self.count > COUNT_LIMIT and not self.estimated

    @property
    def exact(self) -> bool:
        """:attr:`count` is the number of rows."""
        return not self.estimated and not self.capped

    @property
    def count_label(self) -> str:
        """The count as the list shows it: ``"42"``, ``"about 1000000"``, ``"more than 10000"``."""
        if self.estimated:
            return str(_("about %(count)s") % {"count": self.count})
        if self.capped:
            return str(_("more than %(count)s") % {"count": COUNT_LIMIT})
        return str(self.count)

    @cached_property
    def num_pages(self) -> int:
        # The pages up to COUNT_LIMIT rows; deeper ones are reached through a filter.
        pages: int = super().num_pages
        return min(pages, max(1, math.ceil(COUNT_LIMIT / self.per_page)))


class IdentificationChangeList(ChangeList):
    def get_ordering_field(self, field_name: Any) -> Any:
        # Django sorts by whichever column of list_display the URL names (?o=4), not only
        # those of sortable_by; a sort without an index reads and sorts the whole table.
        if self.sortable_by is not None and field_name not in self.sortable_by:
            return None
        return super().get_ordering_field(field_name)


class LargeTableAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
    """The list of a table of millions of rows: a capped count, no facet counts, no sort
    by a column outside ``sortable_by``, and only the URL lookups of :attr:`filter_lookups`."""

    paginator = CappedPaginator
    show_full_result_count = False
    show_facets = admin.ShowFacets.NEVER
    #: The lookups a changelist URL may filter by, each served by an index or cheap.
    filter_lookups: frozenset[str] = frozenset()

    def lookup_allowed(self, lookup: str, value: str, request: HttpRequest) -> bool:
        # Any other is refused (400), rather than run over the whole table.
        return lookup in self.filter_lookups and super().lookup_allowed(lookup, value, request)

    def get_changelist(self, request: HttpRequest, **kwargs: Any) -> type[ChangeList]:
        return IdentificationChangeList


class ProviderFilter(admin.SimpleListFilter):
    """The identity providers: those the settings name, then those the configured broker
    API publishes; no ``SELECT DISTINCT`` over the table."""

    title = _("identity provider")
    parameter_name = "identity_provider"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        configured = [eid_settings.IDENTITY_PROVIDER, *(eid_settings.ALLOWED_PROVIDERS or ())]
        names = [
            *configured,
            *broker_api().published_providers,
            self.value(),  # a provider chosen by URL that no list names (another API's)
        ]
        return [(name, name) for name in dict.fromkeys(names) if name]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
        value = self.value()
        return queryset.filter(identity_provider=value) if value else queryset


@admin.register(Identification)
class IdentificationAdmin(LargeTableAdmin):
    list_display = (
        "pk",
        "user",
        "status",
        "identity_provider",
        "name",
        "created_at",
        "completed_at",
    )
    # Choices known without a query (the status choices, the providers' lists, fixed date
    # ranges), each served by an index (docs/reference/models.md, "The admin"). Not
    # "display": iframe rows may be rare, and a rare value no index has reads the table.
    list_filter = ("status", ProviderFilter, "created_at")
    list_select_related = ("user",)
    # Newest first, by the created_at index; no sort by a column without one.
    ordering = ("-created_at",)
    sortable_by = ("pk", "created_at")
    filter_lookups = FILTER_LOOKUPS
    search_help_text = _(
        "Exact match: the reference, the broker request id, the user's username or e-mail "
        "address, or the provider's unique id of a verified identification."
    )
    # The broker's texts are shown through the scrubbing methods below, never as stored.
    exclude = (
        "social_security_number",
        "social_security_number_hash",
        "error_message",
        "metadata",
        "raw",
    )
    readonly_fields = (
        "user",
        "status",
        "display",
        "identity_provider",
        "identity_provider_unique_id",
        "name",
        "first_name",
        "middle_name",
        "last_name",
        "date_of_birth",
        "masked_social_security_number",
        "request_id",
        "external_id",
        "reference",
        "next_url",
        "user_agent",
        "ip_address",
        "error_status",
        "error_code",
        "scrubbed_error_message",
        "scrubbed_metadata",
        "scrubbed_raw",
        "created_at",
        "completed_at",
    )

    def get_search_fields(self, request: HttpRequest) -> tuple[str, ...]:
        # What the search box searches is get_search_results' (exact values on indexed
        # columns); a non-empty tuple shows the box.
        return ("reference", "request_id", "user", "identity_provider_unique_id")

    def get_search_results(
        self, request: HttpRequest, queryset: QuerySet[Identification], search_term: str
    ) -> tuple[QuerySet[Identification], bool]:
        # Exact values only, each found by an index: a LIKE '%q%' reads every row. The
        # national identity number is never searched (it would be in the URL).
        term = search_term.strip()
        if not term:
            return queryset, False
        match = (
            Q(reference=term)
            | Q(request_id=term)
            | Q(status=Identification.Status.SUCCESS, identity_provider_unique_id=term)
        )
        users = searched_users(term)
        if users:
            # The ids as literals, not a subquery: OR'ed with the other columns, each arm
            # stays an index scan.
            match |= Q(user__in=users)
        return queryset.filter(match), False

    def get_queryset(self, request: HttpRequest) -> QuerySet[Identification]:
        # The list never shows the number: do not decrypt a page of them. The detail page
        # loads it on access.
        return super().get_queryset(request).defer(*ENCRYPTED_FIELDS)

    @admin.display(description=_("national identity number"))
    def masked_social_security_number(self, obj: Identification) -> str:
        if obj.has_unreadable_number:
            return str(_("(cannot be decrypted with the configured keys)"))
        return obj.masked_social_security_number or "-"

    # The broker's texts are stored scrubbed; scrubbed again when shown, for rows stored by
    # a version before the scrubber.
    @admin.display(description=_("error message"))
    def scrubbed_error_message(self, obj: Identification) -> str:
        return scrub(obj.error_message) or "-"

    @admin.display(description=_("metadata"))
    def scrubbed_metadata(self, obj: Identification) -> str:
        return json.dumps(scrub_json(obj.metadata), ensure_ascii=False, indent=2)

    @admin.display(description=_("record as received"))
    def scrubbed_raw(self, obj: Identification) -> str:
        return json.dumps(scrub_json(obj.raw), ensure_ascii=False, indent=2)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        # Viewing needs the view permission; nobody edits a verified identity by hand.
        return False

    # A deletion here leaves a "purged" event (outcome "admin") for each row, in the
    # deletion's transaction: the audit trail outlives the rows.
    def delete_model(self, request: HttpRequest, obj: Identification) -> None:
        # Django's delete view has its transaction open already; atomic() is a savepoint.
        with transaction.atomic(using=router.db_for_write(Identification, instance=obj)):
            audit.write(obj, audit.Kind.PURGED, outcome=retention.ADMIN, using=obj._state.db)
            super().delete_model(request, obj)

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[Identification]) -> None:
        # The "delete selected" action: no transaction of Django's around it.
        with transaction.atomic(using=queryset.db):
            retention.write_events(queryset, audit.Kind.PURGED, outcome=retention.ADMIN)
            super().delete_queryset(request, queryset)


def searched_users(term: str) -> list[Any]:
    """The pks of the accounts whose login (``USERNAME_FIELD``) or e-mail address is exactly
    ``term``; the e-mail only when ``term`` has an ``@`` (Django's ``User`` has no index on
    it: each such search reads the user table)."""
    user_model = get_user_model()
    match = Q()
    for name in dict.fromkeys((user_model.USERNAME_FIELD, user_model.get_email_field_name())):
        try:
            user_model._meta.get_field(name)
        except FieldDoesNotExist:
            continue
        if name == user_model.USERNAME_FIELD or "@" in term:
            match |= Q(**{name: term})
    if not match:
        return []
    pks = user_model._default_manager.filter(match).values_list("pk", flat=True)
    return list(pks[:MAX_SEARCHED_USERS])


@admin.register(LinkedIdentity)
class LinkedIdentityAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
    """Links, read-only; staff may remove one (a lost eID, an account taken over). The key
    is never shown: it names the person at their eID to whoever holds their unique id."""

    list_display = ("pk", "user", "provider", "scheme", "linked_at", "last_used_at")
    list_select_related = ("user",)
    # By the primary key's index, at any number of accounts; no sort by another column.
    ordering = ("-pk",)
    sortable_by = ("pk",)
    paginator = CappedPaginator
    show_full_result_count = False
    show_facets = admin.ShowFacets.NEVER
    search_help_text = _("Exact match: the user's username or e-mail address.")
    # A search term is looked up in get_search_results; this only shows the search box.
    search_fields = ("user__pk",)
    exclude = ("key",)
    readonly_fields = ("user", "provider", "scheme", "linked_at", "last_used_at")

    def get_search_results(
        self, request: HttpRequest, queryset: QuerySet[LinkedIdentity], search_term: str
    ) -> tuple[QuerySet[LinkedIdentity], bool]:
        term = search_term.strip()
        if not term:
            return queryset, False
        return queryset.filter(user__in=searched_users(term)), False

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False  # a link is made by a verification of the person

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


#: The lookups the audit events' list may filter by: its filters' (choices known without a
#: query). None has an index of its own: the list reads the ``(at)`` index newest first and
#: keeps the matching rows, which finds a page at once for the common values; the count
#: stops at ``COUNT_LIMIT``.
EVENT_FILTER_LOOKUPS: Final = frozenset({"kind__exact"})


@admin.register(AuditEvent)
class AuditEventAdmin(LargeTableAdmin):
    """The audit trail, view only: an event is written with its change and never edited;
    it is deleted only by ``eid_purge --events-older-than``. The same care for a large
    table as the identifications' list."""

    list_display = (
        "at",
        "kind",
        "identification_id",
        "user_id",
        "purpose",
        "provider",
        "level_of_assurance",
        "status",
        "outcome",
        "duration_ms",
    )
    # The kind, served by the (kind, at) index, its choices known without a query. Not the
    # status or the purpose: without an index of their own a rare value would read the whole
    # table for its capped count (the status is in the kinds; an account's or an
    # identification's trail is the search). No date_hierarchy: it counts and scans the
    # table for its years and months.
    list_filter = ("kind",)
    # Newest first, by the (at) index; no sort by a column without one.
    ordering = ("-at", "-id")
    sortable_by = ("at",)
    filter_lookups = EVENT_FILTER_LOOKUPS
    search_help_text = _("Exact match: an identification's number or a user's id.")
    # A search term is looked up in get_search_results; this only shows the search box.
    search_fields = ("user_id",)

    def get_search_results(
        self, request: HttpRequest, queryset: QuerySet[AuditEvent], search_term: str
    ) -> tuple[QuerySet[AuditEvent], bool]:
        # Exact values, each found by an index: (identification_id) and (user_id, at).
        term = search_term.strip()
        if not term:
            return queryset, False
        match = Q(user_id=term)
        if term.isascii() and term.isdigit() and int(term) < 2**63:
            match |= Q(identification_id=int(term))
        return queryset.filter(match), False

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        # Append-only: deleted only by eid_purge --events-older-than.
        return False

    def get_urls(self) -> list[Any]:
        # The dashboard (django_eid.dashboard): the admin's login and staff check, then the
        # page's own permission check (view audit events). Imported here: only the admin needs it.
        from django.urls import path

        from django_eid.dashboard import DashboardView

        view = self.admin_site.admin_view(DashboardView.as_view(admin_site=self.admin_site))
        dashboard = path("dashboard/", view, name="django_eid_auditevent_dashboard")
        return [dashboard, *super().get_urls()]
