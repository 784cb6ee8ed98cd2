"""What a use case of the flow answers when it will not do what was asked.

Every front end (the HTML views, the JSON API, a management command) catches
:class:`Refused` and maps its :attr:`~Refused.outcome` to its own answer: the wording and
the status code are :mod:`django_eid.outcomes`'s.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from django_eid.models import Identification
from django_eid.outcomes import Outcome

if TYPE_CHECKING:
    pass

logger = logging.getLogger("django_eid")


class Refused(Exception):
    """The flow refused what was asked; ``outcome`` says what to tell the user.

    Nothing was changed, except where ``identification`` is set: then that row records
    the failure. ``field`` names the input at fault, when one is; ``params`` fill the
    message's placeholders.
    """

    def __init__(
        self,
        outcome: Outcome,
        *,
        identification: Identification | None = None,
        field: str | None = None,
        params: Mapping[str, Any] | None = None,
    ) -> None:
        super().__init__(outcome.code)
        self.outcome = outcome
        self.identification = identification
        self.field = field
        self.params = dict(params or {})

    @property
    def message(self) -> str:
        """The outcome's message in the active language, placeholders filled."""
        message = str(self.outcome.message)
        return message % self.params if self.params else message
