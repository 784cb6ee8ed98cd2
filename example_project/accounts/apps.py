from __future__ import annotations

from django.apps import AppConfig

#: Identifies the site's receiver of ``identification_succeeded``.
DISPATCH_UID = "example_project.accounts.mark_verified"


class AccountsConfig(AppConfig):
    name = "example_project.accounts"
    label = "accounts"
    verbose_name = "Accounts"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from django_eid.models import Identification
        from django_eid.signals import identification_succeeded
        from example_project.accounts.receivers import mark_verified

        identification_succeeded.connect(
            mark_verified, sender=Identification, dispatch_uid=DISPATCH_UID
        )
