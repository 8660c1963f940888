"""The hub's PKI: created once, reused, re-issued only when needed; real TLS handshakes;
the CA pin matches kubeadm's definition; the served CA is checked against the pin."""

from __future__ import annotations

import datetime as dt
import hashlib
import socket
import ssl
import subprocess
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest
from aiohttp import web
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from controlplane.apiserver.auth import ca_routes
from controlplane.apiserver.tls import (
    CaHashMismatch,
    Pki,
    ca_hash,
    client_ssl_context,
    ensure_pki,
    fetch_and_verify_ca,
)
from controlplane.pki import PkiError


def sans_of(cert_path: Path) -> set[str]:
    cert = x509.load_pem_x509_certificate(cert_path.read_bytes())
    names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    return {str(name) for name in names.get_values_for_type(x509.DNSName)} | {
        str(ip) for ip in names.get_values_for_type(x509.IPAddress)
    }


def write_cert_expiring_in(pki: Pki, *, days: int, signer_key: ec.EllipticCurvePrivateKey) -> None:
    """Replace the serving certificate with one for the same hosts, signed by ``signer_key``,
    expiring in ``days``."""
    ca = x509.load_pem_x509_certificate(pki.ca_pem)
    current = x509.load_pem_x509_certificate(pki.server_cert_path.read_bytes())
    sans = current.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    key = ec.generate_private_key(ec.SECP256R1())
    now = dt.datetime.now(dt.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "gpufed-hub")]))
        .issuer_name(ca.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(days=1))
        .not_valid_after(now + dt.timedelta(days=days))
        .add_extension(sans, critical=False)
        .sign(signer_key, hashes.SHA256())
    )
    pki.server_cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    pki.server_key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    )


def ca_key_of(pki: Pki) -> ec.EllipticCurvePrivateKey:
    key = serialization.load_pem_private_key(pki.ca_key_path.read_bytes(), password=None)
    assert isinstance(key, ec.EllipticCurvePrivateKey)
    return key


def test_first_run_creates_ca_and_server_cert_with_private_keys(tmp_path: Path) -> None:
    pki = ensure_pki(tmp_path, hosts=[])

    assert pki.directory == tmp_path / "pki"
    for path in (pki.ca_cert_path, pki.ca_key_path, pki.server_cert_path, pki.server_key_path):
        assert path.is_file(), path
    assert pki.ca_key_path.stat().st_mode & 0o777 == 0o600
    assert pki.server_key_path.stat().st_mode & 0o777 == 0o600
    assert pki.ca_pem == pki.ca_cert_path.read_bytes()
    ca = x509.load_pem_x509_certificate(pki.ca_pem)
    assert ca.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    server = x509.load_pem_x509_certificate(pki.server_cert_path.read_bytes())
    server.verify_directly_issued_by(ca)
    assert ca.not_valid_after_utc - ca.not_valid_before_utc >= dt.timedelta(days=3650)
    assert dt.timedelta(days=364) < server.not_valid_after_utc - server.not_valid_before_utc <= dt.timedelta(days=366)
    assert {"127.0.0.1", "localhost", "::1", socket.gethostname().lower()} <= sans_of(pki.server_cert_path)


def test_second_run_reuses_ca_and_server_cert(tmp_path: Path) -> None:
    first = ensure_pki(tmp_path, hosts=["hub.example.com"])
    server_pem = first.server_cert_path.read_bytes()

    second = ensure_pki(tmp_path, hosts=["hub.example.com"])

    assert second.ca_pem == first.ca_pem
    assert second.server_cert_path.read_bytes() == server_pem


@pytest.mark.parametrize("new_host", ["hub.example.com", "10.1.2.3", "[fd00::7]"])
def test_new_host_reissues_server_cert_but_keeps_the_ca(tmp_path: Path, new_host: str) -> None:
    first = ensure_pki(tmp_path, hosts=[])
    ca_key_pem = first.ca_key_path.read_bytes()
    old_server = first.server_cert_path.read_bytes()

    second = ensure_pki(tmp_path, hosts=[new_host])

    assert second.ca_pem == first.ca_pem
    assert second.ca_key_path.read_bytes() == ca_key_pem
    assert second.server_cert_path.read_bytes() != old_server
    assert new_host.strip("[]") in sans_of(second.server_cert_path)
    assert "localhost" in sans_of(second.server_cert_path)


@pytest.mark.parametrize(("days_left", "reissued"), [(10, True), (29, True), (31, False), (200, False)])
def test_server_cert_expiring_within_30_days_is_reissued(tmp_path: Path, days_left: int, reissued: bool) -> None:
    pki = ensure_pki(tmp_path, hosts=[])
    write_cert_expiring_in(pki, days=days_left, signer_key=ca_key_of(pki))
    before = pki.server_cert_path.read_bytes()

    after = ensure_pki(tmp_path, hosts=[]).server_cert_path.read_bytes()

    assert (after != before) is reissued
    cert = x509.load_pem_x509_certificate(after)
    assert cert.not_valid_after_utc - dt.datetime.now(dt.UTC) > dt.timedelta(days=30)


def test_server_cert_from_another_ca_is_reissued(tmp_path: Path) -> None:
    pki = ensure_pki(tmp_path, hosts=[])
    write_cert_expiring_in(pki, days=300, signer_key=ec.generate_private_key(ec.SECP256R1()))

    ensure_pki(tmp_path, hosts=[])

    cert = x509.load_pem_x509_certificate(pki.server_cert_path.read_bytes())
    cert.verify_directly_issued_by(x509.load_pem_x509_certificate(pki.ca_pem))


@pytest.mark.parametrize("damaged", ["server.crt", "server.key"])
def test_unreadable_or_mismatched_server_files_are_reissued(tmp_path: Path, damaged: str) -> None:
    pki = ensure_pki(tmp_path, hosts=[])
    (pki.directory / damaged).write_bytes(b"garbage")

    ensure_pki(tmp_path, hosts=[])

    key = serialization.load_pem_private_key(pki.server_key_path.read_bytes(), password=None)
    cert = x509.load_pem_x509_certificate(pki.server_cert_path.read_bytes())
    assert key.public_key() == cert.public_key()


def test_key_of_another_certificate_is_reissued(tmp_path: Path) -> None:
    pki = ensure_pki(tmp_path, hosts=[])
    pki.server_key_path.write_bytes(ensure_pki(tmp_path / "other", hosts=[]).server_key_path.read_bytes())
    ensure_pki(tmp_path, hosts=[])
    key = serialization.load_pem_private_key(pki.server_key_path.read_bytes(), password=None)
    assert key.public_key() == x509.load_pem_x509_certificate(pki.server_cert_path.read_bytes()).public_key()


def test_unreadable_ca_is_an_error_not_silently_replaced(tmp_path: Path) -> None:
    pki = ensure_pki(tmp_path, hosts=[])
    pki.ca_cert_path.write_bytes(b"garbage")
    with pytest.raises(PkiError, match="not a PEM certificate"):
        ensure_pki(tmp_path, hosts=[])
    assert pki.ca_cert_path.read_bytes() == b"garbage"


def test_missing_ca_key_is_an_error_only_when_a_cert_must_be_issued(tmp_path: Path) -> None:
    pki = ensure_pki(tmp_path, hosts=[])
    pki.ca_key_path.unlink()

    assert ensure_pki(tmp_path, hosts=[]).ca_pem == pki.ca_pem
    with pytest.raises(PkiError, match="CA key"):
        ensure_pki(tmp_path, hosts=["new.example.com"])


def test_ca_hash_is_kubeadms_discovery_token_ca_cert_hash(tmp_path: Path) -> None:
    pki = ensure_pki(tmp_path, hosts=[])
    # kubeadm's documented recipe: the SHA-256 of the CA's DER SubjectPublicKeyInfo.
    spki = subprocess.run(
        ["openssl", "x509", "-pubkey", "-noout"], input=pki.ca_pem, capture_output=True, check=True
    ).stdout
    der = subprocess.run(
        ["openssl", "pkey", "-pubin", "-outform", "der"], input=spki, capture_output=True, check=True
    ).stdout

    assert ca_hash(pki.ca_pem) == "sha256:" + hashlib.sha256(der).hexdigest()
    assert pki.ca_hash == ca_hash(pki.ca_pem)
    other = ensure_pki(tmp_path / "other", hosts=[])
    assert ca_hash(other.ca_pem) != ca_hash(pki.ca_pem)


async def hello(_: web.Request) -> web.Response:
    return web.Response(text="hello")


@pytest.fixture
async def tls_server(tmp_path: Path) -> AsyncIterator[tuple[Pki, str]]:
    """An HTTPS server on 127.0.0.1 with the generated serving certificate."""
    pki = ensure_pki(tmp_path, hosts=[])
    app = web.Application()
    app.router.add_get("/hello", hello)
    app.router.add_routes(ca_routes(ca_pem=pki.ca_pem))
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=pki.server_ssl_context())
    await site.start()
    port = runner.addresses[0][1]
    try:
        yield pki, f"https://127.0.0.1:{port}"
    finally:
        await runner.cleanup()


async def get_text(url: str, *, context: ssl.SSLContext) -> str:
    async with (
        aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=10)) as session,
        session.get(url, ssl=context) as response,
    ):
        return await response.text()


async def test_client_trusting_the_ca_connects(tls_server: tuple[Pki, str]) -> None:
    pki, url = tls_server
    assert await get_text(url + "/hello", context=pki.client_ssl_context()) == "hello"
    # "localhost" is a SAN as well.
    assert await get_text(url.replace("127.0.0.1", "localhost") + "/hello", context=pki.client_ssl_context()) == "hello"


@pytest.mark.parametrize("trust", ["system", "other-ca"])
async def test_client_not_trusting_the_ca_is_rejected(tls_server: tuple[Pki, str], tmp_path: Path, trust: str) -> None:
    _, url = tls_server
    if trust == "system":
        context = ssl.create_default_context()
    else:
        context = client_ssl_context(ensure_pki(tmp_path / "other", hosts=[]).ca_pem)
    with pytest.raises(aiohttp.ClientConnectorCertificateError):
        await get_text(url + "/hello", context=context)


async def test_fetch_and_verify_ca_accepts_the_pinned_ca(tls_server: tuple[Pki, str]) -> None:
    pki, url = tls_server
    assert await fetch_and_verify_ca(url, expected_hash=pki.ca_hash) == pki.ca_pem


@pytest.mark.parametrize("pin", ["other-ca", "garbage"])
async def test_fetch_and_verify_ca_rejects_a_different_ca(tls_server: tuple[Pki, str], tmp_path: Path, pin: str) -> None:
    _, url = tls_server
    expected = ensure_pki(tmp_path / "other", hosts=[]).ca_hash if pin == "other-ca" else "md5:1234"
    with pytest.raises(CaHashMismatch):
        await fetch_and_verify_ca(url, expected_hash=expected)
