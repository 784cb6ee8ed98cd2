"""``eid_required(login=True)`` and ``EidRequiredMixin.eid_login``: a visitor who is not
logged in logs in with their eID, and passes the gate with that same identification."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from django.contrib.auth.models import AbstractBaseUser
from django.test import Client

from django_eid.models import Identification
from tests.door.conftest import row_of
from tests.fixtures_views import Started

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("path", ["/gated/door/", "/gated/class/door/"])
def test_a_visitor_goes_to_the_eid_login_not_login_url(path: str, visitor: Client) -> None:
    response = visitor.get(path)
    assert response.status_code == 302
    assert response["Location"] == f"/eid/login/?next={path}"
    json_answer = visitor.get(path, headers={"accept": "application/json"})
    assert json_answer.status_code == 401
    assert json_answer.json()["login_url"] == "/eid/login/"


def test_the_login_s_identification_passes_the_gate(
    verify: Callable[..., Identification],
    alice: AbstractBaseUser,
    identify_at_door: Callable[..., tuple[Started, Any]],
    visitor: Client,
) -> None:
    verify()
    Identification.objects.update(completed_at="2000-01-01T00:00:00Z")  # too old for the gate
    started, response = identify_at_door(next="/gated/door/")
    assert response["Location"] == "/gated/door/"
    page = visitor.get("/gated/door/")
    assert page.status_code == 200
    assert page.content.decode() == f"door {row_of(started).pk}"


def test_without_login_the_gate_sends_a_visitor_to_login_url(visitor: Client) -> None:
    assert visitor.get("/gated/any/")["Location"] == "/login/?next=/gated/any/"
