"""The same-device rule: an identity reaches the account without the browser's return only
when the broker saw it on the device that started (its address and user agent); missing
values never match, spellings of one address do. The start keeps a keyed hash of the
device, not the values."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from django.contrib.auth.models import AbstractBaseUser
from django.test import Client

from django_eid import crypto, flow
from django_eid.models import Identification
from tests.fixtures_broker import ScriptedBroker
from tests.fixtures_views import Signals, Started, changed, logged_in, snapshot
from tests.flow.returns import (
    ELSEWHERE,
    START,
    TEST_CLIENT_IP,
    USER_AGENT,
    Ended,
    assert_go_back_page,
    identified_at_the_broker,
)

pytestmark = pytest.mark.django_db

Status = Identification.Status


def test_the_start_keeps_a_keyed_hash_of_the_device_not_the_values(
    start: Callable[..., Started], phone: Client
) -> None:
    row = start(client=phone).row
    assert len(row.device_key) == 64
    assert USER_AGENT not in row.device_key
    assert (row.user_agent, row.ip_address) == ("", None)


@pytest.mark.parametrize("ua", ["", "Mozilla/5.0 (Linux; Android 15)"])
def test_the_user_agent_is_part_of_the_device(
    start: Callable[..., Started], phone: Client, broker: ScriptedBroker, ua: str
) -> None:
    started = start(client=phone)
    identified_at_the_broker(broker, started, {"IPAddress": TEST_CLIENT_IP, "UserAgent": ua})
    assert flow.settle(started.row).outcome == "other_device"


@pytest.mark.parametrize(
    ("environment", "completed"),
    [
        ({"IPAddress": TEST_CLIENT_IP, "UserAgent": USER_AGENT}, True),
        ({"IPAddress": "198.51.100.7", "UserAgent": USER_AGENT}, False),
        ({"IPAddress": TEST_CLIENT_IP, "UserAgent": USER_AGENT + " relay"}, False),
        ({"IPAddress": TEST_CLIENT_IP}, False),
        ({"UserAgent": USER_AGENT}, False),
        ({"IPAddress": "127.000.000.001", "UserAgent": USER_AGENT}, False),
        (..., False),
    ],
    ids=[
        "the device that started",
        "another address",
        "another user agent",
        "no user agent",
        "no address",
        "an address in another spelling",
        "no EnvironmentInfo",
    ],
)
@pytest.mark.parametrize("how", ELSEWHERE)
def test_an_app_switch_completes_only_on_the_device_that_started(
    ended_at_the_broker: Callable[..., Ended],
    phone: Client,
    alice: AbstractBaseUser,
    broker: ScriptedBroker,
    signals: Signals,
    environment: Any,
    completed: bool,
    how: str,
) -> None:
    ended = ended_at_the_broker("success", client=phone)
    started = ended.started
    ended.record_says(EnvironmentInfo=environment)
    broker.counts.clear()
    response = ended.come_back_elsewhere(how)
    assert_go_back_page(response)
    assert (broker.counts["status"], broker.counts["retrieve"]) == (1, 1)
    if not completed:
        assert (snapshot(), signals.names) == (ended.before, [])
        return
    assert changed(ended.before, snapshot()) == {started.pk}
    row = started.row
    assert (row.status, row.last_name) == (Status.SUCCESS, "Nordmann")
    # The browser's address and user agent are the record's, stored on completion.
    assert (row.ip_address, row.user_agent) == (TEST_CLIENT_IP, USER_AGENT)
    assert signals.calls == [("identification_succeeded", started.pk, Status.SUCCESS, alice.pk)]
    # The browser that started shows where it went, once, and fetches nothing again.
    signals.clear()
    broker.counts.clear()
    shown = phone.get(START)
    assert (shown.status_code, shown["Location"]) == (302, "/")
    assert phone.get(START).status_code == 200  # the form again
    assert (signals.names, broker.counts["retrieve"]) == ([], 0)


# -- missing values never match, spellings of one address do ------------------------------
VICTIM_UA = "Mozilla/5.0 (iPhone; CPU iPhone OS 18_1) Mobile/15E148 Victim"


@pytest.mark.parametrize(
    ("start_address", "start_ua", "environment"),
    [
        ("", None, ...),  # no address, no user agent; the record has no EnvironmentInfo
        ("", VICTIM_UA, {"UserAgent": VICTIM_UA}),  # the user agent copied, no address
        ("unix:/run/gunicorn.sock", VICTIM_UA, {"IPAddress": "n/a", "UserAgent": VICTIM_UA}),
        ("", VICTIM_UA, {"IPAddress": "", "UserAgent": VICTIM_UA}),
    ],
    ids=["nothing on either side", "no address", "no valid address", "empty addresses"],
)
def test_missing_device_values_never_match_each_other(
    broker: ScriptedBroker,
    bob: AbstractBaseUser,
    signals: Signals,
    start: Callable[..., Started],
    start_address: str,
    start_ua: str | None,
    environment: Any,
) -> None:
    """The relay through missing values: Bob starts from a browser without a valid address
    (or behind a unix socket) with the victim's user agent copied; the victim identifies and
    the record says nothing usable of the device. Nothing of the victim reaches Bob."""
    headers = {"REMOTE_ADDR": start_address}
    if start_ua is not None:
        headers["HTTP_USER_AGENT"] = start_ua
    started = start(client=logged_in(bob, **headers))
    assert started.row.device_key == ""  # never recognised: only its callback finishes it
    identified_at_the_broker(broker, started, environment)
    assert flow.settle(started.row).outcome == "other_device"
    row = started.refresh()
    assert (row.status, row.name) == (Status.PENDING, "")
    assert signals.names == ["identification_started"]


def test_a_start_without_a_user_agent_is_never_recognised(
    start: Callable[..., Started], broker: ScriptedBroker, alice: AbstractBaseUser
) -> None:
    started = start(client=logged_in(alice))  # 127.0.0.1, no User-Agent
    assert started.row.device_key == ""
    identified_at_the_broker(broker, started, {"IPAddress": TEST_CLIENT_IP, "UserAgent": ""})
    assert flow.settle(started.row).outcome == "other_device"


def test_same_device_needs_a_device_on_both_sides() -> None:
    key = crypto.device_key("192.0.2.7", USER_AGENT)
    assert crypto.same_device(key, "192.0.2.7", USER_AGENT)
    for address, agent in [
        (None, USER_AGENT),
        ("", USER_AGENT),
        ("n/a", USER_AGENT),
        ("192.0.2.7", ""),
        (None, None),
    ]:
        assert not crypto.same_device(key, address, agent)
    # A row stored before this version from a start without an address: its key was made of
    # empty values, which now match nothing.
    legacy = crypto._digest(
        crypto._device_keys(crypto.configured_keys())[0], json.dumps(["", USER_AGENT])
    )
    assert not crypto.same_device(legacy, None, USER_AGENT)
    assert not crypto.same_device(legacy, "", USER_AGENT)
    assert crypto.device_key(None, USER_AGENT) == crypto.device_key("192.0.2.7", None) == ""


@pytest.mark.parametrize(
    ("start_address", "record_address"),
    [
        ("2001:db8::1", "2001:DB8::1"),
        ("2001:db8::1", "2001:db8:0:0:0:0:0:1"),
        ("2001:DB8:0000::0001", "2001:db8::1"),
        ("::ffff:192.0.2.7", "192.0.2.7"),
        ("192.0.2.7", "::ffff:192.0.2.7"),
        ("::FFFF:c000:0207", "192.0.2.7"),
    ],
)
def test_spellings_of_one_address_are_one_device(
    broker: ScriptedBroker,
    alice: AbstractBaseUser,
    start: Callable[..., Started],
    start_address: str,
    record_address: str,
) -> None:
    browser = logged_in(alice, REMOTE_ADDR=start_address, HTTP_USER_AGENT=USER_AGENT)
    started = start(client=browser)
    identified_at_the_broker(
        broker, started, {"IPAddress": record_address, "UserAgent": USER_AGENT}
    )
    assert flow.settle(started.row).outcome == "succeeded"
    assert started.refresh().status == Status.SUCCESS


def test_the_normalised_address_keeps_the_keys_of_canonical_spellings() -> None:
    """Rows in flight across the upgrade: a key made of a canonical address is unchanged."""
    assert crypto.normalized_ip("2001:DB8:0::1") == "2001:db8::1"
    assert crypto.normalized_ip("::ffff:192.0.2.7") == "192.0.2.7"
    assert crypto.normalized_ip("192.0.2.007") is None
    assert crypto.normalized_ip(" 192.0.2.7") is None
    key = crypto._device_keys(crypto.configured_keys())[0]
    for address in ("192.0.2.7", "2001:db8::1"):
        before = crypto._digest(key, json.dumps([address, USER_AGENT]))
        assert crypto.device_key(address, USER_AGENT) == before
