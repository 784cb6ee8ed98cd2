"""The app's settings: one dict, ``settings.DJANGO_EID``, read lazily.

Every key, its default and its meaning are listed in :data:`DEFAULTS`. Values
are read on first use and cached until Django reports that ``DJANGO_EID`` (or
``DEBUG``/``SECRET_KEY``, which some values depend on) changed, so
``override_settings`` and pytest-django's ``settings`` fixture work, and a
request does not re-parse the dict each time it reads a key.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, TypeGuard
from urllib.parse import urlsplit

from django.conf import settings
from django.core.signals import setting_changed
from django.dispatch import receiver
from django.utils import translation

LANGUAGES: Final = ("NO", "EN", "SV", "DA", "FI")
TOKEN_AUTH_METHODS: Final = ("basic", "post")
#: Upper-case words joined by underscores, as the interface document describes.
PROVIDER_RE: Final = re.compile(r"^[A-Z0-9]+(?:_[A-Z0-9]+)*\Z")

DEFAULTS: Final[Mapping[str, Any]] = {
    # Broker and OAuth client (issue: foundation).
    "CLIENT_ID": None,
    "CLIENT_SECRET": None,
    "BASE_URL": None,
    "AUTH_URL": None,
    "SCOPES": ("identify",),
    "TOKEN_AUTH_METHOD": "basic",
    "TIMEOUT": 10,
    "TOKEN_CACHE": "default",
    "CA_BUNDLE": None,
    "MAX_RESPONSE_BYTES": 1024 * 1024,
    # What a session asks the broker for.
    "IDENTITY_PROVIDER": None,
    "ALLOWED_PROVIDERS": None,
    "LANGUAGE": None,
    "GET_SOCIAL_SECURITY_NUMBER": False,
    "IFRAME_DOMAIN": None,
    # The flow.
    "SESSION_MAX_AGE": 1800,
    "SUCCESS_URL": "/",
    "ABORT_URL": None,
    "ERROR_URL": None,
    "CALLBACK_INTERSTITIAL": True,
    "MAX_PENDING_PER_USER": 5,
    "ONE_ACCOUNT_PER_PERSON": False,
    # Personal data.
    "ENCRYPTION_KEYS": None,
    # The sandbox broker (django_eid.sandbox).
    "SANDBOX_ALLOW_WITHOUT_DEBUG": False,
    "SANDBOX_TOKEN_LIFETIME": 3600,
    "SANDBOX_LATENCY": 0,
    # Cache alias holding the sandbox's tokens and sessions; share it (Redis) across processes.
    "SANDBOX_CACHE": "default",
}

#: Broker ``Language`` code for each Django language code it covers (others: EN).
_DJANGO_TO_BROKER_LANGUAGE: Final = {
    "nb": "NO",
    "nn": "NO",
    "no": "NO",
    "sv": "SV",
    "da": "DA",
    "fi": "FI",
}
#: Django language code for each broker ``Language`` code (the sandbox renders in it).
BROKER_TO_DJANGO_LANGUAGE: Final = {"NO": "nb", "EN": "en", "SV": "sv", "DA": "da", "FI": "fi"}


@dataclass(frozen=True)
class Problem:
    """One configuration problem, reported by a system check and by the client."""

    id: str
    level: str  # "error" or "warning"
    message: str
    hint: str | None = None


class EidSettings:
    """Typed, lazy view of ``settings.DJANGO_EID`` with defaults."""

    _cache: dict[str, Any] | None = None
    #: Bumped on every change, so holders of derived state (clients) know to rebuild.
    generation: int = 0

    def _values(self) -> dict[str, Any]:
        if self._cache is None:
            user = getattr(settings, "DJANGO_EID", None) or {}
            values = dict(DEFAULTS)
            values.update(user)
            self._cache = values
        return self._cache

    def clear(self) -> None:
        self._cache = None
        self.generation += 1

    def raw(self, key: str) -> Any:
        return self._values()[key]

    @property
    def user_keys(self) -> frozenset[str]:
        return frozenset(getattr(settings, "DJANGO_EID", None) or {})

    # -- broker and OAuth client ---------------------------------------
    @property
    def CLIENT_ID(self) -> str:
        return str(self.raw("CLIENT_ID") or "")

    @property
    def CLIENT_SECRET(self) -> str:
        return str(self.raw("CLIENT_SECRET") or "")

    @property
    def BASE_URL(self) -> str:
        return str(self.raw("BASE_URL") or "").rstrip("/")

    @property
    def AUTH_URL(self) -> str:
        return str(self.raw("AUTH_URL") or "").rstrip("/")

    @property
    def TOKEN_URL(self) -> str:
        return self.AUTH_URL + "/oauth/connect/token"

    @property
    def SCOPES(self) -> tuple[str, ...]:
        scopes = self.raw("SCOPES")
        if isinstance(scopes, str):
            return tuple(scopes.split())
        return tuple(str(s) for s in scopes or ())

    @property
    def TOKEN_AUTH_METHOD(self) -> str:
        return str(self.raw("TOKEN_AUTH_METHOD"))

    @property
    def TIMEOUT(self) -> float:
        return float(self.raw("TIMEOUT"))

    @property
    def TOKEN_CACHE(self) -> str:
        return str(self.raw("TOKEN_CACHE"))

    @property
    def CA_BUNDLE(self) -> str | None:
        value = self.raw("CA_BUNDLE")
        return str(value) if value else None

    @property
    def MAX_RESPONSE_BYTES(self) -> int:
        return int(self.raw("MAX_RESPONSE_BYTES"))

    # -- what a session asks for ---------------------------------------
    @property
    def IDENTITY_PROVIDER(self) -> str | None:
        return self.raw("IDENTITY_PROVIDER") or None

    @property
    def ALLOWED_PROVIDERS(self) -> tuple[str, ...] | None:
        value = self.raw("ALLOWED_PROVIDERS")
        return None if value is None else tuple(value)

    @property
    def LANGUAGE(self) -> str | None:
        value = self.raw("LANGUAGE")
        return str(value).upper() if value else None

    @property
    def GET_SOCIAL_SECURITY_NUMBER(self) -> bool:
        return bool(self.raw("GET_SOCIAL_SECURITY_NUMBER"))

    @property
    def IFRAME_DOMAIN(self) -> str | None:
        return self.raw("IFRAME_DOMAIN") or None

    # -- the flow -------------------------------------------------------
    @property
    def SESSION_MAX_AGE(self) -> int:
        return int(self.raw("SESSION_MAX_AGE"))

    @property
    def SUCCESS_URL(self) -> str:
        return str(self.raw("SUCCESS_URL"))

    @property
    def ABORT_URL(self) -> str | None:
        return self.raw("ABORT_URL") or None

    @property
    def ERROR_URL(self) -> str | None:
        return self.raw("ERROR_URL") or None

    @property
    def CALLBACK_INTERSTITIAL(self) -> bool:
        return bool(self.raw("CALLBACK_INTERSTITIAL"))

    @property
    def MAX_PENDING_PER_USER(self) -> int:
        return int(self.raw("MAX_PENDING_PER_USER"))

    @property
    def ONE_ACCOUNT_PER_PERSON(self) -> bool:
        return bool(self.raw("ONE_ACCOUNT_PER_PERSON"))

    # -- personal data --------------------------------------------------
    @property
    def ENCRYPTION_KEYS(self) -> tuple[str, ...]:
        return tuple(self.raw("ENCRYPTION_KEYS") or ())

    # -- sandbox ----------------------------------------------------------
    @property
    def SANDBOX_ALLOW_WITHOUT_DEBUG(self) -> bool:
        return bool(self.raw("SANDBOX_ALLOW_WITHOUT_DEBUG"))

    @property
    def SANDBOX_TOKEN_LIFETIME(self) -> int:
        return int(self.raw("SANDBOX_TOKEN_LIFETIME"))

    @property
    def SANDBOX_LATENCY(self) -> float:
        return float(self.raw("SANDBOX_LATENCY"))

    @property
    def SANDBOX_CACHE(self) -> str:
        return str(self.raw("SANDBOX_CACHE"))

    # -- derived ----------------------------------------------------------
    def broker_language(self) -> str:
        """``LANGUAGE`` if set, else the broker code for Django's active language."""
        if self.LANGUAGE:
            return self.LANGUAGE
        active = (translation.get_language() or "en").lower()
        return _DJANGO_TO_BROKER_LANGUAGE.get(active.split("-")[0], "EN")

    def problems(self) -> list[Problem]:
        """Everything wrong with the configuration, for checks and the client."""
        return list(_validate(self))


def is_http_url(value: object) -> TypeGuard[str]:
    """An absolute http(s) URL with a host."""
    if not isinstance(value, str):
        return False
    try:
        parts = urlsplit(value)
    except ValueError:
        return False
    return parts.scheme in ("http", "https") and bool(parts.hostname)


def _validate(s: EidSettings) -> Sequence[Problem]:
    out: list[Problem] = []
    user = getattr(settings, "DJANGO_EID", None)
    if user is not None and not isinstance(user, Mapping):
        return [Problem("django_eid.E000", "error", "settings.DJANGO_EID must be a dict.")]
    unknown = sorted(s.user_keys - DEFAULTS.keys())
    if unknown:
        out.append(
            Problem(
                "django_eid.W010",
                "warning",
                f"Unknown DJANGO_EID keys: {', '.join(unknown)}.",
                "Check the spelling against the settings table in the README.",
            )
        )
    for key, pid in (("CLIENT_ID", "E001"), ("CLIENT_SECRET", "E002")):
        value = s.raw(key)
        if not value or not isinstance(value, str):
            out.append(Problem(f"django_eid.{pid}", "error", f"DJANGO_EID['{key}'] is required."))
    for key, pid, wid in (("BASE_URL", "E003", "W001"), ("AUTH_URL", "E004", "W002")):
        value = s.raw(key)
        if not is_http_url(value):
            out.append(
                Problem(
                    f"django_eid.{pid}",
                    "error",
                    f"DJANGO_EID['{key}'] must be an absolute http(s) URL.",
                )
            )
        elif urlsplit(value).scheme == "http" and not settings.DEBUG:
            out.append(
                Problem(
                    f"django_eid.{wid}",
                    "warning",
                    f"DJANGO_EID['{key}'] uses http:// while DEBUG is False.",
                    "Use https:// in production; credentials and personal data cross this link.",
                )
            )
    if s.TOKEN_AUTH_METHOD not in TOKEN_AUTH_METHODS:
        out.append(
            Problem(
                "django_eid.E005",
                "error",
                f"DJANGO_EID['TOKEN_AUTH_METHOD'] must be one of {', '.join(TOKEN_AUTH_METHODS)}.",
            )
        )
    if s.TOKEN_CACHE not in settings.CACHES:
        out.append(
            Problem(
                "django_eid.E006",
                "error",
                f"DJANGO_EID['TOKEN_CACHE'] names cache {s.TOKEN_CACHE!r}, "
                "which is not in settings.CACHES.",
            )
        )
    else:
        backend = str(settings.CACHES[s.TOKEN_CACHE].get("BACKEND", ""))
        if not settings.DEBUG and backend.endswith(("LocMemCache", "DummyCache")):
            out.append(
                Problem(
                    "django_eid.W003",
                    "warning",
                    f"DJANGO_EID['TOKEN_CACHE'] ({s.TOKEN_CACHE!r}) is a per-process cache "
                    f"({backend.rsplit('.', 1)[-1]}).",
                    "Each worker process will then fetch its own access token. Point TOKEN_CACHE "
                    "at a cache shared by all workers (Redis, Memcached, database).",
                )
            )
    if s.LANGUAGE is not None and s.LANGUAGE not in LANGUAGES:
        out.append(
            Problem(
                "django_eid.E007",
                "error",
                f"DJANGO_EID['LANGUAGE'] must be one of {', '.join(LANGUAGES)} or None.",
            )
        )
    try:
        timeout = s.TIMEOUT
    except (TypeError, ValueError):
        timeout = -1.0
    if not (timeout > 0 and math.isfinite(timeout)):
        out.append(
            Problem(
                "django_eid.E008",
                "error",
                "DJANGO_EID['TIMEOUT'] must be a positive, finite number of seconds.",
            )
        )
    scopes = s.raw("SCOPES")
    if isinstance(scopes, str):
        scopes_ok = bool(scopes.split())
    elif isinstance(scopes, list | tuple):
        scopes_ok = bool(scopes) and all(isinstance(x, str) and x.strip() for x in scopes)
    else:
        scopes_ok = False
    if not scopes_ok:
        out.append(
            Problem(
                "django_eid.E009",
                "error",
                "DJANGO_EID['SCOPES'] must be a non-empty list of scope names.",
            )
        )
    providers = [s.raw("IDENTITY_PROVIDER")] if s.raw("IDENTITY_PROVIDER") else []
    allowed = s.raw("ALLOWED_PROVIDERS")
    if allowed is not None:
        if isinstance(allowed, str) or not isinstance(allowed, Sequence | set | frozenset):
            out.append(
                Problem(
                    "django_eid.E011",
                    "error",
                    "DJANGO_EID['ALLOWED_PROVIDERS'] must be a list of provider names or None.",
                )
            )
            allowed = []
        providers.extend(allowed)
    bad = [p for p in providers if not isinstance(p, str) or not PROVIDER_RE.match(p)]
    if bad:
        out.append(
            Problem(
                "django_eid.E012",
                "error",
                f"Invalid identity provider names: {', '.join(map(repr, bad))}.",
                "Providers are upper-case words joined by underscores, e.g. NO_BANKID_WEB.",
            )
        )
    default = s.raw("IDENTITY_PROVIDER")
    if default and allowed and default not in allowed:
        out.append(
            Problem(
                "django_eid.E013",
                "error",
                "DJANGO_EID['IDENTITY_PROVIDER'] is not in ALLOWED_PROVIDERS.",
            )
        )
    keys = s.raw("ENCRYPTION_KEYS")
    if keys is not None:
        from django_eid.crypto import invalid_keys

        if not isinstance(keys, list | tuple) or not keys or invalid_keys(list(keys)):
            out.append(
                Problem(
                    "django_eid.E014",
                    "error",
                    "DJANGO_EID['ENCRYPTION_KEYS'] must be a non-empty list of Fernet keys "
                    "(32 url-safe base64-encoded bytes each).",
                    "Generate one with: python -c 'from cryptography.fernet import Fernet; "
                    "print(Fernet.generate_key().decode())'",
                )
            )
    for key, pid in (
        ("SESSION_MAX_AGE", "E015"),
        ("MAX_PENDING_PER_USER", "E016"),
        ("MAX_RESPONSE_BYTES", "E017"),
    ):
        try:
            ok = int(s.raw(key)) > 0
        except (TypeError, ValueError, OverflowError):
            ok = False
        if not ok:
            out.append(
                Problem(
                    f"django_eid.{pid}", "error", f"DJANGO_EID['{key}'] must be a positive integer."
                )
            )
    if (
        str(getattr(settings, "SESSION_COOKIE_SAMESITE", "Lax")).lower() == "strict"
        and not s.CALLBACK_INTERSTITIAL
    ):
        out.append(
            Problem(
                "django_eid.W004",
                "warning",
                "SESSION_COOKIE_SAMESITE is 'Strict' and DJANGO_EID['CALLBACK_INTERSTITIAL'] "
                "is False.",
                "Browsers do not send a Strict session cookie on the broker's redirect back; "
                "without the interstitial every callback is refused. Enable "
                "CALLBACK_INTERSTITIAL or use 'Lax'.",
            )
        )
    return out


eid_settings = EidSettings()


@receiver(setting_changed)
def _reset_on_change(*, setting: str, **kwargs: Any) -> None:
    if setting in ("DJANGO_EID", "DEBUG", "SECRET_KEY", "CACHES"):
        eid_settings.clear()
