"""The site's receivers: its whole integration with django-eid.

One rule and one side effect, each where it belongs:

- :func:`old_enough` receives ``identification_verifying``, inside the transaction that
  records the identity: raising ``IdentificationRejected`` there stores the identification
  as REJECTED before anyone can see it verified, and shows the user the reason.
- :func:`mark_verified` receives ``identification_succeeded``, after the commit: it marks
  the profile verified.

The site has a verified profile for anyone 13 or older; its wine shop (views.py) asks for
18 with a gate of its own.
"""

from __future__ import annotations

from typing import Any

from django.utils.translation import gettext

from django_eid.exceptions import IdentificationRejected
from django_eid.models import Identification
from example_project.accounts.models import Profile

MINIMUM_AGE = 13


def old_enough(identification: Identification, **kwargs: Any) -> None:
    """Receiver of ``identification_verifying``, connected in ``AccountsConfig.ready()``."""
    age = identification.age
    if age is None or age < MINIMUM_AGE:
        # Shown to the user in their language (example_project/locale).
        raise IdentificationRejected(gettext("You must be 13 or older to use this service."))


def mark_verified(identification: Identification, user: Any, **kwargs: Any) -> None:
    """Receiver of ``identification_succeeded``, connected in ``AccountsConfig.ready()``.

    ``request`` (in ``kwargs``) is ``None`` when the identification is finished outside a
    request; this receiver does not need it.
    """
    Profile.objects.update_or_create(
        user=user,
        defaults={"eid_verified": True, "eid_verified_at": identification.completed_at},
    )
