"""Faults the flow's tests inject: a database statement that fails, a connection reset, the
broker's answers that confirm nothing."""

from __future__ import annotations

import re
from typing import Any

import requests
from django.db import OperationalError

from tests.fixtures_broker import Scripted, raises, reply

CHANGE_WITH_EVENT = re.compile(r"^WITH \w+ AS \(")


class FailingStatement:
    """An ``execute_wrapper`` that makes the first matching statement fail, as a database does."""

    def __init__(self, prefix: str, table: str = "django_eid_identification") -> None:
        self.prefix, self.table, self.failed = prefix, table, 0

    def __call__(self, execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
        # A change with its audit event is one statement on PostgreSQL: "WITH changed AS
        # (UPDATE ...) INSERT ...": its verb is the change's.
        statement = CHANGE_WITH_EVENT.sub("", sql.lstrip().upper(), count=1)
        if not self.failed and statement.startswith(self.prefix) and self.table in sql:
            self.failed += 1
            raise OperationalError("could not serialize access due to concurrent update")
        return execute(sql, params, many, context)


def connection_reset() -> requests.ConnectionError:
    return requests.ConnectionError(ConnectionResetError(104, "Connection reset by peer"))


#: Answers of the broker that confirm nothing: the call fails, or answers no record.
BROKER_FAULTS: dict[str, Scripted] = {
    "connection reset": raises(connection_reset),
    "read timeout": raises(lambda: requests.ReadTimeout("read timed out")),
    "503": reply(503, {"message": "maintenance"}),
    "HTML instead of JSON": reply(200, raw="<html>proxy login</html>"),
}
