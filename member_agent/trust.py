"""Pinning the hub's CA: the agent trusts a CA only if its public key hash matches the join command.

kubeadm's discovery scheme: the join command carries ``sha256:<hex>``, the SHA-256 of the CA
certificate's DER-encoded SubjectPublicKeyInfo. The agent fetches the CA over an unverified
connection, recomputes the hash here and refuses a CA that does not match; every later
connection then verifies the hub's serving certificate against that CA, so a man in the middle
could neither substitute the CA (different key, different hash) nor impersonate the hub.

In: PEM bytes and the expected hash. Out: the normalized hash, or :class:`TrustError`. Pure.
"""

from __future__ import annotations

import hashlib
import hmac
import re

from cryptography import x509
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

_HASH = re.compile(r"^sha256:([0-9a-f]{64})\Z")


class TrustError(Exception):
    """The hub's CA cannot be trusted (malformed, or not the one the join command names)."""


def normalize_hash(value: str) -> str:
    """``sha256:<64 hex>`` in lower case; raises :class:`TrustError` for anything else."""
    text = value.strip().lower()
    if not _HASH.match(text):
        raise TrustError(f"--hub-ca-hash must look like sha256:<64 hex digits>, got {value[:80]!r}")
    return text


def spki_hash(certificate: x509.Certificate) -> str:
    """kubeadm's CA hash: sha256 over the certificate's SubjectPublicKeyInfo DER."""
    spki = certificate.public_key().public_bytes(Encoding.DER, PublicFormat.SubjectPublicKeyInfo)
    return "sha256:" + hashlib.sha256(spki).hexdigest()


def ca_pem_hash(ca_pem: bytes) -> str:
    """The hash of the first certificate in ``ca_pem``."""
    try:
        certificates = x509.load_pem_x509_certificates(ca_pem)
    except ValueError as exc:
        raise TrustError("the hub's CA is not a PEM certificate") from exc
    return spki_hash(certificates[0])


def verify_ca(ca_pem: bytes, expected_hash: str) -> bytes:
    """The PEM of the CA certificate in ``ca_pem`` whose hash is ``expected_hash``.

    Only the matching certificate is returned, so other certificates in a served bundle are
    never trusted by accident.
    """
    expected = normalize_hash(expected_hash)
    try:
        certificates = x509.load_pem_x509_certificates(ca_pem)
    except ValueError as exc:
        raise TrustError("the hub's CA is not a PEM certificate") from exc
    for certificate in certificates:
        if hmac.compare_digest(spki_hash(certificate), expected):
            return certificate.public_bytes(Encoding.PEM)
    found = ", ".join(spki_hash(cert) for cert in certificates)
    raise TrustError(f"the hub's CA does not match --hub-ca-hash {expected} (the hub serves {found})")
