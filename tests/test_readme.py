"""The README's installation steps work as written.

A throwaway site is built from the README's own code blocks (the profile model, the
receiver, the app config and the test file, found by their ``# path`` first line) plus
the settings and URLs its steps describe, and the README's test is run against it with
the installed pytest plugin. A README edit that breaks a newcomer's install fails here.
"""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

import pytest

README = (Path(__file__).resolve().parent.parent / "README.md").read_text(encoding="utf-8")

pytest_plugins = ["pytester"]


def python_blocks() -> dict[str, str]:
    """``{path: code}`` for every README Python block whose first line is ``# path``."""
    blocks = {}
    for match in re.finditer(r"^( *)```python\n(.*?)^\1```", README, re.MULTILINE | re.DOTALL):
        code = textwrap.dedent(match.group(2))
        first, _, rest = code.partition("\n")
        if re.fullmatch(r"# [\w/]+\.py", first):
            blocks[first[2:]] = rest
    return blocks


SITE_SETTINGS = """
    SECRET_KEY = "a-site-following-the-readme"
    INSTALLED_APPS = [
        "django.contrib.auth",
        "django.contrib.contenttypes",
        "django.contrib.sessions",
        "django.contrib.messages",
        "django_eid",  # step 2
        "yourapp.apps.YourAppConfig",
    ]
    MIDDLEWARE = [
        "django.contrib.sessions.middleware.SessionMiddleware",
        "django.middleware.csrf.CsrfViewMiddleware",
        "django.contrib.auth.middleware.AuthenticationMiddleware",
        "django.contrib.messages.middleware.MessageMiddleware",
    ]
    ROOT_URLCONF = "site_urls"
    DATABASES = {"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": ":memory:"}}
    TEMPLATES = [{
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "APP_DIRS": True,
        "OPTIONS": {"context_processors": [
            "django.template.context_processors.request",
            "django.contrib.auth.context_processors.auth",
            "django.contrib.messages.context_processors.messages",
        ]},
    }]
    USE_TZ = True
    DJANGO_EID = {  # step 4, with test credentials
        "CLIENT_ID": "site",
        "CLIENT_SECRET": "site-secret",
        "BASE_URL": "https://api.broker.example",
        "AUTH_URL": "https://auth.broker.example",
    }
"""

SITE_URLS = """
    from django.urls import include, path

    from yourapp.views import payout_account

    urlpatterns = [
        path("eid/", include("django_eid.urls")),  # step 3
        path("payout/", payout_account),  # step 8
    ]
"""


def test_the_readme_names_every_file_a_newcomer_writes() -> None:
    assert set(python_blocks()) == {
        "yourapp/models.py",
        "yourapp/receivers.py",
        "yourapp/apps.py",
        "yourapp/views.py",
        "tests/test_verification.py",
    }


def test_the_readme_site_passes_the_readme_tests(pytester: pytest.Pytester) -> None:
    blocks = python_blocks()
    pytester.mkpydir("yourapp")
    for path in (
        "yourapp/models.py",
        "yourapp/receivers.py",
        "yourapp/apps.py",
        "yourapp/views.py",
    ):
        (pytester.path / path).write_text(blocks[path], encoding="utf-8")
    pytester.makepyfile(
        site_settings=textwrap.dedent(SITE_SETTINGS),
        site_urls=textwrap.dedent(SITE_URLS),
        test_verification=blocks["tests/test_verification.py"],
    )
    pytester.makeini("[pytest]\nDJANGO_SETTINGS_MODULE = site_settings\npythonpath = .\n")
    result = pytester.runpytest_subprocess("--ds=site_settings", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=3)
