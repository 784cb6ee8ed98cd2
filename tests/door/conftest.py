"""The door's vocabulary: a visitor's browser, a login started there, its return."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from django.test import Client

from django_eid.models import Identification
from tests.fixtures_broker import ScriptedBroker
from tests.fixtures_views import Started, start_session

LOGIN = "/eid/login/"


@pytest.fixture
def visitor() -> Client:
    """A browser that is not logged in."""
    return Client()


@pytest.fixture
def door(broker: ScriptedBroker, visitor: Client) -> Callable[..., Started]:
    """``door(client=visitor, *, purpose="login", **post)``: POST the login page (a start at
    the door); the person at the broker has not finished yet."""

    def run(client: Client = visitor, *, purpose: str = "login", **post: str) -> Started:
        return start_session(broker, client, at=LOGIN, purpose=purpose, **post)

    return run


@pytest.fixture
def identify_at_door(
    door: Callable[..., Started], broker: ScriptedBroker, visitor: Client
) -> Callable[..., tuple[Started, Any]]:
    """``identify_at_door(client=visitor, *, purpose="login", next="", provider="",
    **record)``: a start at the door (for ``next``, with ``provider``), the person identified
    as ``record`` says, and the success return in ``client``: ``(started, response)``."""

    def run(
        client: Client = visitor,
        *,
        purpose: str = "login",
        next: str = "",
        provider: str = "",
        **record: Any,
    ) -> tuple[Started, Any]:
        post = {name: value for name, value in (("next", next), ("provider", provider)) if value}
        started = door(client, purpose=purpose, **post)
        broker.will_return(started.request_id, **record)
        return started, client.get(started.success_url())

    return run


def row_of(started: Started) -> Identification:
    return Identification.objects.get(pk=started.pk)
