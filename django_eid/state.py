"""One-time callback state kept in the user's Django session.

Starting a session remembers its reference; a callback is accepted only from a
browser that holds it, and using it removes it. A small cap keeps parallel tabs
working without letting the session grow without bound.
"""

from __future__ import annotations

import time
from typing import Final

from django.http import HttpRequest

from django_eid.conf import eid_settings

SESSION_KEY: Final = "django_eid_pending"
#: The broker page of each pending iframe-display session, so reloading the page that
#: embeds it shows the same session again instead of starting (and paying for) another.
FRAMES_KEY: Final = "django_eid_frames"
MAX_ENTRIES: Final = 8


def _entries(request: HttpRequest) -> dict[str, float]:
    value = request.session.get(SESSION_KEY)
    if not isinstance(value, dict):
        return {}
    return {str(k): float(v) for k, v in value.items() if isinstance(v, int | float)}


def capacity() -> int:
    """How many pending references one browser keeps: never fewer than a user may start."""
    return max(MAX_ENTRIES, eid_settings.MAX_PENDING_PER_USER)


def _frames(request: HttpRequest) -> dict[str, str]:
    value = request.session.get(FRAMES_KEY)
    if not isinstance(value, dict):
        return {}
    return {str(k): v for k, v in value.items() if isinstance(v, str)}


def remember(request: HttpRequest, reference: str, *, frame_url: str | None = None) -> None:
    """Let this browser complete the session ``reference`` (dropping the oldest beyond the cap).

    ``frame_url``: the broker page to embed again when the iframe page is reloaded.
    """
    entries = _entries(request)
    entries[reference] = time.time()
    cap = capacity()
    if len(entries) > cap:
        # The oldest pending tabs lose their claim first.
        for old in sorted(entries, key=entries.__getitem__)[: len(entries) - cap]:
            del entries[old]
    request.session[SESSION_KEY] = entries
    frames = {k: v for k, v in _frames(request).items() if k in entries}
    if frame_url is not None:
        frames[reference] = frame_url
    if frames or FRAMES_KEY in request.session:
        request.session[FRAMES_KEY] = frames


def frame_url(request: HttpRequest, reference: str) -> str | None:
    """The broker page of the pending iframe session ``reference`` this browser started."""
    if not holds(request, reference):
        return None
    return _frames(request).get(reference)


def holds(request: HttpRequest, reference: str) -> bool:
    """Whether this browser started the session ``reference`` and has not used it yet."""
    return reference in _entries(request)


def consume(request: HttpRequest, reference: str) -> None:
    """Forget ``reference``: its callback has been handled (a replay is refused)."""
    entries = _entries(request)
    if entries.pop(reference, None) is not None:
        request.session[SESSION_KEY] = entries
    frames = _frames(request)
    if frames.pop(reference, None) is not None:
        request.session[FRAMES_KEY] = frames
