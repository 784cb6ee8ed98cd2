"""Answers given in place of the sandbox broker's own: outages and hostile replies.

:class:`Faults` holds what a test told the ``eid_broker`` fixture to answer
instead (:meth:`~django_eid.sandbox.fake.EidBroker.inject`): an HTTP status
with a body and headers, or a transport error raised by ``requests``, for the
next few calls of an endpoint or until healed, optionally for one session only.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal, TypeAlias

#: The endpoints by role. The successor APIs' calls answer to the same names: their token
#: endpoints to "token", ``POST .../sessions`` to "create", ``GET .../sessions/{id}`` to
#: "retrieve", v2's ``invalidate`` and the eID Hub's ``cancel`` to "invalidate". The
#: OpenID provider's: "discovery", "jwks", "par", "token" and "userinfo".
Endpoint: TypeAlias = Literal[
    "token", "create", "retrieve", "status", "invalidate", "discovery", "jwks", "par", "userinfo"
]
ENDPOINTS: tuple[Endpoint, ...] = (
    "token",
    "create",
    "retrieve",
    "status",
    "invalidate",
    "discovery",
    "jwks",
    "par",
    "userinfo",
)
#: An exception, or what makes a fresh one for each call (a class will do).
Raised: TypeAlias = "BaseException | Callable[[], BaseException]"
#: What a ``responses`` callback returns: (status, headers, body), or an exception to raise.
Answer: TypeAlias = "tuple[int, dict[str, str], bytes] | BaseException"


def encode(body: Any) -> tuple[dict[str, str], bytes]:
    """A body as sent: dict, list or ``None`` as JSON, ``str`` as HTML, ``bytes`` as is."""
    if isinstance(body, bytes):
        return {}, body
    if isinstance(body, str):
        return {"Content-Type": "text/html"}, body.encode()
    return {"Content-Type": "application/json"}, json.dumps(body).encode()


@dataclass
class Fault:
    """One injected answer: ``times`` calls left, ``None`` for every call until healed."""

    endpoint: Endpoint
    status: int
    headers: dict[str, str]
    content: bytes
    exception: Raised | None
    times: int | None
    request_id: str | None = None

    def matches(self, endpoint: Endpoint, request_id: str | None) -> bool:
        return self.endpoint == endpoint and self.request_id in (None, request_id)

    def answer(self) -> Answer:
        if isinstance(self.exception, BaseException):
            return self.exception
        if self.exception is not None:
            return self.exception()
        return self.status, dict(self.headers), self.content


class Faults:
    """The injected answers of one broker, and which one answers a call."""

    def __init__(self) -> None:
        self._faults: list[Fault] = []

    def add(self, fault: Fault) -> None:
        if fault.endpoint not in ENDPOINTS:
            raise ValueError(f"unknown endpoint {fault.endpoint!r}")
        if fault.times is not None and fault.times < 1:
            raise ValueError("times is a positive number, or None for every call")
        self._faults.append(fault)

    def heal(self, endpoint: Endpoint | None = None, *, request_id: str | None = None) -> None:
        """Drop the injected answers of ``endpoint`` (all by default), or of one session."""
        self._faults = [
            f
            for f in self._faults
            if not (endpoint in (None, f.endpoint) and request_id in (None, f.request_id))
        ]

    def take(self, endpoint: Endpoint, request_id: str | None = None) -> Fault | None:
        """The fault that answers this call, if any; a counted one is used up first.

        Counted faults queue (oldest first), so ``inject(..., times=1)`` twice
        scripts two calls; among the lasting ones the newest wins, so a test can
        replace an outage with another without healing first.
        """
        for fault in self._faults:
            if fault.times is not None and fault.matches(endpoint, request_id):
                fault.times -= 1
                if fault.times == 0:
                    self._faults.remove(fault)
                return fault
        for fault in reversed(self._faults):
            if fault.matches(endpoint, request_id):
                return fault
        return None
