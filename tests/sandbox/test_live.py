"""django-eid's real client against the sandbox app over a real socket (pytest-django's live server)."""

from __future__ import annotations

from urllib.parse import parse_qs, urlsplit

import pytest
import requests

from django_eid.brokers import ReturnUrls
from django_eid.client import EidClient
from django_eid.exceptions import EidApiError, InvalidScope
from django_eid.sandbox.persons import builtin_persons
from tests.fixtures_client import SettingsWrapper, sandbox_settings

URLS = ReturnUrls(
    success="http://shop.test/ok/", abort="http://shop.test/abort/", error="http://shop.test/error/"
)


@pytest.fixture
def sandbox_url(live_server: object, settings: SettingsWrapper) -> str:
    """One settings dict drives both sides: the client's URLs point at the sandbox."""
    url = f"{live_server}/eid-sandbox"
    settings.DJANGO_EID = sandbox_settings(url)
    return url


def test_the_client_and_a_browser_against_the_sandbox(sandbox_url: str) -> None:
    client = EidClient()
    created = client.create_session(
        return_urls=URLS,
        external_reference="ext-42",
        language="NO",
        get_social_security_number=True,
    )
    assert created.url.startswith(f"{sandbox_url}/login/")
    assert client.get_session(created.request_id).status == "CREATED"

    browser = requests.Session()
    page = browser.get(created.url, timeout=10)
    assert page.status_code == 200
    assert '<html lang="nb">' in page.text
    # No CSRF token or cookie: inside a third-party frame the browser would send neither;
    # the unguessable session id in the URL authorises the POST, as at the real broker.
    assert "csrfmiddlewaretoken" not in page.text
    form = {"action": "identify", "person": "MINOR"}
    answer = browser.post(created.url, data=form, allow_redirects=False, timeout=10)
    assert answer.status_code == 302
    query = parse_qs(urlsplit(answer.headers["Location"]).query)
    assert query == {"externalId": ["ext-42"]}  # no broker id in the URL

    record = client.get_session(created.request_id)
    minor = builtin_persons().MINOR
    assert record.is_success
    assert record.social_security_number == minor.national_identity_number
    assert record.birth_date == minor.birth_date
    assert record.environment_info.user_agent == browser.headers["User-Agent"]
    client.close()


def test_client_errors_from_the_sandbox(sandbox_url: str, settings: SettingsWrapper) -> None:
    client = EidClient()
    with pytest.raises(EidApiError) as caught:
        client.get_session("0" * 200)
    assert caught.value.status_code == 404
    client.close()
    settings.DJANGO_EID = {**settings.DJANGO_EID, "SCOPES": ["identify", "admin"]}
    client = EidClient()
    with pytest.raises(InvalidScope):
        client.get_token()
    client.close()
