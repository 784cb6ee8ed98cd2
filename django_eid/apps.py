import contextlib
import importlib

from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class DjangoEidConfig(AppConfig):
    name = "django_eid"
    verbose_name = _("Electronic identification")
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        import logging

        from django.apps import apps
        from django.contrib.auth import get_user_model
        from django.contrib.auth.signals import user_logged_in
        from django.db.models.signals import pre_delete

        from django_eid import checks  # noqa: F401  (registers the system checks)
        from django_eid.retention import record_account_deletion
        from django_eid.signals import hide_rejections
        from django_eid.state import forget_verified_at_login

        logging.getLogger("django.dispatch").addFilter(hide_rejections)
        # A person verified at the door and waiting to sign up is not whoever logs in next
        # in this browser (a shared computer): Django's login() keeps the session's data.
        user_logged_in.connect(forget_verified_at_login, dispatch_uid="django_eid.door")
        # An account's deletion cascades to its identifications: their audit events stay,
        # with a "purged" event each, written in the deletion's transaction. Not a receiver
        # of Identification's own deletion: eid_purge would fall back to Django's slow one.
        # Django names the deleted instance's own class as the sender: the user model and
        # each of its proxies (an admin of "customers"), never every model (that would make
        # every deletion in the project slow).
        users = get_user_model()._meta.concrete_model
        for model in apps.get_models():
            if model._meta.concrete_model is users:
                pre_delete.connect(
                    record_account_deletion,
                    sender=model,
                    dispatch_uid=f"django_eid.account_deletion.{model._meta.label_lower}",
                )
        _import_token_cache_library()


def _import_token_cache_library() -> None:
    """Import the client library of Django's Redis cache backend now, if a cache uses it.

    The backend imports ``redis`` on first use, which made a worker's first identification
    pay for it (about 20 ms of CPU on the benchmark machine; the token is cached there).
    Importing a module opens no connection and reads no database. ``DJANGO_EID`` is not
    read here (it is read lazily, on first use), so every configured cache is looked at,
    not only ``TOKEN_CACHE``; a missing library is left for the first use to report.
    """
    from django.conf import settings

    backends = {
        str(config.get("BACKEND", ""))
        for config in getattr(settings, "CACHES", {}).values()
        if isinstance(config, dict)
    }
    if "django.core.cache.backends.redis.RedisCache" in backends:
        with contextlib.suppress(ImportError):
            importlib.import_module("redis")
