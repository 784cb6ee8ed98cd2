"""Where the return URLs send the browser: the front end (``FRONTEND_URLS``) for an
identification started through the API, today's destinations for the HTML pages'.

Each kind of return reaches the front end with each broker API (``broker_api``: the
returns are the API's); where it sends the browser then is the row's channel's, tested once.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import pytest
from django.contrib.messages import get_messages

from django_eid.models import Identification
from tests.api.conftest import (
    FRONTEND,
    FRONTEND_HOST,
    SAME_DEVICE,
    Api,
    aborted,
    api_start,
    front_end,
    identified,
    made_late,
    settled_by_its_return,
)
from tests.fixtures_broker import ScriptedBroker
from tests.fixtures_views import Started, start_session

pytestmark = pytest.mark.django_db

Status = Identification.Status


def end(broker: ScriptedBroker, started: Started, kind: str) -> str:
    """The person ends the session at the broker as ``kind``; the return URL they get."""
    if kind == "success":
        return identified(broker, started, SAME_DEVICE)
    if kind == "abort":
        return aborted(broker, started)
    return started.error_url("TIMEOUT")


@pytest.mark.parametrize(
    ("kind", "status"),
    [("success", Status.SUCCESS), ("abort", Status.ABORTED), ("error", Status.ERROR)],
)
def test_an_api_start_returns_to_the_front_end(
    broker_api: str,
    api: Api,
    broker: ScriptedBroker,
    frontend: dict[str, str],
    kind: str,
    status: str,
) -> None:
    started = api_start(api, broker)
    response = api.client.get(end(broker, started, kind))
    assert response.status_code == 302
    assert response["Location"] == front_end(kind, started)
    assert started.refresh().status == status


def test_an_expired_api_start_returns_to_the_front_end_s_error_url(
    api: Api, broker: ScriptedBroker, frontend: dict[str, str], eid: Callable[..., None]
) -> None:
    started = api_start(api, broker)
    made_late(eid, started)
    # Late, and the user never finished at the broker: the return expires it.
    broker.will_return(started.request_id, "USERINITIATED")
    response = api.client.get(started.success_url())
    assert response["Location"] == front_end("error", started)
    assert started.refresh().status == Status.EXPIRED


def test_a_late_success_returns_to_the_front_end_s_success_url(
    api: Api, broker: ScriptedBroker, frontend: dict[str, str], eid: Callable[..., None]
) -> None:
    started = api_start(api, broker)
    made_late(eid, started)
    # However late, a paid identification the broker holds as SUCCESS is stored.
    response = api.client.get(identified(broker, started, SAME_DEVICE))
    assert response["Location"] == front_end("success", started)
    assert started.refresh().status == Status.SUCCESS


def test_a_rejected_api_start_returns_to_the_front_end_s_error_url(
    api: Api, broker: ScriptedBroker, frontend: dict[str, str], eid: Callable[..., None]
) -> None:
    eid(MIN_AGE=18)
    started = api_start(api, broker)
    response = api.client.get(identified(broker, started, SAME_DEVICE, broker.persons.MINOR))
    assert response["Location"] == front_end("error", started)
    assert started.refresh().status == Status.REJECTED


def test_the_start_s_next_wins_for_a_success(
    api: Api, broker: ScriptedBroker, frontend: dict[str, str]
) -> None:
    next_url = f"https://{FRONTEND_HOST}/checkout/pay"
    started = api_start(api, broker, {"next": next_url})
    response = api.client.get(identified(broker, started, SAME_DEVICE))
    assert response["Location"] == next_url


def test_the_start_s_next_does_not_apply_to_an_abort(
    api: Api, broker: ScriptedBroker, frontend: dict[str, str]
) -> None:
    started = api_start(api, broker, {"next": "/checkout/"})
    response = api.client.get(aborted(broker, started))
    assert response["Location"] == front_end("abort", started)


def test_an_api_start_without_frontend_urls_keeps_the_html_destinations(
    api: Api, broker: ScriptedBroker
) -> None:
    started = api_start(api, broker)
    response = api.client.get(identified(broker, started, SAME_DEVICE))
    assert response["Location"] == "/"


@pytest.mark.parametrize(
    ("kind", "location"),
    [("success", "/"), ("abort", "/eid/start/"), ("error", None)],
)
def test_an_html_start_keeps_today_s_destinations(
    api: Api,
    broker: ScriptedBroker,
    frontend: dict[str, str],
    kind: str,
    location: str | None,
) -> None:
    started = start_session(broker, api.client)
    assert started.row.channel == "html"
    response = api.client.get(end(broker, started, kind))
    if location is None:  # the result page
        assert response.status_code == 200
        assert "The identification did not succeed." in response.content.decode()
    else:
        assert (response.status_code, response["Location"]) == (302, location)


def misconfigured(eid: Callable[..., None], **urls: str) -> None:
    """``FRONTEND_URLS`` changed to ``urls`` after the start (check E024 would stop a start
    with them: the client refuses a configuration with errors)."""
    eid(FRONTEND_URLS={**FRONTEND, **urls}, FRONTEND_ALLOWED_HOSTS=[FRONTEND_HOST])


def settled(api: Api, broker: ScriptedBroker) -> Started:
    """An API start identified on its device and settled by a poll: its return needs no broker."""
    started = api_start(api, broker)
    settled_by_its_return(api, started, identified(broker, started, SAME_DEVICE))
    assert api.identification(started.reference).json()["status"] == "SUCCESS"
    return started


def test_a_frontend_url_on_a_host_not_allowed_is_not_used(
    api: Api,
    broker: ScriptedBroker,
    eid: Callable[..., None],
    caplog: pytest.LogCaptureFixture,
) -> None:
    started = settled(api, broker)
    cancelled = api_start(api, broker)
    misconfigured(
        eid, success="https://evil.example/{reference}", abort="https://evil.example/{reference}"
    )
    with caplog.at_level(logging.ERROR, logger="django_eid"):
        assert api.client.get(started.success_url())["Location"] == "/"
        assert api.client.get(cancelled.abort_url())["Location"] == "/eid/start/"
    errors = [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR]
    assert len(errors) == 2
    assert all("E024" in error for error in errors)
    assert ("'success'" in errors[0], "'abort'" in errors[1]) == (True, True)
    assert "evil.example" not in "".join(errors)


@pytest.mark.parametrize(
    "url",
    [
        "//evil.example/{reference}",
        "javascript:alert('{reference}')",
        f"https://{FRONTEND_HOST}@evil.example/{{reference}}",
        f"https://{FRONTEND_HOST}.evil.example/{{reference}}",
    ],
)
def test_a_frontend_url_that_leaves_the_allowed_hosts_is_not_used(
    api: Api, broker: ScriptedBroker, eid: Callable[..., None], url: str
) -> None:
    started = settled(api, broker)
    misconfigured(eid, success=url)
    assert api.client.get(started.success_url())["Location"] == "/"


def test_a_frontend_path_on_the_site_is_used(
    api: Api, broker: ScriptedBroker, eid: Callable[..., None]
) -> None:
    eid(
        FRONTEND_URLS={**FRONTEND, "success": "/app/#/verified/{reference}"},
        FRONTEND_ALLOWED_HOSTS=[FRONTEND_HOST],
    )
    started = api_start(api, broker)
    response = api.client.get(identified(broker, started, SAME_DEVICE))
    assert response["Location"] == f"/app/#/verified/{started.reference}"


def messages_of(response: Any) -> list[str]:
    return [str(message) for message in get_messages(response.wsgi_request)]


def test_no_you_cancelled_message_for_an_api_start(
    api: Api, broker: ScriptedBroker, frontend: dict[str, str]
) -> None:
    started = api_start(api, broker)
    response = api.client.get(aborted(broker, started))
    assert response["Location"] == front_end("abort", started)
    assert messages_of(response) == []
    # The HTML start, for comparison: its page says so.
    html = start_session(broker, api.client)
    response = api.client.get(aborted(broker, html))
    assert messages_of(response) == ["You cancelled the identification."]


def test_no_you_cancelled_message_for_an_api_start_without_frontend_urls(
    api: Api, broker: ScriptedBroker
) -> None:
    started = api_start(api, broker)
    response = api.client.get(aborted(broker, started))
    assert response["Location"] == "/eid/start/"
    assert messages_of(response) == []
