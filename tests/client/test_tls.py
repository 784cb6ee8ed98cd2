"""TLS to the broker, against a real TLS server on loopback with a private CA.

``CA_BUNDLE`` names the CA a site's broker (or its TLS-inspecting proxy) is signed by. It
must win over ``REQUESTS_CA_BUNDLE`` and ``CURL_CA_BUNDLE``, which containers and corporate
networks set for everything else: with them set, every call of the client still verifies
the broker against the configured bundle, and the environment's still applies when no
bundle is configured.
"""

from __future__ import annotations

import datetime
import ipaddress
import json
import ssl
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from django_eid.client import EidClient
from django_eid.exceptions import EidUnavailable
from tests.fixtures_client import RECORD, REQUEST_ID, SettingsWrapper, eid_settings_with


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def _pem(cert: x509.Certificate) -> bytes:
    return cert.public_bytes(serialization.Encoding.PEM)


@dataclass(frozen=True)
class Ca:
    """A private certificate authority, and a server certificate for 127.0.0.1 it signed."""

    bundle: Path
    server_cert: Path
    server_key: Path


def make_ca(directory: Path, label: str) -> Ca:
    now = datetime.datetime.now(datetime.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca = (
        x509.CertificateBuilder()
        .subject_name(_name(f"django-eid test CA {label}"))
        .issuer_name(_name(f"django-eid test CA {label}"))
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(
            x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False
        )
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    server = (
        x509.CertificateBuilder()
        .subject_name(_name("127.0.0.1"))
        .issuer_name(ca.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False,
        )
        .add_extension(x509.ExtendedKeyUsage([x509.OID_SERVER_AUTH]), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()),
            critical=False,
        )
        .sign(ca_key, hashes.SHA256())
    )
    found = Ca(
        bundle=directory / f"{label}-ca.pem",
        server_cert=directory / f"{label}-server.pem",
        server_key=directory / f"{label}-server.key",
    )
    found.bundle.write_bytes(_pem(ca))
    found.server_cert.write_bytes(_pem(server))
    found.server_key.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return found


class _Broker(BaseHTTPRequestHandler):
    """The token endpoint and a session's record, as the broker answers them."""

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self._json({"access_token": "tls-token", "token_type": "Bearer", "expires_in": 3600})

    def do_GET(self) -> None:
        self._json(RECORD)

    def _json(self, body: dict[str, Any]) -> None:
        data = json.dumps(body).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture(scope="module")
def cas(tmp_path_factory: pytest.TempPathFactory) -> tuple[Ca, Ca]:
    """The broker's private CA, and another one the environment names."""
    directory = tmp_path_factory.mktemp("tls")
    return make_ca(directory, "broker"), make_ca(directory, "environment")


@pytest.fixture(scope="module")
def tls_broker(cas: tuple[Ca, Ca]) -> Iterator[str]:
    """The broker over TLS on loopback, its certificate signed by the private CA."""
    broker_ca, _ = cas
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Broker)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(broker_ca.server_cert, broker_ca.server_key)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    yield f"https://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


@pytest.fixture
def environment_names_another_ca(cas: tuple[Ca, Ca], monkeypatch: pytest.MonkeyPatch) -> None:
    _, other = cas
    monkeypatch.setenv("REQUESTS_CA_BUNDLE", str(other.bundle))
    monkeypatch.setenv("CURL_CA_BUNDLE", str(other.bundle))


@pytest.mark.usefixtures("environment_names_another_ca")
def test_the_configured_ca_bundle_wins_over_the_environments(
    settings: SettingsWrapper, tls_broker: str, cas: tuple[Ca, Ca]
) -> None:
    broker_ca, _ = cas
    settings.DJANGO_EID = eid_settings_with(
        BASE_URL=tls_broker, AUTH_URL=tls_broker, CA_BUNDLE=str(broker_ca.bundle)
    )
    client = EidClient()
    try:
        record = client.get_session(REQUEST_ID)  # the token, then the record: both over TLS
    finally:
        client.close()
    assert record.request_id == REQUEST_ID


@pytest.mark.usefixtures("environment_names_another_ca")
def test_without_a_configured_bundle_the_environments_is_used(
    settings: SettingsWrapper, tls_broker: str
) -> None:
    """The environment's CA does not sign the broker: refused, as verification must."""
    settings.DJANGO_EID = eid_settings_with(BASE_URL=tls_broker, AUTH_URL=tls_broker)
    client = EidClient()
    try:
        with pytest.raises(EidUnavailable, match=r"could not connect \(SSLError\)"):
            client.get_session(REQUEST_ID)
    finally:
        client.close()
