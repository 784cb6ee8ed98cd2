"""Admin of identifications: everything read-only, the national identity number masked."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.http import HttpRequest
from django.utils.translation import gettext_lazy as _

from django_eid.models import Identification


@admin.register(Identification)
class IdentificationAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
    list_display = (
        "pk",
        "user",
        "status",
        "identity_provider",
        "name",
        "created_at",
        "completed_at",
    )
    list_filter = ("status", "identity_provider", "display")
    search_fields = ("user__username", "user__email", "name", "first_name", "last_name")
    list_select_related = ("user",)
    date_hierarchy = "created_at"
    exclude = ("social_security_number", "social_security_number_hash")
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
        "error_message",
        "metadata",
        "raw",
        "created_at",
        "completed_at",
    )

    @admin.display(description=_("national identity number"))
    def masked_social_security_number(self, obj: Identification) -> str:
        return obj.masked_social_security_number or "-"

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        # Viewing needs the view permission; nobody edits a verified identity by hand.
        return False
