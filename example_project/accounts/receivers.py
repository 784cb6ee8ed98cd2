"""The site's receiver of ``identification_succeeded``: its whole integration with django-eid.

It shows both things a receiver can do: act on a verified identity (mark the
profile verified) and refuse one (raise ``IdentificationRejected``; django-eid
then stores the identification as REJECTED and shows the user the reason).
"""

from __future__ import annotations

from typing import Any

from django.utils.translation import gettext

from django_eid.exceptions import IdentificationRejected
from django_eid.models import Identification
from example_project.accounts.models import Profile

MINIMUM_AGE = 18


def mark_verified(identification: Identification, user: Any, **kwargs: Any) -> None:
    """Receiver of ``identification_succeeded``, connected in ``AccountsConfig.ready()``."""
    age = identification.age
    if age is not None and age < MINIMUM_AGE:
        # Marked for translation like any user-facing text; this demo ships no catalog of its
        # own, so it reads in English whatever the language.
        raise IdentificationRejected(gettext("You must be 18 or older to use this service."))
    Profile.objects.update_or_create(
        user=user,
        defaults={"eid_verified": True, "eid_verified_at": identification.completed_at},
    )
