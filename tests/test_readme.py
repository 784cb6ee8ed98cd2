"""The README's installation steps work as written.

A throwaway site is built from the README's own code blocks (the profile model, the
receiver, the app config and the test file, found by their ``# path`` first line) plus
the settings and URLs its steps describe, and the README's test is run against it with
the installed pytest plugin. A README edit that breaks a newcomer's install fails here.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
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


def fenced(language: str) -> list[str]:
    """The README's ``language`` blocks, dedented (those inside the steps are indented)."""
    pattern = rf"^( *)```{language}\n(.*?)^\1```"
    return [
        textwrap.dedent(m.group(2)) for m in re.finditer(pattern, README, re.MULTILINE | re.DOTALL)
    ]


def one_block(language: str, containing: str) -> str:
    (block,) = [b for b in fenced(language) if containing in b]
    return block


def run(args: list[str], cwd: Path, env: dict[str, str]) -> str:
    result = subprocess.run(  # noqa: S603  (our interpreter, the README's commands)
        [sys.executable, *args], cwd=cwd, env=env, capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, f"{args}:\n{result.stdout}\n{result.stderr}"
    return result.stdout


@pytest.mark.own_process
def test_a_new_project_following_the_readme_passes_the_readme_tests(tmp_path: Path) -> None:
    """What a newcomer does, from ``startproject`` to the README's test, with only the
    README's own code and commands: the project template's settings and URLs, the
    README's additions to them, its environment, migrations and pytest configuration."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DJANGO_", "EID_"))}
    env.pop("DATABASE_URL", None)
    env.pop("PYTHONPATH", None)
    env["PYTHONPATH"] = str(Path(__file__).resolve().parent.parent)  # this checkout's package
    run(["-m", "django", "startproject", "mysite"], tmp_path, env)
    site = tmp_path / "mysite"
    run(["manage.py", "startapp", "yourapp"], site, env)

    # The login page the README gives a new project.
    login = one_block("django", "registration/login.html")
    first, _, template = login.partition("\n")
    assert first == "{# yourapp/templates/registration/login.html #}"
    (site / "yourapp/templates/registration").mkdir(parents=True)
    (site / "yourapp/templates/registration/login.html").write_text(template, encoding="utf-8")
    login_route = 'path("accounts/", include("django.contrib.auth.urls"))'
    assert f"`{login_route}`" in README

    # Settings: the apps the README names, then step 4's block as written.
    assert '`"yourapp"` to `INSTALLED_APPS`' in README
    settings = site / "mysite/settings.py"
    text = settings.read_text(encoding="utf-8")
    assert re.search(r"^INSTALLED_APPS = \[$", text, re.MULTILINE)
    text = text.replace(
        "INSTALLED_APPS = [\n", 'INSTALLED_APPS = [\n    "yourapp",\n    "django_eid",\n'
    )
    text += "\n" + one_block("python", "DJANGO_EID = {")
    settings.write_text(text, encoding="utf-8")

    # URLs: every route of the README's urlpatterns blocks, with their imports.
    imports, routes = ["from django.urls import include"], [login_route]
    for block in fenced("python"):
        if "urlpatterns = [" in block:
            imports += re.findall(r"^from yourapp\.\S+ import \w+$", block, re.MULTILINE)
            routes += re.findall(r"^ +(path\(.*\)),$", block, re.MULTILINE)
    urls = site / "mysite/urls.py"
    text = urls.read_text(encoding="utf-8") + "\n" + "\n".join(imports) + "\n"
    text += "".join(f"urlpatterns.append({route})\n" for route in routes)
    urls.write_text(text, encoding="utf-8")

    # The files the README names, and pytest's configuration.
    for path, code in python_blocks().items():
        (site / path).parent.mkdir(parents=True, exist_ok=True)
        (site / path).write_text(code, encoding="utf-8")
    ini = one_block("ini", "[pytest]")
    first, _, ini = ini.partition("\n")
    assert first == "# pytest.ini"
    (site / "pytest.ini").write_text(ini, encoding="utf-8")

    # The environment of step 4, and every command in the README's order.
    exports = one_block("console", "export EID_CLIENT_ID")
    for name, value in re.findall(r"(EID_\w+)=(\S+)", exports):
        env[name] = value
    assert "python manage.py migrate\n" in fenced("console")  # step 5
    assert one_block("console", "makemigrations") == (
        "python manage.py makemigrations yourapp\npython manage.py migrate\n"
    )
    assert "no issues" in run(["manage.py", "check", "--fail-level", "WARNING"], site, env)
    run(["manage.py", "migrate"], site, env)
    run(["manage.py", "makemigrations", "yourapp"], site, env)
    run(["manage.py", "migrate"], site, env)
    output = run(["-m", "pytest", "-p", "no:cacheprovider", "-p", "no:randomly"], site, env)
    assert "3 passed" in output


@pytest.mark.own_process
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
