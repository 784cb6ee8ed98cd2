"""Without ``opentelemetry-api`` nothing changes and nothing of it is imported: an
identification in an interpreter where importing ``opentelemetry`` fails."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

CHILD = """
import os
import sys


class Uninstalled:
    # As if opentelemetry-api were not installed: any import of it fails.
    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] == "opentelemetry":
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None


sys.meta_path.insert(0, Uninstalled())
os.environ["DJANGO_SETTINGS_MODULE"] = "tests.settings"
os.environ.pop("DATABASE_URL", None)
import django

django.setup()
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.test import Client

from django_eid import telemetry
from django_eid.models import Identification
from django_eid.sandbox.fake import EidBroker

from django.apps import apps
from django.conf import settings

# The tables straight from the models, as pytest-django's --nomigrations: a second faster.
settings.MIGRATION_MODULES = {app.label: None for app in apps.get_app_configs()}
call_command("migrate", run_syncdb=True, verbosity=0)
assert telemetry.ENABLED is False and telemetry.enabled() is False
client = Client()
client.force_login(get_user_model().objects.create_user("kari"))
with EidBroker.from_settings() as broker:
    assert client.post("/eid/start/").status_code == 302
    assert client.get(broker.complete()).status_code == 302
    # The limits' refusal, and the audit trail's call, with nothing to record to.
    telemetry.refused("too_many_pending")
    telemetry.record_event(
        kind="started", finishing=False, status="PENDING", outcome="", purpose="verify", broker_api="v1",
        provider="", display="redirect", duration_ms=None,
    )
assert Identification.objects.get().status == "SUCCESS"
imported = sorted(m for m in sys.modules if m.partition(".")[0] == "opentelemetry")
assert imported == [], imported
print("identified without OpenTelemetry")
"""


@pytest.mark.own_process
def test_an_identification_without_opentelemetry_imports_none_of_it() -> None:
    done = subprocess.run(  # noqa: S603 - this interpreter, fixed arguments
        [sys.executable, "-c", CHILD],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip() == "identified without OpenTelemetry"
