"""The flow core driven without HTTP, as a command or a JSON endpoint would drive it."""

from __future__ import annotations

import datetime
from collections.abc import Callable
from typing import Any

import pytest
from django.contrib.auth.models import AbstractBaseUser
from django.db import connection, connections, models, transaction
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from django_eid import flow, outcomes
from django_eid.brokers import ReturnUrls
from django_eid.brokers.v1 import V1Api
from django_eid.client import get_client
from django_eid.conf import eid_settings
from django_eid.flows import pending
from django_eid.models import Identification
from tests.audit_sql import event_statements
from tests.fixtures_broker import NO_SESSION_TO_ASK, REST_APIS, SAMPLE, ScriptedBroker
from tests.fixtures_views import Signals

pytestmark = pytest.mark.django_db

Status = Identification.Status
HOST = "shop.example"


def absolute(path: str) -> str:
    return f"https://{HOST}{path}"


def start(user: AbstractBaseUser, **options: Any) -> flow.Started:
    return flow.start(
        user,
        return_urls=lambda reference: flow.return_urls(reference, absolute),
        host=HOST,
        **options,
    )


def ids(row: Identification, error: str = "") -> dict[str, list[str]]:
    """The query of a Success or Abort return, as the broker fills it in; for OpenID
    Connect the ``state`` and, for an Abort or Error return, the ``error``."""
    assert row.request_id is not None
    if eid_settings.BROKER_API == "oidc":
        return {"state": [row.external_id], **({"error": [error]} if error else {})}
    return {"requestId": [row.request_id], "externalId": [row.external_id]}


def test_a_whole_identification_without_a_request(
    alice: AbstractBaseUser, broker: ScriptedBroker, signals: Signals
) -> None:
    """The return URLs as v1 (the default API) gets them; the returns of every API:
    test_abort_and_error_returns_without_a_request and tests/brokers."""
    started = start(alice, next_url="/account/")
    row = started.identification
    assert started.url.startswith("https://")
    assert (row.status, row.user, row.next_url) == (Status.PENDING, alice, "/account/")
    urls = broker.sent()["ReturnUrls"]
    assert urls["Success"] == (f"https://{HOST}/eid/return/{row.reference}/success/?externalId=[2]")
    assert urls["Error"] == (
        f"https://{HOST}/eid/return/{row.reference}/error/?status=[0]&externalId=[2]"
    )

    broker.will_return(row.request_id)  # the user identified at the broker
    returned = flow.return_to(
        flow.SUCCESS, user=alice, reference=row.reference, params=ids(row), browser_holds=True
    )
    assert returned.acted
    assert returned.identification.status == Status.SUCCESS
    assert returned.identification.name == SAMPLE.name
    assert signals.names == ["identification_started", "identification_succeeded"]
    assert [sent.kwargs["request"] for sent in signals.sent] == [None, None]
    # A replay returns the finished row and does nothing.
    again = flow.return_to(
        flow.SUCCESS, user=alice, reference=row.reference, params=ids(row), browser_holds=False
    )
    assert (again.acted, again.identification.status) == (False, Status.SUCCESS)
    assert len(broker.get_calls) == 1


@pytest.mark.apis(*REST_APIS, reason=NO_SESSION_TO_ASK)
def test_complete_stores_a_record_retrieved_by_the_caller(
    alice: AbstractBaseUser, broker: ScriptedBroker, signals: Signals, broker_api: str
) -> None:
    row = start(alice).identification
    assert row.request_id is not None
    broker.will_return(row.request_id)
    record = get_client().get_session(row.request_id)
    assert flow.complete(row, record) is True
    assert Identification.objects.get(pk=row.pk).status == Status.SUCCESS
    assert flow.complete(row, record) is False  # finished already: nothing happens
    assert signals.names.count("identification_succeeded") == 1


@pytest.mark.apis(*REST_APIS, reason=NO_SESSION_TO_ASK)
def test_a_record_in_progress_leaves_the_row_pending(
    alice: AbstractBaseUser, broker: ScriptedBroker, broker_api: str
) -> None:
    row = start(alice).identification
    assert row.request_id is not None
    broker.will_return(row.request_id, "USERINITIATED")
    with pytest.raises(flow.Refused) as refused:
        flow.complete(row, get_client().get_session(row.request_id))
    assert refused.value.outcome is outcomes.IN_PROGRESS
    assert refused.value.outcome.status == 409
    assert Identification.objects.get(pk=row.pk).status == Status.PENDING


@pytest.mark.parametrize(
    ("kind", "status", "signal"),
    [
        (flow.ABORT, Status.ABORTED, "identification_aborted"),
        (flow.ERROR, Status.ERROR, "identification_failed"),
    ],
)
def test_abort_and_error_returns_without_a_request(
    alice: AbstractBaseUser,
    broker: ScriptedBroker,
    signals: Signals,
    broker_api: str,
    kind: str,
    status: str,
    signal: str,
) -> None:
    row = start(alice).identification
    if eid_settings.BROKER_API == "oidc":
        params = ids(row, "access_denied" if kind == flow.ABORT else "TIMEOUT")
    else:
        params = ids(row) if kind == flow.ABORT else {"status": ["TIMEOUT"], **ids(row)}
    if kind == flow.ERROR:
        assert row.request_id is not None
        broker.will_return(row.request_id, "ERROR")  # what the broker says decides
    returned = flow.return_to(
        kind, user=alice, reference=row.reference, params=params, browser_holds=True
    )
    assert (returned.acted, returned.identification.status) == (True, status)
    assert signals.names == ["identification_started", signal]


def refused_return(alice: AbstractBaseUser, row: Identification, **change: Any) -> outcomes.Outcome:
    """Why a Success return of ``row`` with ``change`` to its arguments is refused."""
    arguments: dict[str, Any] = {
        "user": alice,
        "reference": row.reference,
        "params": ids(row),
        "browser_holds": True,
        **change,
    }
    with pytest.raises(flow.Refused) as refused:
        flow.return_to(flow.SUCCESS, **arguments)
    return refused.value.outcome


def test_a_return_whose_ids_are_not_the_sessions_is_refused(
    alice: AbstractBaseUser, broker: ScriptedBroker, broker_api: str
) -> None:
    row = start(alice).identification
    params = {"requestId": ["nope"], "externalId": ["nope"]}
    assert refused_return(alice, row, params=params) is outcomes.ANSWER_MISMATCH
    assert Identification.objects.get(pk=row.pk).status == Status.PENDING
    assert broker.get_calls == []


@pytest.mark.parametrize(
    ("change", "outcome"),
    [
        ({"browser_holds": False}, outcomes.NOT_THIS_BROWSER),
        ({"reference": "x" * 40}, outcomes.INVALID_LINK),
        ({"reference": "not a reference"}, outcomes.INVALID_LINK),
    ],
)
def test_a_return_that_is_not_this_users_or_browsers_is_refused(
    alice: AbstractBaseUser,
    broker: ScriptedBroker,
    change: dict[str, Any],
    outcome: outcomes.Outcome,
) -> None:
    row = start(alice).identification
    assert refused_return(alice, row, **change) is outcome
    assert Identification.objects.get(pk=row.pk).status == Status.PENDING
    assert broker.get_calls == []


def test_another_users_reference_is_an_invalid_link(
    alice: AbstractBaseUser, bob: AbstractBaseUser, broker: ScriptedBroker
) -> None:
    row = start(alice).identification
    assert refused_return(alice, row, user=bob) is outcomes.INVALID_LINK


# -- the rules of a start --------------------------------------------------------------------------
def test_the_pending_limit_refuses_before_the_broker_is_called(
    alice: AbstractBaseUser, broker: ScriptedBroker, eid: Callable[..., None]
) -> None:
    eid(MAX_PENDING_PER_USER=2)
    start(alice)
    start(alice)
    with pytest.raises(flow.Refused) as refused:
        start(alice)
    assert refused.value.outcome is outcomes.TOO_MANY_PENDING
    assert refused.value.outcome.status == 429
    assert len(broker.create_requests) == 2


@pytest.mark.parametrize(
    ("overrides", "provider", "restrict", "code", "chosen"),
    [
        ({}, None, None, None, None),  # the user chooses at the broker
        ({}, "NO_BANKID_WEB", None, None, "NO_BANKID_WEB"),
        ({}, "no_bankid", None, "provider_malformed", None),
        ({"IDENTITY_PROVIDER": "NO_BUYPASS"}, None, None, None, "NO_BUYPASS"),
        ({"IDENTITY_PROVIDER": "NO_BUYPASS"}, "NO_BANKID_WEB", None, "provider_not_offered", None),
        ({"ALLOWED_PROVIDERS": ["A_B", "C_D"]}, None, None, "provider_required", None),
        ({"ALLOWED_PROVIDERS": ["A_B", "C_D"]}, "C_D", None, None, "C_D"),
        ({"ALLOWED_PROVIDERS": ["A_B"]}, None, None, None, "A_B"),
        ({}, None, ["NO_BANKID_WEB"], None, "NO_BANKID_WEB"),  # a gate's one provider
        ({}, "NO_BUYPASS", ["NO_BANKID_WEB"], "provider_not_offered", None),
        ({"ALLOWED_PROVIDERS": ["A_B", "C_D"]}, None, ["C_D", "E_F"], None, "C_D"),
        ({"ALLOWED_PROVIDERS": ["A_B"]}, None, ["C_D"], "provider_none_offered", None),
    ],
)
def test_the_provider_rules(
    eid: Callable[..., None],
    overrides: dict[str, Any],
    provider: str | None,
    restrict: list[str] | None,
    code: str | None,
    chosen: str | None,
) -> None:
    eid(**overrides)
    if code is None:
        assert flow.choose_provider(provider, restrict=restrict) == chosen
        return
    with pytest.raises(flow.Refused) as refused:
        flow.choose_provider(provider, restrict=restrict)
    assert (refused.value.outcome.code, refused.value.field) == (code, "provider")
    assert refused.value.outcome.status == 400


def test_a_display_that_does_not_exist_is_refused(
    alice: AbstractBaseUser, broker: ScriptedBroker
) -> None:
    with pytest.raises(flow.Refused) as refused:
        start(alice, display="popup")
    assert (refused.value.outcome.code, refused.value.field) == ("display_invalid", "display")
    assert broker.create_requests == []


def test_an_unconfigured_site_refuses_to_start(
    alice: AbstractBaseUser, eid: Callable[..., None]
) -> None:
    eid(CLIENT_SECRET="")
    with pytest.raises(flow.Refused) as refused:
        start(alice)
    assert refused.value.outcome is outcomes.NOT_AVAILABLE
    assert not Identification.objects.exists()


def test_a_broker_failure_is_stored_and_raised(
    alice: AbstractBaseUser, broker: ScriptedBroker, broker_api: str
) -> None:
    broker.fail_next("create", 500, times=None)
    with pytest.raises(flow.BrokerFailed) as failed:
        start(alice)
    row = failed.value.identification
    assert row is not None
    assert (row.status, row.error_code) == (Status.ERROR, "EidUnavailable")
    assert failed.value.outcome is outcomes.BROKER_UNREACHABLE


def age(seconds: float) -> None:
    """Every row was created ``seconds`` earlier than it was."""
    for row in Identification.objects.all():
        Identification.objects.filter(pk=row.pk).update(
            created_at=row.created_at - datetime.timedelta(seconds=seconds)
        )


def test_failed_starts_hold_the_limit_only_for_a_short_while(
    alice: AbstractBaseUser, broker: ScriptedBroker, eid: Callable[..., None]
) -> None:
    """Failed starts count to stop a client hammering a failing broker, not to ration the
    user: once the broker is back, the user starts again within FAILED_START_WINDOW."""
    eid(MAX_PENDING_PER_USER=2)
    broker.fail_next("create", 503, times=2)
    for _ in range(2):
        with pytest.raises(flow.BrokerFailed):
            start(alice)
    assert flow.unfinished_count(alice) == 2
    with pytest.raises(flow.Refused) as refused:  # right away: still counted
        start(alice)
    assert refused.value.outcome is outcomes.TOO_MANY_PENDING
    age(flow.FAILED_START_WINDOW + 1)
    assert flow.unfinished_count(alice) == 0
    assert start(alice).identification.status == Status.PENDING
    # Pending rows still count for SESSION_MAX_AGE.
    age(flow.FAILED_START_WINDOW + 1)
    assert flow.unfinished_count(alice) == 1


def test_an_unexpected_failure_after_the_reservation_is_stored_and_raised(
    alice: AbstractBaseUser, broker: ScriptedBroker, eid: Callable[..., None]
) -> None:
    """A bug in the caller's return URLs (or anything else not the broker's): the reserved
    row does not stay PENDING without a session, counting toward the limit."""
    eid(MAX_PENDING_PER_USER=1)

    def broken(reference: str) -> ReturnUrls:
        raise RuntimeError("a bug, with 31127112345 in its message")

    with pytest.raises(RuntimeError):
        flow.start(alice, return_urls=broken, host=HOST)
    row = Identification.objects.get()
    assert (row.status, row.request_id) == (Status.ERROR, None)
    assert (row.error_code, row.error_message) == ("RuntimeError", "")
    assert broker.create_requests == []
    age(flow.FAILED_START_WINDOW + 1)
    assert start(alice).identification.status == Status.PENDING


def test_an_unexpected_failure_of_the_broker_call_is_stored_and_raised(
    alice: AbstractBaseUser, broker: ScriptedBroker, monkeypatch: pytest.MonkeyPatch
) -> None:
    client = get_client()

    def crash(**kwargs: Any) -> Any:
        raise KeyError("bug")

    monkeypatch.setattr(client, "create_session", crash)
    with pytest.raises(KeyError):
        start(alice)
    assert Identification.objects.get().status == Status.ERROR
    assert not Identification.objects.filter(status=Status.PENDING).exists()


def hide_users(monkeypatch: pytest.MonkeyPatch, user_model: Any, *managers: str) -> None:
    """Replace the user model's ``managers`` (``default_manager``, ``base_manager``) by one
    that fails when asked: a site's manager that hides users must not make the lock take
    nothing."""

    class Hiding(models.Manager):  # type: ignore[type-arg]
        def get_queryset(self) -> Any:
            raise AssertionError(f"the lock went through one of {managers}")

    hiding = Hiding()
    hiding.model = user_model
    for manager in managers:
        monkeypatch.setattr(user_model._meta, manager, hiding)


def test_a_start_locks_the_users_row_then_counts_then_reserves(
    alice: AbstractBaseUser, broker: ScriptedBroker, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The pending limit's statements, in the order that makes it a guarantee (the count
    after the lock: tests/production/test_pending_limit.py), and whatever the user model's
    managers hide: a custom default manager must not make the lock take nothing."""
    user_model = type(alice)
    hide_users(monkeypatch, user_model, "default_manager", "base_manager")
    users = connection.ops.quote_name(user_model._meta.db_table)
    with CaptureQueriesContext(connection) as queries:
        row = start(alice).identification
    statements = [q["sql"] for q in queries.captured_queries]

    def kind(sql: str) -> str | None:
        """What a statement is; None for a transaction's edges (BEGIN, a savepoint)."""
        if sql.endswith("FOR UPDATE"):
            return "lock"
        if sql.startswith("SELECT COUNT(*)"):
            return "count"
        if sql.startswith("WITH changed AS (UPDATE"):
            return "UPDATE"  # the change and its audit event, one statement (PostgreSQL)
        verb = sql.split(" ", 1)[0]
        return verb if verb in {"SELECT", "INSERT", "UPDATE"} else None

    lock = ["lock"] if connection.features.has_select_for_update else []
    # The "started" event with the broker's session id (PostgreSQL: in the UPDATE's statement).
    event = ["INSERT"] if event_statements() else []
    assert [k for k in map(kind, statements) if k] == [*lock, "count", "INSERT", "UPDATE", *event]
    if lock:  # alice's row in the user table, not merely a statement of that shape
        (locking,) = [s for s in statements if kind(s) == "lock"]
        assert f" FROM {users} WHERE " in locking
        assert locking.endswith(f"= {alice.pk} FOR UPDATE")
    assert Identification.objects.get().request_id == row.request_id


def test_a_backend_whose_row_lock_is_not_a_trailing_clause_gets_the_orms_lock(
    alice: AbstractBaseUser, broker: ScriptedBroker, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A table hint (``WITH (UPDLOCK)``) cannot follow the statement's WHERE: the ORM places
    it, through the base manager (a default manager hiding users must not matter)."""
    if not connection.features.has_select_for_update:
        pytest.skip("the database locks no rows (SQLite): nothing to lock either way")
    user_model = type(alice)
    hide_users(monkeypatch, user_model, "default_manager")
    monkeypatch.setattr(pending.StartSql.of(connections["default"]), "lock_sql", None)
    users = connection.ops.quote_name(user_model._meta.db_table)
    with CaptureQueriesContext(connection) as queries:
        assert start(alice).identification.status == Status.PENDING
    statements = [q["sql"] for q in queries.captured_queries]
    (lock,) = [s for s in statements if s.startswith("SELECT") and f"FROM {users}" in s]
    assert lock.endswith("FOR UPDATE")
    count = next(i for i, s in enumerate(statements) if s.startswith("SELECT COUNT(*)"))
    assert statements.index(lock) < count


def test_a_reused_request_id_inside_the_callers_transaction_leaves_it_usable(
    alice: AbstractBaseUser, broker: ScriptedBroker
) -> None:
    """The unique index refuses the RequestId of an earlier session; the start's UPDATE ran
    in a savepoint, so the caller's transaction goes on (ATOMIC_REQUESTS on its view)."""
    first = start(alice).identification
    broker.will_create(first.request_id)
    with transaction.atomic():
        with pytest.raises(flow.BrokerFailed) as failed:
            start(alice)
        assert "RequestId of an earlier session" in str(failed.value.error)
        assert Identification.objects.count() == 2  # the transaction still answers
    row = failed.value.identification
    row.refresh_from_db()
    assert (row.status, row.request_id) == (Status.ERROR, None)
    assert Identification.objects.get(pk=first.pk).status == Status.PENDING


class ReadsFromAReplica:
    """A router that sends reads to a replica this test has not got: a read that decides
    a write would fail, not merely see a lagging copy."""

    def db_for_read(self, model: Any, **hints: Any) -> str:
        return "replica"

    def db_for_write(self, model: Any, **hints: Any) -> str:
        return "default"


def test_the_pending_limit_counts_on_the_database_written_to(
    alice: AbstractBaseUser, broker: ScriptedBroker, eid: Callable[..., None], settings: Any
) -> None:
    """A replica lagging behind would miss the rows of starts just made: the count runs on
    the database written to (the one that holds the user's lock), by default too."""
    eid(MAX_PENDING_PER_USER=1)
    settings.DATABASE_ROUTERS = [ReadsFromAReplica()]
    assert start(alice).identification.status == Status.PENDING
    with pytest.raises(flow.Refused) as refused:
        start(alice)
    assert refused.value.outcome is outcomes.TOO_MANY_PENDING
    assert flow.unfinished_count(alice) == 1


def test_the_pending_limit_is_counted_for_a_saved_user_only() -> None:
    """An anonymous or unsaved user has no rows to count: an error, not a count of 0."""
    from django.contrib.auth.models import AnonymousUser

    with pytest.raises(ValueError, match="needs a saved user"):
        flow.unfinished_count(AnonymousUser())


def test_what_counts_toward_the_pending_limit(
    alice: AbstractBaseUser, bob: AbstractBaseUser, eid: Callable[..., None]
) -> None:
    """Each kind of row just inside and just outside its window; another user's rows and
    finished rows never count."""
    eid(SESSION_MAX_AGE=600)
    now = timezone.now()
    within, past = flow.FAILED_START_WINDOW - 5, flow.FAILED_START_WINDOW + 5
    counted = [
        dict(status=Status.PENDING, created=595),
        dict(status=Status.ERROR, created=within),  # a start failed at the broker
        dict(status=Status.ABORTED, created=3600, completed=within),  # cancelled lately
    ]
    not_counted = [
        dict(status=Status.PENDING, created=605),  # stale
        dict(status=Status.ERROR, created=past),
        dict(status=Status.ERROR, created=within, request_id=True),  # failed later on
        dict(status=Status.ERROR, created=within, anonymized=True),
        dict(status=Status.ABORTED, created=within, completed=past),
        dict(status=Status.SUCCESS, created=1, completed=1),
        dict(status=Status.EXPIRED, created=1, completed=1),
        dict(status=Status.REJECTED, created=1, completed=1),
    ]

    def add(user: AbstractBaseUser, spec: dict[str, Any]) -> None:
        row = Identification.objects.create(
            user=user,
            status=spec["status"],
            request_id=f"session-of-{user.pk}" if spec.get("request_id") else None,
            anonymized_at=now if spec.get("anonymized") else None,
        )
        completed = spec.get("completed")
        Identification.objects.filter(pk=row.pk).update(
            created_at=now - datetime.timedelta(seconds=spec["created"]),
            completed_at=None if completed is None else now - datetime.timedelta(seconds=completed),
        )

    for spec in [*counted, *not_counted]:
        add(alice, spec)
        add(bob, spec)
    assert flow.unfinished_count(alice) == len(counted)
    assert flow.unfinished_count(bob.pk) == len(counted)


def test_iframe_display_sends_the_hosts_domain(
    alice: AbstractBaseUser, broker: ScriptedBroker
) -> None:
    """v1's iFrame object (the other APIs' frames: tests/brokers)."""
    start(alice, display="iframe")
    assert broker.sent()["iFrame"]["Domain"] == HOST


@pytest.mark.parametrize(
    ("value", "safe"),
    [
        ("/account/", "/account/"),
        ("/account/?tab=eid#top", "/account/?tab=eid#top"),
        (f"https://{HOST}/x/", f"https://{HOST}/x/"),
        ("https://evil.example/", ""),
        ("//evil.example/", ""),
        ("javascript:alert(1)", ""),
        (" /account/", ""),
        ("/a\x00b/", ""),
        ("/" + "a" * 2000, ""),
        (None, ""),
    ],
)
def test_safe_next(value: str | None, safe: str) -> None:
    assert flow.safe_next(value, host=HOST, secure=True) == safe


def test_return_urls_keep_the_placeholders_unencoded() -> None:
    plain = flow.return_urls("r" * 32, absolute)
    assert isinstance(plain, ReturnUrls)
    assert plain.success.endswith("/success/")
    urls = V1Api.return_urls(plain, external_reference="ext")
    assert urls.success.endswith("/success/?externalId=[2]")
    assert urls.abort.endswith("/abort/?externalId=[2]")
    assert urls.error.endswith("/error/?status=[0]&externalId=[2]")


def test_start_drops_a_destination_off_the_site(
    alice: AbstractBaseUser, broker: ScriptedBroker
) -> None:
    """A JSON or command front end passing user input gets the same check as the form."""
    for unsafe in ("https://evil.example/", "//evil.example/", "/" + "a" * 3000):
        assert start(alice, next_url=unsafe).identification.next_url == ""
    assert start(alice, next_url="/account/").identification.next_url == "/account/"
