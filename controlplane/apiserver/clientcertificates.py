"""Client certificate authentication, as kube-apiserver's x509 authenticator with
``--client-ca-file``.

The hub's TLS server asks every client for a certificate and verifies one that is offered
against the client CA (the hub's own CA unless ``--client-ca-file`` names another): its
signature, validity period and, when it has an extended key usage, ``clientAuth``. A client that
offers none goes on to bearer tokens. The user a verified certificate names is kube's
(``CommonNameUserConversion``): the subject's Common Name is the user, each Organization a group
(with ``system:authenticated``), and the extra ``authentication.kubernetes.io/credential-id`` is
``X509SHA256=<hex SHA-256 of the certificate>``. A certificate without a Common Name
authenticates nobody. As in kube, a certificate is checked before a bearer token, and it stays
valid until it expires (there is no revocation): issue short-lived ones.

In: the DER certificate the TLS handshake verified. Out: the :class:`UserInfo` it names. Pure:
no I/O; answers are kept for the certificates seen last.
"""

from __future__ import annotations

import functools
import hashlib
import ssl
from typing import Final

from cryptography import x509
from cryptography.x509.oid import NameOID

from controlplane.apiserver.identity import AUTHENTICATED, EXTRA_CREDENTIAL_ID, Role, UserInfo

#: Certificates whose user is kept (a fleet of clients each with its own certificate fits).
_CACHED_CERTIFICATES: Final = 1024


def peer_certificate(ssl_object: ssl.SSLObject | ssl.SSLSocket | None) -> bytes | None:
    """The DER certificate a TLS client offered and the handshake verified, if any."""
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
