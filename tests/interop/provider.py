"""The test OpenID provider (:mod:`tests.interop.op_project`) as the tests drive it.

:class:`Provider` writes the provider's configuration, starts it as a process of its own on
a free loopback port over TLS (a certificate of a private CA), waits until its discovery
document answers, and stops it; :meth:`Provider.rotate` restarts it with a new signing key,
the old one kept in the JWKS as an inactive key.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import requests
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from tests.client.test_tls import Ca

ROOT = Path(__file__).resolve().parents[2]
#: Seconds the provider may take to answer its discovery document after it was started.
START_TIMEOUT = 30.0
#: The user at the provider, and the person behind it.
USERNAME = "kari.op"
PASSWORD = "op-password-1"
CLIENT_SECRET = "interop-client-secret-0123456789"
#: A request in the provider's log (Django's ``django.server`` lines).
LOGGED_REQUEST = re.compile(r'^"(GET|POST) (\S+) HTTP/1\.1" (\d{3}) ', re.MULTILINE)
#: The client id of each claim layout (``generic`` and each django-eid preset's).
LAYOUTS = ("generic", "idura", "signicat", "bankid-no", "vipps")


def client_id(layout: str) -> str:
    return f"django-eid-{layout}"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def rsa_key_pem() -> str:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    ).decode("ascii")


@dataclass
class Provider:
    """One test OpenID provider, its files in ``directory``."""

    directory: Path
    tls: Ca
    redirect_uri: str
    person: dict[str, str]
    port: int = field(default_factory=free_port)
    #: The signing keys' PEM files, the active one last.
    keys: list[Path] = field(default_factory=list)
    #: Django's SECRET_KEY of the provider (the same across a restart).
    secret_key: str = field(default_factory=lambda: secrets.token_urlsafe(40))
    starts: int = 0
    process: subprocess.Popen[bytes] | None = None

    @property
    def issuer(self) -> str:
        return f"https://127.0.0.1:{self.port}/o"

    @property
    def log(self) -> Path:
        return self.directory / "op.log"

    def new_key(self) -> None:
        path = self.directory / f"signing-{len(self.keys)}.pem"
        path.write_text(rsa_key_pem(), encoding="ascii")
        self.keys.append(path)

    def config(self) -> Path:
        path = self.directory / "op.json"
        values: dict[str, Any] = {
            "issuer": self.issuer,
            "secret_key": self.secret_key,
            "database": str(self.directory / "op.sqlite3"),
            "signing_key": str(self.keys[-1]),
            "inactive_keys": [str(key) for key in self.keys[:-1]],
            "tls": {"cert": str(self.tls.server_cert), "key": str(self.tls.server_key)},
            "clients": {client_id(layout): layout for layout in LAYOUTS},
            "client_secret": CLIENT_SECRET,
            "redirect_uri": self.redirect_uri,
            "user": {"username": USERNAME, "password": PASSWORD},
            "person": self.person,
        }
        path.write_text(json.dumps(values, indent=2), encoding="utf-8")
        return path

    def start(self) -> None:
        if not self.keys:
            self.new_key()
        self.starts += 1
        path = [str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(path)}
        env.pop("DJANGO_SETTINGS_MODULE", None)
        with self.log.open("ab") as log:
            log.write(f"--- start {self.starts} ---\n".encode())
            self.process = subprocess.Popen(  # noqa: S603 - this interpreter, our own module
                [
                    sys.executable,
                    "-m",
                    "tests.interop.op_project.serve",
                    str(self.config()),
                    str(self.port),
                ],
                cwd=ROOT,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        self.wait_until_it_answers()

    def wait_until_it_answers(self) -> None:
        """Poll the discovery document (over TLS, trusting the private CA only) until it
        answers 200, the process ends, or :data:`START_TIMEOUT` passes."""
        assert self.process is not None
        url = f"{self.issuer}/.well-known/openid-configuration"
        deadline = time.monotonic() + START_TIMEOUT
        with requests.Session() as http:
            http.trust_env = False  # loopback only, whatever proxy the environment names
            while True:
                if self.process.poll() is not None:
                    raise RuntimeError(
                        f"the test OP ended ({self.process.returncode}):\n{self.tail()}"
                    )
                try:
                    if http.get(url, verify=str(self.tls.bundle), timeout=1).status_code == 200:
                        return
                except requests.ConnectionError:
                    pass
                if time.monotonic() > deadline:
                    self.stop()
                    raise RuntimeError(
                        f"the test OP did not answer in {START_TIMEOUT} s:\n{self.tail()}"
                    )
                time.sleep(0.05)

    def stop(self) -> None:
        if self.process is None:
            return
        self.process.terminate()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self.process = None

    def rotate(self) -> None:
        """A new signing key; the old one stays in the JWKS, inactive (the restart keeps
        the port, the database, the user and the clients)."""
        self.stop()
        self.new_key()
        self.start()

    def log_size(self) -> int:
        """Where the log ends now: :meth:`requests` from here are the ones that follow."""
        return self.log.stat().st_size if self.log.exists() else 0

    def requests(self, since: int = 0) -> list[str]:
        """``"METHOD /path"`` of each request the provider answered after ``since`` (a
        :meth:`log_size`), the query left out, in order."""
        with self.log.open("rb") as log:
            log.seek(since)
            text = log.read().decode(errors="replace")
        return [
            f"{method} {path.split('?')[0]}" for method, path, _ in LOGGED_REQUEST.findall(text)
        ]

    def tail(self, lines: int = 60) -> str:
        if not self.log.exists():
            return ""
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
