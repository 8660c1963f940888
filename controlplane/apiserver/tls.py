"""The hub's TLS material: a private CA and the serving certificate it signs, or a
serving certificate the operator provides.

The hub serves HTTPS, always. By default, on first start :func:`ensure_pki` creates a CA
and a serving certificate under ``<state_dir>/pki/``; later starts load them, so
kubeconfigs and agents that trust the CA keep working across restarts. The CA is never
replaced automatically (every agent pins its hash); the serving certificate is re-issued
when a requested host is missing from its SANs, when it expires within 30 days, or when
it was not signed by the CA on disk.

Alternatively :func:`load_serving_certificate` takes a certificate, its key and the CA
that signed it from files (``--tls-cert-file``, ``--tls-private-key-file``,
``--tls-ca-file``), e.g. from a Kubernetes Secret or cert-manager. They are read and
checked on every start (so a renewed Secret is picked up by a restart) and are never
copied or re-issued: a key that does not match, an expired certificate or one the CA did
not sign is a :class:`PkiError` naming the file.

In: a state directory and the host names/IPs the hub is reached at, or the three files.
Out: :class:`ServingCertificate` (the certificate and key files, the CA PEM clients
should trust, an ``ssl.SSLContext`` for the server and one for clients that trust only
this CA) and :func:`ca_hash`, the pin an agent is given.

The CA and certificate building blocks (:func:`~controlplane.pki.load_or_create_ca`,
:func:`~controlplane.pki.ensure_certificate`) live in :mod:`controlplane.pki`, which the
embedded etcd's own PKI uses too; this module holds what is specific to serving the hub.

Joining agents discover the CA the way kubeadm's ``cluster-info`` ConfigMap works: the
hub serves its CA certificate to anyone, without credentials too, at :data:`CA_PATH`; the agent
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
import logging
import socket
import ssl
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import aiohttp
from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID

from controlplane.apis.constants import CA_PATH
from controlplane.apiserver.requestclientcert import request_client_certificates
from controlplane.pki import (
    BACKDATE,
    SERVER_RENEW_BEFORE,
    PkiError,
    ca_files,
    ensure_certificate,
    load_or_create_ca,
    san_entries,
    sans_of,
    utc_now,
)

log = logging.getLogger(__name__)

#: How long fetching the hub's CA may take.
FETCH_TIMEOUT: Final = dt.timedelta(seconds=10)

_CA_HASH_PREFIX: Final = "sha256:"
_DEFAULT_HOSTS: Final = ("127.0.0.1", "localhost", "::1")


class CaHashMismatch(Exception):
    """The CA a hub served does not match the pinned ``sha256:`` hash."""


@dataclass(frozen=True, slots=True)
class ServingCertificate:
    """What the hub serves HTTPS with, and the CA its clients should trust and pin."""

    cert_path: Path
    key_path: Path
    ca_pem: bytes

    @property
    def ca_hash(self) -> str:
        return ca_hash(self.ca_pem)

    def server_ssl_context(self, client_ca_pem: bytes | None = None) -> ssl.SSLContext:
        """A TLS server context presenting the serving certificate (TLS 1.2+); with
        ``client_ca_pem``, it asks clients for a certificate and takes any one offered, for the
        authenticator to verify against that CA (:mod:`controlplane.apiserver.clientcertificates`),
        as kube-apiserver's ``--client-ca-file``."""
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.minimum_version = ssl.TLSVersion.TLSv1_2
        context.load_cert_chain(certfile=self.cert_path, keyfile=self.key_path)
        if client_ca_pem:
            context.load_verify_locations(cadata=client_ca_pem.decode())
            request_client_certificates(context)
        return context

    def client_ssl_context(self) -> ssl.SSLContext:
        """A TLS client context that trusts only this CA."""
        return client_ssl_context(self.ca_pem)


@dataclass(frozen=True, slots=True)
class Pki:
    """The hub's own CA and serving certificate, as files under ``<state_dir>/pki``."""

    directory: Path
    ca_pem: bytes

    @property
    def ca_cert_path(self) -> Path:
        return ca_files(self.directory)[0]

    @property
    def ca_key_path(self) -> Path:
        return ca_files(self.directory)[1]

    @property
    def server_cert_path(self) -> Path:
        return self.directory / "server.crt"

    @property
    def server_key_path(self) -> Path:
        return self.directory / "server.key"

    @property
    def ca_hash(self) -> str:
        return ca_hash(self.ca_pem)

    @property
    def serving(self) -> ServingCertificate:
        return ServingCertificate(cert_path=self.server_cert_path, key_path=self.server_key_path, ca_pem=self.ca_pem)

    def server_ssl_context(self, client_ca_pem: bytes | None = None) -> ssl.SSLContext:
        """A TLS server context presenting the serving certificate (TLS 1.2+), asking for client
        certificates when ``client_ca_pem`` is given."""
        return self.serving.server_ssl_context(client_ca_pem)

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
    ca_cert = load_or_create_ca(pki.ca_cert_path, pki.ca_key_path, common_name="gpufed-ca")
    ensure_certificate(
        pki.server_cert_path,
        pki.server_key_path,
        ca_cert=ca_cert,
        ca_key_path=pki.ca_key_path,
        common_name="gpufed-hub",
        hosts=[*_DEFAULT_HOSTS, socket.gethostname(), *hosts],
        usages=(ExtendedKeyUsageOID.SERVER_AUTH,),
    )
    return Pki(directory=directory, ca_pem=ca_cert.public_bytes(serialization.Encoding.PEM))


def load_serving_certificate(
    cert_file: Path, *, key_file: Path, ca_file: Path | None = None, hosts: Sequence[str] = ()
) -> ServingCertificate:
    """Check and use a serving certificate the operator provides.

    ``cert_file`` holds the certificate, optionally followed by intermediate CA
    certificates; ``key_file`` its private key; ``ca_file`` the CA that signed it (the
    one agents pin). Without ``ca_file`` the certificate file must end in a self-signed
    certificate, which is then the CA. ``hosts`` are the names clients use: a missing one
    is logged as a warning (the certificate is the operator's to fix).
    Raises :class:`PkiError` naming the file for anything that would fail a handshake.
    """
    chain = _read_certificates(cert_file, flag="--tls-cert-file")
    leaf = chain[0]
    key = _read_private_key(key_file, flag="--tls-private-key-file")
    if key.public_key() != leaf.public_key():
        raise PkiError(
            f"--tls-private-key-file {key_file} does not match the certificate in --tls-cert-file {cert_file}"
        )
    now = utc_now()
    if leaf.not_valid_after_utc <= now:
        raise PkiError(
            f"the certificate in --tls-cert-file {cert_file} expired at "
            f"{leaf.not_valid_after_utc:%Y-%m-%d %H:%M:%S}Z; renew it"
        )
    if leaf.not_valid_before_utc > now + BACKDATE:
        raise PkiError(
            f"the certificate in --tls-cert-file {cert_file} is not valid before "
            f"{leaf.not_valid_before_utc:%Y-%m-%d %H:%M:%S}Z; check this machine's clock"
        )
    if ca_file is not None:
        cas = _read_certificates(ca_file, flag="--tls-ca-file")
    elif _is_self_signed(chain[-1]):
        ca_file, cas = cert_file, [chain[-1]]
    else:
        raise PkiError(
            f"--tls-cert-file {cert_file} does not end in a self-signed CA certificate; "
            "pass --tls-ca-file with the CA that signed it (agents pin its hash)"
        )
    ca = _signing_ca(chain, cas)
    if ca is None:
        raise PkiError(
            f"the certificate in --tls-cert-file {cert_file} is not signed by the CA in --tls-ca-file {ca_file} "
            "(put intermediate CA certificates after it in --tls-cert-file)"
        )
    for issuer in [*chain[1:], ca]:
        if issuer.not_valid_after_utc <= now:
            raise PkiError(
                f"the CA certificate {issuer.subject.rfc4514_string()} (from {ca_file} or {cert_file}) expired at "
                f"{issuer.not_valid_after_utc:%Y-%m-%d %H:%M:%S}Z; renew it"
            )
    if leaf.not_valid_after_utc - now < SERVER_RENEW_BEFORE:
        log.warning("the provided serving certificate %s expires at %s", cert_file, leaf.not_valid_after_utc)
    missing = [str(name.value) for name in san_entries(list(hosts)) if name not in sans_of(leaf)]
    if missing:
        log.warning(
            "the provided serving certificate %s does not name %s; clients using those names will reject it",
            cert_file,
            ", ".join(missing),
        )
    return ServingCertificate(
        cert_path=cert_file, key_path=key_file, ca_pem=ca.public_bytes(serialization.Encoding.PEM)
    )


def client_ca(client_ca_file: Path | None, *, own_ca_pem: bytes | None) -> bytes | None:
    """The CA client certificates are verified against: ``--client-ca-file`` (each certificate in
    it, read and checked), else ``own_ca_pem`` (the hub's own CA, when the hub issued its serving
    certificate), else None (no client certificates)."""
    if client_ca_file is None:
        return own_ca_pem
    certificates = _read_certificates(client_ca_file, flag="--client-ca-file")
    return b"".join(c.public_bytes(serialization.Encoding.PEM) for c in certificates)


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


def _read_file(path: Path, *, flag: str) -> bytes:
    """The bytes of the file a command-line ``flag`` names; PkiError when it cannot be read."""
    try:
        return path.read_bytes()
    except OSError as exc:
        raise PkiError(f"{flag} {path}: cannot read it: {exc.strerror or exc}") from exc


def _read_certificates(path: Path, *, flag: str) -> list[x509.Certificate]:
    data = _read_file(path, flag=flag)
    try:
        certificates = x509.load_pem_x509_certificates(data)
    except ValueError as exc:
        raise PkiError(f"{flag} {path} holds no PEM certificate") from exc
    return certificates


def _read_private_key(path: Path, *, flag: str) -> ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey:
    data = _read_file(path, flag=flag)
    try:
        key = serialization.load_pem_private_key(data, password=None)
    except (ValueError, TypeError) as exc:
        raise PkiError(f"{flag} {path} is not an unencrypted PEM private key") from exc
    if not isinstance(key, ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey):
        raise PkiError(f"{flag} {path} is a {type(key).__name__}; use an EC or RSA key")
    return key


def _is_self_signed(cert: x509.Certificate) -> bool:
    if cert.issuer != cert.subject:
        return False
    try:
        cert.verify_directly_issued_by(cert)
    except (ValueError, TypeError, InvalidSignature):
        return False
    return True


def _issued_by(cert: x509.Certificate, issuer: x509.Certificate) -> bool:
    try:
        cert.verify_directly_issued_by(issuer)
    except (ValueError, TypeError, InvalidSignature):
        return False
    return True


def _signing_ca(chain: list[x509.Certificate], cas: list[x509.Certificate]) -> x509.Certificate | None:
    """The CA of ``cas`` that ``chain`` (leaf, then intermediates in order) leads to."""
    for index, cert in enumerate(chain):
        for ca in cas:
            if cert == ca or _issued_by(cert, ca):
                return ca
        if index + 1 < len(chain) and not _issued_by(cert, chain[index + 1]):
            return None
    return None
