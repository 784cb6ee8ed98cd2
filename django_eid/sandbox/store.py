"""Where the sandbox broker keeps its tokens and sessions.

Two stores with one small interface: :class:`MemoryStore` for a single test
(the ``eid_broker`` fixture), :class:`CacheStore` for the sandbox app, so that
several server processes share state when they share a cache (Redis, a
database cache). Values are plain JSON-like dicts, copied in and out, so the
two stores behave the same: changing a value read from a store changes
nothing until it is written back.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Callable
from typing import Any, Protocol


def now() -> float:
    """``time.time()``, looked up at each call so that a test can move the clock."""
    return time.time()


class Store(Protocol):
    """Key-value storage with expiry; keys are short strings like ``"session:<id>"``."""

    def get(self, key: str) -> dict[str, Any] | None:
        """The value stored under ``key``, or ``None`` when absent or expired."""

    def set(self, key: str, value: dict[str, Any], ttl: float) -> None:
        """Store ``value`` under ``key`` for ``ttl`` seconds."""

    def delete(self, key: str) -> None:
        """Forget ``key`` (no error when absent)."""


class MemoryStore:
    """A dict with expiry, for one process (and one test)."""

    def __init__(self, clock: Callable[[], float] = now) -> None:
        self.clock = clock
        self._data: dict[str, tuple[float, dict[str, Any]]] = {}

    def get(self, key: str) -> dict[str, Any] | None:
        item = self._data.get(key)
        if item is None:
            return None
        expires, value = item
        if self.clock() >= expires:
            del self._data[key]
            return None
        return copy.deepcopy(value)

    def set(self, key: str, value: dict[str, Any], ttl: float) -> None:
        self._data[key] = (self.clock() + ttl, copy.deepcopy(value))

    def delete(self, key: str) -> None:
        self._data.pop(key, None)

    def keys(self, prefix: str = "") -> list[str]:
        """Live keys starting with ``prefix`` (for the fixture; caches cannot list keys)."""
        return [k for k in list(self._data) if k.startswith(prefix) and self.get(k) is not None]


class CacheStore:
    """A Django cache, keys prefixed so the sandbox never meets the site's own entries."""

    def __init__(self, alias: str = "default", prefix: str = "django_eid_sandbox:") -> None:
        self.alias = alias
        self.prefix = prefix

    @property
    def _cache(self) -> Any:
        from django.core.cache import caches

        return caches[self.alias]

    def get(self, key: str) -> dict[str, Any] | None:
        value = self._cache.get(self.prefix + key)
        return value if isinstance(value, dict) else None

    def set(self, key: str, value: dict[str, Any], ttl: float) -> None:
        # Django caches take whole seconds; never 0, which would mean "do not store".
        self._cache.set(self.prefix + key, value, max(1, int(ttl)))

    def delete(self, key: str) -> None:
        self._cache.delete(self.prefix + key)
