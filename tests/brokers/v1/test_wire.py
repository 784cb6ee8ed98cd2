"""``BROKER_API = "v1"`` sends exactly what django-eid sent before the broker APIs had an
interface: every request of every kind of call, its URL, headers and body byte for byte.

``wire.json`` was recorded from the client of commit b51c09c (before
``django_eid.brokers``) with the same calls; only headers that depend on the installed
libraries (``User-Agent`` carries their versions, ``Accept-Encoding`` their codecs) and
``Content-Length`` are left out.

One change since is deliberate, and applied to the recording here rather than in it: the
return URLs no longer ask for the broker's request id (``requestId=[1]``), which is
personal data to ``eid_purge`` and would land in access logs and browser history; the
callbacks are bound by django-eid's reference and external id (:data:`DROPPED`).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import responses

from django_eid.brokers import ReturnUrls
from django_eid.client import EidClient
from tests.fixtures_client import RECORD, REQUEST_ID, SESSION_URL, TOKEN_URL

RECORDED = Path(__file__).with_name("wire.json")
CREATED = {
    "Url": "https://id.broker.test/NoBankIDWeb/Start?sessionid=Qm9n",
    "RequestId": REQUEST_ID,
}
#: What the recording asked for and the return URLs no longer do (see the module docstring).
DROPPED = "requestId=[1]&"
#: Headers that depend on the installed libraries, or follow from the body.
VARYING = {"User-Agent", "Accept-Encoding", "Content-Length"}


def sent_requests(rsps: responses.RequestsMock) -> list[dict[str, Any]]:
    """Every request sent, as recorded."""
    sent = []
    for call in rsps.calls:
        request = call.request
        body = request.body.decode() if isinstance(request.body, bytes) else request.body
        headers = {k: v for k, v in sorted(request.headers.items()) if k not in VARYING}
        sent.append(
            {"method": request.method, "url": request.url, "headers": headers, "body": body}
        )
    return sent


def test_the_v1_requests_are_those_sent_before_the_interface(
    wire: responses.RequestsMock,
) -> None:
    token = {"access_token": "tok-1", "expires_in": 3600, "token_type": "Bearer"}
    wire.add(responses.POST, TOKEN_URL, json=token)
    wire.add(responses.POST, SESSION_URL, json=CREATED)
    wire.add(responses.GET, SESSION_URL, json=RECORD)
    wire.add(responses.GET, SESSION_URL + "/status", json={"Done": True})
    wire.add(responses.PUT, SESSION_URL + "/invalidate", json={})
    base = "https://shop.example/eid/return/r/"
    urls = ReturnUrls(base + "success/", base + "abort/", base + "error/")
    client = EidClient()
    client.create_session(return_urls=urls, external_reference="ext-1")
    client.create_session(
        return_urls=urls,
        external_reference="6f1c0d7e9b2a4c55a1e3f0b8d2c4e6a8",
        identity_provider="NO_BANKID_WEB",
        language="NO",
        get_social_security_number=True,
        iframe_domain="shop.example:8443",
        iframe_web_messaging=True,
        prefilled_social_security_number="31127112345",
    )
    client.get_session(REQUEST_ID)
    client.get_session(REQUEST_ID, metadata=True)
    client.session_done(REQUEST_ID)
    client.invalidate_session(REQUEST_ID)
    recorded = RECORDED.read_text()
    assert recorded.count(DROPPED) == 6  # three return URLs in each of the two creates
    assert sent_requests(wire) == json.loads(recorded.replace(DROPPED, ""))
