"""Personal data in what is logged and reported: the national identity number, the client
secret, the Basic credentials and the access token never reach a log line (every logger at
DEBUG, SQL included), an e-mail to ADMINS, a response, an exception message, a ``repr`` or
Django's technical 500 page, whichever way a flow goes. What is stored: ``test_stored.py``.
"""

from __future__ import annotations

import base64
import logging
import sys
from collections.abc import Callable, Iterator
from typing import Any

import django
import pytest
from django.contrib.auth.models import AbstractBaseUser
from django.core import mail
from django.core.signals import got_request_exception
from django.db import OperationalError, connection
from django.test import Client
from django.utils.log import AdminEmailHandler
from django.views.debug import ExceptionReporter, technical_500_response

from django_eid import signals
from django_eid.brokers.v1 import parse_record
from django_eid.exceptions import EidProtocolError, IdentificationRejected
from django_eid.models import Identification
from tests.fixtures_broker import ACCESS_TOKEN, SSN, ScriptedBroker, record, reply
from tests.fixtures_client import SECRET
from tests.fixtures_views import Started, logged_in, make_user
from tests.flow.faults import FailingStatement
from tests.flow.returns import GO_BACK
from tests.privacy.helpers import USER_AGENT, everything_logged

pytestmark = pytest.mark.django_db

Status = Identification.Status
TOKEN = ACCESS_TOKEN
TEST_CLIENT_IP = "127.0.0.1"  # the test client's REMOTE_ADDR

BASIC = base64.b64encode(f"test-client:{SECRET}".encode()).decode()
NEVER = {
    "national identity number": SSN,
    "client secret": SECRET,
    "access token": TOKEN,
    "Basic credentials": BASIC,
}


def assert_clean(text: str, where: str) -> None:
    for what, value in NEVER.items():
        assert value not in text, f"the {what} is in {where}"


class Capture(logging.Handler):
    """Every log record, formatted with its traceback, arguments and request."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.setFormatter(logging.Formatter("%(name)s %(levelname)s %(message)s"))
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        extra = f" args={record.args!r} request={getattr(record, 'request', None)!r}"
        self.lines.append(self.format(record) + extra)


@pytest.fixture
def all_logs(settings: Any) -> Iterator[Capture]:
    """Root at DEBUG with every django logger propagating, SQL included, and mail_admins on."""
    # Plain addresses from Django 6.0 on, which deprecates (name, address) pairs. The
    # test environment already sends mail to the local-memory outbox.
    settings.ADMINS = (
        ["ops@example.com"] if django.VERSION >= (6, 0) else [("Ops", "ops@example.com")]
    )
    capture = Capture()
    mailer = AdminEmailHandler(include_html=True)
    names = [
        "",
        "django",
        "django.request",
        "django.dispatch",
        "django.db.backends",
        "django.security",
        "django_eid",
        "django_eid.client",
        "urllib3",
        "requests",
    ]
    saved = {n: logging.getLogger(n).level for n in names}
    for name in names:
        logging.getLogger(name).setLevel(logging.DEBUG)
    logging.getLogger().addHandler(capture)
    logging.getLogger("django.request").addHandler(mailer)
    connection.force_debug_cursor = True
    try:
        yield capture
    finally:
        connection.force_debug_cursor = False
        logging.getLogger("django.request").removeHandler(mailer)
        logging.getLogger().removeHandler(capture)
        for name, level in saved.items():
            logging.getLogger(name).setLevel(level)


def _crash(**kwargs: Any) -> None:
    # A receiver's own message is the site's to keep clean (Django logs it); this one is.
    raise ValueError(f"cannot use {kwargs['identification'].social_security_number!r}")


def _reject(**kwargs: Any) -> None:
    raise IdentificationRejected("Under age.")


def _flow(
    name: str,
    start: Callable[..., Started],
    client: Client,
    broker: ScriptedBroker,
    user: AbstractBaseUser,
) -> None:
    """Drive one complete flow; every response is checked for the secrets too."""
    responses: list[Any] = []
    if name.startswith("start fails"):
        kind, body = {
            "start fails: token refused, echoing the secret": (
                "token",
                {"error": "invalid_client", "error_description": f"secret {SECRET} is wrong"},
            ),
            "start fails: create refused, echoing the token": (
                "create",
                {"message": f"token {TOKEN} not valid for {SSN}", "code": "E"},
            ),
        }[name]
        broker.fault(kind, reply(401, body))
        responses.append(client.post("/eid/start/"))
    elif name.startswith("app switch"):
        # Back in a browser without the session: settled from the broker's status call and
        # record (a possible relay is logged), and the "go back" page.
        browser = logged_in(user, HTTP_USER_AGENT=USER_AGENT)
        started = start(client=browser, ends="success")
        responses.append(started.response)
        rid = started.request_id
        if "same device" in name:
            device = {"IPAddress": TEST_CLIENT_IP, "UserAgent": USER_AGENT}
            broker.answer_record(rid, record(rid, EnvironmentInfo=device))
        elsewhere = Client()
        responses.append(elsewhere.get(started.success_url()))  # the interstitial
        responses.append(elsewhere.get(responses[-1].context["retry_url"]))
        assert GO_BACK in responses[-1].content.decode()
        done = "same device" in name
        assert started.row.status == (Status.SUCCESS if done else Status.PENDING)
        responses.append(browser.get("/eid/start/"))  # the browser that started
    else:
        started = start(
            display="iframe" if "iframe" in name else "redirect",
            ends="error" if "error callback" in name else "success",
        )
        responses.append(started.response)
        rid = started.request_id
        if "fails to parse" in name:
            broker.answer_record(rid, record(rid, SocialSecurityNumber=int(SSN), Name=SSN))
        elif "retrieval fails" in name:
            broker.answer_record(rid, reply(500, {"message": f"Bearer {TOKEN} for {SSN} failed"}))
        elif "not SUCCESS" in name:
            broker.answer_record(rid, record(rid, "TIMEOUT"))
        url = started.error_url() if "error callback" in name else started.success_url()
        if "tampered" in name:
            url = started.success_url(p2="forged")
        responses.append(client.get(url))
        responses.append(client.get(url))  # a reload
    for response in responses:
        assert_clean(response.content.decode() + str(dict(response.headers)), "a response")


FLOWS = [
    "success",
    "success in an iframe",
    "error callback",
    "record not SUCCESS",
    "receiver rejects",
    "receiver crashes",
    "ONE_ACCOUNT_PER_PERSON",
    "retrieval fails, echoing the token and number",
    "record fails to parse",
    "tampered callback",
    "app switch from another device",
    "app switch on the same device",
    "start fails: token refused, echoing the secret",
    "start fails: create refused, echoing the token",
]


@pytest.mark.parametrize("name", FLOWS)
def test_no_log_line_or_admin_mail_holds_the_number_the_secret_or_the_token(
    start: Callable[..., Started],
    alice_client: Client,
    broker: ScriptedBroker,
    eid: Callable[..., None],
    django_user_model: Any,
    alice: AbstractBaseUser,
    all_logs: Capture,
    name: str,
) -> None:
    eid(GET_SOCIAL_SECURITY_NUMBER=True, ONE_ACCOUNT_PER_PERSON=True)
    if name == "ONE_ACCOUNT_PER_PERSON":  # someone else holds this person already
        other = logged_in(make_user(django_user_model, "carol"))
        first = start(client=other, ends="success")
        other.get(first.success_url())
    receiver = {"receiver rejects": _reject, "receiver crashes": _crash}.get(name)
    if receiver:
        signals.identification_succeeded.connect(receiver, dispatch_uid="pd")
    try:
        _flow(name, start, alice_client, broker, alice)
    finally:
        signals.identification_succeeded.disconnect(dispatch_uid="pd")
    if name == "error callback":
        assert Identification.objects.get(user=alice).status == Status.ERROR
    assert all_logs.lines, "nothing was captured"
    assert any("django_eid" in line for line in all_logs.lines)
    assert_clean("\n".join(all_logs.lines), "the logs")
    for message in mail.outbox:
        assert_clean(message.body + str(message.alternatives), "an e-mail to ADMINS")
    for row in Identification.objects.all():
        assert_clean(repr(row.raw) + row.error_message + str(row) + repr(row), "a row")


# -- one flow through every kind of return, with caplog ------------------------------------
@pytest.fixture
def crashing_receiver() -> Iterator[None]:
    """A receiver that crashes after reading the number (its message is the site's business)."""

    def crash(identification: Identification, **kwargs: Any) -> None:
        assert identification.social_security_number == SSN
        raise ValueError("receiver bug")

    signals.identification_succeeded.connect(crash, weak=False, dispatch_uid="test-privacy")
    yield
    signals.identification_succeeded.disconnect(dispatch_uid="test-privacy")


def test_no_log_line_of_the_flow_holds_the_number_or_a_secret(
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
    assert_clean(logged, "the logs")
    assert broker.sent()["GetSocialSecurityNumber"] is True  # v1's create request (the default)


@pytest.mark.parametrize(
    "body",
    [
        {"SocialSecurityNumber": int(SSN)},
        {"SocialSecurityNumber": [SSN]},
        {"SocialSecurityNumber": {"value": SSN}},
        {"Name": {"ssn": SSN}},
        {"EnvironmentInfo": SSN},
        {"Error": SSN},
        {"Status": float(SSN)},
    ],
    ids=range(7),
)
def test_parse_errors_never_quote_the_number(body: dict[str, Any]) -> None:
    with pytest.raises(EidProtocolError) as caught:
        parse_record({"RequestId": "r", **body})
    assert SSN not in str(caught.value)
    assert SSN not in repr(caught.value)


def test_a_parsed_record_hides_the_number_from_repr() -> None:
    parsed = parse_record(record("r"))
    assert parsed.social_security_number == SSN
    assert SSN not in repr(parsed)
    assert SSN not in str(parsed)


# -- Django's technical 500 page and error e-mails ------------------------------------------
@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("debug", [True, False], ids=["DEBUG page", "ADMINS e-mail"])
def test_the_technical_500_report_shows_neither_number_nor_secret(
    start: Callable[..., Started],
    alice_client: Client,
    broker: ScriptedBroker,
    eid: Callable[..., None],
    settings: Any,
    debug: bool,
) -> None:
    """A database error deep below the success view, while the record is in its frames."""
    eid(
        GET_SOCIAL_SECURITY_NUMBER=True,
        ENCRYPTION_KEYS=[base64.urlsafe_b64encode(b"k" * 32).decode()],
    )
    started = start(ends="success")
    seen: list[Any] = []

    def keep(sender: Any, request: Any, **kwargs: Any) -> None:
        seen.append((request, sys.exc_info()))

    got_request_exception.connect(keep, dispatch_uid="keep")
    try:
        with (
            connection.execute_wrapper(FailingStatement("UPDATE")),
            pytest.raises(OperationalError),
        ):
            alice_client.get(started.success_url())
    finally:
        got_request_exception.disconnect(dispatch_uid="keep")
    ((request, exc_info),) = seen
    settings.DEBUG = debug
    reporter = ExceptionReporter(request, *exc_info, is_email=not debug)
    html, text = reporter.get_traceback_html(), reporter.get_traceback_text()
    page = technical_500_response(request, *exc_info).content.decode()
    for report in (html, text, page):
        for shown in ("OperationalError", "finish.py", "DJANGO_EID", "CLIENT_SECRET"):
            assert shown in report  # a real report, with the settings
        assert_clean(report, "the technical 500 report")
        assert "Nordmann" not in report or debug  # names too, once DEBUG is off
        assert eid_keys(settings) not in report
    assert started.row.status == Status.PENDING


def eid_keys(settings: Any) -> str:
    keys: list[str] = settings.DJANGO_EID["ENCRYPTION_KEYS"]
    return keys[0]
