"""The hub's TLS material: a private CA and the serving certificate it signs.

The hub serves HTTPS by default. On first start :func:`ensure_pki` creates a CA and a
serving certificate under ``<state_dir>/pki/``; later starts load them, so kubeconfigs
and agents that trust the CA keep working across restarts. The CA is never replaced
automatically (every agent pins its hash); the serving certificate is re-issued when a
requested host is missing from its SANs, when it expires within 30 days, or when it
was not signed by the CA on disk.

In: a state directory and the host names/IPs the hub is reached at.
Out: :class:`Pki` (paths, the CA PEM, an ``ssl.SSLContext`` for the server and one for
clients that trust only this CA) and :func:`ca_hash`, the pin an agent is given.

Joining agents discover the CA the way kubeadm's ``cluster-info`` ConfigMap works: the
hub serves its CA certificate without authentication at :data:`CA_PATH`; the agent
fetches it over an unverified connection, accepts it only when its public-key hash
equals the ``--hub-ca-hash`` it was given, and from then on verifies the hub normally
against that CA (:func:`fetch_and_verify_ca`). This is preferred over reading the CA
from the TLS handshake because Python 3.11's ``ssl`` module only exposes the peer's
leaf certificate, not the chain, and because serving the CA over HTTP lets any client
(curl, the CLI) do the same check.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import hashlib
import hmac
import ipaddress
import logging
import os
import socket
import ssl
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import aiohttp
from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from controlplane.apiserver.auth.authorizer import CA_PATH

log = logging.getLogger(__name__)

CA_VALIDITY: Final = dt.timedelta(days=3650)
SERVER_VALIDITY: Final = dt.timedelta(days=365)
#: A serving certificate closer than this to expiry is re-issued on start.
SERVER_RENEW_BEFORE: Final = dt.timedelta(days=30)
#: Tolerated clock skew between the hub and its clients.
_BACKDATE: Final = dt.timedelta(minutes=5)
#: How long fetching the hub's CA may take.
FETCH_TIMEOUT: Final = dt.timedelta(seconds=10)

_CA_HASH_PREFIX: Final = "sha256:"
_DEFAULT_HOSTS: Final = ("127.0.0.1", "localhost", "::1")


class PkiError(Exception):
    """The PKI on disk is unusable (e.g. a certificate must be re-issued but the CA key is gone)."""


class CaHashMismatch(Exception):
    """The CA a hub served does not match the pinned ``sha256:`` hash."""


@dataclass(frozen=True, slots=True)
class Pki:
    """The hub's CA and serving certificate, as files under ``<state_dir>/pki``."""

    directory: Path
    ca_pem: bytes

    @property
    def ca_cert_path(self) -> Path:
        return self.directory / "ca.crt"

    @property
    def ca_key_path(self) -> Path:
        return self.directory / "ca.key"

    @property
    def server_cert_path(self) -> Path:
        return self.directory / "server.crt"

    @property
    def server_key_path(self) -> Path:
        return self.directory / "server.key"

    @property
    def ca_hash(self) -> str:
        return ca_hash(self.ca_pem)

    def server_ssl_context(self) -> ssl.SSLContext:
        """A TLS server context presenting the serving certificate (TLS 1.2+)."""
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.minimum_version = ssl.TLSVersion.TLSv1_2
        context.load_cert_chain(certfile=self.server_cert_path, keyfile=self.server_key_path)
        return context

    def client_ssl_context(self) -> ssl.SSLContext:
        """A TLS client context that trusts only this CA."""
        return client_ssl_context(self.ca_pem)


def ensure_pki(state_dir: Path, *, hosts: list[str]) -> Pki:
    """Create (first run) or load (later runs) the CA and serving certificate.

    ``hosts`` are extra DNS names or IP addresses for the serving certificate; 127.0.0.1,
    localhost, ::1 and this machine's hostname are always included.
    """
    directory = state_dir / "pki"
    directory.mkdir(parents=True, exist_ok=True, mode=0o700)
    pki = Pki(directory=directory, ca_pem=b"")
    ca_cert, ca_key = _load_or_create_ca(pki)
    wanted = _san_entries([*_DEFAULT_HOSTS, socket.gethostname(), *hosts])
    reason = _server_cert_problem(pki, ca_cert=ca_cert, wanted=wanted)
    if reason is not None:
        if ca_key is None:
            ca_key = _load_ca_key(pki)
        log.info("issuing hub serving certificate", extra={"reason": reason, "path": str(pki.server_cert_path)})
        _issue_server_cert(pki, ca_cert=ca_cert, ca_key=ca_key, sans=wanted)
    return Pki(directory=directory, ca_pem=ca_cert.public_bytes(serialization.Encoding.PEM))


def ca_hash(ca_pem: bytes) -> str:
    """``sha256:<hex>`` of the CA certificate's DER SubjectPublicKeyInfo.

    This is exactly kubeadm's ``--discovery-token-ca-cert-hash``.
    """
    cert = x509.load_pem_x509_certificate(ca_pem)
    spki = cert.public_key().public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    return _CA_HASH_PREFIX + hashlib.sha256(spki).hexdigest()


def verify_ca_hash(ca_pem: bytes, *, expected: str) -> None:
    """Raise :class:`CaHashMismatch` unless ``ca_pem``'s hash equals ``expected``."""
    if not expected.startswith(_CA_HASH_PREFIX):
        raise CaHashMismatch(f"CA hash {expected!r} must look like sha256:<64 hex digits>")
    try:
        actual = ca_hash(ca_pem)
    except ValueError as exc:
        raise CaHashMismatch("the hub served something that is not a PEM certificate") from exc
    if not hmac.compare_digest(actual, expected.lower()):
        raise CaHashMismatch(f"the hub's CA has hash {actual}, expected {expected}")


def client_ssl_context(ca_pem: bytes) -> ssl.SSLContext:
    """A TLS client context that trusts only ``ca_pem`` and checks the host name."""
    context = ssl.create_default_context(ssl.Purpose.SERVER_AUTH, cadata=ca_pem.decode("ascii"))
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    return context


async def fetch_and_verify_ca(server_url: str, *, expected_hash: str) -> bytes:
    """Fetch the hub's CA from :data:`CA_PATH`, check it against the pin, and return its PEM.

    The first request cannot verify the server (the CA is what we are fetching), so the
    answer is trusted only through ``expected_hash``. A second request, verified against
    the fetched CA, proves the server at ``server_url`` holds a certificate that CA issued
    for this host name. Each request gives up after :data:`FETCH_TIMEOUT`.
    """
    url = server_url.rstrip("/") + CA_PATH
    client_timeout = aiohttp.ClientTimeout(total=FETCH_TIMEOUT.total_seconds())
    async with aiohttp.ClientSession(timeout=client_timeout) as session:
        async with session.get(url, ssl=False) as response:
            response.raise_for_status()
            ca_pem = await response.read()
        verify_ca_hash(ca_pem, expected=expected_hash)
        async with session.get(url, ssl=client_ssl_context(ca_pem)) as response:
            response.raise_for_status()
            served_again = await response.read()
    if served_again != ca_pem:
        raise CaHashMismatch("the hub served a different CA on the verified connection")
    return ca_pem


async def ensure_pki_async(state_dir: Path, *, hosts: list[str]) -> Pki:
    """:func:`ensure_pki` off the event loop (key generation and file I/O)."""
    return await asyncio.to_thread(ensure_pki, state_dir, hosts=hosts)


def _load_or_create_ca(pki: Pki) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey | None]:
    if pki.ca_cert_path.exists():
        try:
            cert = x509.load_pem_x509_certificate(pki.ca_cert_path.read_bytes())
        except ValueError as exc:
            raise PkiError(f"{pki.ca_cert_path} is not a PEM certificate; restore it from a backup") from exc
        return cert, None
    if pki.ca_key_path.exists():
        raise PkiError(f"{pki.ca_key_path} exists without {pki.ca_cert_path}; restore or remove both")
    key = ec.generate_private_key(ec.SECP256R1())
    now = _now()
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "gpufed-ca")])
    ski = x509.SubjectKeyIdentifier.from_public_key(key.public_key())
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - _BACKDATE)
        .not_valid_after(now + CA_VALIDITY)
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
        .add_extension(ski, critical=False)
        .sign(key, hashes.SHA256())
    )
    # The key first: a crash in between leaves "key without cert", which is reported,
    # never a CA certificate nobody can sign with.
    _write_private(pki.ca_key_path, _key_pem(key))
    _write_public(pki.ca_cert_path, cert.public_bytes(serialization.Encoding.PEM))
    log.info("created hub certificate authority", extra={"path": str(pki.ca_cert_path)})
    return cert, key


def _load_ca_key(pki: Pki) -> ec.EllipticCurvePrivateKey:
    if not pki.ca_key_path.exists():
        raise PkiError(f"the serving certificate must be re-issued but the CA key {pki.ca_key_path} is missing")
    key = serialization.load_pem_private_key(pki.ca_key_path.read_bytes(), password=None)
    if not isinstance(key, ec.EllipticCurvePrivateKey):
        raise PkiError(f"{pki.ca_key_path} is not an EC private key")
    return key


def _server_cert_problem(pki: Pki, *, ca_cert: x509.Certificate, wanted: list[x509.GeneralName]) -> str | None:
    """Why the serving certificate must be (re-)issued, or None when it is fine."""
    if not pki.server_cert_path.exists() or not pki.server_key_path.exists():
        return "missing"
    try:
        cert = x509.load_pem_x509_certificate(pki.server_cert_path.read_bytes())
        key = serialization.load_pem_private_key(pki.server_key_path.read_bytes(), password=None)
    except (ValueError, TypeError):
        return "unreadable"
    try:
        cert.verify_directly_issued_by(ca_cert)
    except (ValueError, TypeError, InvalidSignature):
        return "not issued by the current CA"
    if cert.not_valid_after_utc - _now() < SERVER_RENEW_BEFORE:
        return "expires soon"
    try:
        present = set(cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value)
    except x509.ExtensionNotFound:
        return "no subject alternative names"
    missing = [name for name in wanted if name not in present]
    if missing:
        return "missing hosts " + ", ".join(str(name.value) for name in missing)
    if key.public_key() != cert.public_key():
        return "key does not match certificate"
    return None


def _issue_server_cert(
    pki: Pki,
    *,
    ca_cert: x509.Certificate,
    ca_key: ec.EllipticCurvePrivateKey,
    sans: list[x509.GeneralName],
) -> None:
    key = ec.generate_private_key(ec.SECP256R1())
    now = _now()
    ca_ski = ca_cert.extensions.get_extension_for_class(x509.SubjectKeyIdentifier).value
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "gpufed-hub")]))
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - _BACKDATE)
        .not_valid_after(min(now + SERVER_VALIDITY, ca_cert.not_valid_after_utc))
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=False,
                crl_sign=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(x509.SubjectAlternativeName(sans), critical=False)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_subject_key_identifier(ca_ski), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    _write_private(pki.server_key_path, _key_pem(key))
    _write_public(pki.server_cert_path, cert.public_bytes(serialization.Encoding.PEM))


def _san_entries(hosts: list[str]) -> list[x509.GeneralName]:
    """Unique SAN entries, IP addresses as IPAddress, everything else as DNSName."""
    entries: list[x509.GeneralName] = []
    for host in hosts:
        host = host.strip().strip("[]")
        if not host:
            continue
        entry: x509.GeneralName
        try:
            entry = x509.IPAddress(ipaddress.ip_address(host))
        except ValueError:
            entry = x509.DNSName(host.lower())
        if entry not in entries:
            entries.append(entry)
    return entries


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def _write_private(path: Path, data: bytes) -> None:
    _write_atomically(path, data, mode=0o600)


def _write_public(path: Path, data: bytes) -> None:
    _write_atomically(path, data, mode=0o644)


def _write_atomically(path: Path, data: bytes, *, mode: int) -> None:
    # mkstemp creates the file 0600, so a key is never readable by others, even briefly.
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "wb") as file:
            file.write(data)
            file.flush()
            os.fsync(file.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)
