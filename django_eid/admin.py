"""Admin of identifications: everything read-only, the national identity number masked,
the broker's texts scrubbed (:mod:`django_eid.scrub`)."""

from __future__ import annotations

import json
from typing import Any

from django.contrib import admin
from django.contrib.auth import get_user_model
from django.core.exceptions import FieldDoesNotExist
from django.db.models import QuerySet
from django.http import HttpRequest
from django.utils.translation import gettext_lazy as _

from django_eid.models import Identification
from django_eid.scrub import scrub, scrub_json


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
