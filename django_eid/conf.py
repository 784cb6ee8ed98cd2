"""The app's settings: one dict, ``settings.DJANGO_EID``, read lazily.

Every key, its default and its meaning are listed in :data:`DEFAULTS`. Values
are read on first use and cached until Django reports that ``DJANGO_EID`` (or
``DEBUG``/``SECRET_KEY``, which some values depend on) changed, so
``override_settings`` and pytest-django's ``settings`` fixture work, and a
request does not re-parse the dict each time it reads a key.

What makes a value valid is :mod:`django_eid.validation`'s concern: this module
only reads values, it never judges them.
"""

from __future__ import annotations

from collections.abc import Mapping
from decimal import Decimal, InvalidOperation
from typing import Any, Final

from django.conf import settings
from django.core.signals import setting_changed
from django.dispatch import receiver
from django.utils import translation

from django_eid import vocabulary

DEFAULTS: Final[Mapping[str, Any]] = {
    # Broker and OAuth client (issue: foundation). ``None``: the default of BROKER_API.
    "BROKER_API": "v1",
    "CLIENT_ID": None,
    "CLIENT_SECRET": None,
    "BASE_URL": None,
    "AUTH_URL": None,
    "SCOPES": None,
    "TOKEN_AUTH_METHOD": None,
    # The eID Hub's account, and the attributes its sessions ask for (None: django-eid's).
    "ACCOUNT_ID": None,
    "REQUESTED_ATTRIBUTES": None,
    # OpenID Connect brokers (BROKER_API "oidc"): the broker's preset and the client's keys.
    "OIDC_PRESET": None,
    "OIDC_ISSUER": None,
    "OIDC_PRIVATE_KEY": None,
    "OIDC_PRIVATE_KEY_ID": None,
    "OIDC_PAR": None,
    "OIDC_REDIRECT_URI": None,
    "OIDC_ACR_VALUES": None,
    "OIDC_LOGIN_HINT": None,
    # Keep the signed id_token and the keys it was checked with (django_eid.evidence).
    "KEEP_EVIDENCE": False,
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
    "IFRAME_WEB_MESSAGING": False,
    "IFRAME_WEB_MESSAGING_SCRIPT": None,
    # The flow.
    "SESSION_MAX_AGE": 1800,
    "SUCCESS_URL": "/",
    "ABORT_URL": None,
    "ERROR_URL": None,
    "CALLBACK_INTERSTITIAL": True,
    "MAX_PENDING_PER_USER": 5,
    "ONE_ACCOUNT_PER_PERSON": False,
    # A verified identification links its account to the person (LinkedIdentity).
    "LINK_ON_VERIFY": True,
    "COMPLETE_WITHOUT_CALLBACK": "same_device",
    # Identity at the door: logging in and signing up with an eID (django_eid.flows.login).
    # The providers the login page offers; None: those ALLOWED_PROVIDERS allows.
    "LOGIN_PROVIDERS": None,
    # The lowest level of assurance that logs in or signs up: "low", "substantial", "high".
    "LOGIN_MIN_LOA": "substantial",
    # Anonymous starts cost money at the broker: at most this many per browser session in
    # SESSION_MAX_AGE, and LOGIN_RATE ("starts/period") per client address (None: no cap).
    "LOGIN_MAX_PENDING_PER_SESSION": 5,
    "LOGIN_RATE": "60/h",
    # A person without an account: "closed" (a page saying so), "form" or "auto" sign-up.
    "SIGNUP": "closed",
    "SIGNUP_FORM": "django_eid.forms.SignupForm",
    # The site's own sign-up page, linked from the "no account" page ("closed").
    "SIGNUP_URL": None,
    # The site's hooks into logging in and signing up (django_eid.adapter.DefaultAdapter).
    "ADAPTER": "django_eid.adapter.DefaultAdapter",
    # The JSON API (django_eid.api).
    "FRONTEND_URLS": None,
    "FRONTEND_ALLOWED_HOSTS": (),
    "API_AUTHENTICATION_CLASSES": None,
    "API_EXPOSE_SOCIAL_SECURITY_NUMBER": False,
    # Site rules applied before an identity is stored as verified.
    "MIN_AGE": None,
    # The lowest level of assurance stored as verified: "low", "substantial" or "high".
    "MIN_LOA": None,
    # Pre-fill the account's person's number at the broker for a same_person gate.
    "PREFILL_SAME_PERSON": False,
    # Personal data.
    "ENCRYPTION_KEYS": None,
    # The admin's dashboard: the broker's price of one session, for its cost estimate.
    "PRICE_PER_SESSION": None,
    "PRICE_CURRENCY": "",
    # The sandbox broker (django_eid.sandbox).
    "SANDBOX_ALLOW_WITHOUT_DEBUG": False,
    "SANDBOX_TOKEN_LIFETIME": 3600,
    "SANDBOX_LATENCY": 0,
    # Cache alias holding the sandbox's tokens and sessions; share it (Redis) across processes.
    "SANDBOX_CACHE": "default",
}


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
    def BROKER_API(self) -> str:
        return str(self.raw("BROKER_API"))

    @property
    def CLIENT_ID(self) -> str:
        return str(self.raw("CLIENT_ID") or "")

    @property
    def CLIENT_SECRET(self) -> str:
        return str(self.raw("CLIENT_SECRET") or "")

    # BASE_URL, AUTH_URL, SCOPES and TOKEN_AUTH_METHOD as set; unset, each is the API's
    # own default, which only the API knows: django_eid.brokers.BrokerConfig has both.
    @property
    def BASE_URL(self) -> str:
        return str(self.raw("BASE_URL") or "").rstrip("/")

    @property
    def AUTH_URL(self) -> str:
        return str(self.raw("AUTH_URL") or "").rstrip("/")

    @property
    def SCOPES(self) -> tuple[str, ...] | None:
        scopes = self.raw("SCOPES")
        if scopes is None:
            return None
        if isinstance(scopes, str):
            return tuple(scopes.split())
        try:
            return tuple(str(s) for s in scopes)
        except TypeError:
            return ()  # not a list of names: check E009 says so

    @property
    def TOKEN_AUTH_METHOD(self) -> str | None:
        method = self.raw("TOKEN_AUTH_METHOD")
        return None if method is None else str(method)

    @property
    def ACCOUNT_ID(self) -> str:
        return str(self.raw("ACCOUNT_ID") or "")

    @property
    def REQUESTED_ATTRIBUTES(self) -> tuple[str, ...] | None:
        value = self.raw("REQUESTED_ATTRIBUTES")
        return None if value is None else tuple(str(a) for a in value)

    # -- OpenID Connect ----------------------------------------------------
    @property
    def OIDC_PRESET(self) -> str | None:
        return str(self.raw("OIDC_PRESET")) if self.raw("OIDC_PRESET") else None

    @property
    def OIDC_ISSUER(self) -> str:
        return str(self.raw("OIDC_ISSUER") or "")

    @property
    def OIDC_PRIVATE_KEY(self) -> str:
        return str(self.raw("OIDC_PRIVATE_KEY") or "")

    @property
    def OIDC_PRIVATE_KEY_ID(self) -> str:
        return str(self.raw("OIDC_PRIVATE_KEY_ID") or "")

    @property
    def OIDC_PAR(self) -> bool | None:
        value = self.raw("OIDC_PAR")
        return None if value is None else bool(value)

    @property
    def OIDC_REDIRECT_URI(self) -> str | None:
        return str(self.raw("OIDC_REDIRECT_URI")) if self.raw("OIDC_REDIRECT_URI") else None

    @property
    def OIDC_ACR_VALUES(self) -> str | None:
        return str(self.raw("OIDC_ACR_VALUES")) if self.raw("OIDC_ACR_VALUES") else None

    @property
    def OIDC_LOGIN_HINT(self) -> str | None:
        return str(self.raw("OIDC_LOGIN_HINT")) if self.raw("OIDC_LOGIN_HINT") else None

    @property
    def KEEP_EVIDENCE(self) -> bool:
        return bool(self.raw("KEEP_EVIDENCE"))

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

    @property
    def IFRAME_WEB_MESSAGING(self) -> bool:
        return bool(self.raw("IFRAME_WEB_MESSAGING"))

    @property
    def IFRAME_WEB_MESSAGING_SCRIPT(self) -> str | None:
        value = self.raw("IFRAME_WEB_MESSAGING_SCRIPT")
        return str(value) if value else None

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

    @property
    def LINK_ON_VERIFY(self) -> bool:
        return bool(self.raw("LINK_ON_VERIFY"))

    # -- identity at the door ---------------------------------------------
    @property
    def LOGIN_PROVIDERS(self) -> tuple[str, ...] | None:
        value = self.raw("LOGIN_PROVIDERS")
        return None if value is None else tuple(value)

    @property
    def LOGIN_MIN_LOA(self) -> str | None:
        value = self.raw("LOGIN_MIN_LOA")
        return str(value) if value else None

    @property
    def LOGIN_MAX_PENDING_PER_SESSION(self) -> int | None:
        value = self.raw("LOGIN_MAX_PENDING_PER_SESSION")
        return None if value is None else int(value)

    @property
    def LOGIN_RATE(self) -> tuple[int, int] | None:
        """``LOGIN_RATE`` as ``(starts, seconds)``; ``None`` without a cap (or a malformed
        value, which check ``E040`` reports: then no cap rather than a 500 on every start)."""
        return parse_rate(self.raw("LOGIN_RATE"))

    @property
    def SIGNUP(self) -> str:
        return str(self.raw("SIGNUP"))

    @property
    def SIGNUP_FORM(self) -> str:
        return str(self.raw("SIGNUP_FORM"))

    @property
    def SIGNUP_URL(self) -> str | None:
        return str(self.raw("SIGNUP_URL")) if self.raw("SIGNUP_URL") else None

    @property
    def ADAPTER(self) -> str:
        return str(self.raw("ADAPTER"))

    @property
    def FRONTEND_URLS(self) -> dict[str, str] | None:
        value = self.raw("FRONTEND_URLS")
        return None if not value else {str(k): str(v) for k, v in dict(value).items()}

    @property
    def FRONTEND_ALLOWED_HOSTS(self) -> tuple[str, ...]:
        return tuple(str(host) for host in self.raw("FRONTEND_ALLOWED_HOSTS") or ())

    @property
    def API_AUTHENTICATION_CLASSES(self) -> tuple[str, ...] | None:
        value = self.raw("API_AUTHENTICATION_CLASSES")
        return None if value is None else tuple(str(path) for path in value)

    @property
    def API_EXPOSE_SOCIAL_SECURITY_NUMBER(self) -> bool:
        return bool(self.raw("API_EXPOSE_SOCIAL_SECURITY_NUMBER"))

    @property
    def COMPLETE_WITHOUT_CALLBACK(self) -> str:
        return str(self.raw("COMPLETE_WITHOUT_CALLBACK"))

    @property
    def MIN_AGE(self) -> int | None:
        value = self.raw("MIN_AGE")
        return None if value is None else int(value)

    @property
    def MIN_LOA(self) -> str | None:
        value = self.raw("MIN_LOA")
        return str(value) if value else None

    @property
    def PREFILL_SAME_PERSON(self) -> bool:
        return bool(self.raw("PREFILL_SAME_PERSON"))

    # -- personal data --------------------------------------------------
    @property
    def ENCRYPTION_KEYS(self) -> tuple[str, ...]:
        return tuple(self.raw("ENCRYPTION_KEYS") or ())

    # -- the admin's dashboard ------------------------------------------------
    @property
    def PRICE_PER_SESSION(self) -> Decimal | None:
        """The broker's price of one session; ``None`` when unset or invalid (E045)."""
        return parse_price(self.raw("PRICE_PER_SESSION"))

    @property
    def PRICE_CURRENCY(self) -> str:
        return str(self.raw("PRICE_CURRENCY") or "")

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
        return vocabulary.broker_language(translation.get_language())


def parse_price(value: object) -> Decimal | None:
    """``PRICE_PER_SESSION`` (an ``int``, ``float``, ``str`` or ``Decimal`` of at least 0) as
    a ``Decimal``; ``None`` for ``None`` and for anything else (a bool, a negative number,
    NaN, text that is no number)."""
    if isinstance(value, bool) or not isinstance(value, int | float | str | Decimal):
        return None
    try:
        # A float through its shortest repr: 0.1 is Decimal("0.1"), not 0.1000000000000000055.
        price = Decimal(repr(value) if isinstance(value, float) else value)
    except InvalidOperation:
        return None
    return price if price.is_finite() and price >= 0 else None


#: ``LOGIN_RATE``'s periods: ``"60/h"``, ``"10/5m"``, ``"1000/d"``.
_PERIODS: Final = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def parse_rate(value: object) -> tuple[int, int] | None:
    """``"starts/period"`` (``"60/h"``, ``"10/15m"``) as ``(starts, seconds)``; ``None``
    for ``None`` and for anything malformed."""
    if not isinstance(value, str) or value.count("/") != 1:
        return None
    starts, period = value.split("/")
    unit = period[-1:]
    multiple = period[:-1] or "1"
    if not (starts.isascii() and starts.isdigit() and multiple.isascii() and multiple.isdigit()):
        return None
    if unit not in _PERIODS or int(starts) < 1 or int(multiple) < 1:
        return None
    return int(starts), int(multiple) * _PERIODS[unit]


eid_settings = EidSettings()


@receiver(setting_changed)
def _reset_on_change(*, setting: str, **kwargs: Any) -> None:
    if setting in ("DJANGO_EID", "DEBUG", "SECRET_KEY", "CACHES"):
        eid_settings.clear()
