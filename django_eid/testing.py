"""pytest plugin of django-eid: the ``eid_broker`` fixture.

Installed with django-eid (``pytest11`` entry point), so a site's test suite
has the fixture without any configuration. It serves the sandbox broker at
the configured ``DJANGO_EID`` URLs through ``responses`` and lets the test act
as the person at the broker::

    def test_my_receiver(client, django_user_model, eid_broker):
        client.force_login(django_user_model.objects.create_user("kari"))
        client.post(reverse("django_eid:start"))
        response = client.get(eid_broker.complete(eid_broker.persons.NORWEGIAN))
        assert Profile.objects.get(user__username="kari").verified

The broker reads ``DJANGO_EID`` when the fixture is set up: a test that
changes those settings with pytest-django's ``settings`` fixture must list
``settings`` (and make its change in a fixture) before ``eid_broker``.

This module is imported by pytest at start-up, before Django is configured:
it imports nothing from Django, ``requests`` or ``responses`` until a fixture
runs.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from django_eid.sandbox.fake import EidBroker
    from django_eid.sandbox.persons import Person, Persons

__all__ = ["EidBroker", "Person", "Persons", "eid_broker"]


def __getattr__(name: str) -> Any:
    # Lazy re-exports, for type hints in a site's tests (``eid_broker: EidBroker``).
    if name == "EidBroker":
        from django_eid.sandbox.fake import EidBroker

        return EidBroker
    if name in ("Person", "Persons"):
        from django_eid.sandbox import persons

        return getattr(persons, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


@pytest.fixture
def eid_broker() -> Iterator[EidBroker]:
    """The identification broker, served through ``responses`` at the configured URLs.

    Act as the person with ``complete(person=None, **overrides)``, ``abort()`` and
    ``fail(status="TIMEOUT")``; each returns the return URL to GET with the test
    client. See :class:`django_eid.sandbox.fake.EidBroker` for the rest.
    """
    from django_eid.sandbox.fake import EidBroker

    with EidBroker.from_settings() as broker:
        yield broker
