"""The national identity number and the broker credentials never reach a log line."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from django.test import Client

from django_eid import signals
from django_eid.models import Identification
from tests.flow.conftest import (
    ACCESS_TOKEN,
    BASIC_CREDENTIALS,
    CLIENT_SECRET,
    SSN,
    Broker,
    Started,
)

pytestmark = pytest.mark.django_db

SECRETS = (SSN, CLIENT_SECRET, BASIC_CREDENTIALS, ACCESS_TOKEN)


def everything_logged(caplog: pytest.LogCaptureFixture) -> str:
    """Every message, its arguments and any traceback, as text."""
    parts = [caplog.text]
    for record in caplog.records:
        parts += [record.getMessage(), repr(record.args), record.exc_text or ""]
    return "\n".join(parts)


@pytest.fixture
def crashing_receiver() -> Iterator[None]:
    """A receiver that crashes after reading the number (its message is the site's business)."""

    def crash(identification: Identification, **kwargs: Any) -> None:
        assert identification.social_security_number == SSN
        raise ValueError("receiver bug")

    signals.identification_succeeded.connect(crash, weak=False, dispatch_uid="test-privacy")
    yield
    signals.identification_succeeded.disconnect(dispatch_uid="test-privacy")


@pytest.mark.apis("v1", reason="v1's create request")
def test_no_log_line_of_the_flow_holds_the_number_or_a_secret(
    start: Callable[..., Started],
    broker: Broker,
    alice_client: Client,
    eid: Callable[..., None],
    caplog: pytest.LogCaptureFixture,
    crashing_receiver: None,
) -> None:
    caplog.set_level(logging.DEBUG)
    eid(GET_SOCIAL_SECURITY_NUMBER=True)

    # Success, with a receiver crash, then a replay.
    ok = start(next="/account/")
    broker.will_return(ok.request_id)
    assert alice_client.get(ok.success_url()).status_code == 302
    assert alice_client.get(ok.success_url()).status_code == 302
    assert ok.refresh().social_security_number == SSN

    # In progress, then a record of another session, then a refused status.
    refused = start()
    broker.will_return(refused.request_id, "CREATED")
    broker.will_answer(refused.request_id, json={"RequestId": "other", "SocialSecurityNumber": SSN})
    broker.will_return(refused.request_id, "TIMEOUT")
    assert alice_client.get(refused.success_url()).status_code == 409
    assert alice_client.get(refused.success_url()).status_code == 502
    assert alice_client.get(refused.success_url()).status_code == 200

    # A record that breaks the contract, with the number in it.
    broken = start()
    broker.will_answer(broken.request_id, json={"RequestId": broken.request_id, "Name": 12})
    assert alice_client.get(broken.success_url()).status_code == 502

    # Error, abort, tampering, another browser, expiry.
    failed = start()
    broker.will_return(failed.request_id, "ERROR")
    assert alice_client.get(failed.error_url()).status_code == 200
    aborted = start()
    assert alice_client.get(aborted.abort_url(p2="0" * 32)).status_code == 400
    assert alice_client.get(aborted.abort_url()).status_code == 302
    assert Client().get(broken.success_url()).status_code == 200  # interstitial

    logged = everything_logged(caplog)
    assert "Identification" in logged  # the flow did log
    assert "receiver bug" in logged  # and so did the crash
    for secret in SECRETS:
        assert secret not in logged
    assert broker.sent()["GetSocialSecurityNumber"] is True
