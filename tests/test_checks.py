"""System checks: each misconfiguration has a stable id, and the client refuses to run on errors."""

from __future__ import annotations

from typing import Any

import pytest
from django.core import checks
from django.core.exceptions import ImproperlyConfigured
from joserfc.jwk import ECKey, RSAKey

from django_eid.brokers import api_class
from django_eid.checks import check_settings
from django_eid.client import EidClient, get_client
from django_eid.exceptions import EidConfigurationError, EidError
from django_eid.sandbox.persons import builtin_persons
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
    # Identity at the door (log in, sign up).
    ("django_eid.E038", {"LOGIN_MIN_LOA": "highest"}),
    ("django_eid.E038", {"LOGIN_MIN_LOA": 3}),
    ("django_eid.E039", {"LOGIN_PROVIDERS": "NO_BANKID_WEB"}),
    ("django_eid.E039", {"LOGIN_PROVIDERS": ["no-bankid"]}),
    (
        "django_eid.E039",
        {"ALLOWED_PROVIDERS": ["NO_BANKID_WEB"], "LOGIN_PROVIDERS": ["SWE_BANKID"]},
    ),
    ("django_eid.E040", {"LOGIN_RATE": "60 per hour"}),
    ("django_eid.E040", {"LOGIN_RATE": 60}),
    ("django_eid.E041", {"LOGIN_MAX_PENDING_PER_SESSION": 0}),
    ("django_eid.E041", {"LOGIN_MAX_PENDING_PER_SESSION": True}),
    ("django_eid.E042", {"SIGNUP": "open"}),
    ("django_eid.E043", {"SIGNUP_FORM": "nowhere.Form"}),
    ("django_eid.E043", {"ADAPTER": "django_eid.adapter.Missing"}),
    ("django_eid.E044", {"SIGNUP_URL": ["/register/"]}),
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
        # The REST APIs return no signed token: no evidence to keep.
        ("django_eid.W029", {"KEEP_EVIDENCE": True}),
        ("django_eid.W029", {"BROKER_API": "v2", "KEEP_EVIDENCE": True}),
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


# -- BROKER_API "oidc" -----------------------------------------------------------------------
#: A valid OpenID Connect site: the provider's issuer instead of BASE_URL and AUTH_URL.
OIDC: dict[str, Any] = {
    "BROKER_API": "oidc",
    "OIDC_PRESET": "idura",
    "OIDC_ISSUER": "https://shop-test.idura.broker",
    "CLIENT_ID": "urn:shop:eid",
    "SCOPES": None,
    "BASE_URL": None,
    "AUTH_URL": None,
}
RSA_KEY = RSAKey.generate_key(2048)
PRIVATE_PEM = RSA_KEY.as_pem(private=True).decode()
EC_PRIVATE_PEM = ECKey.generate_key("P-256").as_pem(private=True).decode()
PUBLIC_PEM = RSA_KEY.as_pem(private=False).decode()
SIGNED = {"TOKEN_AUTH_METHOD": "private_key_jwt", "OIDC_PRIVATE_KEY": PRIVATE_PEM}
NUMBER = builtin_persons().NORWEGIAN.national_identity_number

OIDC_ERROR_CASES: list[tuple[str, dict[str, Any]]] = [
    ("django_eid.E030", {**OIDC, "OIDC_ISSUER": None}),
    ("django_eid.E030", {**OIDC, "OIDC_ISSUER": "/oidc/idura"}),
    ("django_eid.E030", {**OIDC, "OIDC_ISSUER": "shop-test.idura.broker"}),
    ("django_eid.E030", {**OIDC, "OIDC_ISSUER": "https://shop-test.idura.broker?tenant=1"}),
    ("django_eid.E030", {**OIDC, "OIDC_ISSUER": "https://shop-test.idura.broker#x"}),
    ("django_eid.E031", {**OIDC, "OIDC_PRESET": "criipto"}),
    ("django_eid.E031", {**OIDC, "OIDC_PRESET": "Idura"}),
    ("django_eid.E032", {**OIDC, "TOKEN_AUTH_METHOD": "private_key_jwt"}),
    # Neither a key nor a secret: the key is what is missing (no E002).
    ("django_eid.E032", {**OIDC, "TOKEN_AUTH_METHOD": "private_key_jwt", "CLIENT_SECRET": None}),
    ("django_eid.E032", {**OIDC, **SIGNED, "OIDC_PRIVATE_KEY": PUBLIC_PEM}),
    ("django_eid.E032", {**OIDC, **SIGNED, "OIDC_PRIVATE_KEY": "-----BEGIN garbage-----"}),
    ("django_eid.E033", {**OIDC, "OIDC_REDIRECT_URI": "/eid/oidc/callback/"}),
    ("django_eid.E033", {**OIDC, "OIDC_REDIRECT_URI": "shop.example/eid/oidc/callback/"}),
    ("django_eid.E034", {**OIDC, "MIN_LOA": "medium"}),
    ("django_eid.E034", {**OIDC, "MIN_LOA": "HIGH"}),
    ("django_eid.E034", {**OIDC, "MIN_LOA": 3}),
    # Signicat's name for NO BankID is not one of Idura's.
    ("django_eid.E035", {**OIDC, "IDENTITY_PROVIDER": "nbid"}),
    ("django_eid.E035", {**OIDC, "ALLOWED_PROVIDERS": ["no-bankid", "mitid"]}),
    ("django_eid.E035", {**OIDC, "OIDC_PRESET": "bankid-no", "IDENTITY_PROVIDER": "no-bankid"}),
    ("django_eid.E036", {**OIDC, "OIDC_ACR_VALUES": "urn:grn:authn:no:bankid\n"}),
    ("django_eid.E036", {**OIDC, "OIDC_ACR_VALUES": "urn:grn:authn:\x00no:bankid"}),
    ("django_eid.E036", {**OIDC, "OIDC_LOGIN_HINT": "scope:ssn\r\n"}),
    (
        "django_eid.E037",
        {
            **OIDC,
            "OIDC_PRESET": None,
            "IDENTITY_PROVIDER": None,
            "GET_SOCIAL_SECURITY_NUMBER": True,
        },
    ),
    ("django_eid.E036", {**OIDC, "OIDC_LOGIN_HINT": 5}),
    ("django_eid.E036", {**OIDC, "OIDC_LOGIN_HINT": f"BID:{NUMBER}"}),
    ("django_eid.E036", {**OIDC, "OIDC_LOGIN_HINT": NUMBER}),
    # private_key_jwt is OIDC's alone: the REST APIs authenticate with the secret.
    ("django_eid.E005", {"TOKEN_AUTH_METHOD": "private_key_jwt"}),
    ("django_eid.E005", {"BROKER_API": "v2", "TOKEN_AUTH_METHOD": "private_key_jwt"}),
    ("django_eid.E005", {**OIDC, "TOKEN_AUTH_METHOD": "digest"}),
    # Without private_key_jwt an OIDC client still needs its secret.
    ("django_eid.E002", {**OIDC, "CLIENT_SECRET": None}),
]


@pytest.mark.parametrize(("check_id", "overrides"), OIDC_ERROR_CASES)
def test_oidc_error_is_reported_by_its_id(
    settings: SettingsWrapper, check_id: str, overrides: dict[str, Any]
) -> None:
    messages = run(settings, debug=True, **overrides)
    assert ids(messages) == {check_id}
    assert messages[0].level == checks.ERROR
    assert SECRET not in messages[0].msg
    assert NUMBER not in messages[0].msg


@pytest.mark.parametrize(("check_id", "overrides"), OIDC_ERROR_CASES)
def test_client_refuses_an_oidc_configuration_with_errors(
    settings: SettingsWrapper, check_id: str, overrides: dict[str, Any]
) -> None:
    settings.DEBUG = True
    settings.DJANGO_EID = eid_settings_with(**overrides)
    with pytest.raises(EidConfigurationError, match=check_id):
        EidClient()


@pytest.mark.parametrize(
    "overrides",
    [
        OIDC,
        {**OIDC, "OIDC_PRESET": None},  # a generic OpenID provider
        {**OIDC, "OIDC_PRESET": "signicat", "ALLOWED_PROVIDERS": ["nbid", "sbid", "mitid", "ftn"]},
        {**OIDC, "OIDC_PRESET": "bankid-no", "IDENTITY_PROVIDER": "bis", "MIN_LOA": "substantial"},
        {**OIDC, "OIDC_PRESET": "vipps", "IDENTITY_PROVIDER": "vipps", "OIDC_PAR": False},
        {**OIDC, "OIDC_REDIRECT_URI": "https://shop.example/eid/oidc/callback/"},
        {**OIDC, "OIDC_ACR_VALUES": "urn:grn:authn:se:bankid", "OIDC_LOGIN_HINT": "scope:ssn"},
        # No CLIENT_SECRET with private_key_jwt (E002 not raised), an RSA or an EC key.
        {**OIDC, **SIGNED, "CLIENT_SECRET": None, "OIDC_PRIVATE_KEY_ID": "shop-1"},
        {**OIDC, **SIGNED, "CLIENT_SECRET": None, "OIDC_PRIVATE_KEY": EC_PRIVATE_PEM},
        {**OIDC, "TOKEN_AUTH_METHOD": "post"},
        {**OIDC, "KEEP_EVIDENCE": True},
    ],
)
@pytest.mark.usefixtures("shared_cache")
def test_a_valid_oidc_configuration_has_no_message(
    settings: SettingsWrapper, overrides: dict[str, Any]
) -> None:
    """No BASE_URL nor AUTH_URL (E003/E004 do not apply: the issuer says where)."""
    assert "BASE_URL" not in eid_settings_with(**overrides)
    assert run(settings, TOKEN_CACHE="shared", **overrides) == []
    EidClient().close()


@pytest.mark.parametrize(
    ("check_id", "overrides"),
    [
        ("django_eid.W024", {"OIDC_ISSUER": "https://shop-test.idura.broker"}),
        ("django_eid.W024", {"BROKER_API": "v2", "OIDC_PRESET": "idura"}),
        ("django_eid.W024", {"BROKER_API": "eid-hub", "ACCOUNT_ID": "a-1", "OIDC_PAR": False}),
        ("django_eid.W025", {**OIDC, "OIDC_ISSUER": "http://localhost:8000/eid-sandbox/oidc"}),
        ("django_eid.W026", {"MIN_LOA": "high"}),
        ("django_eid.W026", {"BROKER_API": "v2", "MIN_LOA": "substantial"}),
        ("django_eid.W026", {**OIDC, "OIDC_PRESET": None, "MIN_LOA": "low"}),
    ],
)
@pytest.mark.usefixtures("shared_cache")
def test_oidc_warnings(settings: SettingsWrapper, check_id: str, overrides: dict[str, Any]) -> None:
    messages = run(settings, TOKEN_CACHE="shared", **overrides)
    assert ids(messages) == {check_id}
    assert messages[0].level == checks.WARNING


def test_a_plain_http_issuer_is_fine_in_debug(settings: SettingsWrapper) -> None:
    issuer = "http://localhost:8000/eid-sandbox/oidc/idura"
    assert run(settings, debug=True, **{**OIDC, "OIDC_ISSUER": issuer}) == []


@pytest.mark.usefixtures("shared_cache")
def test_min_loa_with_an_api_that_states_a_level_does_not_warn(settings: SettingsWrapper) -> None:
    assert (
        run(settings, TOKEN_CACHE="shared", BROKER_API="eid-hub", ACCOUNT_ID="a-1", MIN_LOA="high")
        == []
    )


@pytest.mark.parametrize("signup", ["form", "auto"])
def test_an_open_sign_up_without_the_eid_backend_is_warned_about(
    settings: SettingsWrapper, signup: str
) -> None:
    settings.AUTHENTICATION_BACKENDS = ["django.contrib.auth.backends.ModelBackend"]
    assert "django_eid.W027" in ids(run(settings, debug=True, SIGNUP=signup))
    settings.AUTHENTICATION_BACKENDS = [
        "django.contrib.auth.backends.ModelBackend",
        "django_eid.backends.EidBackend",
    ]
    assert "django_eid.W027" not in ids(run(settings, debug=True, SIGNUP=signup))


def test_the_door_s_defaults_are_valid(settings: SettingsWrapper) -> None:
    found = ids(run(settings, debug=True, LOGIN_PROVIDERS=["NO_BANKID_WEB"], LOGIN_RATE=None))
    assert not {i for i in found if i[-4:] in ("E038", "E039", "E040", "E041", "E042", "E043")}


@pytest.mark.parametrize("price", [None, 0, 1, 0.35, "0.35", "12"])
def test_a_price_per_session_is_a_number_of_at_least_zero(
    settings: SettingsWrapper, price: Any
) -> None:
    assert "django_eid.E045" not in ids(run(settings, debug=True, PRICE_PER_SESSION=price))


@pytest.mark.parametrize("price", [-1, "-0.5", "free", "NaN", float("inf"), True, [1]])
def test_a_price_per_session_that_is_no_price_is_an_error(
    settings: SettingsWrapper, price: Any
) -> None:
    assert "django_eid.E045" in ids(run(settings, debug=True, PRICE_PER_SESSION=price))
