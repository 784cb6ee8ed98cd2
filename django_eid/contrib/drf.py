"""Django REST framework: the ``EidVerified`` permission.

Django REST framework is not a dependency of django-eid; import this module only on a
site that has it::

    from django_eid.contrib.drf import EidVerified

    class PayoutVerified(EidVerified):
        max_age = 300
        same_person = True

    class PayoutAccountView(APIView):
        permission_classes = [IsAuthenticated, PayoutVerified]

A user who does not pass gets 403 with ``{"code": "eid_required", "message", "reasons",
"start_url"}``; an unauthenticated one is left to REST framework (401 or 403, per its
authentication classes).
"""

from __future__ import annotations

import datetime
from collections.abc import Iterable
from typing import Any
from urllib.parse import urlencode

from django.urls import reverse
from django.utils.functional import Promise
from rest_framework.permissions import BasePermission

from django_eid import state
from django_eid.requirements import Requirements


class EidVerified(BasePermission):  # type: ignore[misc]  # REST framework is untyped
    """Allow users whose verified identity meets the class's conditions (those of
    ``eid_required``, as class attributes)."""

    max_age: int | float | datetime.timedelta | None = None
    min_age: int | None = None
    #: The level of assurance at least (``"low"``, ``"substantial"``, ``"high"``).
    min_loa: str | None = None
    providers: Iterable[str] | None = None
    same_person: bool = False
    #: What the answer's ``message`` says instead of the defaults.
    eid_message: str | Promise | None = None
    #: Where the front end sends the user afterwards (the start's ``next``); ``None``: none.
    next_url: str | None = None

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        # A mistake in the class attributes fails at import, not on every request.
        cls._requirements = Requirements.of(
            max_age=cls.max_age,
            min_age=cls.min_age,
            min_loa=cls.min_loa,
            providers=cls.providers,
            same_person=cls.same_person,
            message=cls.eid_message,
        )

    def get_requirements(self) -> Requirements:
        """The conditions for this request; by default the class attributes'."""
        requirements: Requirements = getattr(type(self), "_requirements", None) or (
            Requirements.of(
                max_age=self.max_age,
                min_age=self.min_age,
                min_loa=self.min_loa,
                providers=self.providers,
                same_person=self.same_person,
                message=self.eid_message,
            )
        )
        return requirements

    def has_permission(self, request: Any, view: Any) -> bool:
        requirements = self.get_requirements()
        user = request.user
        if not getattr(user, "is_authenticated", False):
            return False
        verdict = requirements.check(user)
        if verdict.passed:
            request.eid_identification = verdict.identification
            return True
        demand = requirements.demand(verdict)
        start_url = reverse("django_eid:start")
        if self.next_url:
            if hasattr(request, "session"):
                state.require(request, self.next_url, demand)
            start_url += "?" + urlencode({"next": self.next_url})
        # REST framework answers 403 with this as its body (instances live one request).
        self.message = demand.as_json(start_url)
        self.code = "eid_required"
        return False
