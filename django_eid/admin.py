"""Admin of identifications: everything read-only, the national identity number masked."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.contrib.auth import get_user_model
from django.core.exceptions import FieldDoesNotExist
from django.db.models import QuerySet
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

    def get_search_fields(self, request: HttpRequest) -> tuple[str, ...]:
        # The user model is the site's: search its login and e-mail fields, whatever
        # they are called (a bank's USERNAME_FIELD may be a customer number).
        user_model = get_user_model()
        user_fields = []
        for name in dict.fromkeys((user_model.USERNAME_FIELD, user_model.get_email_field_name())):
            try:
                user_model._meta.get_field(name)
            except FieldDoesNotExist:
                continue
            user_fields.append(f"user__{name}")
        return (*user_fields, "name", "first_name", "last_name")

    def get_queryset(self, request: HttpRequest) -> QuerySet[Identification]:
        # The list never shows the number: do not decrypt a page of them. The detail page
        # loads it on access.
        return super().get_queryset(request).defer("social_security_number")

    @admin.display(description=_("national identity number"))
    def masked_social_security_number(self, obj: Identification) -> str:
        if obj.has_unreadable_number:
            return str(_("(cannot be decrypted with the configured keys)"))
        return obj.masked_social_security_number or "-"

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        # Viewing needs the view permission; nobody edits a verified identity by hand.
        return False
