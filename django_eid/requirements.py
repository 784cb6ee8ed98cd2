"""What a gate requires of a user's verified identity, and whether the user meets it.

The question "may this user do this now?" answered without HTTP: the decorator, the
mixin and the REST framework permission ask it through :meth:`Requirements.check`, and
a site may ask it anywhere (a template tag, a task). Only the user's latest verification
is judged: it is who the user is now.
"""

from __future__ import annotations

import datetime
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from django.utils.functional import Promise

from django_eid import claims, outcomes, person_keys, reasons
from django_eid.brokers import ANY_PROVIDER_RE
from django_eid.models import Identification, check_level

#: The longest ``max_age`` that means something (and that date arithmetic can still do).
MAX_AGE_LIMIT = datetime.timedelta(days=36525)


@dataclass(frozen=True)
class Verdict:
    """The answer of :meth:`Requirements.check`.

    ``identification`` is the user's latest verified identification when it meets the
    requirements (else ``None``); ``reasons`` are the conditions the user failed, as
    :mod:`django_eid.reasons` codes, empty when they pass.
    """

    identification: Identification | None
    reasons: tuple[str, ...] = ()

    @property
    def passed(self) -> bool:
        return not self.reasons


@dataclass(frozen=True)
class Demand:
    """What a gate asked of the identification the user starts: why they were sent, and
    what the identification must be (kept in the session by :mod:`django_eid.state`).

    ``codes`` are the conditions the user failed, ``message`` the gate's own explanation
    instead of the defaults.
    """

    codes: tuple[str, ...] = ()
    message: str = ""
    min_age: int | None = None
    same_person: bool = False
    providers: tuple[str, ...] | None = None
    min_loa: str | None = None

    def reasons(self) -> list[str]:
        """What the start page tells the user, in the active language."""
        if self.message:
            return [self.message]
        return [outcomes.gate_reason(code, min_age=self.min_age) for code in self.codes]

    def as_json(self, start_url: str) -> dict[str, Any]:
        """The body of a 403 answer to a JSON client: no personal data, the start URL."""
        return {
            "code": "eid_required",
            "message": " ".join(self.reasons()),
            "reasons": list(self.codes),
            "start_url": start_url,
        }


@dataclass(frozen=True)
class Requirements:
    """The conditions of a gate.

    ``max_age``: the latest verification is at most this old (seconds or a ``timedelta``);
    ``min_age``: its person is at least this many whole years old (an unknown age fails);
    ``min_loa``: it was made at this level of assurance or a higher one (``"low"``,
    ``"substantial"``, ``"high"``; a level the broker did not state fails);
    ``providers``: it was made with one of these providers; ``same_person``: its person is
    the one already verified on the account (:func:`django_eid.claims.account_person`);
    ``message``: what the start page says instead of the defaults.
    """

    max_age: datetime.timedelta | None = None
    min_age: int | None = None
    providers: tuple[str, ...] | None = None
    same_person: bool = False
    message: str | Promise | None = None
    # Last, so that building one with positional arguments means what it meant before.
    min_loa: str | None = None

    @classmethod
    def of(
        cls,
        *,
        max_age: int | float | datetime.timedelta | None = None,
        min_age: int | None = None,
        min_loa: str | None = None,
        providers: Iterable[str] | str | None = None,
        same_person: bool = False,
        message: str | Promise | None = None,
    ) -> Requirements:
        """Requirements from a gate's options, checked at once (``ValueError``, ``TypeError``)."""
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
        check_level(min_loa)
        if isinstance(providers, str):
            providers = (providers,)
        found = None if providers is None else tuple(providers)
        if found is not None and not found:
            raise ValueError("providers must name at least one provider")
        # Decorators build these at import time: the syntax of any API, not the settings'.
        bad = [p for p in found or () if not ANY_PROVIDER_RE.match(str(p))]
        if bad:
            raise ValueError(f"providers: {bad!r} are not provider names (e.g. NO_BANKID_WEB)")
        return cls(max_age, min_age, found, bool(same_person), message, min_loa)

    def check(self, user: Any) -> Verdict:
        """Whether ``user``'s latest verification meets these requirements, and if not, why."""
        latest = Identification.objects.latest_verified(user)
        if latest is None:
            return Verdict(None, (reasons.NOT_VERIFIED,))
        unmet = latest.unmet(
            max_age=self.max_age,
            min_age=self.min_age,
            min_loa=self.min_loa,
            providers=self.providers,
        )
        if not unmet and self.same_person and not _is_account_person(user, latest):
            unmet = (reasons.OTHER_PERSON,)
        return Verdict(None if unmet else latest, unmet)

    def demand(self, verdict: Verdict) -> Demand:
        """What the start page needs to know of these requirements, which ``verdict`` failed."""
        return Demand(
            codes=verdict.reasons,
            message=str(self.message or ""),
            min_age=self.min_age,
            same_person=self.same_person,
            providers=self.providers,
            min_loa=self.min_loa,
        )


def _is_account_person(user: Any, identification: Identification) -> bool:
    person = claims.account_person(user)
    return (
        person is None
        or person.pk == identification.pk
        or person_keys.same_person(identification, person)
    )
