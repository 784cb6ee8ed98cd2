"""Helpers of the suite's fixtures above the client: starts and returns, users, signals,
before-and-after snapshots of the rows.

The fixtures themselves (``start``, ``signals``, ``alice`` ...) are in ``tests/conftest.py``,
built on these. The broker is :class:`tests.fixtures_broker.ScriptedBroker`,
the sandbox behind ``responses`` (for ``BROKER_API = "oidc"`` its OpenID provider too: the
start pushes the authorization request, :class:`Started` builds the callback's ``code``/
``error`` and ``state``). The callbacks are driven with the return URLs
the app actually sent in the create request, placeholders filled as the broker
does it (:func:`substitute`).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qsl, quote, urlencode, urlsplit

import pytest
from django.contrib.auth.models import AbstractBaseUser
from django.db import connection
from django.test import Client

from django_eid import signals, vocabulary
from django_eid.brokers import api_class
from django_eid.brokers.oidc import request_id_of
from django_eid.conf import eid_settings
from django_eid.models import Identification, LinkedIdentity
from django_eid.sandbox.broker import SessionError
from django_eid.sandbox.wire import Session, append_session_id, fill_placeholders
from django_eid.sandbox.wire_oidc import API as OIDC
from django_eid.sandbox.wire_oidc import return_url
from tests.fixtures_broker import BROKER_PAGE, ScriptedBroker

#: OpenID Connect's one redirect URI, where every return of an OIDC test arrives.
OIDC_CALLBACK = "/eid/oidc/callback/"
SIGNAL_NAMES = (
    "identification_started",
    "identification_succeeded",
    "identification_aborted",
    "identification_failed",
    "identification_bound",
    "eid_login",
)


def substitute(url: str, **values: str) -> str:
    """Fill placeholders as the broker does; returns path and query for the test client.

    ``values`` maps ``p0``/``p1``/``p2`` to the text for ``[0]``/``[1]``/``[2]``.
    """
    url = fill_placeholders(url, {f"[{key[1:]}]": value for key, value in values.items()})
    parts = urlsplit(url)
    assert (parts.scheme, parts.netloc) == ("http", "testserver"), url
    return f"{parts.path}?{parts.query}"


def returned(api: str, template: str, *, status: str, session_id: str, external_id: str) -> str:
    """A return URL of ``api`` as the broker sends the user there; path and query.

    v1 fills the placeholders of the URL django-eid sent (``[0]`` the error status, ``[2]``
    the external id; no session id: django-eid keeps it out of its URLs). The successor
    APIs append ``sessionId`` to the URL as it was sent, the external id already in it.
    ``session_id``/``external_id`` other than the genuine ones forge a return: for v1 the
    session id is then added as ``requestId`` (as the URLs of older releases carried it).
    """
    broker_api = api_class(api)
    if api == "v1":
        url = substitute(template, p0=status, p2=external_id)
        if session_id:
            url += f"&{broker_api.request_id_param}={quote(session_id, safe='')}"
        return url
    parts = urlsplit(template)
    assert (parts.scheme, parts.netloc) == ("http", "testserver"), template
    query = [
        (key, external_id if key == broker_api.external_id_param else value)
        for key, value in parse_qsl(parts.query, keep_blank_values=True)
    ]
    url = f"{parts.path}?{urlencode(query)}"
    return append_session_id(url, session_id) if session_id else url


@dataclass
class Started:
    """A session started through the start view; its return URLs as the broker has them."""

    response: Any  # the test client's response
    sent: dict[str, Any]
    pk: int
    reference: str
    request_id: str
    external_id: str
    broker: ScriptedBroker | None = None
    #: The broker API the session was started with (``BROKER_API``).
    api: str = "v1"

    @property
    def row(self) -> Identification:
        return Identification.objects.get(pk=self.pk)

    def refresh(self) -> Identification:
        return self.row

    @property
    def is_oidc(self) -> bool:
        return self.api == OIDC

    @property
    def session(self) -> Session:
        """The broker's session, as the sandbox read the create request (any API; for
        OpenID Connect the OP's session of the row's ``state``)."""
        assert self.broker is not None
        found = self.broker.broker.session(self.broker.session_id(self.request_id))
        assert found is not None
        return found

    @property
    def return_urls(self) -> dict[str, str]:
        """The return URLs sent, by ``Success``/``Abort``/``Error``, as the broker read them
        (for OpenID Connect the one ``redirect_uri``, for each)."""
        if self.is_oidc:
            redirect_uri = str(self.session.wire["redirect_uri"])
            return dict.fromkeys(("Success", "Abort", "Error"), redirect_uri)
        return self.session.return_urls

    def template(self, kind: str) -> str:
        return self.return_urls[kind]

    def _url(self, kind: str, status: str, values: dict[str, str]) -> str:
        if self.is_oidc:
            return self._oidc_url(kind, status, values)
        # v1 has no session id in its URLs; the successors append the genuine one.
        genuine = "" if self.api == "v1" else self.request_id
        return returned(
            self.api,
            self.return_urls[kind],
            status=values.get("p0", status),
            session_id=values.get("p1", genuine),
            external_id=values.get("p2", self.external_id),
        )

    def _oidc_url(self, kind: str, status: str, values: dict[str, str]) -> str:
        """OpenID Connect's return: the callback with the genuine ``code`` (``Success``),
        ``error=access_denied`` (``Abort``) or ``error=<status>`` (``Error``), the ``state``
        and the OP's ``iss``; ``p2`` forges the ``state``. A ``Success`` or ``Error`` of a session the
        OP ended otherwise is where the OP sends the user then (its own error). There is no
        session id in these returns: a test that forges one (``p1``) is one of the REST
        APIs'."""
        assert "p1" not in values, "no session id in an OIDC return: mark the test REST_APIS"
        session = self.session
        state = values.get("p2", self.external_id)
        ended = session.status not in vocabulary.IN_PROGRESS
        if kind != "Abort" and ended and session.status != vocabulary.SUCCESS:
            genuine = urlsplit(return_url(session))
            query = [(k, state if k == "state" else v) for k, v in parse_qsl(genuine.query)]
            return f"{genuine.path}?{urlencode(query)}"
        params = {
            "Success": {"code": str(session.wire["code"])},
            "Abort": {"error": "access_denied", "error_description": "Cancelled."},
            "Error": {"error": values.get("p0", status), "error_description": "Failed."},
        }[kind]
        redirect_uri = urlsplit(str(session.wire["redirect_uri"]))
        # The OP's issuer, as it sends it (RFC 9207).
        params = {**params, "state": state, "iss": str(session.wire["issuer"])}
        return f"{redirect_uri.path}?{urlencode(params)}"

    def success_url(self, **values: str) -> str:
        """The Success URL; ``p1``/``p2`` forge the session id and the external id."""
        return self._url("Success", "", values)

    def abort_url(self, **values: str) -> str:
        return self._url("Abort", "", values)

    def error_url(self, status: str = "TIMEOUT", **values: str) -> str:
        """The Error URL, as the broker sends the person there once the session failed with
        ``status`` (the broker's record says so); ``p1``/``p2`` forge the ids.

        When the broker's session is over already, or ``values`` change an id, the URL is
        made without the broker (a replay, or a forged return).
        """
        if self.broker is not None and not values:
            try:
                url = self.broker.fail(status, request_id=self.request_id)
            except (SessionError, ValueError):  # over, or a status the broker never sends
                pass
            else:
                parts = urlsplit(url)
                return f"{parts.path}?{parts.query}"
        return self._url("Error", status, values)

    def url(self, kind: str) -> str:
        """The genuine callback URL of ``kind`` (success, abort or error)."""
        if kind == "success":
            return self.success_url()
        if kind == "abort":
            return self.abort_url()
        assert kind == "error", kind
        return self.error_url()

    def path(self, kind: str) -> str:
        if self.is_oidc:
            return OIDC_CALLBACK
        return f"/eid/return/{self.reference}/{kind}/"


# -- users -------------------------------------------------------------------------
_link_keys = itertools.count(1)


def link(
    user: AbstractBaseUser,
    provider: str = "NO_BANKID_WEB",
    scheme: str = "no-bankid",
    **fields: Any,
) -> LinkedIdentity:
    """A link of ``user`` to a person of its own (a key no other link has), as a
    verification would make it (``LinkedIdentity``)."""
    return LinkedIdentity.objects.create(
        user=user, key=f"uid:{next(_link_keys):064x}", provider=provider, scheme=scheme, **fields
    )


def make_user(django_user_model: Any, name: str) -> AbstractBaseUser:
    user: AbstractBaseUser = django_user_model.objects.create_user(
        name, f"{name}@example.com", f"pw-{name}"
    )
    return user


def logged_in(user: AbstractBaseUser, **kwargs: Any) -> Client:
    client = Client(**kwargs)
    client.force_login(user)
    return client


#: What the person does at the broker after a start (``start(ends=...)``): the broker's
#: record of the session says so from then on, and its return URL of that kind applies.
AT_BROKER: dict[str, Callable[[ScriptedBroker, str], Any]] = {
    "success": lambda broker, request_id: broker.complete(request_id=request_id),
    "abort": lambda broker, request_id: broker.abort(request_id=request_id),
    "error": lambda broker, request_id: broker.fail("TIMEOUT", request_id=request_id),
    "pending": lambda broker, request_id: None,
}


def start_session(
    broker: ScriptedBroker,
    client: Client,
    request_id: str | None = None,
    *,
    ends: str = "pending",
    at: str = "/eid/start/",
    **post: str,
) -> Started:
    """POST to the start view (``at``: the login page's, ``/eid/login/``); the broker answers ``request_id`` (a fresh one by default),
    then the person at the broker does what ``ends`` says (:data:`AT_BROKER`; by default
    nothing yet: a test scripts the record with ``broker.will_return``).

    Checks the redirect to the broker (or, for iframe display, the redirect to the page
    embedding it, which it then GETs) and that one create request was sent.
    """
    api = eid_settings.BROKER_API
    if request_id is not None:
        assert api != OIDC, "the row's request id is the app's own with OIDC: mark REST_APIS"
        broker.will_create(request_id)
    before = len(broker.create_requests)
    response = client.post(at, post)
    assert len(broker.create_requests) == before + 1, response.status_code
    sent = broker.sent()
    session = broker.sessions[-1]
    if api == OIDC:
        # One redirect_uri: the row is the one whose external id the OP has as ``state``.
        found = Identification.objects.get(external_id=session.wire["state"])
        reference = found.reference
        assert found.request_id == request_id_of(found.external_id)
    else:
        reference = urlsplit(session.return_urls["Success"]).path.split("/")[3]
    if post.get("display") == "iframe":
        # Post/Redirect/Get: the page embedding the broker is a GET (a reload starts nothing).
        assert response.status_code == 303
        assert response["Location"] == f"/eid/frame/{reference}/"
        response = client.get(response["Location"])
        assert response.status_code == 200
    elif api == OIDC:
        # The OP's authorization endpoint, the request pushed (PAR) before.
        assert response.status_code == 302
        assert broker.oidc is not None
        location = urlsplit(response["Location"])
        assert response["Location"].startswith(broker.oidc.endpoint("authorize") + "?")
        assert {k for k, _ in parse_qsl(location.query)} == {"client_id", "request_uri"}
    else:
        assert response.status_code == 302
        assert response["Location"] == BROKER_PAGE
    row = Identification.objects.get(reference=reference)
    assert row.status == Identification.Status.PENDING
    if api != OIDC:
        assert row.request_id == (request_id or broker.sessions[-1].request_id)
    AT_BROKER[ends](broker, row.request_id)
    return Started(response, sent, row.pk, reference, row.request_id, row.external_id, broker, api)


# -- signals -----------------------------------------------------------------------
@dataclass
class Sent:
    """One django-eid signal: its name, keyword arguments, and the row's status then."""

    name: str
    kwargs: dict[str, Any]
    status: str
    in_atomic: bool


@dataclass
class Signals:
    """Every django-eid signal sent while connected (the ``signals`` fixture), oldest first."""

    sent: list[Sent] = field(default_factory=list)

    def connect(self, uid: str) -> None:
        for name in SIGNAL_NAMES:

            def receiver(name: str = name, **kwargs: Any) -> None:
                status = kwargs["identification"].status
                self.sent.append(Sent(name, kwargs, status, connection.in_atomic_block))

            getattr(signals, name).connect(receiver, weak=False, dispatch_uid=f"{uid}-{name}")

    @staticmethod
    def disconnect(uid: str) -> None:
        for name in SIGNAL_NAMES:
            getattr(signals, name).disconnect(dispatch_uid=f"{uid}-{name}")

    @property
    def names(self) -> list[str]:
        """The signals' names (``"identification_succeeded"`` ...)."""
        return [s.name for s in self.sent]

    @property
    def calls(self) -> list[tuple[str, int, str, Any]]:
        """``(name, identification pk, its status then, user pk)`` of each."""
        return [
            (s.name, s.kwargs["identification"].pk, s.status, s.kwargs["user"].pk)
            for s in self.sent
        ]

    @property
    def in_atomic(self) -> list[bool]:
        """Whether each was sent inside a transaction (none should be: they follow commits)."""
        return [s.in_atomic for s in self.sent]

    def of(self, name: str) -> list[dict[str, Any]]:
        """The keyword arguments of each ``name`` signal, the row's status then as ``status``."""
        return [{**s.kwargs, "status": s.status} for s in self.sent if s.name == name]

    def clear(self) -> None:
        self.sent.clear()


# -- observation ---------------------------------------------------------------------
def snapshot() -> dict[int, dict[str, Any]]:
    """Every row with every field, to compare before and after a request."""
    return {values["id"]: values for values in Identification.objects.order_by("pk").values()}


def changed(before: dict[int, dict[str, Any]], after: dict[int, dict[str, Any]]) -> set[int]:
    """Rows created, deleted or modified between two snapshots."""
    return {pk for pk in before.keys() | after.keys() if before.get(pk) != after.get(pk)}


# -- the admin ---------------------------------------------------------------------
def without_planner_estimate(monkeypatch: pytest.MonkeyPatch) -> None:
    """The admin's list counts its rows, as on a table PostgreSQL never analyzed.

    Unfiltered on PostgreSQL, past its count limit, the list shows the planner's estimate:
    the table's pages times the rows per page of the last ``ANALYZE``. Earlier tests leave
    pages and statistics behind (rows rolled back or deleted stay until a vacuum), so 1 row
    could read as "about 30414" (a flaky test, issue 23). A test of the count takes the
    estimate out; the estimate has tests of its own (tests/production/test_admin_queries.py
    and a test that gives one). Elsewhere there is none to take out (the list counts).
    """
    from django_eid import admin

    if connection.vendor == "postgresql":
        monkeypatch.setattr(admin, "estimated_rows", lambda queryset: None)
