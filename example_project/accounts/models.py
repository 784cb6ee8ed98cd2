"""The site's profile: what the site itself remembers about a verified user."""

from __future__ import annotations

from typing import ClassVar

from django.conf import settings
from django.db import models


class Profile(models.Model):
    user = models.OneToOneField(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="profile"
    )
    #: Set by the receiver in ``receivers.py`` once an identity is verified.
    eid_verified = models.BooleanField("verified with eID", default=False)
    eid_verified_at = models.DateTimeField("verified at", null=True, blank=True)
    #: Where the site pays the user; changed only behind a fresh verification (views.py).
    payout_account = models.CharField("payout account", max_length=34, blank=True)

    objects: ClassVar[models.Manager[Profile]] = models.Manager()

    def __str__(self) -> str:
        return f"Profile of {self.user}"
