"""What a return of the flow does, for the tests of the returns: the record's properties it
reads, the outcome of each genuine return, the checks that a refused one changed nothing and
consumed nothing (:class:`Ended`), a session made older than it is, and a genuine return that
reaches a browser without the one-time state (the app switch)."""

from __future__ import annotations

import datetime
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django.contrib.auth.models import AbstractBaseUser
from django.test import Client

from django_eid.models import Identification
from tests.fixtures_broker import SAMPLE, SSN, UNIQUE_ID, ScriptedBroker, record
from tests.fixtures_views import Signals, Started, changed, logged_in, snapshot

Status = Identification.Status
START = "/eid/start/"

#: What the genuine return of each kind does once nothing hostile got in the way: the
#: response's status code and ``Location``, the row's status, the signal sent.
CALLBACK_OUTCOME = {
    "success": (302, "/", Status.SUCCESS, "identification_succeeded"),
    "abort": (302, START, Status.ABORTED, "identification_aborted"),
    "error": (200, None, Status.ERROR, "identification_failed"),
}


def pending_refs(client: Client) -> set[str]:
    """The references of the starts this browser's session holds (the one-time state)."""
    return set(client.session.get("django_eid_pending", {}))


def url_of(started: Started, kind: str, **values: str) -> str:
    """The return URL of ``kind``, its placeholders filled by hand (``p0``/``p1``/``p2``;
    the genuine ids by default, ``[0]`` TIMEOUT), without asking the broker."""
    fill = {"success": started.success_url, "abort": started.abort_url}.get(kind)
    return fill(**values) if fill else started.error_url(**values)


def assert_untouched(
    response: Any, status: int, before: dict[int, Any], signals: Signals, broker: ScriptedBroker
) -> None:
    """A refusal: its status code, no row changed, no signal, nothing asked of the broker."""
    assert response.status_code == status
    assert snapshot() == before
    assert signals.names == []
    assert (broker.counts["status"], broker.counts["retrieve"]) == (0, 0)


def assert_genuine_completes(
    client: Client, started: Started, kind: str, signals: Signals, user: AbstractBaseUser
) -> None:
    """The real return still works: nothing was consumed by the refused one.

    The broker's record must say what ``kind`` means (``start(ends=kind)``): an Error
    return ends the row only when the record confirms the failure.
    """
    code, location, status, signal = CALLBACK_OUTCOME[kind]
    before = snapshot()
    response = client.get(started.url(kind))
    assert response.status_code == code
    if location:
        assert response["Location"] == location
    assert changed(before, snapshot()) == {started.pk}
    assert started.row.status == status
    if kind == "error":
        assert started.row.error_status == "TIMEOUT"  # the URL's [0]
    assert signals.calls == [(signal, started.pk, status, user.pk)]


def assert_pending_then_completes(client: Client, started: Started, signals: Signals) -> None:
    """Nothing was stored or consumed: the row is PENDING, its reference still in ``client``'s
    session, no signal but the start's; the same Success URL completes it now that the
    broker answers."""
    assert started.refresh().status == Status.PENDING
    assert signals.names == ["identification_started"]
    assert started.reference in pending_refs(client)
    response = client.get(started.success_url())
    assert response.status_code == 302
    assert started.refresh().status == Status.SUCCESS
    assert signals.names == ["identification_started", "identification_succeeded"]


@dataclass
class Ended:
    """A session the person ended at the broker (``start(ends=kind)``), the start's signal
    forgotten and the rows as they were then (:attr:`before`): what a refused return must
    leave untouched, and whose genuine return must still complete it; its record as the
    test scripts it, its return in another browser. Made by the ``ended_at_the_broker``
    fixture (``tests/flow/conftest.py``)."""

    started: Started
    kind: str
    before: dict[int, Any]
    client: Client
    user: AbstractBaseUser
    signals: Signals
    broker: ScriptedBroker
    eid: Callable[..., None]

    def record_says(self, status: str = "SUCCESS", **fields: Any) -> None:
        """Retrieving the session answers its record with ``status`` and ``fields`` (until
        healed: :func:`tests.fixtures_broker.record`)."""
        request_id = self.started.request_id
        self.broker.answer_record(request_id, record(request_id, status, **fields))

    def come_back_elsewhere(self, how: str, kind: str = "success") -> Any:
        """:func:`come_back_elsewhere` with the genuine return URL of ``kind``."""
        return come_back_elsewhere(how, self.started.url(kind), self.user, self.broker, self.eid)

    def assert_untouched(self, response: Any, status: int) -> None:
        """:func:`assert_untouched` since the start."""
        assert_untouched(response, status, self.before, self.signals, self.broker)

    def assert_genuine_completes(self) -> None:
        """:func:`assert_genuine_completes` by the return of :attr:`kind`, in :attr:`client`."""
        assert_genuine_completes(self.client, self.started, self.kind, self.signals, self.user)


def aged(started: Started, seconds: float) -> None:
    """``started``'s row was created ``seconds`` earlier than it was."""
    Identification.objects.filter(pk=started.pk).update(
        created_at=started.row.created_at - datetime.timedelta(seconds=seconds)
    )


def make_stale(started: Started, eid: Callable[..., None]) -> None:
    """``started`` is older than ``SESSION_MAX_AGE`` (60 seconds from now on)."""
    eid(SESSION_MAX_AGE=60)
    aged(started, 90)


# -- the app switch: a genuine return in a browser without the one-time state --------------
#: What the "go back" page says whatever happened (django_eid/elsewhere.html, its heading).
GO_BACK = "Go back to where you started"
#: The user agent of the browser that starts, for the same-device rule (the test client
#: sends none unless given, and REMOTE_ADDR 127.0.0.1: :data:`TEST_CLIENT_IP`).
USER_AGENT = "Mozilla/5.0 (iPhone; CPU iPhone OS 18_0) Mobile/15E148"
TEST_CLIENT_IP = "127.0.0.1"
#: The record's EnvironmentInfo of an identification on the device that started.
SAME_DEVICE = {"IPAddress": TEST_CLIENT_IP, "UserAgent": USER_AGENT}
#: ... and on another device (the relay: somebody else identified at the session's URL).
OTHER_DEVICE = {"IPAddress": "198.51.100.23", "UserAgent": USER_AGENT}
#: Where a return reaches a browser that does not hold the one-time state.
ELSEWHERE = (
    "the owner in another browser",
    "no session, after the interstitial",
    "no session, without the interstitial",
)


def starting_browser(user: AbstractBaseUser) -> Client:
    """``user``'s browser that starts: :data:`USER_AGENT` at :data:`TEST_CLIENT_IP`."""
    return logged_in(user, HTTP_USER_AGENT=USER_AGENT)


def identified_at_the_broker(
    broker: ScriptedBroker, started: Started, environment: Any = ..., **record: Any
) -> None:
    """The sample person identified at the broker (its status call says done); retrieving
    the session answers their record with ``environment`` as its ``EnvironmentInfo``
    (``...``: the sandbox's own, the sample person's device) and ``record``'s fields."""
    session_id = broker.session_id(started.request_id)
    assert broker.broker.session(session_id) is not None
    broker.broker.identify(session_id, SAMPLE)
    if environment is not ...:
        record = {"EnvironmentInfo": environment, **record}
    broker.will_return(started.request_id, **record)


def come_back_elsewhere(
    how: str, url: str, user: AbstractBaseUser, broker: ScriptedBroker, eid: Callable[..., None]
) -> Any:
    """GET ``url`` as ``how`` (one of :data:`ELSEWHERE`) says; the final response.

    The interstitial (a browser without the session cookie gets our own page, which
    requests the URL once more) asks the broker nothing and changes nothing.
    """
    if how == "the owner in another browser":
        return logged_in(user).get(url)
    if how == "no session, without the interstitial":
        eid(CALLBACK_INTERSTITIAL=False)
        return Client().get(url)
    assert how == "no session, after the interstitial", how
    before, calls = snapshot(), dict(broker.counts)
    browser = Client()
    first = browser.get(url)
    assert first.status_code == 200
    assert "eid_retry=1" in first.context["retry_url"]
    assert (snapshot(), dict(broker.counts)) == (before, calls)
    return browser.get(first.context["retry_url"])


def assert_go_back_page(response: Any) -> None:
    """The app switch's page: 200, "go back", and nothing of the identity."""
    assert response.status_code == 200
    assert response.templates[0].name == "django_eid/elsewhere.html"
    page = response.content.decode()
    assert GO_BACK in page
    for value in (SSN, UNIQUE_ID, SAMPLE.first_name, SAMPLE.last_name, SAMPLE.date_of_birth):
        assert str(value) not in page
