"""Certificate authorities and the certificates they sign, as files: the building blocks
of every TLS setup in gpufed.

The hub's serving PKI (``controlplane.apiserver.tls``) and the embedded etcd's own PKI
(``controlplane.storage.embedded``) both keep a private CA and certificates it issues
under a state directory. This module holds what they share, so neither imports the
other: :func:`load_or_create_ca` (a CA is created once and never replaced) and
:func:`ensure_certificate` (a certificate is re-issued when missing, damaged, issued by
another CA, expiring within :data:`SERVER_RENEW_BEFORE`, or missing a wanted host).

In: file paths, a common name, host names/IPs and extended key usages. Out: the CA
certificate, and the key and certificate files written atomically (keys 0600).
Anything unusable is a :class:`PkiError` whose message names the file and what to do.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import ipaddress
import logging
import os
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Final

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

log = logging.getLogger(__name__)

CA_VALIDITY: Final = dt.timedelta(days=3650)
SERVER_VALIDITY: Final = dt.timedelta(days=365)
#: An issued certificate closer than this to expiry is re-issued on start (a serving
#: certificate the operator provides is only warned about).
SERVER_RENEW_BEFORE: Final = dt.timedelta(days=30)
#: Tolerated clock skew between the hub and its clients.
BACKDATE: Final = dt.timedelta(minutes=5)


class PkiError(Exception):
    """The TLS material is unusable: a damaged file, a key that does not match its
    certificate, an expired certificate, or a certificate that must be re-issued but
    whose CA key is gone. The message names the file and says what to do."""



def private_directory(path: Path) -> Path:
    """``path``, created when missing and made the owner's alone (0700): it holds keys, tokens or
    credentials. A directory that is not ours to change (a mounted volume's root) keeps its mode."""
    path.mkdir(parents=True, exist_ok=True, mode=0o700)
    with contextlib.suppress(PermissionError):
        path.chmod(0o700)
    return path


def ca_files(directory: Path) -> tuple[Path, Path]:
    """The certificate and key files of the CA kept in ``directory``."""
    return directory / "ca.crt", directory / "ca.key"


def load_or_create_ca(cert_path: Path, key_path: Path, *, common_name: str) -> x509.Certificate:
    """Load the CA certificate at ``cert_path``, or create a new CA (key and certificate).

    An existing CA is never replaced: a damaged one is a :class:`PkiError`.
    """
    if cert_path.exists():
        try:
            return x509.load_pem_x509_certificate(cert_path.read_bytes())
        except ValueError as exc:
            raise PkiError(f"{cert_path} is not a PEM certificate; restore it from a backup") from exc
    if key_path.exists():
        raise PkiError(f"{key_path} exists without {cert_path}; restore or remove both")
    key = ec.generate_private_key(ec.SECP256R1())
    now = utc_now()
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
    ski = x509.SubjectKeyIdentifier.from_public_key(key.public_key())
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - BACKDATE)
        .not_valid_after(now + CA_VALIDITY)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(_key_usage(cert_sign=True), critical=True)
        .add_extension(ski, critical=False)
        .sign(key, hashes.SHA256())
    )
    # The key first: a crash in between leaves "key without cert", which is reported,
    # never a CA certificate nobody can sign with.
    _write_private(key_path, _key_pem(key))
    _write_public(cert_path, cert.public_bytes(serialization.Encoding.PEM))
    log.info("created certificate authority", extra={"path": str(cert_path)})
    return cert


def ensure_certificate(
    cert_path: Path,
    key_path: Path,
    *,
    ca_cert: x509.Certificate,
    ca_key_path: Path,
    common_name: str,
    hosts: Sequence[str] = (),
    usages: Sequence[x509.ObjectIdentifier],
) -> bool:
    """Keep a certificate signed by ``ca_cert`` at ``cert_path``; return whether it was (re-)issued.

    It is (re-)issued when missing, unreadable, not issued by ``ca_cert``, expiring within
    :data:`SERVER_RENEW_BEFORE`, missing one of ``hosts`` from its SANs, or not matching
    its key. ``usages`` are its extended key usages (server and/or client auth).
    """
    wanted = san_entries(list(hosts))
    reason = _certificate_problem(cert_path, key_path, ca_cert=ca_cert, wanted=wanted)
    if reason is None:
        return False
    ca_key = _load_ca_key(ca_key_path, cert_path=cert_path)
    log.info("issuing certificate", extra={"reason": reason, "path": str(cert_path)})
    key = ec.generate_private_key(ec.SECP256R1())
    now = utc_now()
    ca_ski = ca_cert.extensions.get_extension_for_class(x509.SubjectKeyIdentifier).value
    builder = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)]))
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - BACKDATE)
        .not_valid_after(min(now + SERVER_VALIDITY, ca_cert.not_valid_after_utc))
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(_key_usage(cert_sign=False), critical=True)
        .add_extension(x509.ExtendedKeyUsage(list(usages)), critical=False)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_subject_key_identifier(ca_ski), critical=False)
    )
    if wanted:
        builder = builder.add_extension(x509.SubjectAlternativeName(wanted), critical=False)
    cert = builder.sign(ca_key, hashes.SHA256())
    _write_private(key_path, _key_pem(key))
    _write_public(cert_path, cert.public_bytes(serialization.Encoding.PEM))
    return True


def _load_ca_key(path: Path, *, cert_path: Path) -> ec.EllipticCurvePrivateKey:
    if not path.exists():
        raise PkiError(f"{cert_path} must be (re-)issued but the CA key {path} is missing")
    key = serialization.load_pem_private_key(path.read_bytes(), password=None)
    if not isinstance(key, ec.EllipticCurvePrivateKey):
        raise PkiError(f"{path} is not an EC private key")
    return key


def _certificate_problem(
    cert_path: Path, key_path: Path, *, ca_cert: x509.Certificate, wanted: list[x509.GeneralName]
) -> str | None:
    """Why the certificate must be (re-)issued, or None when it is fine."""
    if not cert_path.exists() or not key_path.exists():
        return "missing"
    try:
        cert = x509.load_pem_x509_certificate(cert_path.read_bytes())
        key = serialization.load_pem_private_key(key_path.read_bytes(), password=None)
    except (ValueError, TypeError):
        return "unreadable"
    try:
        cert.verify_directly_issued_by(ca_cert)
    except (ValueError, TypeError, InvalidSignature):
        return "not issued by the current CA"
    if cert.not_valid_after_utc - utc_now() < SERVER_RENEW_BEFORE:
        return "expires soon"
    if wanted:
        present = sans_of(cert)
        if not present:
            return "no subject alternative names"
        missing = [name for name in wanted if name not in present]
        if missing:
            return "missing hosts " + ", ".join(str(name.value) for name in missing)
    if key.public_key() != cert.public_key():
        return "key does not match certificate"
    return None


def sans_of(cert: x509.Certificate) -> set[x509.GeneralName]:
    try:
        return set(cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value)
    except x509.ExtensionNotFound:
        return set()


def _key_usage(*, cert_sign: bool) -> x509.KeyUsage:
    return x509.KeyUsage(
        digital_signature=True,
        content_commitment=False,
        key_encipherment=False,
        data_encipherment=False,
        key_agreement=False,
        key_cert_sign=cert_sign,
        crl_sign=cert_sign,
        encipher_only=False,
        decipher_only=False,
    )


def san_entries(hosts: list[str]) -> list[x509.GeneralName]:
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


def utc_now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)
