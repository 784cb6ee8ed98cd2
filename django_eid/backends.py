"""``EidBackend``: the authentication backend that logs a person in by their eID.

Add it to ``AUTHENTICATION_BACKENDS`` beside the site's others (``ModelBackend``,
django-allauth's): it answers only ``authenticate(request, identification=...)``, with the
account an identification at the door verified (:func:`django_eid.flows.login.account_to_log_in`),
and ignores every other call. Permissions are the other backends' concern.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.backends import BaseBackend
from django.utils.module_loading import import_string

from django_eid.flows import login

if TYPE_CHECKING:
    from django.http import HttpRequest


class EidBackend(BaseBackend):
    """Log in the account linked to the person an identification at the door verified.

    ``identification`` must be the one this browser came back with: django-eid's views ask
    that (the start's one-time state) before they call ``authenticate()``.
    """

    def authenticate(
        self, request: HttpRequest | None, identification: object = None, **kwargs: Any
    ) -> Any | None:
        if identification is None or kwargs:
            return None  # another backend's credentials
        return login.account_to_log_in(identification)

    def get_user(self, user_id: Any) -> Any | None:
        user = get_user_model()._default_manager.filter(pk=user_id).first()
        return user if user is not None and self.user_can_authenticate(user) else None

    def user_can_authenticate(self, user: Any) -> bool:
        """Inactive users are refused, as Django's ``ModelBackend`` refuses them."""
        return login.can_authenticate(user)


def door_open() -> bool:
    """Whether the site logs people in by eID: ``django_eid.backends.EidBackend`` (or a
    subclass) is in ``AUTHENTICATION_BACKENDS``. Until it is, nobody starts at the door
    (each start would be a billed session that logs nobody in): upgrading opens nothing."""
    return backend_path() is not None


def backend_path() -> str | None:
    """The dotted path of the first ``EidBackend`` (or subclass) in
    ``AUTHENTICATION_BACKENDS``, or ``None``."""
    return _eid_backend(tuple(getattr(settings, "AUTHENTICATION_BACKENDS", ())))


@functools.lru_cache(maxsize=4)
def _eid_backend(paths: tuple[str, ...]) -> str | None:
    for path in paths:
        try:
            backend = import_string(path)
        except ImportError:
            continue  # Django's own check names it
        if isinstance(backend, type) and issubclass(backend, EidBackend):
            return path
    return None
