"""Run the example project inside the test suite's settings.

The suite's settings (``tests.settings``) do not install the example project's
``accounts`` app: its receivers refuse children and mark profiles verified, which
would change what every other test sees. :func:`example_site` installs it for a block of tests only:
the app, its templates, its URLs and its django-eid settings, plus the
``accounts_profile`` table, and takes all of it away again afterwards.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from copy import deepcopy
from pathlib import Path
from typing import Any

from django.conf import settings
from django.contrib import admin
from django.db import connection
from django.test.utils import override_settings

import example_project
from django_eid.models import Identification
from django_eid.sandbox import broker as sandbox_broker
from django_eid.signals import identification_succeeded, identification_verifying
from example_project.accounts.apps import DISPATCH_UID, RULE_DISPATCH_UID

APP = "example_project.accounts"
TEMPLATES_DIR = Path(example_project.__file__).resolve().parent / "templates"
#: What the example project's settings.py sets, minus what comes from the environment.
LANGUAGES = [
    ("en", "English"),
    ("nb", "Norsk bokmål"),
    ("sv", "Svenska"),
    ("da", "Dansk"),
    ("fi", "Suomi"),
]


def _templates() -> list[dict[str, Any]]:
    templates = deepcopy(settings.TEMPLATES)
    engine: dict[str, Any] = templates[0]
    engine["DIRS"] = [TEMPLATES_DIR, *engine.get("DIRS", [])]
    processors = engine.setdefault("OPTIONS", {}).setdefault("context_processors", [])
    if "django.template.context_processors.i18n" not in processors:
        processors.append("django.template.context_processors.i18n")
    return templates


def eid_settings_for(broker_url: str | None) -> dict[str, Any]:
    """The suite's ``DJANGO_EID`` with the example project's choices.

    ``broker_url`` is where the sandbox is served (the live server's
    ``/eid-sandbox``); ``None`` keeps the suite's broker URLs.
    """
    values: dict[str, Any] = dict(settings.DJANGO_EID)
    values.update(
        SUCCESS_URL="account",
        FRONTEND_URLS=dict.fromkeys(("success", "abort", "error"), "/spa/?reference={reference}"),
        GET_SOCIAL_SECURITY_NUMBER=True,
        SIGNUP="form",  # the default of the example's EID_SIGNUP
        # The suite runs with DEBUG=False; the sandbox refuses that otherwise.
        SANDBOX_ALLOW_WITHOUT_DEBUG=True,
    )
    if broker_url is not None:
        # The sandbox's own client: it never accepts a site's credentials.
        values.update(
            BASE_URL=broker_url,
            AUTH_URL=broker_url,
            CLIENT_ID=sandbox_broker.CLIENT_ID,
            CLIENT_SECRET=sandbox_broker.CLIENT_SECRET,
        )
    return values


@contextmanager
def example_site(broker_url: str | None = None) -> Iterator[None]:
    """Serve the example project while the block runs.

    Needs database access (``django_db_blocker.unblock()``) and must not run
    inside a transaction: it creates and drops the profile table.
    """
    installed = list(settings.INSTALLED_APPS)
    if "django_eid.sandbox" not in installed:
        installed.append("django_eid.sandbox")
    installed.append(APP)
    overrides = override_settings(
        INSTALLED_APPS=installed,
        ROOT_URLCONF="example_project.urls",
        TEMPLATES=_templates(),
        LANGUAGES=LANGUAGES,
        LOCALE_PATHS=[TEMPLATES_DIR.parent / "locale"],
        LOGIN_URL="login",
        LOGIN_REDIRECT_URL="django_eid:start",
        LOGOUT_REDIRECT_URL="home",
        AUTHENTICATION_BACKENDS=[
            "django.contrib.auth.backends.ModelBackend",
            "django_eid.backends.EidBackend",
        ],
        DJANGO_EID=eid_settings_for(broker_url),
    )
    overrides.enable()
    profile: Any = None
    try:
        # Importable only now that the app is installed.
        from example_project.accounts.models import Profile

        profile = Profile
        with connection.schema_editor() as editor:
            editor.create_model(Profile)
        try:
            yield
        finally:
            with connection.schema_editor() as editor:
                editor.delete_model(Profile)
    finally:
        # Undo what the app's ready() and admin autodiscovery did.
        identification_succeeded.disconnect(sender=Identification, dispatch_uid=DISPATCH_UID)
        identification_verifying.disconnect(sender=Identification, dispatch_uid=RULE_DISPATCH_UID)
        if profile is not None and admin.site.is_registered(profile):
            admin.site.unregister(profile)
        overrides.disable()
