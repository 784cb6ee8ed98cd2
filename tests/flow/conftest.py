"""What only the flow's tests use beside the suite's vocabulary (``tests/conftest.py``): the
browser that starts, for the same-device rule."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import AbstractBaseUser
from django.test import Client

from tests.flow.returns import starting_browser


@pytest.fixture
def phone(alice: AbstractBaseUser) -> Client:
    """Alice's phone browser, which starts the identification: the device (its address and
    user agent, :data:`tests.flow.returns.USER_AGENT`) the broker's record is compared with."""
    return starting_browser(alice)
