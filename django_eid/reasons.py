"""Why a gate turns a user away: the reason codes.

Stable strings: :meth:`~django_eid.models.Identification.unmet` and the gates
(:mod:`django_eid.requirements`) give them, the start page and the JSON API carry them
(``reason``), and :func:`django_eid.outcomes.gate_reason` words them for the user.
"""

from __future__ import annotations

from typing import Final

#: No verification of the account meets the gate at all.
NOT_VERIFIED: Final = "not_verified"
#: Verified longer ago than the gate's ``max_age``.
TOO_OLD: Final = "too_old"
#: Verified with another eID than the gate's ``providers``.
WRONG_PROVIDER: Final = "wrong_provider"
#: Younger than the gate's ``min_age``.
TOO_YOUNG: Final = "too_young"
#: The verification does not tell a date of birth, and the gate has a ``min_age``.
AGE_NOT_KNOWN: Final = "age_not_known"
#: The verification's level of assurance is below the gate's ``min_loa``, or not known.
LEVEL_TOO_LOW: Final = "loa_too_low"
#: Another person than the one already verified on the account (``same_person``).
OTHER_PERSON: Final = "other_person"
