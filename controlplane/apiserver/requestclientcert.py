"""Ask TLS clients for a certificate without letting the handshake judge it: Go's
``tls.RequestClientCert``, which kube-apiserver serves with.

kube-apiserver's TLS server asks every client for a certificate and accepts the handshake whatever
is offered; its x509 authenticator verifies the certificate afterwards, so a certificate the
client CA did not sign, one expired or one not meant for client authentication is answered
``401 Unauthorized`` instead of ending the connection. Python's ``ssl`` module has no verify
callback: with ``CERT_OPTIONAL`` OpenSSL ends the handshake when the offered chain does not
verify. :func:`request_client_certificates` installs, on one ``SSLContext``, an OpenSSL verify
callback that accepts whatever chain is offered (``SSL_CTX_set_verify`` through ``ctypes``, on
the OpenSSL the ``_ssl`` module itself is linked with). Python keeps a context's callback when
its verify mode is set again, and its server sockets inherit it.

The context's ``SSL_CTX`` is read from the ``_ssl._SSLContext`` object, whose C struct starts with
it right after the object header; the pointer is used only once OpenSSL reports, for it, the
context's own options and verify mode. Where that check fails (another Python implementation or
layout) nothing is changed and the caller is told: the handshake then verifies as before.

:func:`peer_intermediates` reads the intermediate CA certificates a client sent after its own,
which kube's authenticator builds the chain with (Python 3.11's ``ssl`` exposes only the client's
own certificate).

In: a server ``SSLContext`` with its client CA loaded; a connection of it. Out: the same context,
asking for a certificate it no longer verifies (:mod:`controlplane.apiserver.clientcertificates`
does); the connection's intermediates.
"""

from __future__ import annotations

import _ssl
import ctypes
import logging
import ssl
import sys
from typing import Final

log = logging.getLogger(__name__)

_SSL_VERIFY_PEER: Final = 0x01
_VerifyCallback = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_int, ctypes.c_void_p)


def _accept_any_chain(_preverified: int, _store: int | None) -> int:
    """OpenSSL's verify callback: 1 continues the handshake whatever the chain's verification found."""
    return 1


#: Kept for the life of the process: OpenSSL holds a pointer to it in every context it is set on.
_ACCEPT_ANY_CHAIN: Final = _VerifyCallback(_accept_any_chain)


def _openssl() -> ctypes.CDLL | None:
    """The ``_ssl`` extension's library: its symbols resolve to the OpenSSL it is linked with. None
    outside CPython (whose object layouts the pointers below are read from)."""
    if sys.implementation.name != "cpython":
        return None
    try:
        library = ctypes.CDLL(_ssl.__file__)
        library.SSL_CTX_set_verify.argtypes = [ctypes.c_void_p, ctypes.c_int, _VerifyCallback]
        library.SSL_CTX_set_verify.restype = None
        library.SSL_CTX_get_verify_mode.argtypes = [ctypes.c_void_p]
        library.SSL_CTX_get_verify_mode.restype = ctypes.c_int
        library.SSL_CTX_get_options.argtypes = [ctypes.c_void_p]
        library.SSL_CTX_get_options.restype = ctypes.c_uint64
        library.SSL_get_SSL_CTX.argtypes = [ctypes.c_void_p]
        library.SSL_get_SSL_CTX.restype = ctypes.c_void_p
        library.SSL_get_peer_cert_chain.argtypes = [ctypes.c_void_p]
        library.SSL_get_peer_cert_chain.restype = ctypes.c_void_p
        library.OPENSSL_sk_num.argtypes = [ctypes.c_void_p]
        library.OPENSSL_sk_num.restype = ctypes.c_int
        library.OPENSSL_sk_value.argtypes = [ctypes.c_void_p, ctypes.c_int]
        library.OPENSSL_sk_value.restype = ctypes.c_void_p
        library.i2d_X509.argtypes = [ctypes.c_void_p, ctypes.POINTER(ctypes.POINTER(ctypes.c_ubyte))]
        library.i2d_X509.restype = ctypes.c_int
    except (OSError, AttributeError):
        return None
    return library


_LIBRARY: Final = _openssl()


def _ssl_ctx(context: ssl.SSLContext, library: ctypes.CDLL) -> int | None:
    """The context's ``SSL_CTX *``, once OpenSSL confirms it holds the context's options and verify mode."""
    pointer = ctypes.c_void_p.from_address(id(context) + object.__basicsize__).value
    if not pointer:
        return None
    if library.SSL_CTX_get_options(pointer) != int(context.options):
        return None
    if library.SSL_CTX_get_verify_mode(pointer) & _SSL_VERIFY_PEER != (context.verify_mode != ssl.CERT_NONE):
        return None
    return int(pointer)


def request_client_certificates(context: ssl.SSLContext) -> bool:
    """Make ``context`` ask each client for a certificate and accept any it offers (or none), as
    ``tls.RequestClientCert``. False (and a warning) when this Python's ``ssl`` cannot be so set:
    ``context`` then verifies the offered certificate in the handshake (``CERT_OPTIONAL``)."""
    context.verify_mode = ssl.CERT_OPTIONAL
    pointer = _ssl_ctx(context, _LIBRARY) if _LIBRARY is not None else None
    if _LIBRARY is None or pointer is None:
        log.warning(
            "this Python's ssl module cannot leave client certificates to the authenticator: a certificate "
            "the client CA did not sign ends the TLS handshake instead of being answered 401"
        )
        return False
    _LIBRARY.SSL_CTX_set_verify(pointer, _SSL_VERIFY_PEER, _ACCEPT_ANY_CHAIN)
    return True


def peer_intermediates(ssl_object: ssl.SSLObject | ssl.SSLSocket | None) -> list[bytes]:
    """The DER certificates a client sent after its own (the intermediates kube's x509 authenticator
    builds chains with), in the client's order; none when they cannot be read.

    Python 3.13 reads them with ``get_unverified_chain``; before, OpenSSL's
    ``SSL_get_peer_cert_chain`` (which on a server leaves the client's own certificate out) on the
    connection's ``SSL`` (read after the ``_ssl._SSLSocket`` header and its socket reference, and
    used only when it belongs to the context :func:`request_client_certificates` checked)."""
    if ssl_object is None:
        return []
    unverified = getattr(ssl_object, "get_unverified_chain", None)
    if unverified is not None:
        return [c.public_bytes(_ssl.ENCODING_DER) for c in (unverified() or [])[1:]]
    connection = getattr(ssl_object, "_sslobj", None)
    if _LIBRARY is None or connection is None:
        return []
    pointer = ctypes.c_void_p.from_address(id(connection) + object.__basicsize__ + ctypes.sizeof(ctypes.c_void_p)).value
    context = _ssl_ctx(ssl_object.context, _LIBRARY)
    if not pointer or context is None or _LIBRARY.SSL_get_SSL_CTX(pointer) != context:
        return []
    stack = _LIBRARY.SSL_get_peer_cert_chain(pointer)
    if not stack:
        return []
    certificates = []
    for index in range(_LIBRARY.OPENSSL_sk_num(stack)):
        certificate = _LIBRARY.OPENSSL_sk_value(stack, index)
        size = _LIBRARY.i2d_X509(certificate, None)
        if size <= 0:
            return []
        buffer = (ctypes.c_ubyte * size)()
        cursor = ctypes.cast(buffer, ctypes.POINTER(ctypes.c_ubyte))
        _LIBRARY.i2d_X509(certificate, ctypes.byref(cursor))
        certificates.append(bytes(buffer))
    return certificates
