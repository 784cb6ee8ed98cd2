"""The supported Python and Django versions are stated alike everywhere.

The classifiers of pyproject.toml are the one source; ``requires-python``, the Django
dependency, the tox matrix, the lowest Python of ruff and mypy, the README's table and the
documentation's index must agree with them. ``.ci/pythons.sh`` finds the matrix's
interpreters or names the missing ones.
"""

from __future__ import annotations

import configparser
import os
import re
import subprocess
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))


def key(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in version.split("."))


def classified(prefix: str) -> list[str]:
    """The versions of the classifiers ``<prefix> :: X.Y``, oldest first."""
    versions = [
        c.removeprefix(f"{prefix} :: ")
        for c in PYPROJECT["project"]["classifiers"]
        if re.fullmatch(rf"{re.escape(prefix)} :: \d+\.\d+", c)
    ]
    return sorted(versions, key=key)


PYTHONS = classified("Programming Language :: Python")
DJANGOS = classified("Framework :: Django")


def tox_ini() -> configparser.ConfigParser:
    config = configparser.ConfigParser(interpolation=None)
    config.read(ROOT / "tox.ini", encoding="utf-8")
    return config


def tox_envs() -> list[tuple[str, str]]:
    """``[(python, django)]`` of tox.ini's env_list, e.g. ``("3.13", "6.1")``."""
    envs = []
    for name in re.split(r"[,\s]+", tox_ini()["tox"]["env_list"].strip()):
        match = re.fullmatch(r"py(\d)(\d+)-django(\d)(\d+)", name)
        assert match, f"tox env {name!r} is not pyXY-djangoAB"
        py_major, py_minor, dj_major, dj_minor = match.groups()
        envs.append((f"{py_major}.{py_minor}", f"{dj_major}.{dj_minor}"))
    return envs


def named_versions(text: str) -> list[str]:
    return re.findall(r"\b\d+\.\d+\b", text)


def test_the_classifiers_name_the_supported_versions() -> None:
    assert len(PYTHONS) >= 1
    assert len(DJANGOS) >= 1


def test_requires_python_is_the_oldest_supported_python() -> None:
    assert PYPROJECT["project"]["requires-python"] == f">={PYTHONS[0]}"


def test_the_django_dependency_starts_at_the_oldest_supported_django() -> None:
    django = [d for d in PYPROJECT["project"]["dependencies"] if d.lower().startswith("django")]
    assert django == [f"Django>={DJANGOS[0]}"]


def test_ruff_and_mypy_check_for_the_oldest_supported_python() -> None:
    assert PYPROJECT["tool"]["ruff"]["target-version"] == "py" + PYTHONS[0].replace(".", "")
    assert PYPROJECT["tool"]["mypy"]["python_version"] == PYTHONS[0]


def test_the_tox_matrix_runs_each_supported_django_and_each_supported_python() -> None:
    envs = tox_envs()
    assert {python for python, _ in envs} == set(PYTHONS)
    assert {django for _, django in envs} == set(DJANGOS)


def test_each_tox_environment_pins_its_django_to_its_feature_release() -> None:
    deps = dict(
        line.strip().split(": ", 1)
        for line in tox_ini()["testenv"]["deps"].strip().splitlines()
        if line.strip()
    )
    for django in DJANGOS:
        pin = deps.get("django" + django.replace(".", ""))
        assert pin, f"tox.ini has no deps line for Django {django}"
        match = re.fullmatch(r"Django>=(\d+\.\d+),<(\d+\.\d+)", pin)
        assert match, pin
        assert match.group(1) == django
        assert key(match.group(2)) > key(django)


def test_the_readme_table_states_the_supported_versions() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split("## Supported versions", 1)[1].split("\n## ", 1)[0]
    rows = dict(re.findall(r"^\| (Python|Django) \| (.+) \|$", section, re.MULTILINE))
    assert named_versions(rows["Python"]) == PYTHONS
    assert named_versions(rows["Django"]) == DJANGOS


def test_the_documentation_states_the_supported_versions() -> None:
    index = (ROOT / "docs" / "index.md").read_text(encoding="utf-8")
    section = index.split("## Supported versions", 1)[1].split("\n## ", 1)[0]
    first_sentence = section.strip().split(". ", 1)[0]
    python, django = first_sentence.split(";")
    assert named_versions(python) == PYTHONS
    assert named_versions(django) == DJANGOS


# -- .ci/pythons.sh -------------------------------------------------------------------------------

SYSTEM_PATH = "/usr/bin:/bin"


def pythons_sh(tmp_path: Path, *command: str) -> subprocess.CompletedProcess[str]:
    """Run .ci/pythons.sh with only the system's PATH and an empty or fake pyenv in tmp_path."""
    env = {
        "HOME": str(tmp_path),
        "PATH": SYSTEM_PATH,
        "PYENV_ROOT": str(tmp_path / "pyenv"),
        "EID_PYTHONS_DIR": str(tmp_path / "links"),
    }
    return subprocess.run(  # noqa: S603  (our own script)
        ["/bin/bash", str(ROOT / ".ci" / "pythons.sh"), *command],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def on_system_path(version: str) -> bool:
    return any(os.access(Path(d) / f"python{version}", os.X_OK) for d in SYSTEM_PATH.split(":"))


def test_pythons_sh_names_each_python_it_cannot_find(tmp_path: Path) -> None:
    missing = [v for v in PYTHONS if not on_system_path(v)]
    if not missing:
        pytest.skip(f"every supported Python is in {SYSTEM_PATH} here")
    done = pythons_sh(tmp_path, "true")
    assert done.returncode == 1, done
    error = next(line for line in done.stderr.splitlines() if "ERROR" in line)
    assert named_versions(error.split("not found")[0]) == missing


def test_pythons_sh_finds_pyenvs_interpreters_and_puts_them_on_path(tmp_path: Path) -> None:
    fakes = {}
    for version in PYTHONS:
        bin_dir = tmp_path / "pyenv" / "versions" / f"{version}.1" / "bin"
        bin_dir.mkdir(parents=True)
        fake = bin_dir / f"python{version}"
        fake.write_text("#!/bin/sh\nexit 0\n")
        fake.chmod(0o755)
        fakes[version] = fake
    names = " ".join(f"python{v}" for v in PYTHONS)
    done = pythons_sh(tmp_path, "/bin/sh", "-c", f"for p in {names}; do command -v $p; done")
    assert done.returncode == 0, done
    found = dict(zip(PYTHONS, done.stdout.split(), strict=True))
    for version, fake in fakes.items():
        # One on the system's PATH comes first; pyenv's only stands in for a missing one.
        if not on_system_path(version):
            assert os.path.realpath(found[version]) == str(fake)
