"""System checks: each misconfiguration has a stable id, and the client refuses to run on errors."""

from __future__ import annotations

from typing import Any

import pytest
from django.core import checks
from django.core.exceptions import ImproperlyConfigured

from django_eid.brokers import api_class
from django_eid.checks import check_settings
from django_eid.client import EidClient, get_client
from django_eid.exceptions import EidConfigurationError, EidError
from tests.fixtures_client import SECRET, SettingsWrapper, eid_settings_with

REDIS = {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": "redis://x:6379"}
LOCMEM = {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}
DUMMY = {"BACKEND": "django.core.cache.backends.dummy.DummyCache"}
GOOD_KEY = "x" * 43 + "="  # 32 bytes, url-safe base64: a valid Fernet key


def run(settings: SettingsWrapper, *, debug: bool = False, **overrides: Any) -> list[Any]:
    settings.DEBUG = debug
    settings.DJANGO_EID = eid_settings_with(**overrides)
    return checks.run_checks(tags=["django_eid"])


def ids(messages: list[Any]) -> set[str]:
    return {m.id for m in messages}


@pytest.fixture
def shared_cache(settings: SettingsWrapper) -> None:
    """A cache shared by all workers, so W003 stays quiet."""
    settings.CACHES = {"default": LOCMEM, "shared": REDIS}


def test_the_check_is_registered_with_the_app_tag() -> None:
    assert check_settings in checks.registry.registry.get_checks()
    assert "django_eid" in check_settings.tags  # type: ignore[attr-defined]


def test_valid_configuration_in_debug_has_no_message(settings: SettingsWrapper) -> None:
    assert run(settings, debug=True) == []


@pytest.mark.usefixtures("shared_cache")
def test_valid_production_configuration_has_no_message(settings: SettingsWrapper) -> None:
    assert run(settings, TOKEN_CACHE="shared") == []


# id -> (DJANGO_EID overrides, other settings)
ERROR_CASES: list[tuple[str, dict[str, Any]]] = [
    ("django_eid.E001", {"CLIENT_ID": None}),
    ("django_eid.E001", {"CLIENT_ID": ""}),
    ("django_eid.E001", {"CLIENT_ID": 1234}),
    ("django_eid.E002", {"CLIENT_SECRET": None}),
    ("django_eid.E002", {"CLIENT_SECRET": ""}),
    ("django_eid.E003", {"BASE_URL": None}),
    ("django_eid.E003", {"BASE_URL": "api.broker.test"}),
    ("django_eid.E003", {"BASE_URL": "ftp://api.broker.test"}),
    ("django_eid.E003", {"BASE_URL": "https://"}),
    ("django_eid.E003", {"BASE_URL": "/identification"}),
    ("django_eid.E004", {"AUTH_URL": None}),
    ("django_eid.E004", {"AUTH_URL": "auth.broker.test/oauth"}),
    ("django_eid.E005", {"TOKEN_AUTH_METHOD": "digest"}),
    ("django_eid.E005", {"TOKEN_AUTH_METHOD": "Basic "}),
    ("django_eid.E006", {"TOKEN_CACHE": "tokens"}),
    ("django_eid.E007", {"LANGUAGE": "DE"}),
    ("django_eid.E007", {"LANGUAGE": "norsk"}),
    ("django_eid.E008", {"TIMEOUT": 0}),
    ("django_eid.E008", {"TIMEOUT": -1}),
    ("django_eid.E008", {"TIMEOUT": "soon"}),
    ("django_eid.E008", {"TIMEOUT": float("inf")}),
    ("django_eid.E008", {"TIMEOUT": float("nan")}),
    ("django_eid.E009", {"SCOPES": []}),
    ("django_eid.E009", {"SCOPES": ""}),
    ("django_eid.E009", {"SCOPES": ["identify", 3]}),
    ("django_eid.E009", {"SCOPES": "   "}),
    ("django_eid.E009", {"SCOPES": ["identify", ""]}),
    ("django_eid.E009", {"SCOPES": 5}),
    ("django_eid.E011", {"ALLOWED_PROVIDERS": "NO_BANKID_WEB"}),
    ("django_eid.E012", {"IDENTITY_PROVIDER": "no-bankid-web"}),
    ("django_eid.E012", {"ALLOWED_PROVIDERS": ["NO_BANKID_WEB", "swe bankid"]}),
    ("django_eid.E013", {"IDENTITY_PROVIDER": "SWE_BANKID", "ALLOWED_PROVIDERS": ["NO_BUYPASS"]}),
    ("django_eid.E014", {"ENCRYPTION_KEYS": ["not-a-fernet-key"]}),
    ("django_eid.E014", {"ENCRYPTION_KEYS": []}),
    ("django_eid.E014", {"ENCRYPTION_KEYS": GOOD_KEY}),
    ("django_eid.E014", {"ENCRYPTION_KEYS": 5}),
    ("django_eid.E015", {"SESSION_MAX_AGE": 0}),
    ("django_eid.E016", {"MAX_PENDING_PER_USER": "many"}),
    ("django_eid.E017", {"MAX_RESPONSE_BYTES": 0}),
    ("django_eid.E017", {"MAX_RESPONSE_BYTES": "1MB"}),
    ("django_eid.E020", {"MIN_AGE": -1}),
    ("django_eid.E020", {"MIN_AGE": 0}),
    ("django_eid.E020", {"MIN_AGE": 150}),
    ("django_eid.E020", {"MIN_AGE": "18"}),
    ("django_eid.E020", {"MIN_AGE": 18.0}),
    ("django_eid.E020", {"MIN_AGE": True}),
    ("django_eid.E021", {"COMPLETE_WITHOUT_CALLBACK": "always"}),
    ("django_eid.E022", {"IFRAME_WEB_MESSAGING_SCRIPT": "http://cdn.broker.test/wm.js"}),
    ("django_eid.E022", {"IFRAME_WEB_MESSAGING_SCRIPT": "http://127.0.0.1.evil.test/wm.js"}),
    ("django_eid.E022", {"IFRAME_WEB_MESSAGING_SCRIPT": "http://localhost.evil.test/wm.js"}),
    ("django_eid.E022", {"IFRAME_WEB_MESSAGING_SCRIPT": "//cdn.broker.test/wm.js"}),
    ("django_eid.E022", {"IFRAME_WEB_MESSAGING_SCRIPT": "ftp://cdn.broker.test/wm.js"}),
    ("django_eid.E022", {"IFRAME_WEB_MESSAGING_SCRIPT": "/static/wm.js"}),
    ("django_eid.E027", {"BROKER_API": "v3"}),
    ("django_eid.E027", {"BROKER_API": "V2"}),
    ("django_eid.E027", {"BROKER_API": 2}),
    ("django_eid.E028", {"BROKER_API": "eid-hub"}),
    ("django_eid.E028", {"BROKER_API": "eid-hub", "ACCOUNT_ID": "  "}),
    ("django_eid.E029", {"REQUESTED_ATTRIBUTES": "name dateOfBirth"}),
    ("django_eid.E029", {"REQUESTED_ATTRIBUTES": ["name", 5]}),
    ("django_eid.E029", {"REQUESTED_ATTRIBUTES": ["date of birth"]}),
    # Provider names follow the API.
    ("django_eid.E012", {"BROKER_API": "v2", "IDENTITY_PROVIDER": "NO_BANKID_WEB"}),
    (
        "django_eid.E012",
        {"BROKER_API": "eid-hub", "ACCOUNT_ID": "a-1", "ALLOWED_PROVIDERS": ["NBID"]},
    ),
]


@pytest.mark.parametrize(("check_id", "overrides"), ERROR_CASES)
def test_error_is_reported_by_its_id(
    settings: SettingsWrapper, check_id: str, overrides: dict[str, Any]
) -> None:
    messages = run(settings, debug=True, **overrides)
    assert check_id in ids(messages)
    message = next(m for m in messages if m.id == check_id)
    assert message.level == checks.ERROR
    assert SECRET not in message.msg


@pytest.mark.parametrize(("check_id", "overrides"), ERROR_CASES)
def test_client_refuses_a_configuration_with_errors(
    settings: SettingsWrapper, check_id: str, overrides: dict[str, Any]
) -> None:
    settings.DEBUG = True
    settings.DJANGO_EID = eid_settings_with(**overrides)
    with pytest.raises(EidConfigurationError, match=check_id) as info:
        EidClient()
    assert isinstance(info.value, ImproperlyConfigured)
    assert not isinstance(info.value, EidError)
    assert SECRET not in str(info.value)
    with pytest.raises(EidConfigurationError):
        get_client()


def test_settings_that_are_not_a_dict(settings: SettingsWrapper) -> None:
    settings.DJANGO_EID = ["CLIENT_ID", "x"]
    assert ids(checks.run_checks(tags=["django_eid"])) == {"django_eid.E000"}
    with pytest.raises(EidConfigurationError, match="E000"):
        EidClient()


def test_several_errors_are_reported_together(settings: SettingsWrapper) -> None:
    messages = run(settings, debug=True, CLIENT_ID=None, CLIENT_SECRET=None, LANGUAGE="XX")
    assert {"django_eid.E001", "django_eid.E002", "django_eid.E007"} <= ids(messages)
    with pytest.raises(EidConfigurationError) as info:
        EidClient()
    assert "E001" in str(info.value)
    assert "E007" in str(info.value)
    assert "\n" not in str(info.value)


@pytest.mark.parametrize(
    "overrides",
    [
        {"BROKER_API": "v2", "IDENTITY_PROVIDER": "no_bankid_mobile"},
        {
            "BROKER_API": "eid-hub",
            "ACCOUNT_ID": "a-spge-JoXJ5et0okvIKE10LN70",
            "ALLOWED_PROVIDERS": ["nbid", "otp-sms"],
            "REQUESTED_ATTRIBUTES": ["name", "dateOfBirth", "nbidAlternativeSubject"],
        },
    ],
)
def test_the_successor_apis_need_no_urls_of_their_own(
    settings: SettingsWrapper, overrides: dict[str, Any]
) -> None:
    """Their hosts, token paths and scopes are the API's own unless set."""
    settings.DEBUG = True
    values = {k: v for k, v in eid_settings_with(**overrides).items()}
    for key in ("BASE_URL", "AUTH_URL", "SCOPES"):
        values.pop(key, None)
    settings.DJANGO_EID = values
    assert checks.run_checks(tags=["django_eid"]) == []


def test_valid_values_that_look_odd_are_accepted(settings: SettingsWrapper) -> None:
    messages = run(
        settings,
        debug=True,
        LANGUAGE="no",
        SCOPES="identify document_read",
        IDENTITY_PROVIDER="NO_BANKID_WEB",
        ALLOWED_PROVIDERS=("NO_BANKID_WEB", "SWE_BANKID_MOBILE"),
        TOKEN_AUTH_METHOD="post",
        TIMEOUT=2.5,
        ENCRYPTION_KEYS=[GOOD_KEY],
    )
    assert messages == []


@pytest.mark.parametrize(
    ("check_id", "overrides"),
    [
        ("django_eid.W001", {"BASE_URL": "http://api.broker.test"}),
        ("django_eid.W001", {"BASE_URL": "HTTP://api.broker.test"}),
        ("django_eid.W002", {"AUTH_URL": "http://auth.broker.test"}),
        ("django_eid.W010", {"CLIENTID": "typo"}),
        ("django_eid.W011", {"ONE_ACCOUNT_PER_PERSON": True}),
        ("django_eid.W020", {"ACCOUNT_ID": "a-spge-1"}),
        ("django_eid.W020", {"BROKER_API": "v2", "REQUESTED_ATTRIBUTES": ["name"]}),
        (
            "django_eid.W021",
            {
                "BROKER_API": "v2",
                "IFRAME_WEB_MESSAGING": True,
                "IFRAME_WEB_MESSAGING_SCRIPT": "https://id.broker.test/messaging.js",
            },
        ),
        (
            "django_eid.W022",
            {"BROKER_API": "eid-hub", "ACCOUNT_ID": "a-1", "BASE_URL": "https://api.idfy.io"},
        ),
        # Well-formed provider names that the API's reference does not publish.
        ("django_eid.W023", {"IDENTITY_PROVIDER": "NO_BANKID_WBE"}),
        ("django_eid.W023", {"ALLOWED_PROVIDERS": ["NO_BANKID_WEB", "SE_BANKID"]}),
        ("django_eid.W023", {"IDENTITY_PROVIDER": "UNKNOWN"}),  # a record's value only
        ("django_eid.W023", {"BROKER_API": "v2", "ALLOWED_PROVIDERS": ["nbid"]}),
        (
            "django_eid.W023",
            {"BROKER_API": "eid-hub", "ACCOUNT_ID": "a-1", "IDENTITY_PROVIDER": "no_bankid"},
        ),
    ],
)
@pytest.mark.usefixtures("shared_cache")
def test_warnings(settings: SettingsWrapper, check_id: str, overrides: dict[str, Any]) -> None:
    messages = run(settings, TOKEN_CACHE="shared", **overrides)
    assert ids(messages) == {check_id}
    assert messages[0].level == checks.WARNING
    # A warning does not stop the client.
    EidClient().close()


@pytest.mark.parametrize("url_key", ["BASE_URL", "AUTH_URL"])
def test_plain_http_is_fine_in_debug(settings: SettingsWrapper, url_key: str) -> None:
    assert run(settings, debug=True, **{url_key: "http://localhost:8000"}) == []


@pytest.mark.parametrize(
    "url",
    [
        "https://cdn.broker.test/js/web-messaging.js",
        "HTTPS://cdn.broker.test/wm.js",
        "http://127.0.0.1:8000/eid-sandbox/web-messaging.js",
        "http://127.8.9.10/wm.js",
        "http://localhost:8000/eid-sandbox/web-messaging.js",
        "http://eid.localhost/wm.js",
        "http://[::1]:8000/wm.js",
    ],
)
def test_the_web_messaging_script_is_https_or_on_this_machine(
    settings: SettingsWrapper, url: str
) -> None:
    """The script runs with the site's origin: plain http only for a sandbox on loopback."""
    messages = run(settings, debug=True, IFRAME_WEB_MESSAGING=True, IFRAME_WEB_MESSAGING_SCRIPT=url)
    assert "django_eid.E022" not in ids(messages)


@pytest.mark.parametrize("backend", [LOCMEM, DUMMY])
def test_per_process_token_cache_warns_outside_debug(
    settings: SettingsWrapper, backend: dict[str, str]
) -> None:
    settings.CACHES = {"default": LOCMEM, "tokens": backend}
    messages = run(settings, TOKEN_CACHE="tokens")
    assert ids(messages) == {"django_eid.W003"}
    assert messages[0].hint
    assert run(settings, debug=True, TOKEN_CACHE="tokens") == []


def test_strict_session_cookie_without_interstitial_warns(settings: SettingsWrapper) -> None:
    settings.SESSION_COOKIE_SAMESITE = "Strict"
    assert ids(run(settings, debug=True, CALLBACK_INTERSTITIAL=False)) == {"django_eid.W004"}
    assert run(settings, debug=True, CALLBACK_INTERSTITIAL=True) == []


def test_token_cache_must_be_configured_and_is_then_used(settings: SettingsWrapper) -> None:
    settings.CACHES = {"default": LOCMEM, "tokens": {**LOCMEM, "LOCATION": "tokens"}}
    settings.DEBUG = True
    settings.DJANGO_EID = eid_settings_with(TOKEN_CACHE="tokens")
    client = EidClient()
    assert client.tokens.cache_alias == "tokens"
    client.close()


@pytest.mark.parametrize("min_age", [None, 18, 1, 149])
def test_valid_min_age_has_no_message(settings: SettingsWrapper, min_age: int | None) -> None:
    # None removes the key: the default, no age limit.
    assert run(settings, debug=True, MIN_AGE=min_age) == []


@pytest.mark.parametrize(
    "overrides",
    [
        {"ONE_ACCOUNT_PER_PERSON": True, "GET_SOCIAL_SECURITY_NUMBER": True},
        {"ONE_ACCOUNT_PER_PERSON": False},
        {"ONE_ACCOUNT_PER_PERSON": False, "GET_SOCIAL_SECURITY_NUMBER": True},
    ],
)
@pytest.mark.usefixtures("shared_cache")
def test_one_account_per_person_warns_only_without_the_number(
    settings: SettingsWrapper, overrides: dict[str, Any]
) -> None:
    assert run(settings, TOKEN_CACHE="shared", **overrides) == []


@pytest.mark.parametrize(
    "overrides",
    [
        {"ALLOWED_PROVIDERS": list(api_class("v1").published_providers)},
        {"BROKER_API": "v2", "ALLOWED_PROVIDERS": list(api_class("v2").published_providers)},
        {
            "BROKER_API": "eid-hub",
            "ACCOUNT_ID": "a-1",
            "ALLOWED_PROVIDERS": list(api_class("eid-hub").published_providers),
        },
    ],
)
@pytest.mark.usefixtures("shared_cache")
def test_every_published_provider_is_fine(
    settings: SettingsWrapper, overrides: dict[str, Any]
) -> None:
    assert run(settings, TOKEN_CACHE="shared", **overrides) == []


@pytest.mark.usefixtures("shared_cache")
def test_the_provider_warning_names_each_unlisted_name_once(settings: SettingsWrapper) -> None:
    messages = run(
        settings,
        TOKEN_CACHE="shared",
        IDENTITY_PROVIDER="DK_MITID",
        ALLOWED_PROVIDERS=["DK_MITID", "NO_BANKID_WEB"],
    )
    assert ids(messages) == {"django_eid.W023"}
    assert messages[0].msg.count("'DK_MITID'") == 1
    assert "NO_BANKID_WEB" not in messages[0].msg.split(":")[1]
