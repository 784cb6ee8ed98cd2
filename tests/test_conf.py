"""``settings.DJANGO_EID`` is read lazily, with defaults, and follows setting changes."""

from __future__ import annotations

import os
import subprocess
import sys
from decimal import Decimal
from pathlib import Path

import pytest
from django.test import override_settings
from django.utils import translation

from django_eid.brokers import BrokerConfig
from django_eid.client import EidClient, get_client
from django_eid.conf import DEFAULTS, EidSettings, eid_settings
from tests.fixtures_client import SettingsWrapper, eid_settings_with

ROOT = Path(__file__).resolve().parent.parent


def test_importing_the_package_reads_no_setting() -> None:
    """Nothing is read at import time: the modules import with Django unconfigured."""
    env = {k: v for k, v in os.environ.items() if k != "DJANGO_SETTINGS_MODULE"}
    code = (
        "import django_eid.conf, django_eid.validation, django_eid.tokens, django_eid.records, "
        "django_eid.transport, django_eid.client, "
        "django_eid.checks, django_eid.exceptions\n"
        "from django.conf import settings\n"
        "assert not settings.configured\n"
    )
    subprocess.run([sys.executable, "-c", code], env=env, cwd=ROOT, check=True, timeout=60)  # noqa: S603


def test_a_new_settings_object_reads_nothing_until_used() -> None:
    s = EidSettings()
    assert s._cache is None
    assert s.CLIENT_ID == "test-client"
    assert s._cache is not None


def test_defaults() -> None:
    s = eid_settings
    assert BrokerConfig.of().scopes == ("identify",)
    assert BrokerConfig.of().token_auth_method == "basic"
    assert s.TIMEOUT == 10.0
    assert s.TOKEN_CACHE == "default"
    assert s.IDENTITY_PROVIDER is None
    assert s.ALLOWED_PROVIDERS is None
    assert s.LANGUAGE is None
    assert s.GET_SOCIAL_SECURITY_NUMBER is False
    assert s.IFRAME_DOMAIN is None
    assert DEFAULTS["TIMEOUT"] == 10


def test_settings_fixture_changes_are_seen(settings: SettingsWrapper) -> None:
    assert eid_settings.CLIENT_ID == "test-client"
    settings.DJANGO_EID = eid_settings_with(CLIENT_ID="other-client", TIMEOUT=3)
    assert eid_settings.CLIENT_ID == "other-client"
    assert eid_settings.TIMEOUT == 3.0


def test_override_settings_is_seen_and_undone() -> None:
    with override_settings(DJANGO_EID=eid_settings_with(BASE_URL="https://elsewhere.test/")):
        assert eid_settings.BASE_URL == "https://elsewhere.test"
    assert eid_settings.BASE_URL == "https://api.broker.test"


def test_missing_dict_means_defaults() -> None:
    with override_settings(DJANGO_EID=None):
        assert eid_settings.CLIENT_ID == ""
        # Unset: the API's own defaults, which BrokerConfig applies.
        assert (eid_settings.SCOPES, eid_settings.TOKEN_AUTH_METHOD) == (None, None)
        assert BrokerConfig.of().scopes == ("identify",)


def test_urls_are_stripped_and_token_url_derived() -> None:
    with override_settings(
        DJANGO_EID=eid_settings_with(AUTH_URL="https://auth.x.test/", BASE_URL="https://a.test/v1/")
    ):
        assert BrokerConfig.of().token_url == "https://auth.x.test/oauth/connect/token"
        assert eid_settings.BASE_URL == "https://a.test/v1"


def test_an_unset_url_is_the_apis_default_and_a_set_one_wins() -> None:
    unset = {k: v for k, v in eid_settings_with(BROKER_API="v2").items() if k != "BASE_URL"}
    with override_settings(DJANGO_EID=unset):
        assert eid_settings.BASE_URL == ""  # the setting as given
        config = BrokerConfig.of()
        assert (config.api.name, config.base_url) == ("v2", "https://api.signicat.io")
    with override_settings(DJANGO_EID={**unset, "BASE_URL": "https://b.test/"}):
        assert BrokerConfig.of().base_url == "https://b.test"


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (["identify", "document_read"], ("identify", "document_read")),
        (("identify",), ("identify",)),
        ("identify document_read", ("identify", "document_read")),
    ],
)
def test_scopes_accept_list_or_space_delimited_string(
    value: object, expected: tuple[str, ...]
) -> None:
    with override_settings(DJANGO_EID=eid_settings_with(SCOPES=value)):
        assert expected == eid_settings.SCOPES


@pytest.mark.parametrize(
    ("django_language", "broker"),
    [
        ("nb", "NO"),
        ("nn", "NO"),
        ("no", "NO"),
        ("sv", "SV"),
        ("da", "DA"),
        ("fi", "FI"),
        ("en", "EN"),
        ("en-gb", "EN"),
        ("de", "EN"),
        ("sv-se", "SV"),
    ],
)
def test_language_follows_django_when_unset(django_language: str, broker: str) -> None:
    with translation.override(django_language):
        assert eid_settings.broker_language() == broker


def test_language_setting_wins_over_django() -> None:
    with override_settings(DJANGO_EID=eid_settings_with(LANGUAGE="da")):
        assert eid_settings.LANGUAGE == "DA"
        with translation.override("sv"):
            assert eid_settings.broker_language() == "DA"


def test_get_client_is_reused_and_rebuilt_on_change() -> None:
    first = get_client()
    assert get_client() is first
    with override_settings(DJANGO_EID=eid_settings_with(TIMEOUT=2)):
        second = get_client()
        assert second is not first
        assert second.transport.timeout == 2.0
    third = get_client()
    assert third is not second
    assert third.transport.timeout == 10.0


def test_client_takes_an_explicit_settings_object() -> None:
    client = EidClient(app_settings=eid_settings)
    assert client.settings is eid_settings
    client.close()


@pytest.mark.parametrize(
    ("value", "price"),
    [
        (None, None),
        (0, Decimal(0)),
        (2, Decimal(2)),
        (0.1, Decimal("0.1")),  # by its shortest form, not 0.1000000000000000055...
        ("0.35", Decimal("0.35")),
        (Decimal("1.25"), Decimal("1.25")),
        (-1, None),  # E045
        ("NaN", None),
        ("free", None),
        (True, None),
    ],
)
def test_price_per_session(settings: SettingsWrapper, value: object, price: Decimal | None) -> None:
    settings.DJANGO_EID = eid_settings_with(PRICE_PER_SESSION=value, PRICE_CURRENCY="NOK")
    found = eid_settings.PRICE_PER_SESSION
    assert found == price
    assert eid_settings.PRICE_CURRENCY == "NOK"
