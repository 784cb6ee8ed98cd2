"""``EidRequiredMixin``: :func:`~django_eid.decorators.eid_required` for class-based views."""

from __future__ import annotations

import datetime
from collections.abc import Iterable
from typing import Any, ClassVar

from django.http import HttpRequest, HttpResponseBase
from django.utils.functional import Promise

from django_eid.decorators import gate
from django_eid.requirements import Requirements


class EidRequiredMixin:
    """Let the view run only for users whose verified identity meets the class's conditions.

    Put it first among the bases. The conditions are those of ``eid_required``, as class
    attributes; override :meth:`get_eid_requirements` to decide them per request. A user
    who passes finds the verified identification on ``request.eid_identification``.
    """

    #: Verified at most this long ago (seconds or ``timedelta``); ``None``: any age.
    eid_max_age: int | float | datetime.timedelta | None = None
    #: The person is at least this many whole years old; an unknown age does not pass.
    eid_min_age: int | None = None
    #: Verified at this level of assurance or a higher one (``"low"``, ``"substantial"``,
    #: ``"high"``); a level the broker did not state does not pass.
    eid_min_loa: str | None = None
    #: Verified with one of these providers; ``None``: any.
    eid_providers: Iterable[str] | None = None
    #: The person already verified on the account.
    eid_same_person: bool = False
    #: What the start page says instead of the defaults.
    eid_message: str | Promise | None = None
    #: Where a logged-out user goes; ``None``: ``settings.LOGIN_URL``.
    eid_login_url: str | None = None
    #: Keep a form posted before verifying, and send it again afterwards.
    eid_keep_form: bool = True
    #: A visitor who is not logged in logs in with their eID (``django_eid:login``), and
    #: passes with that same identification when it meets the conditions.
    eid_login: bool = False
    #: The class attributes' requirements, checked when the class is defined.
    _eid_requirements: ClassVar[Requirements | None] = None

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        # A mistake in the class attributes fails at import, not on every request.
        cls._eid_requirements = cls._requirements_of_attributes()

    @classmethod
    def _requirements_of_attributes(cls) -> Requirements:
        return Requirements.of(
            max_age=cls.eid_max_age,
            min_age=cls.eid_min_age,
            min_loa=cls.eid_min_loa,
            providers=cls.eid_providers,
            same_person=cls.eid_same_person,
            message=cls.eid_message,
        )

    def get_eid_requirements(self) -> Requirements:
        """The conditions for this request; by default the class attributes'."""
        requirements: Requirements = getattr(type(self), "_eid_requirements", None) or (
            self._requirements_of_attributes()
        )
        return requirements

    def dispatch(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponseBase:
        refusal = gate(
            request,
            self.get_eid_requirements(),
            login_url=self.eid_login_url,
            keep_form=self.eid_keep_form,
            login=self.eid_login,
        )
        if refusal is not None:
            return refusal
        response: HttpResponseBase = super().dispatch(request, *args, **kwargs)  # type: ignore[misc]
        return response
