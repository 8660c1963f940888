"""Client certificate authentication, as kube-apiserver's x509 authenticator with
``--client-ca-file``.

The hub's TLS server asks every client for a certificate and accepts the handshake whatever is
offered (:mod:`controlplane.apiserver.requestclientcert`); :class:`ClientCertificates` then
verifies an offered certificate against the client CA (the hub's own CA unless
``--client-ca-file`` names another) as kube's ``x509.Verify`` with ``ExtKeyUsageClientAuth``: its
validity period, a chain to a CA of the bundle, and, when it has an extended key usage,
``clientAuth`` (or any). A client that offers none goes on to bearer tokens. A certificate that
fails is :class:`CertificateRejected` with kube's message (``verifying certificate SN=..., SKID=...,
AKID=... failed: x509: certificate signed by unknown authority``): the request is then answered
401 unless a bearer token authenticates it (kube's union of authenticators), and never counts as
anonymous. The remaining lifetime of every offered certificate is observed in
``apiserver_client_certificate_expiration_seconds``, kube's histogram and buckets.

The user a verified certificate names is kube's (``CommonNameUserConversion``): the subject's
Common Name is the user, each Organization a group (with ``system:authenticated``), and the extra
``authentication.kubernetes.io/credential-id`` is ``X509SHA256=<hex SHA-256 of the certificate>``.
A certificate without a Common Name authenticates nobody. As in kube, a certificate is checked
before a bearer token, and it stays valid until it expires (there is no revocation): issue
short-lived ones. Intermediate CAs the client sends after its certificate build the chain, as
kube's (:func:`~controlplane.apiserver.requestclientcert.peer_intermediates`).

In: the DER certificate a client offered and the intermediates it sent. Out: the :class:`UserInfo` it names. No I/O; the users of
the certificates seen last are kept.
"""

from __future__ import annotations

import datetime as dt
import functools
import hashlib
import ssl
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Final

from cryptography import x509
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID
from cryptography.x509.verification import (
    Criticality,
    ExtensionPolicy,
    PolicyBuilder,
    Store,
    VerificationError,
)
from prometheus_client import CollectorRegistry, Histogram

from controlplane.apis.timestamps import format_time
from controlplane.apiserver.identity import AUTHENTICATED, EXTRA_CREDENTIAL_ID, Role, UserInfo
from controlplane.metricstability import Stability, kube_help
from controlplane.pki import utc_now

#: Certificates whose user is kept (a fleet of clients each with its own certificate fits).
_CACHED_CERTIFICATES: Final = 1024

#: kube's buckets of ``apiserver_client_certificate_expiration_seconds``: 0, 30 minutes, 1, 2, 6 and
#: 12 hours, 1, 2 and 4 days, 1 week, 1, 3 and 6 months, 1 year.
EXPIRATION_BUCKETS: Final = (
    0, 1800, 3600, 7200, 21600, 43200, 86400, 172800, 345600, 604800, 2592000, 7776000, 15552000, 31104000,
)
#: Go's ``x509`` errors, as kube's log line and its authenticators' aggregate error show them.
UNKNOWN_AUTHORITY: Final = "x509: certificate signed by unknown authority"
INCOMPATIBLE_USAGE: Final = "x509: certificate specifies an incompatible key usage"
_CLIENT_USAGES: Final = frozenset({ExtendedKeyUsageOID.CLIENT_AUTH, ExtendedKeyUsageOID.ANY_EXTENDED_KEY_USAGE})
#: Go's ``x509.Verify`` checks no extension but a CA's basic constraints and the key usages (below).
_CA_POLICY: Final = ExtensionPolicy.permit_all().require_present(x509.BasicConstraints, Criticality.AGNOSTIC, None)


class CertificateRejected(Exception):
    """A client offered a certificate that does not verify; the message is kube's error."""


def expiration_histogram(registry: CollectorRegistry | None = None) -> Histogram:
    """kube's ``apiserver_client_certificate_expiration_seconds``, in ``registry``."""
    return Histogram(
        "apiserver_client_certificate_expiration_seconds",
        kube_help(
            Stability.ALPHA, "Distribution of the remaining lifetime on the certificate used to authenticate a request.",
        ),
        buckets=EXPIRATION_BUCKETS, registry=registry,
    )


class ClientCertificates:
    """kube's x509 authenticator over the client CA bundle ``ca_pem`` (see the module docstring)."""

    def __init__(
        self, ca_pem: bytes, *, expiration: Histogram | None = None, clock: Callable[[], dt.datetime] = utc_now
    ) -> None:
        self._store = Store(x509.load_pem_x509_certificates(ca_pem))
        self._expiration = expiration
        self._clock = clock
        #: Verified certificates' users (by the certificate and the intermediates sent with it), each
        #: with its expiry and the time until which its chain is valid.
        self._verified: OrderedDict[tuple[bytes, ...], tuple[UserInfo | None, dt.datetime, dt.datetime]] = OrderedDict()

    def user(self, der: bytes, intermediates: Sequence[bytes] = ()) -> UserInfo | None:
        """The user a client's certificate names (None: no Common Name, so nobody), with the
        ``intermediates`` the client sent after it; raise :class:`CertificateRejected` when it does
        not verify."""
        now = self._clock()
        key = (der, *intermediates)
        known = self._verified.get(key)
        if known is not None and now < known[2]:
            self._verified.move_to_end(key)
            self._observe(known[1], now)
            return known[0]
        try:
            certificate = x509.load_der_x509_certificate(der)
            sent = [x509.load_der_x509_certificate(c) for c in intermediates]
        except ValueError:
            raise CertificateRejected("verifying certificate failed: x509: malformed certificate") from None
        self._observe(certificate.not_valid_after_utc, now)
        chain = self._verified_chain(certificate, sent, now)
        user = certificate_user(der)
        self._verified[key] = (user, certificate.not_valid_after_utc, min(c.not_valid_after_utc for c in chain))
        if len(self._verified) > _CACHED_CERTIFICATES:
            self._verified.popitem(last=False)
        return user

    def _observe(self, not_after: dt.datetime, now: dt.datetime) -> None:
        if self._expiration is not None:
            self._expiration.observe((not_after - now).total_seconds())

    def _verified_chain(
        self, certificate: x509.Certificate, intermediates: list[x509.Certificate], now: dt.datetime
    ) -> list[x509.Certificate]:
        """As Go's ``Verify`` with ``KeyUsages: [ExtKeyUsageClientAuth]``: the leaf's validity period
        first, then a chain to the bundle, then each certificate's extended key usage in it."""
        def rejected(reason: str) -> CertificateRejected:
            return CertificateRejected(f"verifying certificate {certificate_identifier(certificate)} failed: {reason}")

        if now > certificate.not_valid_after_utc or now < certificate.not_valid_before_utc:
            bound, word = (
                (certificate.not_valid_after_utc, "after") if now > certificate.not_valid_after_utc
                else (certificate.not_valid_before_utc, "before")
            )
            raise rejected(f"x509: certificate has expired or is not yet valid: current time {format_time(now)} is "
                           f"{word} {format_time(bound)}")
        verifier = (PolicyBuilder().store(self._store).time(now)
                    .extension_policies(ca_policy=_CA_POLICY, ee_policy=ExtensionPolicy.permit_all())
                    .build_client_verifier())
        try:
            chain = verifier.verify(certificate, intermediates).chain
        except VerificationError as exc:
            expired = "not valid at validation time" in str(exc)
            raise rejected("x509: certificate has expired or is not yet valid" if expired else UNKNOWN_AUTHORITY) from None
        for member in chain:
            try:
                usages = set(member.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value)
            except x509.ExtensionNotFound:
                continue
            if not usages & _CLIENT_USAGES:
                raise rejected(INCOMPATIBLE_USAGE)
        return chain


def certificate_identifier(certificate: x509.Certificate) -> str:
    """kube's ``certificateIdentifier``: ``SN=<decimal serial>, SKID=<AB:CD...>, AKID=<...>``."""
    try:
        skid = certificate.extensions.get_extension_for_class(x509.SubjectKeyIdentifier).value.digest
    except x509.ExtensionNotFound:
        skid = b""
    try:
        akid = certificate.extensions.get_extension_for_class(x509.AuthorityKeyIdentifier).value.key_identifier or b""
    except x509.ExtensionNotFound:
        akid = b""
    return f"SN={certificate.serial_number}, SKID={skid.hex(':').upper()}, AKID={akid.hex(':').upper()}"




def peer_certificate(ssl_object: ssl.SSLObject | ssl.SSLSocket | None) -> bytes | None:
    """The DER certificate a TLS client offered, if any."""
    if ssl_object is None:
        return None
    return ssl_object.getpeercert(binary_form=True)


@functools.lru_cache(maxsize=_CACHED_CERTIFICATES)
def certificate_user(der: bytes) -> UserInfo | None:
    """The user a verified client certificate names; None when its subject has no Common Name."""
    certificate = x509.load_der_x509_certificate(der)
    names = certificate.subject.get_attributes_for_oid(NameOID.COMMON_NAME)
    user = str(names[0].value) if names else ""
    if not user:
        return None
    groups = [str(o.value) for o in certificate.subject.get_attributes_for_oid(NameOID.ORGANIZATION_NAME)]
    return UserInfo(
        name=user, role=Role.USER, user_groups=tuple(dict.fromkeys([*groups, AUTHENTICATED])),
        extra=((EXTRA_CREDENTIAL_ID, (f"X509SHA256={hashlib.sha256(der).hexdigest()}",)),),
    )
