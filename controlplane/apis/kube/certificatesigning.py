"""kube-controller-manager's CSR signer for ``kubernetes.io/kube-apiserver-client`` and its CSR
cleaner, as pure decisions.

The signer (``pkg/controller/certificates/signer``) looks only at an Approved CSR that has not
Failed and has no certificate yet. Its usages must be ``client auth`` with, optionally,
``digital signature`` and ``key encipherment``; anything else fails the CSR (condition Failed,
reason ``SignerValidationFailure``, kube's message). Otherwise it issues a certificate for the
request's subject, SANs and public key (``authority.PermissiveSigningPolicy``): not before now
minus 5 minutes, valid for ``min(spec.expirationSeconds, the signing duration)`` (at least 10
minutes; minus the 5 minutes backdate when that is 8 hours or more), never past the CA's own
expiry, with the usages as key usage and extended key usage, not a CA.

The cleaner (``pkg/controller/certificates/cleaner``) deletes a CSR that was issued and approved
more than an hour ago, denied or failed more than an hour ago, pending for more than 24 hours,
or whose issued certificate has expired.

In: a CSR object, the CA certificate and key, the time. Out: :class:`Issued`, :class:`Refused` or
None; booleans. Pure: no I/O.
"""

from __future__ import annotations

import base64
import datetime as dt
from dataclasses import dataclass
from typing import Any, Final

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric.types import CertificateIssuerPrivateKeyTypes
from cryptography.x509.oid import ExtendedKeyUsageOID, ObjectIdentifier

from controlplane.apis.kube import certificates, field
from controlplane.apis.kube.certificates import APPROVED, DENIED, FAILED, KUBE_APISERVER_CLIENT
from controlplane.apis.timestamps import parse_time_or_none
from controlplane.apis.untyped import Obj

#: kube's ``--cluster-signing-duration`` default.
DEFAULT_SIGNING_DURATION: Final = dt.timedelta(days=365)
BACKDATE: Final = dt.timedelta(minutes=5)
SHORT: Final = dt.timedelta(hours=8)
MIN_DURATION: Final = dt.timedelta(minutes=10)

SIGNER_VALIDATION_FAILURE: Final = "SignerValidationFailure"

#: The cleaner's deadlines.
APPROVED_EXPIRATION: Final = dt.timedelta(hours=1)
DENIED_EXPIRATION: Final = dt.timedelta(hours=1)
PENDING_EXPIRATION: Final = dt.timedelta(hours=24)

_KEY_USAGES: Final = {
    "signing": "digital_signature", "digital signature": "digital_signature",
    "content commitment": "content_commitment", "key encipherment": "key_encipherment",
    "key agreement": "key_agreement", "data encipherment": "data_encipherment", "cert sign": "key_cert_sign",
    "crl sign": "crl_sign", "encipher only": "encipher_only", "decipher only": "decipher_only",
}
_EXTENDED_KEY_USAGES: Final[dict[str, ObjectIdentifier]] = {
    "any": ExtendedKeyUsageOID.ANY_EXTENDED_KEY_USAGE,
    "server auth": ExtendedKeyUsageOID.SERVER_AUTH,
    "client auth": ExtendedKeyUsageOID.CLIENT_AUTH,
    "code signing": ExtendedKeyUsageOID.CODE_SIGNING,
    "email protection": ExtendedKeyUsageOID.EMAIL_PROTECTION,
    "s/mime": ExtendedKeyUsageOID.EMAIL_PROTECTION,
    "ipsec end system": ObjectIdentifier("1.3.6.1.5.5.7.3.5"),
    "ipsec tunnel": ObjectIdentifier("1.3.6.1.5.5.7.3.6"),
    "ipsec user": ObjectIdentifier("1.3.6.1.5.5.7.3.7"),
    "timestamping": ExtendedKeyUsageOID.TIME_STAMPING,
    "ocsp signing": ExtendedKeyUsageOID.OCSP_SIGNING,
    "microsoft sgc": ObjectIdentifier("1.3.6.1.4.1.311.10.3.3"),
    "netscape sgc": ObjectIdentifier("2.16.840.1.113730.4.1"),
}


@dataclass(frozen=True, slots=True)
class Issued:
    certificate_pem: bytes

    @property
    def encoded(self) -> str:
        """The certificate as ``status.certificate`` carries it (base64 of the PEM)."""
        return base64.b64encode(self.certificate_pem).decode()


@dataclass(frozen=True, slots=True)
class Refused:
    """The signer refuses the request: the CSR gets a Failed condition with this message."""

    message: str


def client_usages_problem(usages: list[str]) -> str | None:
    """kube's ``validAPIServerClientUsages``."""
    has_client_auth = False
    for usage in usages:
        if usage in ("digital signature", "key encipherment"):
            continue
        if usage == "client auth":
            has_client_auth = True
            continue
        return f"invalid usage for client certificate: {usage}"
    return None if has_client_auth else "missing required usage for client certificate: client auth"


def signing_duration(expiration_seconds: Any, limit: dt.timedelta) -> dt.timedelta:
    """kube's ``signer.duration``: the requested duration within [10 minutes, ``limit``]."""
    if not isinstance(expiration_seconds, int) or isinstance(expiration_seconds, bool):
        return limit
    requested = dt.timedelta(seconds=expiration_seconds)
    return limit if requested > limit else max(requested, MIN_DURATION)


def wants_signing(csr: Obj, signer_name: str = KUBE_APISERVER_CLIENT) -> bool:
    """Approved, not Failed, not issued yet, and for this signer."""
    return (
        certificates.has_condition(csr, APPROVED) and not certificates.has_condition(csr, FAILED)
        and not certificates.certificate_bytes(csr)
        and field.mapping(csr.get("spec")).get("signerName") == signer_name
    )


def sign(
    csr: Obj, *, ca_certificate: x509.Certificate, ca_key: CertificateIssuerPrivateKeyTypes,
    now: dt.datetime, limit: dt.timedelta = DEFAULT_SIGNING_DURATION,
) -> Issued | Refused:
    """The signer's answer to an approved CSR of ``kubernetes.io/kube-apiserver-client``."""
    spec = field.mapping(csr.get("spec"))
    usages = [str(u) for u in spec.get("usages") or []]
    problem = client_usages_problem(usages)
    if problem is not None:
        return Refused(problem)
    request = certificates.parse_request(certificates.request_bytes(csr))  # validated when stored
    ttl = signing_duration(spec.get("expirationSeconds"), limit)
    not_before = now - BACKDATE
    not_after = now + ttl if ttl < SHORT else now + ttl - BACKDATE
    signer_not_after = ca_certificate.not_valid_after_utc
    not_after = min(not_after, signer_not_after)
    if now >= signer_not_after:
        return Refused(f"refusing to sign a certificate that expired in the past: NotAfter={signer_not_after}")
    builder = (
        x509.CertificateBuilder()
        .subject_name(request.subject)
        .issuer_name(ca_certificate.subject)
        .public_key(request.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(not_before)
        .not_valid_after(not_after)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
    )
    key_usage = {name: False for name in set(_KEY_USAGES.values())}
    key_usage.update({_KEY_USAGES[u]: True for u in usages if u in _KEY_USAGES})
    if any(key_usage.values()):
        builder = builder.add_extension(x509.KeyUsage(**key_usage), critical=True)
    extended = list(dict.fromkeys(_EXTENDED_KEY_USAGES[u] for u in usages if u in _EXTENDED_KEY_USAGES))
    if extended:
        builder = builder.add_extension(x509.ExtendedKeyUsage(extended), critical=False)
    try:
        sans = request.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        sans = None
    if sans is not None and len(sans):
        builder = builder.add_extension(sans, critical=False)
    with_ski = builder.add_extension(
        x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_certificate.public_key()),  # type: ignore[arg-type]
        critical=False,
    )
    certificate = with_ski.sign(ca_key, hashes.SHA256())
    return Issued(certificate.public_bytes(serialization.Encoding.PEM))


def _older_than(timestamp: Any, age: dt.timedelta, now: dt.datetime) -> bool:
    moment = parse_time_or_none(timestamp, naive_as_utc=True)
    return moment is not None and now - moment > age


def _issued_expired(csr: Obj, now: dt.datetime) -> bool:
    pem = certificates.certificate_bytes(csr)
    if not pem:
        return False
    try:
        certificate = x509.load_pem_x509_certificate(pem)
    except ValueError:
        return False
    return now > certificate.not_valid_after_utc


def should_clean(csr: Obj, now: dt.datetime) -> bool:
    """kube's cleaner: whether the CSR is deleted now."""
    issued = bool(certificates.certificate_bytes(csr))
    conditions = certificates.conditions(csr)
    for condition in conditions:
        kind, updated = condition.get("type"), condition.get("lastUpdateTime")
        if kind == APPROVED and issued and (_older_than(updated, APPROVED_EXPIRATION, now) or _issued_expired(csr, now)):
            return True
        if kind in (DENIED, FAILED) and _older_than(updated, DENIED_EXPIRATION, now):
            return True
    created = field.mapping(csr.get("metadata")).get("creationTimestamp")
    return not conditions and _older_than(created, PENDING_EXPIRATION, now)

