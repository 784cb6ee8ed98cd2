"""Database connections of the threads a test starts."""

from __future__ import annotations

from django.db import connections
from django.db.backends.base.base import BaseDatabaseWrapper


def close_thread_connections() -> None:
    """Close every database connection of the calling thread; call it as a thread ends.

    ``connections.close_all()`` leaves an in-memory SQLite connection open on purpose
    (closing the only one would drop the database). The test database is a shared-cache
    in-memory one that the main thread keeps open, so a helper thread's own connection
    can close without losing anything, and must: Python 3.13 warns about an unclosed
    sqlite3 connection (``ResourceWarning``), which fails the test that left it.
    """
    for connection in connections.all(initialized_only=True):
        if connection.vendor == "sqlite" and connection.is_in_memory_db():
            # The base class's close(), which the SQLite backend skips for memory databases.
            BaseDatabaseWrapper.close(connection)
        else:
            connection.close()
