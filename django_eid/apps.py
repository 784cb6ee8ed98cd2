from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class DjangoEidConfig(AppConfig):
    name = "django_eid"
    verbose_name = _("Electronic identification")
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        import logging

        from django_eid import checks  # noqa: F401  (registers the system checks)
        from django_eid.signals import hide_rejections

        logging.getLogger("django.dispatch").addFilter(hide_rejections)
