"""An audit event for every change of an identification, in the change's transaction, with
what an auditor needs and nothing of the person (django_eid/audit.py)."""

from __future__ import annotations

import datetime
import re
from collections.abc import Callable, Iterator
from io import StringIO
from typing import Any

import hypothesis
import pytest
from django.contrib.auth.models import AbstractBaseUser
from django.core.management import call_command
from django.db import DatabaseError, connection, transaction
from django.test import Client
from hypothesis import strategies as st

from django_eid import crypto, flow
from django_eid.conf import eid_settings
from django_eid.exceptions import IdentificationRejected
from django_eid.models import AuditEvent, Identification
from django_eid.sandbox.persons import make_identity_number
from tests.fixtures_broker import ScriptedBroker
from tests.fixtures_views import Started, logged_in

pytestmark = pytest.mark.django_db

Status = Identification.Status
Kind = AuditEvent.Kind
ADDRESS = "203.0.113.7"
UA = "Mozilla/5.0 (audit)"


def trail(pk: int) -> list[tuple[str, str]]:
    """``(kind, status)`` of identification ``pk``'s events, oldest first."""
    rows = AuditEvent.objects.filter(identification_id=pk).order_by("at", "id")
    return list(rows.values_list("kind", "status"))


@pytest.fixture
def browser(alice: AbstractBaseUser) -> Client:
    """Alice's browser, from a known address."""
    return logged_in(alice, HTTP_USER_AGENT=UA, REMOTE_ADDR=ADDRESS)


def test_a_success_is_started_returned_and_linked_on_every_api(
    broker_api: str,
    broker: ScriptedBroker,
    start: Callable[..., Started],
    browser: Client,
    alice: AbstractBaseUser,
) -> None:
    started = start(browser)
    broker.will_return(started.request_id)
    assert browser.get(started.success_url()).status_code == 302
    assert trail(started.pk) == [
        (Kind.STARTED, Status.PENDING),
        (Kind.RETURNED, Status.SUCCESS),
        (Kind.LINKED, Status.SUCCESS),
    ]
    row = started.row
    returned = AuditEvent.objects.get(identification_id=started.pk, kind=Kind.RETURNED)
    assert returned.user_id == str(alice.pk)
    assert (returned.purpose, returned.broker_api) == ("verify", eid_settings.BROKER_API)
    assert returned.provider == row.identity_provider != ""
    assert returned.level_of_assurance == row.level_of_assurance
    assert (returned.display, returned.outcome) == ("redirect", "")
    assert returned.at == row.completed_at
    assert returned.duration_ms == int((row.completed_at - row.created_at).total_seconds() * 1000)
    # The address as a keyed hash, the same on every event of the identification.
    hashes = set(
        AuditEvent.objects.filter(identification_id=started.pk).values_list(
            "address_hash", flat=True
        )
    )
    assert hashes == {crypto.address_hash(ADDRESS)}
    assert ADDRESS not in hashes.pop()


def test_an_abort_an_error_and_an_expiry_each_write_their_event(
    broker: ScriptedBroker, start: Callable[..., Started], alice_client: Client
) -> None:
    aborted = start()
    alice_client.get(aborted.abort_url())
    failed = start(ends="error")
    alice_client.get(failed.error_url())
    stale = start()
    assert flow.expire(stale.row)
    assert trail(aborted.pk)[-1] == (Kind.RETURNED, Status.ABORTED)
    assert trail(failed.pk)[-1] == (Kind.RETURNED, Status.ERROR)
    assert AuditEvent.objects.get(identification_id=failed.pk, kind=Kind.RETURNED).outcome
    assert trail(stale.pk) == [(Kind.STARTED, Status.PENDING), (Kind.EXPIRED, Status.EXPIRED)]


def test_a_cancel_and_a_reconcile_say_how_the_row_ended(
    broker: ScriptedBroker, start: Callable[..., Started], browser: Client
) -> None:
    cancelled = start(browser)
    assert flow.cancel(cancelled.row)
    reconciled = start(browser)
    broker.complete(user_agent=UA, ip_address=ADDRESS)
    call_command("eid_reconcile", "--older-than", "0", stdout=StringIO())
    assert trail(cancelled.pk)[-1] == (Kind.CANCELLED, Status.ABORTED)
    assert trail(reconciled.pk)[1] == (Kind.RECONCILED, Status.SUCCESS)


def test_a_lost_race_writes_no_second_event(
    broker: ScriptedBroker, start: Callable[..., Started], alice_client: Client
) -> None:
    started = start()
    broker.will_return(started.request_id)
    alice_client.get(started.success_url())
    assert not flow.abort(Identification.objects.get(pk=started.pk))  # finished already
    assert not flow.expire(Identification.objects.get(pk=started.pk))
    assert [k for k, _ in trail(started.pk)].count(Kind.RETURNED) == 1
    assert len(trail(started.pk)) == 3


def test_a_success_refused_by_a_site_rule_is_rejected_with_its_code(
    broker: ScriptedBroker,
    start: Callable[..., Started],
    alice_client: Client,
    verifying: Callable[..., None],
) -> None:
    def rule(identification: Identification, **kwargs: Any) -> None:
        raise IdentificationRejected("No.")

    verifying(rule)
    started = start()
    broker.will_return(started.request_id)
    alice_client.get(started.success_url())
    assert trail(started.pk) == [
        (Kind.STARTED, Status.PENDING),
        (Kind.RETURNED, Status.SUCCESS),
        (Kind.REJECTED, Status.REJECTED),
    ]
    assert AuditEvent.objects.get(identification_id=started.pk, kind=Kind.REJECTED).outcome == (
        started.row.error_code
    )


def test_a_setting_s_rule_rejects_in_the_same_transaction(
    broker: ScriptedBroker, start: Callable[..., Started], alice_client: Client, eid: Any
) -> None:
    """MIN_LOA: the SUCCESS and its refusal are one transaction (nobody sees the SUCCESS),
    and so are their two events."""
    eid(MIN_LOA="high")
    started = start()
    broker.will_return(started.request_id)
    alice_client.get(started.success_url())
    row = started.row
    assert (row.status, row.error_code) == (Status.REJECTED, "LOA_TOO_LOW")
    assert trail(started.pk)[1:] == [
        (Kind.RETURNED, Status.SUCCESS),
        (Kind.REJECTED, Status.REJECTED),
    ]
    assert AuditEvent.objects.get(identification_id=row.pk, kind=Kind.REJECTED).outcome == (
        "LOA_TOO_LOW"
    )


def test_a_broker_down_at_the_start_and_at_the_return_is_a_broker_error(
    broker: ScriptedBroker, start: Callable[..., Started], alice_client: Client
) -> None:
    broker.will_fail_create(503)
    response = alice_client.post("/eid/start/")
    assert response.status_code in (200, 302, 502, 503)
    row = Identification.objects.get()
    # No session: one "started" event that says so (not a session the broker bills).
    assert trail(row.pk) == [(Kind.STARTED, Status.ERROR), (Kind.BROKER_ERROR, Status.ERROR)]
    started = start()
    broker.will_answer(started.request_id, times=5, status=503, json={})
    alice_client.get(started.success_url())
    assert started.row.status == Status.PENDING
    assert trail(started.pk)[-1] == (Kind.BROKER_ERROR, Status.PENDING)
    outcomes = AuditEvent.objects.filter(kind=Kind.BROKER_ERROR).values_list("outcome", flat=True)
    assert set(outcomes) <= {"EidApiError", "EidServerError", "EidUnavailable", "EidHTTPError"}


@pytest.fixture
def events_refused() -> Iterator[None]:
    """The database refuses every audit event (a trigger), as a full disk or a revoked
    grant would."""
    table = AuditEvent._meta.db_table
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute(
                "CREATE FUNCTION refuse_event() RETURNS trigger LANGUAGE plpgsql AS "
                "$$ BEGIN RAISE EXCEPTION 'no events'; END $$"
            )
            cursor.execute(
                f"CREATE TRIGGER refuse_event BEFORE INSERT ON {table} "
                "FOR EACH ROW EXECUTE FUNCTION refuse_event()"
            )
        else:
            cursor.execute(
                f"CREATE TRIGGER refuse_event BEFORE INSERT ON {table} "
                "BEGIN SELECT RAISE(ABORT, 'no events'); END"
            )
    yield
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute(f"DROP TRIGGER refuse_event ON {table}")
            cursor.execute("DROP FUNCTION refuse_event()")
        else:
            cursor.execute("DROP TRIGGER refuse_event")


def test_no_change_is_kept_without_its_event(
    broker: ScriptedBroker, start: Callable[..., Started], alice: AbstractBaseUser, request: Any
) -> None:
    """An event that cannot be written takes its change with it: the start's row, a finish."""
    started = start()
    request.getfixturevalue("events_refused")
    # (A savepoint each: on PostgreSQL a failed statement fails the test's transaction.)
    with pytest.raises(DatabaseError), transaction.atomic():
        flow.abort(Identification.objects.get(pk=started.pk))
    assert started.row.status == Status.PENDING
    before = Identification.objects.count()
    with pytest.raises(DatabaseError), transaction.atomic():
        logged_in(alice).post("/eid/start/")
    assert Identification.objects.count() == before


#: Hostile names: letters of every Nordic alphabet, markup, quotes; long enough not to be a
#: part of a code by chance.
NAMES = st.text(
    alphabet=st.sampled_from("abcdefghijklmnopqrstuvwxyzæøåäöÆØÅÄÖ<>\"'&; "),
    min_size=8,
    max_size=30,
).filter(lambda name: len(name.strip(" ;&")) >= 8)
BIRTHS = st.dates(min_value=datetime.date(1925, 1, 1), max_value=datetime.date(2005, 12, 31))


@hypothesis.settings(
    max_examples=8,
    deadline=None,
    suppress_health_check=[hypothesis.HealthCheck.function_scoped_fixture],
)
@hypothesis.given(
    first=NAMES,
    last=NAMES,
    born=BIRTHS,
    serial=st.integers(0, 40),
    spelt=st.sampled_from(["{}", "E_{}", "{:spaced}", "{:dotted}", "{:colons}"]),
)
def test_no_event_names_the_person(
    broker: ScriptedBroker,
    start: Callable[..., Started],
    alice_client: Client,
    eid: Any,
    first: str,
    last: str,
    born: datetime.date,
    serial: int,
    spelt: str,
) -> None:
    """Hostile values in every text the broker sends, a success and a failure quoting the
    number in its code and message: none reaches an event."""
    eid(GET_SOCIAL_SECURITY_NUMBER=True)
    number = make_identity_number(born, start=serial)
    person = {
        "FirstName": first,
        "LastName": last,
        "Name": f"{first} {last}",
        "SocialSecurityNumber": number,
        "DateOfBirth": born.strftime("%d%m%y"),
    }
    started = start()
    broker.will_return(started.request_id, **person)
    alice_client.get(started.success_url())
    failed = start()
    broker.will_return(
        failed.request_id,
        "ERROR",
        Error={"ErrorCode": spell(spelt, number), "ErrorMessage": f"{first} {number} {last}"},
    )
    alice_client.get(failed.success_url())
    values = [
        str(value)
        for pk in (started.pk, failed.pk)
        for event in AuditEvent.objects.filter(identification_id=pk).values()
        for value in event.values()
    ]
    assert started.row.social_security_number == number  # the row has it: the events not
    # Each value as its digits alone too: no spelling of the number or the date gets through.
    seen = " ".join([*values, *(re.sub(r"[\s.:\-]", "", value) for value in values)])
    for value in (number, number[:6], first.strip(), last.strip(), born.strftime("%Y%m%d")):
        assert value not in seen


def spell(how: str, number: str) -> str:
    """``number`` as a broker's error code might spell it."""
    separator = {"{:spaced}": " ", "{:dotted}": ".", "{:colons}": ":"}.get(how)
    if separator is None:
        return how.format(number)
    return separator.join(number[i : i + 3] for i in range(0, len(number), 3))
