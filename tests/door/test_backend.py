"""``EidBackend`` beside the site's other backends, and the default adapter with a user model
that has no username. What needs another ``INSTALLED_APPS`` or ``AUTH_USER_MODEL`` runs in
a fresh interpreter: Django reads them once, when it sets up."""

from __future__ import annotations

import datetime
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any, ClassVar

import pytest
from django.contrib.auth import authenticate
from django.contrib.auth.models import AbstractBaseUser
from django.test import RequestFactory
from django.utils import timezone

from django_eid.backends import EidBackend
from django_eid.models import Identification, LinkedIdentity
from django_eid.person_keys import uid_key

ROOT = Path(__file__).resolve().parents[2]

Status = Identification.Status


def door_row(user: Any, **fields: Any) -> Identification:
    """A login's identification as it finishes: verified at the door, bound to ``user``,
    the person linked to it."""
    values: dict[str, Any] = {
        "user": user,
        "purpose": "login",
        "status": Status.SUCCESS,
        "completed_at": timezone.now(),
        "identity_provider": "NO_BANKID_WEB",
        "identity_provider_unique_id": "pid-1",
        **fields,
    }
    row = Identification.objects.create(**values)
    key = uid_key(row)
    if user is not None and key is not None:
        LinkedIdentity.objects.get_or_create(key=key, defaults={"user": user})
    return row


@pytest.mark.django_db
def test_the_backend_answers_only_a_fresh_verified_identification_at_the_door(
    alice: AbstractBaseUser,
) -> None:
    request = RequestFactory().get("/")
    assert authenticate(request, identification=door_row(alice)) == alice
    old = timezone.now() - datetime.timedelta(hours=2)
    refused = [
        door_row(alice, purpose="verify"),
        door_row(alice, status=Status.REJECTED),
        door_row(alice, completed_at=old),
        door_row(alice, anonymized_at=timezone.now()),
        door_row(None),
        "not an identification",
    ]
    assert [authenticate(request, identification=row) for row in refused] == [None] * 6
    # The person's link removed since (by the account's owner): no login by it.
    row = door_row(alice)
    LinkedIdentity.objects.all().delete()
    assert authenticate(request, identification=row) is None
    # Another backend's credentials are not the eID's, and passwords still work beside it.
    assert EidBackend().authenticate(request, username="alice", password="pw-alice") is None
    assert authenticate(request, username="alice", password="pw-alice") == alice


@pytest.mark.django_db
def test_an_inactive_user_is_not_authenticated_nor_kept_logged_in(
    alice: AbstractBaseUser,
) -> None:
    row = door_row(alice)
    alice.is_active = False
    alice.save()
    assert authenticate(RequestFactory().get("/"), identification=row) is None
    assert EidBackend().get_user(alice.pk) is None


@pytest.mark.django_db
def test_a_row_bound_to_another_user_since_it_was_read_does_not_log_in(
    alice: AbstractBaseUser, bob: AbstractBaseUser
) -> None:
    row = door_row(alice)
    Identification.objects.filter(pk=row.pk).update(user=bob)
    assert authenticate(RequestFactory().get("/"), identification=row) is None


def run_child(code: str) -> dict[str, Any]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("DJANGO_SETTINGS_MODULE", None)
    done = subprocess.run(  # noqa: S603 - this interpreter, our own code
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=ROOT, timeout=120
    )
    assert done.returncode == 0, done.stderr
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


SETUP = """
import json
from django.conf import settings
settings.configure(
    INSTALLED_APPS=[
        "django.contrib.contenttypes", "django.contrib.auth", "django.contrib.sessions",
        "django_eid", {apps}
    ],
    AUTH_USER_MODEL={user_model!r},
    AUTHENTICATION_BACKENDS={backends!r},
    DATABASES={{"default": {{"ENGINE": "django.db.backends.sqlite3", "NAME": ":memory:"}}}},
    USE_TZ=True,
    SECRET_KEY="child-secret-key-not-for-production-0123456789",
    DEFAULT_AUTO_FIELD="django.db.models.BigAutoField",
    MIDDLEWARE={middleware!r},
    DJANGO_EID={{"CLIENT_ID": "c", "CLIENT_SECRET": "s", "BASE_URL": "https://api.broker.test",
                "AUTH_URL": "https://auth.broker.test", "SIGNUP": {signup!r}}},
)
import django
django.setup()
from django.core.management import call_command
call_command("migrate", run_syncdb=True, verbosity=0)
from django.contrib.auth import authenticate, get_user_model, login
from django.contrib.sessions.backends.db import SessionStore
from django.test import RequestFactory
from django.utils import timezone
from django_eid.models import Identification

from django.contrib.auth.models import AnonymousUser
from django_eid.models import LinkedIdentity
from django_eid.person_keys import uid_key

def door_row(user, **fields):
    row = Identification.objects.create(
        user=user, purpose="login", status="SUCCESS", completed_at=timezone.now(),
        identity_provider="NO_BANKID_WEB", identity_provider_unique_id="pid-1",
        first_name="Kari", last_name="Nordmann", name="Kari Nordmann", **fields)
    if user is not None:
        LinkedIdentity.objects.get_or_create(key=uid_key(row), defaults={{"user": user}})
    return row

def request():
    made = RequestFactory().get("/")
    made.session = SessionStore()
    made.user = AnonymousUser()
    return made
"""


@pytest.mark.own_process
def test_the_backend_works_beside_allauth_s() -> None:
    """django-allauth installed, its backend before django-eid's: each logs in its own way,
    and Django's login() keeps the backend that authenticated."""
    code = (
        SETUP.format(
            apps='"allauth", "allauth.account",',
            user_model="auth.User",
            backends=[
                "django.contrib.auth.backends.ModelBackend",
                "allauth.account.auth_backends.AuthenticationBackend",
                "django_eid.backends.EidBackend",
            ],
            signup="closed",
            middleware=["allauth.account.middleware.AccountMiddleware"],
        )
        + """
kari = get_user_model().objects.create_user("kari", "kari@example.com", "pw-kari-1")
by_eid = request()
user = authenticate(by_eid, identification=door_row(kari))
login(by_eid, user)
by_password = request()
other = authenticate(by_password, username="kari", password="pw-kari-1")
print(json.dumps({
    "eid": [user.pk, by_eid.session["_auth_user_backend"]],
    "password": [other.pk, other.backend],
    "allauth_eid": authenticate(request(), identification="x"),
}))
"""
    )
    result = run_child(code)
    assert result["eid"] == [1, "django_eid.backends.EidBackend"]
    assert result["password"][0] == 1
    assert result["password"][1] != "django_eid.backends.EidBackend"
    assert result["allauth_eid"] is None


@pytest.mark.own_process
def test_the_default_adapter_signs_up_a_user_model_without_a_username() -> None:
    """``email_users.Person``: the e-mail address is the username; the form asks for it,
    "auto" cannot make one up (check W028), and logs nobody in half-made."""
    code = (
        SETUP.format(
            apps='"tests.email_users",',
            user_model="email_users.Person",
            backends=["django_eid.backends.EidBackend"],
            signup="form",
            middleware=[],
        )
        + """
from django.test import override_settings
from django_eid.adapter import DefaultAdapter
from django_eid.forms import SignupForm
from django_eid.flows import signup
from django_eid.validation import problems
row = door_row(None)
form = SignupForm({"email": "kari@example.com"}, identification=row)
valid = form.is_valid()
user = signup.sign_up(row, adapter=DefaultAdapter(), form=form)
twice = SignupForm({"email": "KARI@example.com"}, identification=door_row(None, reference="r" * 32))
with override_settings(DJANGO_EID={**settings.DJANGO_EID, "SIGNUP": "auto"}):
    auto_open = DefaultAdapter().is_open_for_signup(None, row)
    warned = [p.id for p in problems()]
print(json.dumps({
    "fields": sorted(form.fields), "valid": valid, "email": user.email,
    "password": user.has_usable_password(), "bound": Identification.objects.get(pk=row.pk).user_id == user.pk,
    "linked": user.eid_links.count(), "twice": twice.is_valid(), "auto_open": auto_open,
    "W028": "django_eid.W028" in warned,
}))
"""
    )
    result = run_child(code)
    assert result == {
        "fields": ["email"],
        "valid": True,
        "email": "kari@example.com",
        "password": False,
        "bound": True,
        "linked": 1,
        "twice": False,
        "auto_open": False,
        "W028": True,
    }


class StaffStaysOut(EidBackend):
    """A site's subclass: no eID logins for staff."""

    calls: ClassVar[list[Any]] = []

    def authenticate(self, request: Any, identification: object = None, **kwargs: Any) -> Any:
        user = super().authenticate(request, identification, **kwargs)
        type(self).calls.append(user)
        return None if user is not None and user.is_staff else user


@pytest.mark.django_db
def test_a_site_s_subclass_decides_every_login(
    alice: AbstractBaseUser,
    verify: Any,
    identify_at_door: Any,
    visitor: Any,
    settings: Any,
) -> None:
    """Also the login this very request finished: the backend is asked, not skipped."""
    settings.AUTHENTICATION_BACKENDS = [
        "django.contrib.auth.backends.ModelBackend",
        f"{__name__}.StaffStaysOut",
    ]
    verify()
    alice.is_staff = True
    alice.save()
    StaffStaysOut.calls.clear()
    _started, response = identify_at_door()
    assert StaffStaysOut.calls == [alice]
    assert response.status_code == 403
    assert "_auth_user_id" not in visitor.session
