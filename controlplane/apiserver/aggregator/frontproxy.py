"""The hub's front-proxy identity: how an extension API server learns who is calling.

As kube-apiserver with ``--requestheader-*`` and ``--proxy-client-cert-file``: the hub keeps a
front-proxy CA of its own (``<state>/front-proxy/front-proxy-ca.{crt,key}``, apart from the serving
PKI and made whether or not the hub serves a provided certificate) and a client certificate it
signs (``front-proxy-client.{crt,key}``, Common Name ``front-proxy-client``; keys 0600, never
logged). Each proxied request carries that certificate and the caller, as the hub authenticated
it (after impersonation), in kube's headers: ``X-Remote-User``, one ``X-Remote-Group`` per group and
``X-Remote-Extra-<key>`` per extra value (the key percent-escaped where a header name may not hold
a character, as client-go's ``SetAuthProxyHeaders`` writes it). The
``kube-system/extension-apiserver-authentication`` ConfigMap (:func:`authentication_configmap`)
tells k8s.io/apiserver-based servers to trust it.

In: the front-proxy folder of the state directory, a user. Out: a :class:`FrontProxy`, headers,
a ConfigMap body.
"""

from __future__ import annotations

import json
import ssl
import urllib.parse
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from cryptography.hazmat.primitives import serialization
from cryptography.x509.oid import ExtendedKeyUsageOID

from controlplane.apis.proxyframing import DROPPED_REQUEST_HEADERS, forwarded_headers
from controlplane.apiserver.identity import UserInfo
from controlplane.pki import ensure_certificate, load_or_create_ca, private_directory

FRONT_PROXY_CLIENT: Final = "front-proxy-client"
USER_HEADER: Final = "X-Remote-User"
GROUP_HEADER: Final = "X-Remote-Group"
EXTRA_HEADER_PREFIX: Final = "X-Remote-Extra-"
#: Headers a client may not send through the hub: they would speak for the hub's front proxy.
IDENTITY_HEADER_PREFIX: Final = "x-remote-"
AUTHENTICATION_CONFIGMAP: Final = "extension-apiserver-authentication"
AUTHENTICATION_NAMESPACE: Final = "kube-system"
#: The characters of a header name that client-go's ``headerKeyEscape`` leaves as they are.
_HEADER_KEY_SAFE: Final = "!#$&'*+-.^_`|~"


@dataclass(frozen=True, slots=True)
class FrontProxy:
    """The front-proxy CA (its certificate, PEM) and the client certificate's files."""

    ca_pem: bytes
    cert_path: Path
    key_path: Path

    def client_context(self, *, ca_bundle_pem: str | None, insecure: bool) -> ssl.SSLContext:
        """A TLS client context that presents the front-proxy certificate and verifies the server
        against ``ca_bundle_pem`` (the system roots without one), or not at all when ``insecure``."""
        context = ssl.create_default_context(cadata=ca_bundle_pem) if ca_bundle_pem else ssl.create_default_context()
        if insecure:
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE
        context.load_cert_chain(self.cert_path, self.key_path)
        return context


def ensure_front_proxy(directory: Path) -> FrontProxy:
    """Create (first run) or load the front-proxy CA and its client certificate in ``directory`` (0700)."""
    private_directory(directory)
    ca_cert_path, ca_key_path = directory / "front-proxy-ca.crt", directory / "front-proxy-ca.key"
    ca_cert = load_or_create_ca(ca_cert_path, ca_key_path, common_name="gpufed-front-proxy-ca")
    cert_path, key_path = directory / "front-proxy-client.crt", directory / "front-proxy-client.key"
    ensure_certificate(
        cert_path, key_path, ca_cert=ca_cert, ca_key_path=ca_key_path, common_name=FRONT_PROXY_CLIENT,
        usages=(ExtendedKeyUsageOID.CLIENT_AUTH,),
    )
    return FrontProxy(ca_cert.public_bytes(serialization.Encoding.PEM), cert_path, key_path)


def identity_headers(user: UserInfo) -> list[tuple[str, str]]:
    """``user`` in kube's request headers."""
    headers = [(USER_HEADER, user.name), *((GROUP_HEADER, group) for group in user.groups)]
    for key, values in user.extra:
        name = EXTRA_HEADER_PREFIX + urllib.parse.quote(key, safe=_HEADER_KEY_SAFE)
        headers += [(name, value) for value in values]
    return headers


def proxied_headers(
    headers: list[tuple[str, str]], user: UserInfo, *, drop: frozenset[str] = frozenset(),
) -> list[tuple[str, str]]:
    """A client's request ``headers`` as sent on to an extension server: without its credentials,
    hop-by-hop headers, ``Impersonate-*``, any ``X-Remote-*`` of its own and ``drop``, with
    ``user`` in kube's headers."""
    kept = [
        (name, value)
        for name, value in forwarded_headers(headers, drop=DROPPED_REQUEST_HEADERS)
        if not name.lower().startswith(IDENTITY_HEADER_PREFIX) and name.lower() not in drop
    ]
    return kept + identity_headers(user)


def authentication_configmap(*, client_ca_pem: bytes | None, front_proxy: FrontProxy) -> dict[str, Any]:
    """kube's ``kube-system/extension-apiserver-authentication``: the CA of the hub's client
    certificates and what a request from its front proxy looks like."""
    data = {
        "requestheader-client-ca-file": front_proxy.ca_pem.decode(),
        "requestheader-username-headers": json.dumps([USER_HEADER]),
        "requestheader-group-headers": json.dumps([GROUP_HEADER]),
        "requestheader-extra-headers-prefix": json.dumps([EXTRA_HEADER_PREFIX]),
        "requestheader-allowed-names": json.dumps([FRONT_PROXY_CLIENT]),
    }
    if client_ca_pem:
        data["client-ca-file"] = client_ca_pem.decode()
    return {
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": AUTHENTICATION_CONFIGMAP, "namespace": AUTHENTICATION_NAMESPACE},
        "data": dict(sorted(data.items())),
    }
