"""Resources of one pytest-xdist worker, so that workers running at once share nothing.

pytest-django names each worker's PostgreSQL test database (``test_eid_gw0`` ...); the
Redis database of a worker is chosen here. A run's Redis database (``EID_TEST_REDIS_URL``,
``/N``: the slot of ``.ci/services.sh run``) is the first of a block of
:data:`WORKERS_PER_SLOT`, the worker's is ``16 + N * WORKERS_PER_SLOT + worker``: never
that of another slot's worker or of a run without workers (databases 0 to 15).
"""

from __future__ import annotations

from typing import Final
from urllib.parse import urlsplit, urlunsplit

from django.core.exceptions import ImproperlyConfigured

#: Workers one run may start (``pytest -n``) with Redis.
WORKERS_PER_SLOT: Final = 8
#: Runs at once (``.ci/services.sh run``'s slots: databases 0 to 15 without workers).
SLOTS: Final = 16
#: Redis databases ``.ci/services.sh`` starts Redis with (``--databases``).
REDIS_DATABASES: Final = SLOTS + SLOTS * WORKERS_PER_SLOT


def worker_redis_url(url: str, worker: str) -> str:
    """``url`` with the Redis database of pytest-xdist's ``worker`` (``"gw3"``)."""
    parts = urlsplit(url)
    slot = int(parts.path.strip("/") or 0)
    number = int(worker.removeprefix("gw"))
    if not (0 <= slot < SLOTS and 0 <= number < WORKERS_PER_SLOT):
        raise ImproperlyConfigured(
            f"EID_TEST_REDIS_URL {url!r} with worker {worker}: at most {WORKERS_PER_SLOT} "
            f"workers (pytest -n) on Redis databases 0 to {SLOTS - 1}"
        )
    database = SLOTS + slot * WORKERS_PER_SLOT + number
    return urlunsplit(parts._replace(path=f"/{database}"))
