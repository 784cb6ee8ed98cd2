"""What a valid ``DJANGO_EID`` is: the problems behind the system checks.

:func:`problems` lists everything wrong with the configuration, each with a
stable id (``django_eid.E001`` ...; the checks reference lists them all). The
system checks report them at deploy time, and :class:`~django_eid.client.EidClient`
refuses to start while any is an error, so a broken setup fails with the same
message in both places.
"""

from __future__ import annotations

import ipaddress
import math
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Final, Literal
from urllib.parse import urlsplit

from django.conf import settings
from django.utils.http import url_has_allowed_host_and_scheme
from django.utils.module_loading import import_string

from django_eid.brokers import API_NAMES, BrokerConfig, api_class, broker_api
from django_eid.conf import DEFAULTS, EidSettings, eid_settings, parse_price, parse_rate
from django_eid.crypto import invalid_keys
from django_eid.outcomes import FRONTEND_KINDS, REFERENCE_PLACEHOLDER
from django_eid.records import is_http_url
from django_eid.vocabulary import LANGUAGES

TOKEN_AUTH_METHODS: Final = ("basic", "post")
#: With ``BROKER_API = "oidc"`` the client may also sign its own assertion (RFC 7523).
OIDC_TOKEN_AUTH_METHODS: Final = (*TOKEN_AUTH_METHODS, "private_key_jwt")
#: ``COMPLETE_WITHOUT_CALLBACK``: when a row may be finished without its browser's callback.
COMPLETION_MODES: Final = ("same_device", "never")


@dataclass(frozen=True)
class Problem:
    """One configuration problem, reported by a system check and by the client."""

    id: str
    level: Literal["error", "warning"]
    message: str
    hint: str | None = None


def problems(app_settings: EidSettings | None = None) -> list[Problem]:
    """Everything wrong with the configuration, errors and warnings, in a stable order."""
    s = app_settings or eid_settings
    user = getattr(settings, "DJANGO_EID", None)
    if user is not None and not isinstance(user, Mapping):
        # Nothing else can be read from it.
        return [Problem("django_eid.E000", "error", "settings.DJANGO_EID must be a dict.")]
    return [
        *_unknown_keys(s),
        *_broker(s),
        *_eid_hub(s),
        *_oidc(s),
        *_settings_of_other_apis(s),
        *_token_cache(s),
        *_language_timeout_scopes(s),
        *_providers(s),
        *_encryption_keys(s),
        *_positive_integers(s),
        *_callback_cookie(s),
        *_site_rules(s),
        *_completion_and_frames(s),
        *_json_api(s),
        *_door(s),
        *_operations(s),
    ]


def _unknown_keys(s: EidSettings) -> Iterator[Problem]:
    unknown = sorted(s.user_keys - DEFAULTS.keys())
    if unknown:
        yield Problem(
            "django_eid.W010",
            "warning",
            f"Unknown DJANGO_EID keys: {', '.join(unknown)}.",
            "Check the spelling against the settings table in the README.",
        )


def _broker(s: EidSettings) -> Iterator[Problem]:
    """The API, credentials, broker URLs and how the client authenticates."""
    api = s.raw("BROKER_API")
    if api not in API_NAMES:
        yield Problem(
            "django_eid.E027",
            "error",
            f"DJANGO_EID['BROKER_API'] must be one of {', '.join(map(repr, API_NAMES))}.",
            "v1 is the API of the interface document; v2 is Express identification v2; "
            "eid-hub is the eID Hub Authentication REST API.",
        )
    signs = api == "oidc" and s.raw("TOKEN_AUTH_METHOD") == "private_key_jwt"
    for key, pid in (("CLIENT_ID", "E001"), ("CLIENT_SECRET", "E002")):
        if key == "CLIENT_SECRET" and signs:
            continue  # the client signs its assertion with OIDC_PRIVATE_KEY (E032)
        value = s.raw(key)
        if not value or not isinstance(value, str):
            yield Problem(f"django_eid.{pid}", "error", f"DJANGO_EID['{key}'] is required.")
    oidc = api == "oidc"
    for key, pid, wid in (("BASE_URL", "E003", "W001"), ("AUTH_URL", "E004", "W002")):
        if oidc:
            break  # OIDC_ISSUER says where the provider is (E030)
        # Unset: the API's own default (v1 has none).
        value = s.raw(key) or getattr(broker_api(s), f"default_{key.lower()}")
        if not is_http_url(value):
            yield Problem(
                f"django_eid.{pid}",
                "error",
                f"DJANGO_EID['{key}'] must be an absolute http(s) URL.",
            )
        elif urlsplit(value).scheme == "http" and not settings.DEBUG:
            yield Problem(
                f"django_eid.{wid}",
                "warning",
                f"DJANGO_EID['{key}'] uses http:// while DEBUG is False.",
                "Use https:// in production; credentials and personal data cross this link.",
            )
    methods = OIDC_TOKEN_AUTH_METHODS if oidc else TOKEN_AUTH_METHODS
    if BrokerConfig.of(s).token_auth_method not in methods:
        yield Problem(
            "django_eid.E005",
            "error",
            f"DJANGO_EID['TOKEN_AUTH_METHOD'] must be one of {', '.join(methods)}.",
        )


def _token_cache(s: EidSettings) -> Iterator[Problem]:
    if s.TOKEN_CACHE not in settings.CACHES:
        yield Problem(
            "django_eid.E006",
            "error",
            f"DJANGO_EID['TOKEN_CACHE'] names cache {s.TOKEN_CACHE!r}, "
            "which is not in settings.CACHES.",
        )
        return
    backend = str(settings.CACHES[s.TOKEN_CACHE].get("BACKEND", ""))
    if not settings.DEBUG and backend.endswith(("LocMemCache", "DummyCache")):
        yield Problem(
            "django_eid.W003",
            "warning",
            f"DJANGO_EID['TOKEN_CACHE'] ({s.TOKEN_CACHE!r}) is a per-process cache "
            f"({backend.rsplit('.', 1)[-1]}).",
            "Each worker process will then fetch its own access token. Point TOKEN_CACHE "
            "at a cache shared by all workers (Redis, Memcached, database).",
        )


def _eid_hub(s: EidSettings) -> Iterator[Problem]:
    """What the eID Hub API needs: its account, and attributes it can ask for."""
    if s.raw("BROKER_API") == "eid-hub" and not (
        isinstance(s.raw("ACCOUNT_ID"), str) and s.raw("ACCOUNT_ID").strip()
    ):
        yield Problem(
            "django_eid.E028",
            "error",
            "DJANGO_EID['ACCOUNT_ID'] is required with BROKER_API 'eid-hub'.",
            "The account id of the eID Hub (the dashboard shows it, e.g. 'a-spge-...'); "
            "it names the account on every call.",
        )
    attributes = s.raw("REQUESTED_ATTRIBUTES")
    if attributes is not None and not _names(attributes, _ATTRIBUTE_RE):
        yield Problem(
            "django_eid.E029",
            "error",
            "DJANGO_EID['REQUESTED_ATTRIBUTES'] must be a list of attribute names or None.",
            "For example ['name', 'dateOfBirth', 'idpId']; 'nin' is added when "
            "GET_SOCIAL_SECURITY_NUMBER is on.",
        )


def _oidc(s: EidSettings) -> Iterator[Problem]:
    """What an OpenID provider needs (``BROKER_API = "oidc"``), and MIN_LOA."""
    from django_eid.brokers.oidc import private_key
    from django_eid.brokers.oidc_presets import LEVELS, PRESET_NAMES
    from django_eid.brokers.oidc_presets import preset as preset_of
    from django_eid.scrub import scrub

    min_loa = s.raw("MIN_LOA")
    if min_loa is not None and min_loa not in LEVELS:
        yield Problem(
            "django_eid.E034",
            "error",
            f"DJANGO_EID['MIN_LOA'] must be one of {', '.join(map(repr, LEVELS))} or None.",
        )
    no_levels = s.raw("BROKER_API") in ("v1", "v2") or (
        s.raw("BROKER_API") == "oidc" and s.raw("OIDC_PRESET") is None
    )
    if min_loa is not None and no_levels:
        yield Problem(
            "django_eid.W026",
            "warning",
            "DJANGO_EID['MIN_LOA'] is set, but this broker API states no level of assurance: "
            "every identification will be rejected (LOA_TOO_LOW).",
            "The eID Hub and the OIDC presets state a level; with another API, remove MIN_LOA "
            "and restrict ALLOWED_PROVIDERS instead.",
        )
    if (
        s.raw("BROKER_API") == "oidc"
        and s.raw("OIDC_PRESET") is None
        and s.raw("GET_SOCIAL_SECURITY_NUMBER")
    ):
        yield Problem(
            "django_eid.E037",
            "error",
            "DJANGO_EID['GET_SOCIAL_SECURITY_NUMBER'] is on with the generic OpenID provider "
            "(OIDC_PRESET None), which reads no national identity number: every "
            "identification would be rejected (NUMBER_MISSING).",
            "Choose the preset of your broker (OIDC_PRESET), or turn GET_SOCIAL_SECURITY_NUMBER "
            "off: a generic provider's person is their sub at its issuer.",
        )
    oidc_keys = [k for k in DEFAULTS if k.startswith("OIDC_") and s.raw(k) not in (None, "")]
    if s.raw("BROKER_API") != "oidc":
        if oidc_keys and s.raw("BROKER_API") in API_NAMES:
            yield Problem(
                "django_eid.W024",
                "warning",
                f"DJANGO_EID[{oidc_keys[0]!r}] is set, but only BROKER_API 'oidc' uses it.",
                f"Remove {', '.join(oidc_keys)}, or set BROKER_API = 'oidc'.",
            )
        return
    issuer = s.raw("OIDC_ISSUER")
    if not is_http_url(issuer) or urlsplit(issuer).query or urlsplit(issuer).fragment:
        yield Problem(
            "django_eid.E030",
            "error",
            "DJANGO_EID['OIDC_ISSUER'] must be the provider's issuer, an absolute http(s) URL "
            "without query or fragment.",
            "Exactly as the provider's discovery document spells 'issuer', e.g. "
            "'https://yourdomain.idura.broker' or 'https://auth.bankid.no/auth/realms/prod'.",
        )
    elif urlsplit(issuer).scheme == "http" and not settings.DEBUG:
        yield Problem(
            "django_eid.W025",
            "warning",
            "DJANGO_EID['OIDC_ISSUER'] uses http:// while DEBUG is False.",
            "Use the provider's https:// issuer in production.",
        )
    preset = s.raw("OIDC_PRESET")
    if preset is not None and preset not in PRESET_NAMES:
        yield Problem(
            "django_eid.E031",
            "error",
            f"DJANGO_EID['OIDC_PRESET'] must be one of {', '.join(map(repr, PRESET_NAMES))} "
            "or None (a generic OpenID provider).",
        )
    if BrokerConfig.of(s).token_auth_method == "private_key_jwt":  # noqa: S105  (a method name)
        try:
            private_key(str(s.raw("OIDC_PRIVATE_KEY") or ""))
        except Exception:
            yield Problem(
                "django_eid.E032",
                "error",
                "DJANGO_EID['OIDC_PRIVATE_KEY'] must be an RSA or EC private key in PEM with "
                "TOKEN_AUTH_METHOD 'private_key_jwt'.",
                "Register its public key (as a JWK) with the provider, and set "
                "OIDC_PRIVATE_KEY_ID to the key's kid there.",
            )
    chosen = preset_of(preset if preset in PRESET_NAMES else None)
    named = [s.raw("IDENTITY_PROVIDER"), *(s.raw("ALLOWED_PROVIDERS") or ())]
    foreign = [p for p in named if p and chosen.providers and p not in chosen.providers]
    if foreign:
        yield Problem(
            "django_eid.E035",
            "error",
            f"Identity providers not offered by OIDC_PRESET {chosen.name!r}: "
            f"{', '.join(map(str, foreign))}.",
            f"This preset's providers: {', '.join(chosen.providers)}.",
        )
    for key in ("OIDC_ACR_VALUES", "OIDC_LOGIN_HINT"):
        value = s.raw(key)
        if value is None:
            continue
        if not isinstance(value, str) or not _PRINTABLE_RE.fullmatch(value):
            yield Problem(
                "django_eid.E036",
                "error",
                f"DJANGO_EID[{key!r}] must be a short string of printable characters or None.",
            )
        elif key == "OIDC_LOGIN_HINT" and scrub(value) != value:
            yield Problem(
                "django_eid.E036",
                "error",
                "DJANGO_EID['OIDC_LOGIN_HINT'] holds a national identity number, which would "
                "travel in the authorization URL.",
                "Use PREFILL_SAME_PERSON: the person's number is then sent only through PAR.",
            )
    for key in ("OIDC_REDIRECT_URI",):
        value = s.raw(key)
        if value is not None and not is_http_url(value):
            yield Problem(
                "django_eid.E033",
                "error",
                f"DJANGO_EID[{key!r}] must be an absolute http(s) URL or None.",
                "The URL of django_eid:oidc-callback exactly as registered at the provider.",
            )


#: A setting sent as a parameter of the authorization request: printable, no spaces at the
#: ends, not a whole page of text.
_PRINTABLE_RE: Final = re.compile(r"[\x21-\x7e](?:[\x20-\x7e]{0,254}[\x21-\x7e])?")


def _names(value: object, pattern: re.Pattern[str]) -> bool:
    """Whether ``value`` is a list (or tuple) of strings each matching ``pattern`` whole."""
    return isinstance(value, list | tuple) and all(
        isinstance(item, str) and pattern.fullmatch(item) for item in value
    )


#: An eID Hub attribute name (``dateOfBirth``, ``nbidAlternativeSubject``).
_ATTRIBUTE_RE: Final = re.compile(r"[A-Za-z][A-Za-z0-9_]{0,63}")


def _language_timeout_scopes(s: EidSettings) -> Iterator[Problem]:
    if s.LANGUAGE is not None and s.LANGUAGE not in LANGUAGES:
        yield Problem(
            "django_eid.E007",
            "error",
            f"DJANGO_EID['LANGUAGE'] must be one of {', '.join(LANGUAGES)} or None.",
        )
    try:
        timeout = s.TIMEOUT
    except (TypeError, ValueError):
        timeout = -1.0
    if not (timeout > 0 and math.isfinite(timeout)):
        yield Problem(
            "django_eid.E008",
            "error",
            "DJANGO_EID['TIMEOUT'] must be a positive, finite number of seconds.",
        )
    scopes = s.raw("SCOPES")
    if scopes is None:
        scopes_ok = True  # the API's own
    elif isinstance(scopes, str):
        scopes_ok = bool(scopes.split())
    elif isinstance(scopes, list | tuple):
        scopes_ok = bool(scopes) and all(isinstance(x, str) and x.strip() for x in scopes)
    else:
        scopes_ok = False
    if not scopes_ok:
        yield Problem(
            "django_eid.E009",
            "error",
            "DJANGO_EID['SCOPES'] must be a non-empty list of scope names.",
        )


def _providers(s: EidSettings) -> Iterator[Problem]:
    default = s.raw("IDENTITY_PROVIDER")
    providers = [default] if default else []
    allowed = s.raw("ALLOWED_PROVIDERS")
    if allowed is not None:
        if isinstance(allowed, str) or not isinstance(allowed, Sequence | set | frozenset):
            yield Problem(
                "django_eid.E011",
                "error",
                "DJANGO_EID['ALLOWED_PROVIDERS'] must be a list of provider names or None.",
            )
            allowed = []
        providers.extend(allowed)
    api = broker_api(s)
    bad = [p for p in providers if not isinstance(p, str) or not api.provider_re.match(p)]
    if bad:
        yield Problem(
            "django_eid.E012",
            "error",
            f"Invalid identity provider names: {', '.join(map(repr, bad))}.",
            f"Providers of BROKER_API {api.name!r} are named like {api.provider_example}.",
        )
    if default and allowed and default not in allowed:
        yield Problem(
            "django_eid.E013",
            "error",
            "DJANGO_EID['IDENTITY_PROVIDER'] is not in ALLOWED_PROVIDERS.",
        )
    # Well-formed, but not a name the API publishes: most likely a typo or another API's
    # name, which the broker would refuse only when a user starts. The lists are open.
    unlisted = [
        p
        for p in providers
        if p not in bad and api.published_providers and p not in api.published_providers
    ]
    if unlisted:
        yield Problem(
            "django_eid.W023",
            "warning",
            f"Identity providers not in the published list of BROKER_API {api.name!r}: "
            f"{', '.join(map(repr, dict.fromkeys(unlisted)))}.",
            f"Published: {', '.join(api.published_providers)}. Check the spelling; a name "
            "your broker account has beyond these works (silence this check then).",
        )


def _encryption_keys(s: EidSettings) -> Iterator[Problem]:
    keys = s.raw("ENCRYPTION_KEYS")
    if keys is None:
        return
    if not isinstance(keys, list | tuple) or not keys or invalid_keys(list(keys)):
        yield Problem(
            "django_eid.E014",
            "error",
            "DJANGO_EID['ENCRYPTION_KEYS'] must be a non-empty list of Fernet keys "
            "(32 url-safe base64-encoded bytes each).",
            "Generate one with: python -c 'from cryptography.fernet import Fernet; "
            "print(Fernet.generate_key().decode())'",
        )


def _positive_integers(s: EidSettings) -> Iterator[Problem]:
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
            yield Problem(
                f"django_eid.{pid}", "error", f"DJANGO_EID['{key}'] must be a positive integer."
            )


def _callback_cookie(s: EidSettings) -> Iterator[Problem]:
    samesite = str(getattr(settings, "SESSION_COOKIE_SAMESITE", "Lax")).lower()
    if samesite == "strict" and not s.CALLBACK_INTERSTITIAL:
        yield Problem(
            "django_eid.W004",
            "warning",
            "SESSION_COOKIE_SAMESITE is 'Strict' and DJANGO_EID['CALLBACK_INTERSTITIAL'] is False.",
            "Browsers do not send a Strict session cookie on the broker's redirect back; "
            "without the interstitial every callback is refused. Enable "
            "CALLBACK_INTERSTITIAL or use 'Lax'.",
        )


def _site_rules(s: EidSettings) -> Iterator[Problem]:
    min_age = s.raw("MIN_AGE")
    if min_age is not None and (
        isinstance(min_age, bool) or not isinstance(min_age, int) or not 0 < min_age < 150
    ):
        yield Problem(
            "django_eid.E020",
            "error",
            "DJANGO_EID['MIN_AGE'] must be None or a whole number of years between 1 and 149.",
        )
    if s.ONE_ACCOUNT_PER_PERSON and not s.GET_SOCIAL_SECURITY_NUMBER:
        yield Problem(
            "django_eid.W011",
            "warning",
            "DJANGO_EID['ONE_ACCOUNT_PER_PERSON'] is on without GET_SOCIAL_SECURITY_NUMBER: "
            "a person is then recognised by their unique id at one eID provider only.",
            "One person can verify one account per eID provider (BankID on one account, "
            "Buypass on another). Set GET_SOCIAL_SECURITY_NUMBER to match persons across "
            "providers by their national identity number.",
        )


#: Hosts of the other APIs' services: a ``BASE_URL`` or ``AUTH_URL`` left from before a
#: move to the eID Hub would send its calls there.
_NOT_THE_HUB: Final = frozenset({"api.signicat.io", "api.idfy.io"})


def _settings_of_other_apis(s: EidSettings) -> Iterator[Problem]:
    """Settings that do nothing, or the wrong thing, with the chosen ``BROKER_API``."""
    api = s.raw("BROKER_API")
    if api not in API_NAMES:
        return  # E027
    unused = [k for k in ("ACCOUNT_ID", "REQUESTED_ATTRIBUTES") if s.raw(k) not in (None, "")]
    if api != "eid-hub" and unused:
        yield Problem(
            "django_eid.W020",
            "warning",
            f"DJANGO_EID[{unused[0]!r}] is set, but only BROKER_API 'eid-hub' uses it.",
            f"BROKER_API is {api!r}: remove {' and '.join(unused)}, or set BROKER_API.",
        )
    if s.IFRAME_WEB_MESSAGING and not api_class(api).web_messaging:
        yield Problem(
            "django_eid.W021",
            "warning",
            f"DJANGO_EID['IFRAME_WEB_MESSAGING'] does nothing with BROKER_API {api!r}.",
            "Only the v1 broker's frame tells the page embedding it how it ended; with "
            "this API the frame page polls the session's status.",
        )
    if s.KEEP_EVIDENCE and api != "oidc":
        yield Problem(
            "django_eid.W029",
            "warning",
            f"DJANGO_EID['KEEP_EVIDENCE'] is on, but BROKER_API {api!r} returns no signed "
            "token: no evidence is kept.",
            "Only an OpenID provider signs the identity it returns (BROKER_API 'oidc'); "
            "remove KEEP_EVIDENCE, or set BROKER_API.",
        )
    if api == "eid-hub":
        for key in ("BASE_URL", "AUTH_URL"):
            host = urlsplit(str(s.raw(key) or "")).hostname
            if host in _NOT_THE_HUB:
                yield Problem(
                    "django_eid.W022",
                    "warning",
                    f"DJANGO_EID[{key!r}] points at {host}, a host of the older APIs, with "
                    "BROKER_API 'eid-hub'.",
                    f"Remove {key} (the eID Hub's default is https://api.signicat.com) or "
                    "set the hub's URL.",
                )


def _completion_and_frames(s: EidSettings) -> Iterator[Problem]:
    if s.COMPLETE_WITHOUT_CALLBACK not in COMPLETION_MODES:
        yield Problem(
            "django_eid.E021",
            "error",
            "DJANGO_EID['COMPLETE_WITHOUT_CALLBACK'] must be one of "
            f"{', '.join(map(repr, COMPLETION_MODES))}.",
        )
    script = s.raw("IFRAME_WEB_MESSAGING_SCRIPT")
    if script is not None and not _script_url(script):
        yield Problem(
            "django_eid.E022",
            "error",
            "DJANGO_EID['IFRAME_WEB_MESSAGING_SCRIPT'] must be an absolute https:// URL "
            "(http:// only on a loopback host) or None.",
            "The frame page runs this script with your site's origin: anyone who can change "
            "it in transit can act as the user on your site.",
        )
    elif s.IFRAME_WEB_MESSAGING and not script:
        yield Problem(
            "django_eid.W012",
            "warning",
            "DJANGO_EID['IFRAME_WEB_MESSAGING'] is on without IFRAME_WEB_MESSAGING_SCRIPT.",
            "The broker tells the page embedding it through its own script: set "
            "IFRAME_WEB_MESSAGING_SCRIPT to the URL the broker gives. Without it, the frame "
            "page still moves on by polling.",
        )


#: A host as ``FRONTEND_ALLOWED_HOSTS`` matches it: exactly, so no leading dot or wildcard.
_HOST_RE: Final = re.compile(
    r"(?:[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*|\[[0-9A-Fa-f:.]+\])(?::\d{1,5})?"
)

#: What the checks fill in for ``{reference}`` before judging a ``FRONTEND_URLS`` URL.
_SAMPLE_REFERENCE: Final = "A" * 32


def _json_api(s: EidSettings) -> Iterator[Problem]:
    """The JSON API's front end (``FRONTEND_URLS``, its hosts) and its authentication."""
    hosts = s.raw("FRONTEND_ALLOWED_HOSTS")
    if not _names(hosts, _HOST_RE):
        yield Problem(
            "django_eid.E025",
            "error",
            "DJANGO_EID['FRONTEND_ALLOWED_HOSTS'] must be a list of host names.",
            "For example ['app.example.com', 'localhost:3000']: exact names, with the port "
            "when it is not the default; no patterns ('.example.com', '*'), no scheme.",
        )
        hosts = ()
    urls = s.raw("FRONTEND_URLS")
    if urls is not None:
        yield from _frontend_urls(urls, set(hosts))
    classes = s.raw("API_AUTHENTICATION_CLASSES")
    if classes is not None:
        yield from _authentication_classes(classes)


def _frontend_urls(urls: object, hosts: set[str]) -> Iterator[Problem]:
    if (
        not isinstance(urls, Mapping)
        or set(urls) != set(FRONTEND_KINDS)
        or not all(isinstance(v, str) and v for v in urls.values())
    ):
        yield Problem(
            "django_eid.E023",
            "error",
            "DJANGO_EID['FRONTEND_URLS'] must be None or a dict of 'success', 'abort' and "
            "'error', each a path or an absolute http(s) URL.",
            "Each may contain {reference}, e.g. 'https://app.example.com/verify/{reference}'.",
        )
        return
    for kind in FRONTEND_KINDS:
        url = str(urls[kind]).replace(REFERENCE_PLACEHOLDER, _SAMPLE_REFERENCE)
        parts = urlsplit(url)
        if not url_has_allowed_host_and_scheme(url, allowed_hosts=hosts):
            yield Problem(
                "django_eid.E024",
                "error",
                f"DJANGO_EID['FRONTEND_URLS'][{kind!r}] is neither a path nor a URL on "
                "FRONTEND_ALLOWED_HOSTS.",
                f"Add {parts.hostname!r} to DJANGO_EID['FRONTEND_ALLOWED_HOSTS'], or use a path.",
            )
        elif parts.scheme == "http" and not settings.DEBUG:
            yield Problem(
                "django_eid.W013",
                "warning",
                f"DJANGO_EID['FRONTEND_URLS'][{kind!r}] uses http:// while DEBUG is False.",
                "Use https:// in production: the front end shows a verified identity.",
            )


def _authentication_classes(classes: object) -> Iterator[Problem]:
    problem = None
    if isinstance(classes, str) or not isinstance(classes, list | tuple):
        problem = "must be None or a list of dotted paths of authentication classes"
    else:
        for path in classes:
            try:
                cls = import_string(str(path))
            except ImportError as err:
                problem = f"names {path!r}, which cannot be imported ({err})"
                break
            if not callable(getattr(cls, "authenticate", None)):
                problem = f"names {path!r}, which has no authenticate() method"
                break
    if problem:
        yield Problem(
            "django_eid.E026",
            "error",
            f"DJANGO_EID['API_AUTHENTICATION_CLASSES'] {problem}.",
            "List Django REST framework authentication classes, e.g. "
            "'rest_framework.authentication.TokenAuthentication'; None uses the session.",
        )


def _script_url(value: object) -> bool:
    """An absolute https URL, or an http one on a loopback host (a sandbox in development:
    ``localhost``, ``*.localhost``, ``127.0.0.0/8``, ``::1``)."""
    if not is_http_url(value):
        return False
    parts = urlsplit(value)
    if parts.scheme.lower() == "https":
        return True
    return _is_loopback_host(parts.hostname or "")


def _is_loopback_host(host: str) -> bool:
    """Whether ``host`` (a host name or an IP address, without brackets) is this machine."""
    host = host.lower().rstrip(".")
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


#: ``SIGNUP``: what a person who identified at the door without an account meets.
SIGNUP_MODES: Final = ("closed", "form", "auto")
#: The adapter django-eid uses unless ``ADAPTER`` names another.
DEFAULT_ADAPTER: Final = "django_eid.adapter.DefaultAdapter"
#: The backend that logs a person in by their eID.
EID_BACKEND: Final = "django_eid.backends.EidBackend"


def _door(s: EidSettings) -> Iterator[Problem]:
    """Logging in and signing up with an eID."""
    from django_eid.brokers.oidc_presets import LEVELS

    login_loa = s.raw("LOGIN_MIN_LOA")
    if login_loa is not None and login_loa not in LEVELS:
        yield Problem(
            "django_eid.E038",
            "error",
            f"DJANGO_EID['LOGIN_MIN_LOA'] must be one of {', '.join(map(repr, LEVELS))} or None.",
            "A level no broker gives would keep every login out; None lets any level in.",
        )
    providers = s.raw("LOGIN_PROVIDERS")
    allowed = s.raw("ALLOWED_PROVIDERS")
    api = broker_api(s)
    if providers is not None and (
        isinstance(providers, str)
        or not isinstance(providers, Sequence | set | frozenset)
        or not all(isinstance(p, str) and api.provider_re.match(p) for p in providers)
        or (isinstance(allowed, Sequence) and not set(providers) <= set(allowed))
    ):
        yield Problem(
            "django_eid.E039",
            "error",
            "DJANGO_EID['LOGIN_PROVIDERS'] must be None or a list of provider names, each "
            "also in ALLOWED_PROVIDERS when that is set.",
            f"Providers of BROKER_API {api.name!r} are named like {api.provider_example}.",
        )
    rate = s.raw("LOGIN_RATE")
    if rate is not None and parse_rate(rate) is None:
        yield Problem(
            "django_eid.E040",
            "error",
            "DJANGO_EID['LOGIN_RATE'] must be None or 'starts/period', such as '60/h' or "
            "'10/15m' (periods: s, m, h, d).",
        )
    per_session = s.raw("LOGIN_MAX_PENDING_PER_SESSION")
    if per_session is not None and (
        isinstance(per_session, bool) or not isinstance(per_session, int) or per_session < 1
    ):
        yield Problem(
            "django_eid.E041",
            "error",
            "DJANGO_EID['LOGIN_MAX_PENDING_PER_SESSION'] must be None or a positive integer.",
        )
    if s.raw("SIGNUP") not in SIGNUP_MODES:
        yield Problem(
            "django_eid.E042",
            "error",
            f"DJANGO_EID['SIGNUP'] must be one of {', '.join(map(repr, SIGNUP_MODES))}.",
        )
    for key in ("SIGNUP_FORM", "ADAPTER"):
        try:
            import_string(str(s.raw(key)))
        except ImportError as err:
            yield Problem(
                "django_eid.E043",
                "error",
                f"DJANGO_EID['{key}'] cannot be imported: {err}.",
                "A dotted path to a class, such as 'myapp.forms.SignupForm'.",
            )
    signup_url = s.raw("SIGNUP_URL")
    if signup_url is not None and not isinstance(signup_url, str):
        yield Problem(
            "django_eid.E044",
            "error",
            "DJANGO_EID['SIGNUP_URL'] must be None, a URL or a URL name.",
        )
    if s.raw("SIGNUP") == "auto" and s.raw("ADAPTER") == DEFAULT_ADAPTER:
        from django_eid.adapter import username_is_an_address

        if username_is_an_address():
            yield Problem(
                "django_eid.W028",
                "warning",
                "DJANGO_EID['SIGNUP'] is 'auto', but the user model's USERNAME_FIELD is an "
                "e-mail address, which the default adapter cannot make up: nobody signs up.",
                "Use SIGNUP 'form' (it asks for the address), or an ADAPTER whose "
                "is_open_for_signup() says yes and whose populate_user() fills it.",
            )
    from django_eid.backends import door_open

    if s.raw("SIGNUP") in ("form", "auto") and not door_open():
        yield Problem(
            "django_eid.W027",
            "warning",
            f"DJANGO_EID['SIGNUP'] opens sign-up, but {EID_BACKEND!r} is not in "
            "AUTHENTICATION_BACKENDS: nobody can log in with an eID.",
            "Add it next to the backends the site has.",
        )


def _operations(s: EidSettings) -> Iterator[Problem]:
    """What running it in production reads: the dashboard's price of a session."""
    price = s.raw("PRICE_PER_SESSION")
    if price is not None and parse_price(price) is None:
        yield Problem(
            "django_eid.E045",
            "error",
            f"DJANGO_EID['PRICE_PER_SESSION'] = {price!r} is not a price: a number of at least 0 "
            "(an int, a float, a Decimal or a string such as '0.35') was expected.",
            "Set it to the broker's price of one session, or to None for no estimate.",
        )
