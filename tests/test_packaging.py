"""The distribution: what ``python -m build`` produces, and that the wheel works on its own.

Builds the sdist and the wheel once (into a temporary directory), checks them with
``twine check --strict``, inspects the wheel's file list against the source tree,
then installs the wheel into a fresh virtual environment and runs
``python -m django check`` there against a minimal site that uses it.

Slow (about a minute, most of it pip installing Django and cryptography into the
new environment): deselect with ``-m "not packaging"``.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tarfile
import textwrap
import zipfile
from dataclasses import dataclass
from email.parser import Parser
from pathlib import Path

import pytest

import django_eid
from tests.test_versions import DJANGOS, PYTHONS

pytestmark = pytest.mark.packaging

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "django_eid"
LANGUAGES = ("nb", "sv", "da", "fi")
#: Top-level folders of the repository that must never reach the wheel.
NOT_SHIPPED = ("tests/", "example_project/", "benchmarks/", "docs/")


@dataclass(frozen=True)
class Dists:
    wheel: Path
    sdist: Path

    def wheel_names(self) -> set[str]:
        with zipfile.ZipFile(self.wheel) as archive:
            return set(archive.namelist())

    def wheel_metadata(self) -> dict[str, str]:
        with zipfile.ZipFile(self.wheel) as archive:
            name = next(n for n in archive.namelist() if n.endswith(".dist-info/METADATA"))
            message = Parser().parsestr(archive.read(name).decode())
        return {key: str(value) for key, value in message.items()}

    def wheel_text(self, suffix: str) -> str:
        with zipfile.ZipFile(self.wheel) as archive:
            name = next(n for n in archive.namelist() if n.endswith(suffix))
            return archive.read(name).decode()


def run(*args: str | Path, cwd: Path, env: dict[str, str] | None = None) -> str:
    """Run a command; on failure, fail the test with its output."""
    result = subprocess.run(  # noqa: S603  (our own fixed commands)
        [str(a) for a in args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    if result.returncode != 0:
        pytest.fail(
            f"{' '.join(map(str, args))} exited {result.returncode}\n"
            f"--- stdout\n{result.stdout}\n--- stderr\n{result.stderr}"
        )
    return result.stdout


def clean_env(**extra: str) -> dict[str, str]:
    """The environment without anything that would point Python back at the source tree."""
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("PYTHONPATH", "DJANGO_SETTINGS_MODULE", "VIRTUAL_ENV", "PYTHONHOME")
    }
    env.update(extra)
    return env


@pytest.fixture(scope="module")
def dists(tmp_path_factory: pytest.TempPathFactory) -> Dists:
    out = tmp_path_factory.mktemp("dist")
    # Without --sdist/--wheel, build makes the sdist and then the wheel *from the sdist*,
    # so this also proves the sdist holds everything the wheel needs.
    run(sys.executable, "-m", "build", "--outdir", out, ROOT, cwd=ROOT, env=clean_env())
    (wheel,) = out.glob("django_eid-*.whl")
    (sdist,) = out.glob("django_eid-*.tar.gz")
    return Dists(wheel=wheel, sdist=sdist)


def shipped_source_files() -> set[str]:
    """Files under ``django_eid/`` that the wheel must carry (all but bytecode and .po)."""
    names = set()
    for path in PACKAGE.rglob("*"):
        if not path.is_file() or "__pycache__" in path.parts:
            continue
        if path.suffix in (".pyc", ".po") or path.name.endswith("~"):
            continue
        names.add(path.relative_to(ROOT).as_posix())
    return names


def test_twine_accepts_the_sdist_and_the_wheel(dists: Dists) -> None:
    output = run(
        sys.executable, "-m", "twine", "check", "--strict", dists.sdist, dists.wheel, cwd=ROOT
    )
    assert output.count("PASSED") == 2, output


def test_one_version_string(dists: Dists) -> None:
    assert dists.wheel_metadata()["Version"] == django_eid.__version__
    assert dists.wheel.name == f"django_eid-{django_eid.__version__}-py3-none-any.whl"
    assert dists.sdist.name == f"django_eid-{django_eid.__version__}.tar.gz"


def test_the_metadata_states_what_is_supported(dists: Dists) -> None:
    metadata = dists.wheel_text(".dist-info/METADATA")
    assert f"Requires-Python: >={PYTHONS[0]}" in metadata
    for version in DJANGOS:
        assert f"Classifier: Framework :: Django :: {version}" in metadata
    for version in PYTHONS:
        assert f"Classifier: Programming Language :: Python :: {version}" in metadata
    assert "Description-Content-Type: text/markdown" in metadata
    requires = [line for line in metadata.splitlines() if line.startswith("Requires-Dist:")]
    runtime = [line for line in requires if "extra ==" not in line]
    assert sorted(line.split()[1].split(">")[0].split("=")[0].lower() for line in runtime) == [
        "cryptography",
        "django",
        "joserfc",
        "requests",
    ]


def test_the_wheel_holds_the_whole_package(dists: Dists) -> None:
    names = dists.wheel_names()
    missing = shipped_source_files() - names
    assert not missing, f"not in the wheel: {sorted(missing)}"
    for required in (
        "django_eid/py.typed",
        # The JSON API serves its OpenAPI document from the package.
        "django_eid/openapi.json",
        "django_eid/migrations/0001_initial.py",
        "django_eid/templates/django_eid/base.html",
        "django_eid/templates/django_eid/start.html",
        "django_eid/templates/django_eid/iframe.html",
        "django_eid/templates/django_eid/error.html",
        *(f"django_eid/locale/{lang}/LC_MESSAGES/django.mo" for lang in LANGUAGES),
    ):
        assert required in names
    sandbox_templates = [n for n in names if n.startswith("django_eid/sandbox/templates/")]
    assert sandbox_templates, "the sandbox's templates are missing"


def test_the_wheel_holds_nothing_else(dists: Dists) -> None:
    names = dists.wheel_names()
    outside = sorted(n for n in names if not n.startswith(("django_eid/", "django_eid-")))
    assert not outside, outside
    assert not [n for n in names if n.startswith(NOT_SHIPPED)]
    assert not [n for n in names if n.endswith((".po", ".pyc")) or "__pycache__" in n]


def test_the_pytest_plugin_is_registered(dists: Dists) -> None:
    entry_points = dists.wheel_text(".dist-info/entry_points.txt")
    assert "[pytest11]" in entry_points
    assert "django_eid = django_eid.testing" in entry_points


def test_the_sdist_builds_the_docs_and_runs_the_tests(dists: Dists) -> None:
    with tarfile.open(dists.sdist) as archive:
        names = {n.split("/", 1)[1] for n in archive.getnames() if "/" in n}
    for required in ("README.md", "CHANGELOG.md", "LICENSE", "pyproject.toml", "mkdocs.yml"):
        assert required in names
    assert "docs/index.md" in names
    assert "tests/settings.py" in names
    for lang in LANGUAGES:
        assert f"django_eid/locale/{lang}/LC_MESSAGES/django.po" in names


SITE_SETTINGS = """
    SECRET_KEY = "packaging-test-secret-key-0123456789abcdefghijklmnop"
    DEBUG = True
    ALLOWED_HOSTS = ["testserver"]
    USE_TZ = True
    LANGUAGE_CODE = "en"
    ROOT_URLCONF = "eid_site_urls"
    INSTALLED_APPS = [
        "django.contrib.admin",
        "django.contrib.auth",
        "django.contrib.contenttypes",
        "django.contrib.sessions",
        "django.contrib.messages",
        "django_eid",
        "django_eid.sandbox",
    ]
    MIDDLEWARE = [
        "django.contrib.sessions.middleware.SessionMiddleware",
        "django.middleware.locale.LocaleMiddleware",
        "django.middleware.common.CommonMiddleware",
        "django.middleware.csrf.CsrfViewMiddleware",
        "django.contrib.auth.middleware.AuthenticationMiddleware",
        "django.contrib.messages.middleware.MessageMiddleware",
    ]
    TEMPLATES = [
        {
            "BACKEND": "django.template.backends.django.DjangoTemplates",
            "APP_DIRS": True,
            "OPTIONS": {
                "context_processors": [
                    "django.template.context_processors.request",
                    "django.contrib.auth.context_processors.auth",
                    "django.contrib.messages.context_processors.messages",
                ]
            },
        }
    ]
    DATABASES = {"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": "db.sqlite3"}}
    DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
    DJANGO_EID = {
        "CLIENT_ID": "sandbox-client",
        "CLIENT_SECRET": "sandbox-secret",
        "BASE_URL": "http://127.0.0.1:8000/eid-sandbox",
        "AUTH_URL": "http://127.0.0.1:8000/eid-sandbox",
    }
"""

SITE_URLS = """
    from django.contrib import admin
    from django.urls import include, path

    urlpatterns = [
        path("admin/", admin.site.urls),
        path("eid/", include("django_eid.urls")),
        path("eid-sandbox/", include("django_eid.sandbox.urls")),
    ]
"""

# Run inside the new environment: the package comes from site-packages, its templates
# render, its compiled translations and its OpenAPI document load.
SMOKE = """
    import django
    django.setup()
    import django_eid
    from django.template.loader import get_template
    from django.utils import translation

    assert "site-packages" in django_eid.__file__, django_eid.__file__
    for name in ("base", "start", "iframe", "error", "frame_exit", "interstitial"):
        get_template(f"django_eid/{name}.html")
    for lang in ("nb", "sv", "da", "fi"):
        with translation.override(lang):
            text = translation.gettext("Verify my identity")
        assert text != "Verify my identity", (lang, text)
    from django_eid.api import openapi_document
    assert openapi_document()["openapi"].startswith("3.1"), "the OpenAPI document is missing"
    print("ok", django_eid.__version__)
"""


def test_the_wheel_installs_and_passes_django_check(
    dists: Dists, tmp_path_factory: pytest.TempPathFactory
) -> None:
    site = tmp_path_factory.mktemp("site")
    (site / "eid_site_settings.py").write_text(textwrap.dedent(SITE_SETTINGS))
    (site / "eid_site_urls.py").write_text(textwrap.dedent(SITE_URLS))
    (site / "smoke.py").write_text(textwrap.dedent(SMOKE))
    venv = site / "venv"
    run(sys.executable, "-m", "venv", venv, cwd=site, env=clean_env())
    python = venv / ("Scripts/python.exe" if os.name == "nt" else "bin/python")
    run(python, "-m", "pip", "install", "--quiet", dists.wheel, cwd=site, env=clean_env())

    # cwd is the site folder, never the repository: django_eid must come from the wheel.
    env = clean_env(DJANGO_SETTINGS_MODULE="eid_site_settings", PYTHONPATH=str(site))
    output = run(python, "-m", "django", "check", "--fail-level", "WARNING", cwd=site, env=env)
    assert "System check identified no issues" in output
    run(python, "-m", "django", "migrate", "--verbosity", "0", cwd=site, env=env)
    assert run(python, "smoke.py", cwd=site, env=env).strip() == f"ok {django_eid.__version__}"
