"""Running a management command as a test does."""

from __future__ import annotations

from io import StringIO

from django.core.management import call_command


def run(command: str, *args: str) -> str:
    """What ``command`` writes to its standard output (a ``CommandError`` propagates)."""
    out = StringIO()
    call_command(command, *args, stdout=out)
    return out.getvalue()
