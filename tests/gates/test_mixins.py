"""``EidRequiredMixin``: the decorator's gate for class-based views (tests/gates/views.py)."""

from __future__ import annotations

import datetime

import pytest
from django.test import Client
from django.utils import timezone
from django.views import View

from django_eid.mixins import EidRequiredMixin
from django_eid.models import Identification
from django_eid.testing import EidBroker
from tests.gates.helpers import JSON, verified_at, verify

pytestmark = pytest.mark.django_db


def test_a_logged_out_user_goes_to_the_login_page(client: Client) -> None:
    response = client.get("/gated/class/adults/")
    assert (response.status_code, response["Location"]) == (
        302,
        "/login/?next=/gated/class/adults/",
    )


def test_the_class_attributes_are_the_conditions(
    alice_client: Client, eid_broker: EidBroker
) -> None:
    verify(alice_client, eid_broker, eid_broker.persons.MINOR)
    response = alice_client.get("/gated/class/adults/")
    assert response.status_code == 302
    assert response["Location"] == "/eid/start/?next=%2Fgated%2Fclass%2Fadults%2F"
    verify(alice_client, eid_broker, eid_broker.persons.NORWEGIAN)
    assert alice_client.get("/gated/class/adults/").content == b"adults (class)"


@pytest.mark.parametrize(("level", "passes"), [("high", True), ("substantial", False), ("", False)])
def test_eid_min_loa_is_a_condition(
    alice_client: Client, eid_broker: EidBroker, level: str, passes: bool
) -> None:
    verified_at(alice_client, eid_broker, level)
    response = alice_client.get("/gated/class/high/", headers=JSON)
    if passes:
        assert response.content == b"high (class)"
    else:
        assert (response.status_code, response.json()["reasons"]) == (403, ["loa_too_low"])


def test_get_eid_requirements_decides_per_request(
    alice_client: Client, eid_broker: EidBroker
) -> None:
    verify(alice_client, eid_broker)
    Identification.objects.update(completed_at=timezone.now() - datetime.timedelta(minutes=5))
    assert alice_client.get("/gated/class/chosen/").status_code == 200
    assert alice_client.get("/gated/class/chosen/?fresh=1").status_code == 302


def test_a_json_client_gets_json(alice_client: Client) -> None:
    response = alice_client.get("/gated/class/adults/", headers=JSON)
    assert response.status_code == 403
    assert response.json()["reasons"] == ["not_verified"]


def test_class_attributes_are_checked_when_the_class_is_defined() -> None:
    with pytest.raises(ValueError, match="min_age"):

        class Broken(EidRequiredMixin, View):
            eid_min_age = -1

    with pytest.raises(ValueError, match="provider"):

        class Typo(EidRequiredMixin, View):
            eid_providers = ["bank id"]

    with pytest.raises(ValueError, match="min_loa"):

        class LevelTypo(EidRequiredMixin, View):
            eid_min_loa = "hihg"
