"""The sandbox's v1 endpoints over HTTP, as a site's client calls them (Django's test client,
the sandbox mounted at ``/eid-sandbox/`` of tests/urls.py): the helpers of the v1 tests."""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import urlsplit

from django.test import Client

from tests.sandbox.conftest import BASIC, FORM, bearer_of

TOKEN = "/eid-sandbox/oauth/connect/token"
SESSION = "/eid-sandbox/identification/session"
STATUS = SESSION + "/status"
URLS = {
    "Success": "http://shop.test/eid/ok/?requestId=[1]&externalId=[2]",
    "Abort": "http://shop.test/eid/abort/?requestId=[1]&externalId=[2]",
    "Error": "http://shop.test/eid/error/?status=[0]&requestId=[1]&externalId=[2]",
}


def token(client: Client, scope: str = "identify", auth: str | None = BASIC) -> Any:
    headers = {"Authorization": auth} if auth else {}
    body = f"grant_type=client_credentials&scope={scope}"
    return client.post(TOKEN, body, content_type=FORM, headers=headers)


def bearer(client: Client) -> dict[str, str]:
    return bearer_of(token(client))


def create(client: Client, headers: dict[str, str] | None = None, **fields: Any) -> Any:
    body = json.dumps({"ReturnUrls": URLS, "ExternalReference": "ext-1", **fields})
    if headers is None:
        headers = bearer(client)
    return client.post(SESSION, body, content_type="application/json", headers=headers)


def retrieve(client: Client, request_id: str, headers: dict[str, str] | None = None) -> Any:
    if headers is None:
        headers = bearer(client)
    return client.get(SESSION, {"requestId": request_id}, headers=headers)


def login_path(client: Client, **fields: Any) -> tuple[str, str]:
    """Create a session; return the login page's path and the request id."""
    body = create(client, **fields).json()
    return urlsplit(body["Url"]).path, body["RequestId"]
