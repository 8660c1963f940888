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

In: a server ``SSLContext`` with its client CA loaded. Out: the same context, asking for a
certificate it no longer verifies (:mod:`controlplane.apiserver.clientcertificates` does).
"""

from __future__ import annotations

import _ssl
import ctypes
import logging
import ssl
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
    """The ``_ssl`` extension's library: its symbols resolve to the OpenSSL it is linked with."""
    try:
        library = ctypes.CDLL(_ssl.__file__)
        library.SSL_CTX_set_verify.argtypes = [ctypes.c_void_p, ctypes.c_int, _VerifyCallback]
        library.SSL_CTX_set_verify.restype = None
        library.SSL_CTX_get_verify_mode.argtypes = [ctypes.c_void_p]
        library.SSL_CTX_get_verify_mode.restype = ctypes.c_int
        library.SSL_CTX_get_options.argtypes = [ctypes.c_void_p]
        library.SSL_CTX_get_options.restype = ctypes.c_uint64
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
