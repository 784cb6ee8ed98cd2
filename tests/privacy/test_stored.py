"""Personal data in what is stored: broker texts (error messages, ``MetaData``, any string of
any API's record) are stored and shown scrubbed, and ``raw``/``metadata`` are capped; the
number is stored encrypted and appears nowhere in clear (rows, URLs, the session); the start
keeps a keyed hash of the browser, never its address or user agent. What is logged and
reported: ``test_logs_and_reports.py``; the scrubber itself: ``test_scrub.py``.

What each broker API's record leaves in ``raw`` differs (the REST APIs' records, OpenID
Connect's claims), and so does how a broker words an error: the tests of ``raw`` and of an
error message run with each API (``broker_api``).
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Callable
from typing import Any

import pytest
from django.contrib.auth.models import AbstractBaseUser
from django.db import connection
from django.test import Client

from django_eid.brokers import eidhub, v1, v2
from django_eid.conf import eid_settings
from django_eid.models import MAX_JSON_BYTES, Identification
from django_eid.records import IdentificationRecord
from tests.fixtures_broker import (
    SSN,
    ScriptedBroker,
    expected,
    record,
)
from tests.fixtures_client import SECRET as CLIENT_SECRET
from tests.fixtures_views import Started, logged_in
from tests.privacy.helpers import USER_AGENT, everything_logged

pytestmark = pytest.mark.django_db

Status = Identification.Status

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


def test_a_number_in_metadata_or_a_variant_key_is_stored_scrubbed(
    start: Callable[..., Started],
    broker: ScriptedBroker,
    alice_client: Client,
    eid: Callable[..., None],
) -> None:
    eid(GET_SOCIAL_SECURITY_NUMBER=True)
    started = start()
    # v1's MetaData (the default API).
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


def test_the_admin_scrubs_rows_stored_before_the_scrubber(alice: Any, admin_client: Client) -> None:
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


def test_huge_metadata_is_stored_as_a_marker(
    start: Callable[..., Started], broker: ScriptedBroker, alice_client: Client
) -> None:
    started = start()
    broker.will_return(started.request_id, MetaData={"k": "é" * MAX_JSON_BYTES})  # v1's
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


# -- the number, the browser --------------------------------------------------------------
def test_the_number_is_stored_encrypted_and_shown_nowhere_in_clear(
    start: Callable[..., Started],
    alice_client: Client,
    broker: ScriptedBroker,
    eid: Callable[..., None],
) -> None:
    eid(GET_SOCIAL_SECURITY_NUMBER=True)
    started = start(ends="success")
    response = alice_client.get(started.success_url())
    row = started.row
    assert row.social_security_number == SSN  # readable in Python
    assert "SocialSecurityNumber" not in row.raw
    assert SSN not in repr(row.raw)
    for text in (str(row), repr(row), repr(row.social_security_number), response["Location"]):
        assert SSN not in text
    for call in broker.mock.calls:  # the URLs the broker was called with
        assert SSN not in call.request.url
    for url in started.sent["ReturnUrls"].values():
        assert SSN not in url
    with connection.cursor() as cursor:
        cursor.execute("SELECT * FROM django_eid_identification")
        stored = repr(cursor.fetchall())
    assert SSN not in stored
    assert hashlib.sha256(SSN.encode()).hexdigest() not in stored  # the lookup hash is keyed
    assert Identification.objects.with_social_security_number(SSN).get() == row
    session = alice_client.session
    assert SSN not in repr(dict(session.items()))


START_ADDRESS = "198.51.100.23"


def test_the_start_keeps_a_keyed_hash_of_the_browser_not_its_address_or_user_agent(
    start: Callable[..., Started], alice: AbstractBaseUser, broker: ScriptedBroker
) -> None:
    browser = logged_in(alice, HTTP_USER_AGENT=USER_AGENT, REMOTE_ADDR=START_ADDRESS)
    started = start(client=browser, ends="success")
    row = started.row
    assert (row.ip_address, row.user_agent) == (None, "")
    assert len(row.device_key) == 64
    again = start(client=browser, ends="success").row.device_key
    elsewhere = start(
        client=logged_in(alice, REMOTE_ADDR=START_ADDRESS), ends="success"
    ).row.device_key
    assert again == row.device_key != elsewhere  # the same browser, the same key; not another
    plain = f'["{START_ADDRESS}", "{USER_AGENT}"]'
    with connection.cursor() as cursor:
        cursor.execute("SELECT * FROM django_eid_identification")
        stored = repr(cursor.fetchall())
    for value in (
        START_ADDRESS,
        USER_AGENT,
        "PrivacySuite",
        hashlib.sha256(plain.encode()).hexdigest(),
    ):
        assert value not in stored
    # On completion the address and user agent are what the broker saw (EnvironmentInfo).
    rid = started.request_id
    seen = {"IPAddress": "192.0.2.44", "UserAgent": "BankID app/7.1"}
    broker.answer_record(rid, record(rid, EnvironmentInfo=seen))
    assert browser.get(started.success_url()).status_code == 302
    row = started.row
    assert (row.status, row.ip_address, row.user_agent) == (
        Status.SUCCESS,
        "192.0.2.44",
        "BankID app/7.1",
    )
