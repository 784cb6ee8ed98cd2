"""System checks of the JSON API's settings: E023 to E026 and W013."""

from __future__ import annotations

from typing import Any

import pytest
from django.core import checks

from tests.fixtures_client import SECRET, SettingsWrapper, eid_settings_with

HOST = "app.example.com"
URLS = {
    "success": f"https://{HOST}/verified/{{reference}}",
    "abort": f"https://{HOST}/cancelled/{{reference}}",
    "error": f"https://{HOST}/failed/{{reference}}",
}
API_IDS = {"django_eid.E023", "django_eid.E024", "django_eid.E025", "django_eid.E026"}


def run(settings: SettingsWrapper, *, debug: bool = True, **overrides: Any) -> list[Any]:
    settings.DEBUG = debug
    settings.DJANGO_EID = eid_settings_with(**overrides)
    return checks.run_checks(tags=["django_eid"])


def ids(messages: list[Any]) -> set[str]:
    return {m.id for m in messages}


@pytest.mark.parametrize(
    "overrides",
    [
        {"FRONTEND_URLS": URLS, "FRONTEND_ALLOWED_HOSTS": [HOST]},
        {"FRONTEND_URLS": URLS, "FRONTEND_ALLOWED_HOSTS": (HOST, "admin.example.com")},
        {"FRONTEND_URLS": {k: f"/app/{k}/{{reference}}" for k in URLS}},
        {"FRONTEND_URLS": {**URLS, "error": "/failed/"}, "FRONTEND_ALLOWED_HOSTS": [HOST]},
        {"FRONTEND_ALLOWED_HOSTS": [HOST]},
        {"FRONTEND_ALLOWED_HOSTS": []},
        {"API_AUTHENTICATION_CLASSES": ["rest_framework.authentication.TokenAuthentication"]},
        {
            "API_AUTHENTICATION_CLASSES": (
                "rest_framework.authentication.TokenAuthentication",
                "rest_framework.authentication.SessionAuthentication",
            )
        },
        {"API_AUTHENTICATION_CLASSES": []},
        {"API_EXPOSE_SOCIAL_SECURITY_NUMBER": True},
    ],
)
def test_valid_api_configurations_have_no_message(
    settings: SettingsWrapper, overrides: dict[str, Any]
) -> None:
    assert run(settings, **overrides) == []


def test_valid_https_front_end_in_production_has_no_api_message(
    settings: SettingsWrapper,
) -> None:
    messages = run(settings, debug=False, FRONTEND_URLS=URLS, FRONTEND_ALLOWED_HOSTS=[HOST])
    assert not ids(messages) & (API_IDS | {"django_eid.W013"})


# id -> DJANGO_EID overrides
ERRORS: list[tuple[str, dict[str, Any]]] = [
    ("django_eid.E023", {"FRONTEND_URLS": "https://app.example.com/"}),
    ("django_eid.E023", {"FRONTEND_URLS": ["https://app.example.com/"]}),
    ("django_eid.E023", {"FRONTEND_URLS": {"success": "/ok/", "abort": "/no/"}}),
    (
        "django_eid.E023",
        {"FRONTEND_URLS": {"success": "/ok/", "abort": "/no/", "error": "/e/", "done": "/d/"}},
    ),
    ("django_eid.E023", {"FRONTEND_URLS": {"success": "/ok/", "abort": "/no/", "error": ""}}),
    ("django_eid.E023", {"FRONTEND_URLS": {"success": "/ok/", "abort": "/no/", "error": 5}}),
    ("django_eid.E023", {"FRONTEND_URLS": {}}),
    ("django_eid.E024", {"FRONTEND_URLS": URLS}),
    ("django_eid.E024", {"FRONTEND_URLS": URLS, "FRONTEND_ALLOWED_HOSTS": ["other.example.com"]}),
    (
        "django_eid.E024",
        {"FRONTEND_URLS": {**URLS, "abort": "//evil.example/x"}, "FRONTEND_ALLOWED_HOSTS": [HOST]},
    ),
    (
        "django_eid.E024",
        {
            "FRONTEND_URLS": {**URLS, "error": "javascript:alert(1)"},
            "FRONTEND_ALLOWED_HOSTS": [HOST],
        },
    ),
    (
        "django_eid.E024",
        {
            "FRONTEND_URLS": {**URLS, "error": "ftp://app.example.com/"},
            "FRONTEND_ALLOWED_HOSTS": [HOST],
        },
    ),
    ("django_eid.E025", {"FRONTEND_ALLOWED_HOSTS": HOST}),
    ("django_eid.E025", {"FRONTEND_ALLOWED_HOSTS": [HOST, 5]}),
    ("django_eid.E025", {"FRONTEND_ALLOWED_HOSTS": [""]}),
    # Matched exactly: a pattern would silently match nothing.
    ("django_eid.E025", {"FRONTEND_ALLOWED_HOSTS": [".example.com"]}),
    ("django_eid.E025", {"FRONTEND_ALLOWED_HOSTS": ["*"]}),
    ("django_eid.E025", {"FRONTEND_ALLOWED_HOSTS": ["https://app.example.com"]}),
    ("django_eid.E025", {"FRONTEND_ALLOWED_HOSTS": {HOST: True}}),
    (
        "django_eid.E026",
        {"API_AUTHENTICATION_CLASSES": "rest_framework.authentication.TokenAuthentication"},
    ),
    ("django_eid.E026", {"API_AUTHENTICATION_CLASSES": ["nowhere.Authentication"]}),
    ("django_eid.E026", {"API_AUTHENTICATION_CLASSES": ["rest_framework.authentication.Nope"]}),
    ("django_eid.E026", {"API_AUTHENTICATION_CLASSES": ["django_eid.api.Caller"]}),
    ("django_eid.E026", {"API_AUTHENTICATION_CLASSES": 5}),
]


@pytest.mark.parametrize(("check_id", "overrides"), ERRORS)
def test_an_api_misconfiguration_is_an_error(
    settings: SettingsWrapper, check_id: str, overrides: dict[str, Any]
) -> None:
    messages = run(settings, **overrides)
    assert ids(messages) & API_IDS == {check_id}
    message = next(m for m in messages if m.id == check_id)
    assert message.level == checks.ERROR
    assert message.hint
    assert SECRET not in message.msg


def test_e024_names_the_url_and_the_host_to_add(settings: SettingsWrapper) -> None:
    (message,) = run(
        settings,
        FRONTEND_URLS={**URLS, "success": "https://other.example/ok"},
        FRONTEND_ALLOWED_HOSTS=[HOST],
    )
    assert message.id == "django_eid.E024"
    assert "'success'" in message.msg
    assert "'other.example'" in message.hint


def test_e024_for_each_url_at_fault(settings: SettingsWrapper) -> None:
    messages = run(settings, FRONTEND_URLS=URLS)
    assert [m.id for m in messages] == ["django_eid.E024"] * 3


def test_e026_names_the_class(settings: SettingsWrapper) -> None:
    (message,) = run(settings, API_AUTHENTICATION_CLASSES=["django_eid.api.Caller"])
    assert "django_eid.api.Caller" in message.msg
    assert "authenticate()" in message.msg


def test_plain_http_front_end_warns_outside_debug(settings: SettingsWrapper) -> None:
    settings.CACHES = {
        "default": {
            "BACKEND": "django.core.cache.backends.redis.RedisCache",
            "LOCATION": "redis://x:6379",
        }
    }
    http = {**URLS, "success": f"http://{HOST}/verified/{{reference}}"}
    messages = run(settings, debug=False, FRONTEND_URLS=http, FRONTEND_ALLOWED_HOSTS=[HOST])
    assert ids(messages) == {"django_eid.W013"}
    (warning,) = messages
    assert warning.level == checks.WARNING
    assert "'success'" in warning.msg
    assert run(settings, debug=True, FRONTEND_URLS=http, FRONTEND_ALLOWED_HOSTS=[HOST]) == []
