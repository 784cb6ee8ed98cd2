"""Locust users of benchmark 4: complete identifications, as a browser does them.

Each simulated user logs in once (``bench<N>`` / ``BENCH_PASSWORD``), then
loops with no think time: POST the start form -> GET the broker's page -> POST
its "identify" button -> GET the callback (the app stores the identity and
redirects to the account page, which is not fetched). The whole loop is also
reported as one ``FLOW identification`` entry, whose count, rate and
percentiles are the benchmark's figures.
"""

from __future__ import annotations

import itertools
import json
import os
import re
import time
from typing import Any

from locust import HttpUser, constant, events, task

PASSWORD = os.environ.get("BENCH_PASSWORD", "bench-password")
USERS = int(os.environ.get("BENCH_USERS", "1000"))
_numbers = itertools.count()
_PERSON = re.compile(r'name="person" id="[^"]*" value="([A-Z0-9_]+)"')
_CSRF = re.compile(r'name="csrfmiddlewaretoken" value="([^"]+)"')
#: Every completed identification, including those finished while locust stops
#: (its statistics end with the run time; the rows in the database do not).
completed = {"identifications": 0, "failed_flows": 0}


@events.quit.add_listener
def _write_summary(**kwargs: Any) -> None:
    path = os.environ.get("BENCH_LOCUST_SUMMARY")
    if path:
        with open(path, "w") as fh:
            json.dump(completed, fh)


class Identifier(HttpUser):
    wait_time = constant(0)

    def on_start(self) -> None:
        self.username = f"bench{next(_numbers) % USERS}"
        self.client.get("/login/", name="0 login page")
        token = self.client.cookies.get("csrftoken", "")
        with self.client.post(
            "/login/",
            data={"username": self.username, "password": PASSWORD, "csrfmiddlewaretoken": token},
            allow_redirects=False,
            name="0 login",
            catch_response=True,
        ) as response:
            if response.status_code != 302:
                response.failure(f"login answered {response.status_code}")

    def _fail(self, response: Any, step: str) -> None:
        completed["failed_flows"] += 1
        response.failure(f"{step}: {response.status_code} {response.text[:200]!r}")

    @task
    def identify(self) -> None:
        started = time.perf_counter()
        token = self.client.cookies.get("csrftoken", "")
        with self.client.post(
            "/eid/start/",
            data={"display": "redirect", "csrfmiddlewaretoken": token},
            allow_redirects=False,
            name="1 start",
            catch_response=True,
        ) as response:
            if response.status_code != 302:
                return self._fail(response, "start")
            broker_page = response.headers["Location"]
        with self.client.get(broker_page, name="2 broker page", catch_response=True) as response:
            person = _PERSON.search(response.text)
            csrf = _CSRF.search(response.text)
            if response.status_code != 200 or not person:
                return self._fail(response, "broker page")
        form = {"action": "identify", "person": person.group(1)}
        if csrf:  # the sandbox's page may or may not carry a CSRF token
            form["csrfmiddlewaretoken"] = csrf.group(1)
        with self.client.post(
            broker_page,
            data=form,
            allow_redirects=False,
            name="3 identify",
            catch_response=True,
        ) as response:
            if response.status_code != 302:
                return self._fail(response, "identify")
            callback = response.headers["Location"]
        with self.client.get(
            callback, allow_redirects=False, name="4 callback", catch_response=True
        ) as response:
            if response.status_code != 302 or "/account/" not in response.headers.get(
                "Location", ""
            ):
                return self._fail(response, "callback")
        completed["identifications"] += 1
        self.environment.events.request.fire(
            request_type="FLOW",
            name="identification",
            response_time=(time.perf_counter() - started) * 1000,
            response_length=0,
            exception=None,
            context={},
        )
        return None
