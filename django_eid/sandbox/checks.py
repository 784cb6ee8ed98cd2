"""System checks of the sandbox, and when it serves: it is a development tool and says so.

Tagged ``django_eid_sandbox`` (not ``django_eid``) so that a site's own checks
of its broker settings stay independent of whether the sandbox is installed.

The sandbox serves only while ``DEBUG`` is on (or ``SANDBOX_ALLOW_WITHOUT_DEBUG`` is set),
and only to a site whose ``BASE_URL`` and ``AUTH_URL`` are the sandbox itself (with
``BROKER_API = "oidc"``: whose ``OIDC_ISSUER`` is one of the sandbox's issuers,
``<mount>/oidc/<preset>``): a sandbox left installed beside a real broker has nobody to
serve, and must not answer at all.
"""

from __future__ import annotations

import hmac
from collections.abc import Sequence
from typing import Any, Final
from urllib.parse import SplitResult, urlsplit

from django.conf import settings
from django.core import checks
from django.http import HttpRequest
from django.urls import NoReverseMatch, reverse

from django_eid.brokers import BrokerConfig
from django_eid.conf import eid_settings
from django_eid.sandbox.broker import CLIENT_ID, CLIENT_SECRET
from django_eid.sandbox.wire_oidc import API as OIDC
from django_eid.sandbox.wire_oidc import PRESETS
from django_eid.vocabulary import TOKEN_PATH

#: The URL keys that must name the sandbox for it to serve.
URL_KEYS: Final = ("BASE_URL", "AUTH_URL")
_DEFAULT_PORTS: Final = {"http": 80, "https": 443}


def sandbox_enabled() -> bool:
    """The sandbox serves only with ``DEBUG``, or when explicitly allowed without it."""
    return bool(settings.DEBUG) or eid_settings.SANDBOX_ALLOW_WITHOUT_DEBUG


def mount_path(namespace: str = "django_eid_sandbox") -> str | None:
    """Where the sandbox's URLs are included (``/eid-sandbox``), or ``None`` if nowhere."""
    try:
        return reverse(f"{namespace}:token").removesuffix(TOKEN_PATH)
    except NoReverseMatch:
        return None


def _place(parts: SplitResult) -> tuple[str, int | None, str]:
    # Host, port unless the scheme's default, path: a proxy in front may change the scheme
    # the sandbox sees, never where the client sends its calls.
    port = parts.port
    if port == _DEFAULT_PORTS.get(parts.scheme.lower()):
        port = None
    return (parts.hostname or "").rstrip("."), port, parts.path.rstrip("/")


def points_here(url: object, here: str) -> bool:
    """Whether the configured ``url`` is the sandbox at the absolute URL ``here``."""
    if not isinstance(url, str):
        return False
    try:
        return _place(urlsplit(url)) == _place(urlsplit(here))
    except ValueError:  # a port out of range
        return False


def oidc_issuer(request: HttpRequest, preset: str) -> str:
    """The issuer of the sandbox's OpenID provider ``preset``, as ``request`` reaches it."""
    match = request.resolver_match
    mount = mount_path(match.namespace) if match else None
    return request.build_absolute_uri(f"{mount or ''}/oidc/{preset}")


def _issuer_preset(issuer: object, mount: str) -> str | None:
    """The preset whose issuer ``issuer`` is, at the sandbox at ``mount`` (absolute, or a
    path: compared by path only); ``None`` if it is none of them."""
    absolute = bool(urlsplit(mount).scheme)
    for preset in PRESETS:
        here = f"{mount.rstrip('/')}/oidc/{preset}"
        if absolute and points_here(issuer, here):
            return preset
        if not absolute and urlsplit(str(issuer or "")).path.rstrip("/") == here:
            return preset
    return None


def refusal(request: HttpRequest) -> str | None:
    """Why the sandbox must not serve ``request`` (a 404 says it), or ``None``."""
    if not sandbox_enabled():
        return "The sandbox is disabled (DEBUG is False)."
    match = request.resolver_match
    mount = mount_path(match.namespace) if match else None
    if mount is None:
        return "The sandbox is not mounted."
    here = request.build_absolute_uri(mount)
    if eid_settings.BROKER_API == OIDC:
        if _issuer_preset(eid_settings.OIDC_ISSUER, here) is None:
            return (
                "The sandbox serves only a site whose DJANGO_EID['OIDC_ISSUER'] is one of its "
                f"issuers ({here}/oidc/<preset>); this site's broker is another."
            )
        return None
    for key in URL_KEYS:
        if not points_here(getattr(BrokerConfig.of(), key.lower()), here):
            return (
                f"The sandbox serves only a site whose DJANGO_EID[{key!r}] is the sandbox "
                f"({here}); this site's broker is another."
            )
    return None


def uses_sandbox_credentials() -> bool:
    """Whether ``CLIENT_ID`` and ``CLIENT_SECRET`` are the sandbox's own (public) ones (an
    OIDC client with ``private_key_jwt`` needs the id only: its key is the site's own)."""
    client_id, secret = eid_settings.raw("CLIENT_ID"), eid_settings.raw("CLIENT_SECRET")
    if not isinstance(client_id, str):
        return False
    if not hmac.compare_digest(client_id.encode(), CLIENT_ID.encode()):
        return False
    method = BrokerConfig.of().token_auth_method
    if eid_settings.BROKER_API == OIDC and method == "private_key_jwt":
        return True
    return isinstance(secret, str) and hmac.compare_digest(secret.encode(), CLIENT_SECRET.encode())


@checks.register(checks.Tags.security, "django_eid_sandbox")
def check_sandbox(
    app_configs: Sequence[Any] | None = None, **kwargs: Any
) -> list[checks.CheckMessage]:
    out: list[checks.CheckMessage] = []
    if not settings.DEBUG:
        if eid_settings.SANDBOX_ALLOW_WITHOUT_DEBUG:
            out.append(
                checks.Warning(
                    "The django-eid sandbox broker is installed and serving with DEBUG False.",
                    hint="It identifies anyone as anyone: it must never be used in production. "
                    "Remove 'django_eid.sandbox' from INSTALLED_APPS outside development.",
                    id="django_eid.W100",
                )
            )
        else:
            out.append(
                checks.Error(
                    "The django-eid sandbox broker is installed while DEBUG is False; "
                    "its pages answer 404.",
                    hint="Remove 'django_eid.sandbox' from INSTALLED_APPS, or (tests, demos "
                    "only) set DJANGO_EID['SANDBOX_ALLOW_WITHOUT_DEBUG'] = True.",
                    id="django_eid.E100",
                )
            )
    if eid_settings.SANDBOX_CACHE not in settings.CACHES:
        out.append(
            checks.Error(
                f"DJANGO_EID['SANDBOX_CACHE'] names cache {eid_settings.SANDBOX_CACHE!r}, "
                "which is not in settings.CACHES.",
                id="django_eid.E101",
            )
        )
    out.extend(_check_broker_is_the_sandbox())
    return out


def _check_broker_is_the_sandbox() -> list[checks.CheckMessage]:
    """W101 and W102: the site's broker is not the sandbox, or not with its credentials."""
    mount = mount_path()
    if mount is None:
        return []  # not mounted: it serves nothing
    out: list[checks.CheckMessage] = []
    elsewhere = [
        key
        for key in URL_KEYS
        if urlsplit(getattr(BrokerConfig.of(), key.lower())).path.rstrip("/") != mount.rstrip("/")
    ]
    if eid_settings.BROKER_API == OIDC:
        if _issuer_preset(eid_settings.OIDC_ISSUER, mount) is None:
            out.append(
                checks.Warning(
                    "DJANGO_EID['OIDC_ISSUER'] is not an issuer of the sandbox mounted at "
                    f"{mount}/; the sandbox answers 404.",
                    hint="The sandbox's OpenID providers are at <mount>/oidc/<preset> as the "
                    "server reaches them (e.g. http://127.0.0.1:8000/eid-sandbox/oidc/idura), "
                    f"preset one of {', '.join(PRESETS)}. Against a real broker, remove "
                    "'django_eid.sandbox' from INSTALLED_APPS.",
                    id="django_eid.W101",
                )
            )
            return out
        elsewhere = []
    if elsewhere:
        out.append(
            checks.Warning(
                f"DJANGO_EID[{elsewhere[0]!r}] does not point at the sandbox mounted at "
                f"{mount}/; the sandbox answers 404.",
                hint="The sandbox serves only the site whose BASE_URL and AUTH_URL are its "
                "mount as the server reaches it (e.g. http://127.0.0.1:8000/eid-sandbox). "
                "Against a real broker, remove 'django_eid.sandbox' from INSTALLED_APPS.",
                id="django_eid.W101",
            )
        )
    elif not uses_sandbox_credentials():
        out.append(
            checks.Warning(
                "DJANGO_EID['CLIENT_ID'] and CLIENT_SECRET are not the sandbox's credentials; "
                "its token endpoint refuses them.",
                hint=f"The sandbox accepts only its own client: CLIENT_ID {CLIENT_ID!r}, "
                f"CLIENT_SECRET {CLIENT_SECRET!r}.",
                id="django_eid.W102",
            )
        )
    return out
