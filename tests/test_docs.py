"""The documentation matches the code: every setting, check id, command, signal, URL name,
model field and exception is documented, the README's links and pictures exist, and every
test the documentation names as proof is where it says.

(``mkdocs build --strict`` in ``make test`` catches broken links inside ``docs/``; this
catches what the code has and the documentation forgot.)
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from django.dispatch import Signal
from django.urls import URLPattern

import django_eid
from django_eid import exceptions, signals
from django_eid.conf import DEFAULTS
from django_eid.models import Identification, PersonClaim

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = Path(django_eid.__file__).resolve().parent
DOCS = ROOT / "docs"
README = (ROOT / "README.md").read_text(encoding="utf-8")
REQUIRED = {"CLIENT_ID", "CLIENT_SECRET", "BASE_URL", "AUTH_URL"}


def doc(name: str) -> str:
    return (DOCS / name).read_text(encoding="utf-8")


def headings(text: str) -> set[str]:
    """The code spans that are a whole heading: ``### `NAME` ``."""
    return set(re.findall(r"^#{2,4} `([^`]+)`\s*$", text, flags=re.MULTILINE))


def shown(value: Any) -> str:
    """A default as the documentation writes it."""
    if isinstance(value, str):
        return f'"{value}"'
    if isinstance(value, tuple):
        items = ", ".join(shown(v) for v in value)
        return f"({items},)" if len(value) == 1 else f"({items})"
    return repr(value)


def readme_settings() -> dict[str, str]:
    """README settings table: key -> default cell."""
    rows = re.findall(r"^\| `([A-Z_]+)` \| [^|]+ \| ([^|]+) \|", README, flags=re.MULTILINE)
    return {key: default.strip() for key, default in rows}


def test_the_readme_table_lists_every_setting_with_its_default() -> None:
    table = readme_settings()
    assert set(table) == set(DEFAULTS)
    for key, value in DEFAULTS.items():
        expected = "required" if key in REQUIRED else f"`{shown(value)}`"
        # A default that follows BROKER_API says so after the value.
        assert table[key] == expected or table[key].startswith(expected + " "), key


def test_the_settings_reference_documents_every_setting() -> None:
    text = doc("reference/settings.md")
    assert headings(text) == set(DEFAULTS)
    row = r"^\| \[`([A-Z_]+)`\]\(#[a-z_]+\) \| [^|]+ \| ([^|]+) \|"
    summary = dict(re.findall(row, text, flags=re.MULTILINE))
    assert set(summary) == set(DEFAULTS)
    for key, value in DEFAULTS.items():
        expected = "required" if key in REQUIRED else f"`{shown(value)}`"
        assert summary[key].strip().startswith(expected), key


def check_ids() -> set[str]:
    """Every system check id the code can emit (some are built from tuples of suffixes)."""
    ids = set()
    for path in (
        PACKAGE / "validation.py",
        PACKAGE / "checks.py",
        PACKAGE / "sandbox" / "checks.py",
    ):
        source = path.read_text(encoding="utf-8")
        ids |= {f"django_eid.{m}" for m in re.findall(r"\b([EW]\d{3})\b", source)}
    return ids


def test_the_checks_reference_lists_every_check_id() -> None:
    ids = check_ids()
    assert len(ids) > 20
    assert headings(doc("reference/checks.md")) == ids


def test_the_commands_reference_lists_every_command() -> None:
    commands = {
        p.stem for p in (PACKAGE / "management" / "commands").glob("*.py") if p.stem != "__init__"
    }
    assert {"eid_check", "eid_purge", "eid_reencrypt"} <= commands
    assert headings(doc("reference/commands.md")) == commands


def test_the_signals_reference_lists_every_signal() -> None:
    names = {n for n, v in vars(signals).items() if isinstance(v, Signal)}
    assert len(names) == 7
    assert names <= headings(doc("reference/signals.md"))


def test_the_exceptions_reference_lists_every_exception() -> None:
    names = {
        n
        for n, v in vars(exceptions).items()
        if isinstance(v, type) and issubclass(v, Exception) and v.__module__ == exceptions.__name__
    }
    assert names <= headings(doc("reference/exceptions.md"))


def test_the_urls_reference_lists_every_url_name() -> None:
    from django_eid import urls

    names = {p.name for p in urls.urlpatterns if isinstance(p, URLPattern)}
    text = doc("reference/urls.md")
    for name in names:
        assert f"`django_eid:{name}`" in text, name


def test_the_model_reference_lists_every_field() -> None:
    text = doc("reference/models.md")
    for model in (Identification, PersonClaim):
        fields = {f.name for f in model._meta.get_fields() if f.concrete}
        missing = {f for f in fields - {"id"} if f"`{f}`" not in text}
        assert not missing, model
    assert "## `PersonClaim`" in text
    for status in Identification.Status:
        assert f"| `{status.value}` | {status.label} |" in text


def local_links(text: str) -> set[str]:
    targets = re.findall(r"\]\(([^)\s]+)\)", text)
    return {t.split("#")[0] for t in targets if not re.match(r"^[a-z]+:", t) and t[0] != "#"}


@pytest.mark.parametrize(
    "source", sorted(DOCS.rglob("*.md")), ids=lambda p: str(p.relative_to(ROOT))
)
def test_links_and_pictures_exist(source: Path) -> None:
    # mkdocs checks links between pages, but not images.
    missing = [
        target
        for target in local_links(source.read_text(encoding="utf-8"))
        if not (source.parent / target).exists()
    ]
    assert not missing, f"{source.relative_to(ROOT)} links to missing files: {missing}"


def repository_url() -> str:
    """``[project.urls] Source`` of pyproject.toml (read with a pattern: no tomllib on 3.10)."""
    pyproject = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    match = re.search(r'^Source = "(https://github\.com/[^"]+)"$', pyproject, flags=re.MULTILINE)
    assert match, "pyproject.toml names no Source URL"
    return match.group(1)


def test_the_readme_links_absolutely_to_files_that_exist() -> None:
    # The README is the long description on PyPI, where relative links lead nowhere.
    assert not local_links(README), "relative links in README.md"
    owner_repo = repository_url().removeprefix("https://github.com/")
    page = f"https://github.com/{owner_repo}/blob/main/"
    raw = f"https://raw.githubusercontent.com/{owner_repo}/main/"
    targets = {t.split("#")[0] for t in re.findall(r"\]\((https://[^)\s]+)\)", README)}
    files = {t.removeprefix(page).removeprefix(raw) for t in targets if t.startswith((page, raw))}
    assert len(files) > 20
    missing = [f for f in files if not (ROOT / f).exists()]
    assert not missing, f"README.md links to missing files: {missing}"
    # A picture shows on PyPI only from the raw URL, not from GitHub's page of the file.
    pictures = re.findall(r"!\[[^]]*\]\(([^)\s]+)\)", README)
    assert pictures
    assert all(p.startswith(raw) for p in pictures), pictures


#: A path under ``tests/`` (a folder, a test file or another file), and for a file the test
#: after ``::`` (``tests/flow/test_start.py::test_a_get_never_starts_a_session``); a bare
#: ``test_x.py`` without its folders is caught too, as a path the reader cannot follow.
TEST_REFERENCE = re.compile(r"(?<![\w/.-])((?:[\w.-]+/)*test_\w+\.py|tests/[\w./-]*)((?:::\w+)*)")


def prose_lines(source: Path) -> list[tuple[int, str]]:
    """The lines of a page outside Python code blocks (those are the reader's own code, e.g.
    the testing guide's ``# tests/test_verification.py``); console blocks are kept."""
    lines, fence = [], None
    for number, line in enumerate(source.read_text(encoding="utf-8").splitlines(), 1):
        stripped = line.strip()
        if stripped.startswith("```"):
            fence = None if fence is not None else stripped[3:].strip() or "text"
            continue
        if fence not in ("python", "py", "pycon"):
            lines.append((number, line))
    return lines


def defines(path: Path, names: list[str]) -> bool:
    """``path`` defines ``names[-1]`` as a (maybe async) function, inside classes ``names[:-1]``."""
    text = path.read_text(encoding="utf-8")
    *classes, function = names
    return all(
        re.search(rf"^\s*class {name}\b", text, flags=re.MULTILINE) for name in classes
    ) and bool(re.search(rf"^\s*(?:async\s+)?def {function}\s*\(", text, flags=re.MULTILINE))


def test_every_test_the_documentation_names_exists() -> None:
    """A test named as proof (``tests/x/test_y.py::test_z``), a test file or a folder of
    tests in ``docs/**/*.md`` or README.md: the path from the repository's root exists, and
    the test is defined in that file. Read as text: nothing is imported or collected."""
    broken = []
    for source in [ROOT / "README.md", *sorted(DOCS.rglob("*.md"))]:
        for number, line in prose_lines(source):
            for match in TEST_REFERENCE.finditer(line):
                path, names = match.group(1).rstrip("."), match.group(2)
                where = f"{source.relative_to(ROOT)}:{number}: {path}{names}"
                if not path.startswith("tests/"):
                    broken.append(f"{where} (not a path from the repository's root)")
                elif not (ROOT / path).exists():
                    broken.append(f"{where} ({path} does not exist)")
                elif names and not defines(ROOT / path, names[2:].split("::")):
                    broken.append(f"{where} ({names[2:]} is not defined in {path})")
    assert not broken, "references to tests that are not there:\n" + "\n".join(broken)
