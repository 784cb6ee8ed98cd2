"""(c) ``eid_purge`` running during traffic loses nothing.

The command runs in a loop in its own thread (as cron would, only much more
often) while other threads complete identifications through the real views,
on PostgreSQL. Afterwards every identification younger than the cutoff is
intact, the old ones are gone, and what each user was shown matches what is
stored.
"""

from __future__ import annotations

import datetime
import io
import random
import threading
import time
from typing import Any

import pytest
from django.core.management import call_command
from django.db.models import F
from django.test import Client
from django.utils import timezone

from django_eid import signals
from django_eid.models import Identification
from tests.db_threads import close_thread_connections
from tests.production.helpers import receiving, run_threads, start, success_url
from tests.production.stub import SAMPLE, BrokerStub

pytestmark = [pytest.mark.production, pytest.mark.django_db(transaction=True)]

WORKERS = 4
PER_WORKER = 8
Status = Identification.Status


class Purger:
    """Runs ``eid_purge`` over and over in a thread until stopped."""

    def __init__(self, *argsets: list[str]) -> None:
        self.argsets = argsets
        self.runs = 0
        self.errors: list[BaseException] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        try:
            while not self._stop.is_set():
                args = self.argsets[self.runs % len(self.argsets)]
                call_command("eid_purge", *args, stdout=io.StringIO())
                self.runs += 1
                time.sleep(0.005)
        except BaseException as err:
            self.errors.append(err)
        finally:
            close_thread_connections()

    def __enter__(self) -> Purger:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=30)
        assert not self._thread.is_alive()
        if self.errors:
            raise self.errors[0]


def make_rows(user: Any, count: int, *, age: datetime.timedelta, status: str) -> list[int]:
    now = timezone.now()
    rows = [
        Identification(
            user=user,
            status=status,
            name="Old, Row",
            identity_provider_unique_id="old-1",
            social_security_number=SAMPLE.national_identity_number,
            created_at=now - age,
            completed_at=None if status == Status.PENDING else now - age,
        )
        for _ in range(count)
    ]
    for row in rows:
        row.save()
    return [r.pk for r in rows]


def test_purge_in_a_loop_during_identifications_loses_nothing(
    eid_on_stub: BrokerStub, django_user_model: Any
) -> None:
    veteran = django_user_model.objects.create_user("veteran")
    old_finished = make_rows(veteran, 20, age=datetime.timedelta(days=40), status=Status.SUCCESS)
    young_finished = make_rows(veteran, 5, age=datetime.timedelta(hours=1), status=Status.SUCCESS)
    stale_pending = make_rows(veteran, 5, age=datetime.timedelta(hours=1), status=Status.PENDING)
    users = [django_user_model.objects.create_user(f"user{i}") for i in range(WORKERS)]

    def identify(i: int) -> list[tuple[int, int, str]]:
        browser = Client()
        browser.force_login(users[i])
        done = []
        for _ in range(PER_WORKER):
            row = start(browser)
            response = browser.get(success_url(row, eid_on_stub))
            done.append((row.pk, response.status_code, response.get("Location", "")))
        return done

    with (
        receiving(signals.identification_succeeded) as succeeded,
        Purger(["--older-than", "2h"], ["--older-than", "2h", "--anonymize"]) as purger,
    ):
        outcomes = [o for per_worker in run_threads(identify, WORKERS) for o in per_worker]
    assert purger.runs >= 3, "the purge ran during the traffic"

    # Every identification of the traffic completed, and is stored whole.
    assert len(outcomes) == WORKERS * PER_WORKER
    assert {(status, location) for _, status, location in outcomes} == {(302, "/done/")}
    assert len(succeeded) == WORKERS * PER_WORKER
    for row in Identification.objects.filter(pk__in=[pk for pk, _, _ in outcomes]):
        assert row.status == Status.SUCCESS
        assert row.name == "Nordmann, Kari Marie"
        assert row.identity_provider_unique_id == SAMPLE.identity_provider_unique_id
        assert row.social_security_number == SAMPLE.national_identity_number
        assert row.completed_at is not None
    assert Identification.objects.filter(user__in=users).count() == WORKERS * PER_WORKER

    # Younger than the cutoff and finished: untouched.
    for row in Identification.objects.filter(pk__in=young_finished):
        assert (row.status, row.name, row.social_security_number) == (
            Status.SUCCESS,
            "Old, Row",
            SAMPLE.national_identity_number,
        )
    assert Identification.objects.filter(pk__in=young_finished).count() == 5
    # Pending past SESSION_MAX_AGE: expired, and kept (younger than the cutoff).
    assert set(
        Identification.objects.filter(pk__in=stale_pending).values_list("status", flat=True)
    ) == {Status.EXPIRED}
    # Older than the cutoff: deleted, or stripped by an --anonymize run that came last.
    for row in Identification.objects.filter(pk__in=old_finished):
        assert (row.name, row.social_security_number) == ("", None)


def test_callbacks_racing_the_expiry_of_stale_sessions_agree_with_the_database(
    eid_on_stub: BrokerStub, django_user_model: Any, settings: Any
) -> None:
    """Sessions expire after 1 s; callbacks arrive 0.3 to 1.5 s after the start (the row's
    start is moved back that far instead of waiting it out) while the purge expires them."""
    settings.DJANGO_EID = {**settings.DJANGO_EID, "SESSION_MAX_AGE": 1}
    users = [django_user_model.objects.create_user(f"racer{i}") for i in range(WORKERS)]
    per_worker = 5

    def identify(i: int) -> list[tuple[int, int, str]]:
        rng = random.Random(i)
        browser = Client()
        browser.force_login(users[i])
        done = []
        for _ in range(per_worker):
            row = start(browser)
            age = datetime.timedelta(seconds=rng.uniform(0.3, 1.5))
            Identification.objects.filter(pk=row.pk).update(created_at=F("created_at") - age)
            response = browser.get(success_url(row, eid_on_stub))
            done.append((row.pk, response.status_code, response.get("Location", "")))
        return done

    with (
        receiving(signals.identification_succeeded) as succeeded,
        Purger(["--older-than", "1h"]) as purger,
    ):
        outcomes = [o for per_worker_ in run_threads(identify, WORKERS) for o in per_worker_]
    assert purger.runs >= 3

    stored = dict(Identification.objects.filter(user__in=users).values_list("pk", "status"))
    assert len(stored) == len(outcomes) == WORKERS * per_worker
    shown = {"success": 0, "expired": 0}
    for pk, status, location in outcomes:
        if (status, location) == (302, "/done/"):
            assert stored[pk] == Status.SUCCESS
            shown["success"] += 1
        else:
            # The expired page (410), never a success the database does not hold.
            assert status == 410, (status, location)
            assert stored[pk] == Status.EXPIRED
            shown["expired"] += 1
    assert len(succeeded) == shown["success"]
    assert {s["identification"].pk for s in succeeded} == {
        pk for pk, status in stored.items() if status == Status.SUCCESS
    }
    # The race was real: both outcomes happened.
    assert shown["success"], shown
    assert shown["expired"], shown
