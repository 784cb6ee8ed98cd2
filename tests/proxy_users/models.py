"""A proxy of Django's user model, as a site's admin of "customers" has one (its deletion
names the proxy as the sender of ``pre_delete``)."""

from __future__ import annotations

from django.contrib.auth.models import User


class Customer(User):
    class Meta:
        proxy = True
        app_label = "proxy_users"
