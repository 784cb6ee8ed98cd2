"""What the privacy tests share: everything a log capture holds, and a browser to look for."""

from __future__ import annotations

import pytest

#: A browser's User-Agent (the test client sends none unless given, and REMOTE_ADDR
#: 127.0.0.1), distinctive enough to look for in what is stored.
USER_AGENT = "Mozilla/5.0 (X11; Linux x86_64) PrivacySuite/1.0"


def everything_logged(caplog: pytest.LogCaptureFixture) -> str:
    """Every message, its arguments and any traceback, as text."""
    parts = [caplog.text]
    for entry in caplog.records:
        parts += [entry.getMessage(), repr(entry.args), entry.exc_text or ""]
    return "\n".join(parts)
