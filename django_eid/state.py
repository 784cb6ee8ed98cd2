"""What django-eid keeps in the user's Django session: the browser's side of the flow.

Starting a session remembers its reference; a callback is accepted only from a
browser that holds it, and using it removes it. A gate remembers why it sent the
user to verify (shown on the start page) and keeps a form the user had sent, once,
for after the verification. Every entry is capped and ages out, so parallel tabs work
without letting the session grow without bound.
"""

from __future__ import annotations

import dataclasses
import hashlib
import logging
import secrets
import time
from dataclasses import dataclass
from typing import Any, Final

from django.core.cache import caches
from django.http import HttpRequest

from django_eid.brokers.oidc_presets import LEVELS
from django_eid.conf import eid_settings
from django_eid.models import max_length
from django_eid.requirements import Demand

logger = logging.getLogger("django_eid")

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


def held(request: HttpRequest) -> list[str]:
    """The references this browser started and has not used yet, newest first."""
    entries = _entries(request)
    return sorted(entries, key=entries.__getitem__, reverse=True)


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


# -- a person verified at the door without an account (django_eid.flows.signup) ----------
#: The reference of the identification this browser verified at the door without an
#: account, and when: what a sign-up binds (``pending_identification``).
DOOR_KEY: Final = "django_eid_door"


#: A random key of this browser's session, by which the anonymous caps count its starts.
BROWSER_KEY: Final = "django_eid_browser"


def browser_key(request: HttpRequest) -> str:
    """This browser session's key for the anonymous caps (:mod:`django_eid.flows.caps`):
    random, kept in the session (and through a login, which keeps the session's data), so
    the session need not be saved before its first start to be counted."""
    value = request.session.get(BROWSER_KEY)
    if not isinstance(value, str) or len(value) != 32:
        value = secrets.token_hex(16)
        request.session[BROWSER_KEY] = value
    return value


def keep_verified(request: HttpRequest, reference: str) -> None:
    """Remember that this browser verified ``reference`` at the door, without an account."""
    request.session[DOOR_KEY] = {"reference": reference, "at": time.time()}


def verified(request: HttpRequest) -> str | None:
    """The reference :func:`keep_verified` kept, if younger than ``SESSION_MAX_AGE``."""
    if not hasattr(request, "session"):
        return None
    value = _fresh({"door": request.session.get(DOOR_KEY)}).get("door")
    reference = value.get("reference") if value else None
    return reference if isinstance(reference, str) else None


def forget_verified(request: HttpRequest) -> None:
    """Forget the kept reference: it was bound (or the visitor logged in otherwise)."""
    if hasattr(request, "session") and DOOR_KEY in request.session:
        del request.session[DOOR_KEY]


def forget_verified_at_login(sender: Any, request: HttpRequest | None, **kwargs: Any) -> None:
    """Receiver of Django's ``user_logged_in``: whoever logs in, this browser's person
    waiting to sign up is forgotten (bind before logging the new account in)."""
    if request is not None:
        forget_verified(request)


# -- what a gate asked for (``django_eid.decorators``) -------------------------------------
#: Per destination (the start's ``next``): why a gate sent the user, and what it requires of
#: the identification they are about to start (the same person, the providers).
DEMANDS_KEY: Final = "django_eid_demands"
#: Forms a gate kept while the user verifies, by one-time token.
KEPT_KEY: Final = "django_eid_kept"
#: How many of each a browser keeps; the oldest go first.
MAX_DEMANDS: Final = 8
MAX_KEPT: Final = 4
#: The largest form kept (its path, names and values, in characters); a bigger one is sent
#: again by hand.
MAX_KEPT_SIZE: Final = 16 * 1024
#: The longest destination a start accepts (``Identification.next_url``).
MAX_NEXT_LENGTH: Final = max_length("next_url") or 0


def _fresh(entries: object) -> dict[str, dict[str, Any]]:
    """The entries of a session dict younger than ``SESSION_MAX_AGE``."""
    if not isinstance(entries, dict):
        return {}
    oldest = time.time() - eid_settings.SESSION_MAX_AGE
    return {
        str(key): value
        for key, value in entries.items()
        if isinstance(value, dict)
        and isinstance(value.get("at"), int | float)
        and value["at"] >= oldest
    }


def _capped(entries: dict[str, dict[str, Any]], cap: int) -> dict[str, dict[str, Any]]:
    newest = sorted(entries, key=lambda key: entries[key]["at"], reverse=True)[:cap]
    return {key: entries[key] for key in newest}


def _strings(value: object) -> tuple[str, ...] | None:
    """``value`` as a tuple of strings if it is a list of them (session data may be stale)."""
    if not isinstance(value, list | tuple) or not all(isinstance(v, str) for v in value):
        return None
    return tuple(value)


def require(request: HttpRequest, next_url: str, demand: Demand) -> None:
    """Remember that a gate sends the user to verify, then on to ``next_url``.

    A ``next_url`` longer than the start accepts is not remembered: it could never be read,
    and the session must not grow with the length of the URLs a user is sent to.
    """
    if len(next_url) > MAX_NEXT_LENGTH:
        return
    demands = _fresh(request.session.get(DEMANDS_KEY))
    value = dataclasses.asdict(demand)
    value["at"] = time.time()
    demands[next_url] = value
    request.session[DEMANDS_KEY] = _capped(demands, MAX_DEMANDS)


def demand(request: HttpRequest, next_url: str) -> Demand:
    """What a gate asked for ``next_url``; an empty :class:`Demand` when none did."""
    if not next_url or not hasattr(request, "session"):
        return Demand()
    value = _fresh(request.session.get(DEMANDS_KEY)).get(next_url)
    if value is None:
        return Demand()
    min_age = value.get("min_age")
    min_loa = value.get("min_loa")
    message = value.get("message")
    return Demand(
        codes=_strings(value.get("codes")) or (),
        message=message if isinstance(message, str) else "",
        min_age=min_age if isinstance(min_age, int) and not isinstance(min_age, bool) else None,
        same_person=value.get("same_person") is True,
        providers=_strings(value.get("providers")),
        min_loa=min_loa if min_loa in LEVELS else None,
    )


@dataclass(frozen=True)
class Kept:
    """A form a gate kept: where it was sent, and its fields (in order, repeats kept)."""

    path: str
    fields: list[tuple[str, str]]


def keep(request: HttpRequest, path: str, fields: list[tuple[str, str]]) -> str | None:
    """Keep a form until the user has verified; the one-time token, or ``None`` if too big.

    ``path`` must already be checked to be on this site (the caller knows the host).
    """
    size = len(path) + sum(len(name) + len(value) for name, value in fields)
    if size > MAX_KEPT_SIZE:
        return None
    kept = _fresh(request.session.get(KEPT_KEY))
    token = secrets.token_urlsafe(24)
    user = getattr(request, "user", None)
    kept[token] = {
        "at": time.time(),
        "user": str(getattr(user, "pk", "")),
        "path": path,
        "fields": [list(pair) for pair in fields],
    }
    request.session[KEPT_KEY] = _capped(kept, MAX_KEPT)
    return token


def resume(request: HttpRequest, token: str) -> Kept | None:
    """The form kept under ``token`` for this user, used up; ``None`` if there is none.

    Used once even by two requests at the same instant (two tabs, a prefetch): the session
    alone cannot promise that (the last save wins), so the token is also spent in the
    shared cache.
    """
    kept = _fresh(request.session.get(KEPT_KEY))
    value = kept.pop(token, None) if len(token) <= 64 else None
    if KEPT_KEY in request.session:
        request.session[KEPT_KEY] = kept
    if value is None:
        return None
    user = getattr(request, "user", None)
    if value.get("user") != str(getattr(user, "pk", "")):
        return None  # another account's form (the session survived a change of user)
    path, fields = value.get("path"), value.get("fields")
    if not isinstance(path, str) or not isinstance(fields, list):
        return None
    if not _spend(token):
        return None
    return Kept(
        path=path,
        fields=[
            (str(pair[0]), str(pair[1]))
            for pair in fields
            if isinstance(pair, list) and len(pair) == 2
        ],
    )


def _spend(token: str) -> bool:
    """Mark ``token`` used in the shared cache; False if it was already."""
    key = "django_eid:kept:" + hashlib.sha256(token.encode()).hexdigest()
    try:
        return bool(caches[eid_settings.TOKEN_CACHE].add(key, 1, eid_settings.SESSION_MAX_AGE))
    except Exception:
        logger.warning("Could not mark a kept form used in the cache; the session alone does.")
        return True
