"""The migrations describe the model as it is: nothing for ``makemigrations`` to add."""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import call_command

pytestmark = pytest.mark.django_db


def test_the_migrations_match_the_model() -> None:
    out = StringIO()
    call_command("makemigrations", "django_eid", "--check", "--dry-run", stdout=out)
    assert "No changes detected" in out.getvalue()
