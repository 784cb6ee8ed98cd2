"""The national identity number and the broker credentials never reach a log line."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from django.test import Client

from django_eid import signals
from django_eid.brokers import eidhub, v1, v2
from django_eid.conf import eid_settings
from django_eid.models import MAX_JSON_BYTES, Identification
from django_eid.records import IdentificationRecord
from tests.fixtures_broker import (
    ACCESS_TOKEN,
    BASIC_CREDENTIALS,
    SSN,
    ScriptedBroker,
    expected,
    record,
)
from tests.fixtures_client import SECRET as CLIENT_SECRET
from tests.fixtures_views import Started

pytestmark = pytest.mark.django_db

SECRETS = (SSN, CLIENT_SECRET, BASIC_CREDENTIALS, ACCESS_TOKEN)


def everything_logged(caplog: pytest.LogCaptureFixture) -> str:
    """Every message, its arguments and any traceback, as text."""
    parts = [caplog.text]
    for entry in caplog.records:
        parts += [entry.getMessage(), repr(entry.args), entry.exc_text or ""]
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
    broker_api: str,
    start: Callable[..., Started],
    broker: ScriptedBroker,
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


# -- broker texts are stored scrubbed ---------------------------------------------------------

#: The sample person's number as a broker's free text may write it.
SPACED = f"{SSN[:6]} {SSN[6:]}"


def no_digits_of_the_number(text: str) -> bool:
    return SSN not in "".join(c for c in text if c.isdigit())


def test_an_error_message_quoting_the_number_is_stored_and_shown_scrubbed(
    broker_api: str,
    start: Callable[..., Started],
    broker: ScriptedBroker,
    alice_client: Client,
    admin_client: Client,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    started = start()
    error = {
        "ErrorCode": "PKI_BLOCKED",
        "ErrorMessage": f"Certificate of {SPACED} blocked (client_secret={CLIENT_SECRET}).",
    }
    broker.will_return(started.request_id, "ERROR", Error=error)
    page = alice_client.get(started.error_url())
    assert page.status_code == 200
    row = started.refresh()
    assert row.status == Identification.Status.ERROR
    assert "Certificate of *** blocked" in row.error_message
    for text in (row.error_message, json.dumps(row.raw), page.content.decode()):
        assert no_digits_of_the_number(text)
        assert CLIENT_SECRET not in text
    admin = admin_client.get(f"/admin/django_eid/identification/{row.pk}/change/")
    assert "Certificate of *** blocked" in admin.content.decode()
    assert no_digits_of_the_number(admin.content.decode())
    assert no_digits_of_the_number(everything_logged(caplog))


@pytest.mark.apis("v1", reason="v1's MetaData")
def test_a_number_in_metadata_or_a_variant_key_is_stored_scrubbed(
    broker_api: str,
    start: Callable[..., Started],
    broker: ScriptedBroker,
    alice_client: Client,
    eid: Callable[..., None],
) -> None:
    eid(GET_SOCIAL_SECURITY_NUMBER=True)
    started = start()
    metadata = {"note": f"verified {SPACED}", "personalNumber": "not even well formed", "k": "v"}
    broker.will_return(
        started.request_id, MetaData=metadata, socialSecurityNo=SSN, Person={"nin": SSN}
    )
    assert alice_client.get(started.success_url()).status_code == 302
    row = started.refresh()
    assert row.metadata == {"note": "verified ***", "personalNumber": "***", "k": "v"}
    assert row.raw["socialSecurityNo"] == "***"
    assert row.raw["Person"] == {"nin": "***"}
    assert row.raw["FirstName"] == "Kari"
    assert no_digits_of_the_number(json.dumps(row.raw) + json.dumps(row.metadata))
    # The number's own field is still read (and stored encrypted).
    assert row.social_security_number == SSN


def test_a_number_anywhere_in_any_api_s_record_is_stored_scrubbed(
    broker_api: str, start: Callable[..., Started], broker: ScriptedBroker, alice_client: Client
) -> None:
    started = start()
    body = broker.on_the_wire(record(started.request_id))
    body["customerNote"] = f"person {SSN[:6]}-{SSN[6:]}"
    body["extra"] = {"ids": [SSN, "3f2504e0-4f89-11d3-9a0c-0305e82c3301"]}
    broker.will_answer(started.request_id, json=body)
    assert alice_client.get(started.success_url()).status_code == 302
    row = started.refresh()
    assert row.status == Identification.Status.SUCCESS
    assert row.raw["customerNote"] == "person ***"
    assert row.raw["extra"] == {"ids": ["***", "3f2504e0-4f89-11d3-9a0c-0305e82c3301"]}
    assert no_digits_of_the_number(json.dumps(row.raw))


def test_the_admin_scrubs_rows_stored_before_the_scrubber(
    broker_api: str, alice: Any, admin_client: Client
) -> None:
    row = Identification.objects.create(
        user=alice,
        status=Identification.Status.ERROR,
        error_message=f"blocked {SSN}",
        raw={"Error": {"ErrorMessage": f"blocked {SSN}"}},
        metadata={"ssn": SSN},
    )
    html = admin_client.get(f"/admin/django_eid/identification/{row.pk}/change/")
    assert html.status_code == 200
    assert "blocked ***" in html.content.decode()
    assert SSN not in html.content.decode()


# -- the size of raw ------------------------------------------------------------------------


def test_a_huge_record_is_stored_as_a_marker_and_the_identity_still_read(
    broker_api: str, start: Callable[..., Started], broker: ScriptedBroker, alice_client: Client
) -> None:
    started = start()
    body = broker.on_the_wire(record(started.request_id))
    body["padding"] = "x" * (MAX_JSON_BYTES + 1)
    broker.will_answer(started.request_id, json=body)
    assert alice_client.get(started.success_url()).status_code == 302
    row = started.refresh()
    assert row.status == Identification.Status.SUCCESS
    assert row.first_name == expected().first_name
    # OIDC: the claims received, the protocol's aside (:func:`row_raw_of` is the REST APIs').
    original = row.raw["original_bytes"] if started.is_oidc else size(row_raw_of(body))
    assert original > MAX_JSON_BYTES
    assert row.raw == {"truncated": True, "original_bytes": original, "max_bytes": MAX_JSON_BYTES}


def test_a_record_within_the_cap_is_stored_whole(
    broker_api: str, start: Callable[..., Started], broker: ScriptedBroker, alice_client: Client
) -> None:
    started = start()
    if started.is_oidc:
        # What raw keeps of the claims is measured on a first identification of the person.
        broker.will_return(started.request_id)
        assert alice_client.get(started.success_url()).status_code == 302
        stored, started = size(started.refresh().raw), start()
    body = broker.on_the_wire(record(started.request_id))
    room = MAX_JSON_BYTES - (stored if started.is_oidc else size(row_raw_of(body)))
    body["padding"] = "x" * (room - len(',"padding":""'))
    broker.will_answer(started.request_id, json=body)
    alice_client.get(started.success_url())
    row = started.refresh()
    assert row.raw["padding"] == body["padding"]
    assert size(row.raw) == MAX_JSON_BYTES


@pytest.mark.apis("v1", reason="v1's MetaData")
def test_huge_metadata_is_stored_as_a_marker(
    broker_api: str, start: Callable[..., Started], broker: ScriptedBroker, alice_client: Client
) -> None:
    started = start()
    broker.will_return(started.request_id, MetaData={"k": "é" * MAX_JSON_BYTES})
    alice_client.get(started.success_url())
    row = started.refresh()
    assert row.metadata["truncated"] is True
    # Counted in UTF-8 bytes: "é" is two.
    assert row.metadata["original_bytes"] == len('{"k":""}') + 2 * MAX_JSON_BYTES


PARSERS: dict[str, Callable[[dict[str, Any]], IdentificationRecord]] = {
    "v1": lambda body: v1.parse_record(body),
    "v2": lambda body: v2.parse_record(body, what="GET"),
    "eid-hub": lambda body: eidhub.parse_record(body, what="GET"),
}


def row_raw_of(body: dict[str, Any]) -> dict[str, Any]:
    """What ``raw`` keeps of a wire body of the API in use (the number and echoes left out)."""
    return PARSERS[eid_settings.BROKER_API](body).redacted()


def size(value: dict[str, Any]) -> int:
    """The bytes of ``value`` as compact UTF-8 JSON, as the cap counts them."""
    return len(json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode())
