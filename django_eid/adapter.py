"""The site's hooks into logging in and signing up with an eID (``DJANGO_EID["ADAPTER"]``).

As django-allauth's adapters: subclass :class:`DefaultAdapter`, override what the site
decides otherwise, and name the subclass in ``ADAPTER``. django-eid calls the adapter with
the request and the verified :class:`~django_eid.models.Identification`; what the adapter
returns is used as it is, so keep it free of side effects beyond the user it builds.
"""

from __future__ import annotations

import secrets
from typing import TYPE_CHECKING, Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import models
from django.shortcuts import resolve_url
from django.utils.module_loading import import_string

from django_eid.conf import eid_settings

if TYPE_CHECKING:
    from django.http import HttpRequest

    from django_eid.models import Identification

#: The verified names copied onto a new account, where its user model has the field.
NAME_FIELDS = {"first_name": "first_name", "last_name": "last_name"}


class DefaultAdapter:
    """What django-eid does at the door unless the site says otherwise.

    Works with ``django.contrib.auth.models.User`` and with a custom user model: the names
    go where the model has ``first_name`` and ``last_name``; the sign-up form asks for the
    model's ``USERNAME_FIELD``, ``EMAIL_FIELD`` and ``REQUIRED_FIELDS``; without a form
    (``SIGNUP = "auto"``) a text ``USERNAME_FIELD`` gets a generated handle.
    """

    def is_open_for_signup(
        self, request: HttpRequest | None, identification: Identification
    ) -> bool:
        """Whether this verified person may get an account here: ``SIGNUP`` is ``"form"``, or
        ``"auto"`` with a user model whose username can be made up (not an e-mail address,
        which only the person can give: check ``W028``)."""
        if eid_settings.SIGNUP == "auto":
            return not username_is_an_address()
        return eid_settings.SIGNUP == "form"

    def new_user(self, request: HttpRequest | None, identification: Identification) -> Any:
        """An unsaved user for the person."""
        return get_user_model()()

    def populate_user(self, user: Any, identification: Identification, form: Any = None) -> Any:
        """Fill ``user`` from the verified identity and the sign-up ``form``'s cleaned data
        (``None`` in ``"auto"`` mode). Never the national identity number."""
        meta = user._meta
        for field, attribute in NAME_FIELDS.items():
            value = getattr(identification, attribute, "")
            if value and _has_field(meta, field):
                setattr(user, field, value[: meta.get_field(field).max_length or None])
        if form is not None:
            for name, value in form.cleaned_data.items():
                if _has_field(meta, name):
                    setattr(user, name, value)
        username = user.USERNAME_FIELD
        if not getattr(user, username, None):
            setattr(user, username, self.generate_username(user, identification))
        return user

    def generate_username(self, user: Any, identification: Identification) -> str:
        """A handle for an account made without a form: random, so it tells nothing of the
        person (and never collides in practice)."""
        return f"eid-{secrets.token_hex(6)}"

    def login_redirect_url(self, request: HttpRequest) -> str:
        """Where a login goes without a ``next``: ``settings.LOGIN_REDIRECT_URL``."""
        return str(resolve_url(settings.LOGIN_REDIRECT_URL))

    def signup_redirect_url(self, request: HttpRequest) -> str:
        """Where a sign-up goes without a ``next``: where a login goes."""
        return self.login_redirect_url(request)


def username_is_an_address() -> bool:
    """Whether the user model's ``USERNAME_FIELD`` is an e-mail address."""
    model = get_user_model()
    return isinstance(model._meta.get_field(model.USERNAME_FIELD), models.EmailField)


def _has_field(meta: Any, name: str) -> bool:
    try:
        field = meta.get_field(name)
    except Exception:  # FieldDoesNotExist
        return False
    return isinstance(field, models.Field) and field.concrete and not field.primary_key


def get_adapter() -> DefaultAdapter:
    """The site's adapter (``ADAPTER``), a new instance."""
    adapter: DefaultAdapter = import_string(eid_settings.ADAPTER)()
    return adapter
