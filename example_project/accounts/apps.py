from __future__ import annotations

from django.apps import AppConfig

#: Identify the site's receivers of ``identification_verifying`` and ``identification_succeeded``.
RULE_DISPATCH_UID = "example_project.accounts.old_enough"
DISPATCH_UID = "example_project.accounts.mark_verified"


class AccountsConfig(AppConfig):
    name = "example_project.accounts"
    label = "accounts"
    verbose_name = "Accounts"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from django_eid.models import Identification
        from django_eid.signals import identification_succeeded, identification_verifying
        from example_project.accounts.receivers import mark_verified, old_enough

        identification_verifying.connect(
            old_enough, sender=Identification, dispatch_uid=RULE_DISPATCH_UID
        )
        identification_succeeded.connect(
            mark_verified, sender=Identification, dispatch_uid=DISPATCH_UID
        )
