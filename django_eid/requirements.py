"""What a gate requires of a user's verified identity, and whether the user meets it.

The question "may this user do this now?" answered without HTTP: the decorator, the
mixin and the REST framework permission ask it through :meth:`Requirements.check`, and
a site may ask it anywhere (a template tag, a task).
"""

from __future__ import annotations

import datetime
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from django.utils import timezone
from django.utils.functional import Promise

from django_eid import claims, outcomes, state
from django_eid.models import Identification

#: The longest ``max_age`` that means something (and that date arithmetic can still do).
MAX_AGE_LIMIT = datetime.timedelta(days=36525)


@dataclass(frozen=True)
class Verdict:
    """The answer of :meth:`Requirements.check`.

    ``identification`` is the verified identification that meets the requirements (or
    ``None``); ``reasons`` are the conditions the user failed, as :mod:`django_eid.outcomes`
    gate-reason codes, empty when they pass.
    """

    identification: Identification | None
    reasons: tuple[str, ...] = ()

    @property
    def passed(self) -> bool:
        return not self.reasons


@dataclass(frozen=True)
class Requirements:
    """The conditions of a gate.

    ``max_age``: the latest verified identification is at most this old (seconds or a
    ``timedelta``); ``min_age``: the person is at least this many whole years old (an
    unknown age fails); ``providers``: verified with one of these providers;
    ``same_person``: the person is the one already verified on the account
    (:func:`django_eid.claims.account_person`); ``message``: what the start page says
    instead of the defaults.
    """

    max_age: datetime.timedelta | None = None
    min_age: int | None = None
    providers: tuple[str, ...] | None = None
    same_person: bool = False
    message: str | Promise | None = None

    @classmethod
    def of(
        cls,
        *,
        max_age: int | float | datetime.timedelta | None = None,
        min_age: int | None = None,
        providers: Iterable[str] | str | None = None,
        same_person: bool = False,
        message: str | Promise | None = None,
    ) -> Requirements:
        """Requirements from a gate's options, checked (``ValueError``/``TypeError``) at once."""
        if max_age is not None and not isinstance(max_age, datetime.timedelta):
            if isinstance(max_age, bool) or not isinstance(max_age, int | float):
                raise TypeError("max_age must be a number of seconds or a timedelta")
            try:
                max_age = datetime.timedelta(seconds=max_age)
            except (OverflowError, ValueError) as err:  # inf, nan
                raise ValueError("max_age must be a finite number of seconds") from err
        if max_age is not None and not datetime.timedelta(0) < max_age <= MAX_AGE_LIMIT:
            raise ValueError("max_age must be positive and at most 100 years")
        if min_age is not None and (
            isinstance(min_age, bool) or not isinstance(min_age, int) or not 0 <= min_age < 150
        ):
            raise ValueError("min_age must be a whole number of years below 150")
        if isinstance(providers, str):
            providers = (providers,)
        found = None if providers is None else tuple(providers)
        if found is not None and not found:
            raise ValueError("providers must name at least one provider")
        return cls(max_age, min_age, found, bool(same_person), message)

    def demand(self, verdict: Verdict) -> state.Demand:
        """What the start page needs to know of these requirements, which ``verdict`` failed."""
        return state.Demand(
            codes=verdict.reasons,
            message=str(self.message or ""),
            min_age=self.min_age,
            same_person=self.same_person,
            providers=self.providers,
        )

    def check(self, user: Any) -> Verdict:
        """Whether ``user`` meets these requirements now, and if not, why not."""
        if not getattr(user, "is_authenticated", False):
            return Verdict(None, (outcomes.NOT_VERIFIED,))
        found = Identification.objects.verified_for(
            user, max_age=self.max_age, min_age=self.min_age, providers=self.providers
        )
        if found is not None:
            if self.same_person and not _is_account_person(user, found):
                return Verdict(None, (outcomes.OTHER_PERSON,))
            return Verdict(found)
        return Verdict(None, self._failed(Identification.objects.verified_for(user)))

    def _failed(self, latest: Identification | None) -> tuple[str, ...]:
        """The conditions the user's latest verified identification fails."""
        if latest is None:
            return (outcomes.NOT_VERIFIED,)
        reasons = []
        if self.max_age is not None and (
            latest.completed_at is None or latest.completed_at < timezone.now() - self.max_age
        ):
            reasons.append(outcomes.TOO_OLD)
        if self.providers is not None and latest.identity_provider not in self.providers:
            reasons.append(outcomes.WRONG_PROVIDER)
        if self.min_age is not None:
            age = latest.age
            if age is None:
                reasons.append(outcomes.AGE_NOT_KNOWN)
            elif age < self.min_age:
                reasons.append(outcomes.TOO_YOUNG)
        # Nothing failed on the latest: an older one was meant (a race); ask again.
        return tuple(reasons) or (outcomes.NOT_VERIFIED,)


def _is_account_person(user: Any, identification: Identification) -> bool:
    person = claims.account_person(user)
    return (
        person is None
        or person.pk == identification.pk
        or claims.same_person(identification, person)
    )
