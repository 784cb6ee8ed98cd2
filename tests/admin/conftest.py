"""The admin's tests: a superuser, and the list's rows counted (but by the one test that
gives an estimate)."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client

from tests.fixtures_views import without_planner_estimate


@pytest.fixture(autouse=True)
def _counted(monkeypatch: pytest.MonkeyPatch) -> None:
    without_planner_estimate(monkeypatch)


@pytest.fixture
def superuser_client(django_user_model: Any) -> Client:
    user = django_user_model.objects.create_superuser("root", "root@example.com", "pw-root")
    client = Client()
    client.force_login(user)
    return client
