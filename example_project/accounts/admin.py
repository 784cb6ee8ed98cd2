from __future__ import annotations

from django.contrib import admin

from example_project.accounts.models import Profile


@admin.register(Profile)
class ProfileAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
    list_display = ("user", "eid_verified", "eid_verified_at", "payout_account")
    list_filter = ("eid_verified",)
    search_fields = ("user__username",)
    raw_id_fields = ("user",)
