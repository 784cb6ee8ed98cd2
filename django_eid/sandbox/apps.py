from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class SandboxConfig(AppConfig):
    """The sandbox broker. Add ``"django_eid.sandbox"`` to ``INSTALLED_APPS`` (development only)."""

    name = "django_eid.sandbox"
    label = "django_eid_sandbox"
    verbose_name = _("Identification broker sandbox")

    def ready(self) -> None:
        from django_eid.sandbox import checks  # noqa: F401  (registers the system checks)
