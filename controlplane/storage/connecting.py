"""How the hub reaches etcd: its endpoints as one gRPC target, and the TLS material
(CA, client certificate and key) read and checked into gRPC credentials.

In: the ``--etcd-endpoints`` (``http://``/``https://`` URLs, or a local etcd's ``unix:///path``)/``--etcd-cafile``/``--etcd-certfile``/``--etcd-keyfile``
settings. Out: a gRPC target string and channel credentials, or an
:class:`EtcdConfigError` saying which setting cannot work.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import grpc  # grpcio ships no type hints: see the mypy overrides in pyproject.toml
from cryptography import x509
from cryptography.hazmat.primitives import serialization


class EtcdConfigError(ValueError):
    """The etcd client settings cannot work (an endpoint, a TLS file); the message says which."""


@dataclass(frozen=True, slots=True)
class EtcdClientTls:
    """How to reach etcd over TLS: the CA that signed etcd's serving certificate and the
    client certificate and key etcd trusts (both or neither). Read when a store is built."""

    ca_file: Path
    cert_file: Path | None = None
    key_file: Path | None = None

    def __post_init__(self) -> None:
        if (self.cert_file is None) != (self.key_file is None):
            raise EtcdConfigError("--etcd-certfile and --etcd-keyfile go together: give both or neither")

    def channel_credentials(self) -> Any:
        """gRPC credentials from the files, checked first so that a bad file is a clear error."""
        root = _read_pem(self.ca_file, flag="--etcd-cafile")
        try:
            x509.load_pem_x509_certificates(root)
        except ValueError:
            raise EtcdConfigError(f"--etcd-cafile {self.ca_file} holds no PEM certificate") from None
        if self.cert_file is None or self.key_file is None:
            return grpc.ssl_channel_credentials(root_certificates=root)
        chain = _read_pem(self.cert_file, flag="--etcd-certfile")
        key_pem = _read_pem(self.key_file, flag="--etcd-keyfile")
        try:
            cert = x509.load_pem_x509_certificates(chain)[0]
        except ValueError:
            raise EtcdConfigError(f"--etcd-certfile {self.cert_file} holds no PEM certificate") from None
        try:
            key = serialization.load_pem_private_key(key_pem, password=None)
        except (ValueError, TypeError):
            raise EtcdConfigError(f"--etcd-keyfile {self.key_file} is not an unencrypted PEM private key") from None
        if key.public_key() != cert.public_key():
            raise EtcdConfigError(
                f"--etcd-keyfile {self.key_file} does not match the certificate in --etcd-certfile {self.cert_file}"
            )
        if cert.not_valid_after_utc <= dt.datetime.now(dt.UTC):
            raise EtcdConfigError(
                f"the client certificate in --etcd-certfile {self.cert_file} expired at "
                f"{cert.not_valid_after_utc:%Y-%m-%d %H:%M:%S}Z; renew it"
            )
        return grpc.ssl_channel_credentials(root_certificates=root, private_key=key_pem, certificate_chain=chain)


def _read_pem(path: Path, *, flag: str) -> bytes:
    try:
        return path.read_bytes()
    except OSError as exc:
        raise EtcdConfigError(f"{flag} {path}: cannot read it: {exc.strerror or exc}") from None


def endpoint_scheme(endpoints: Sequence[str]) -> str:
    """``https``, ``http`` or ``unix``: the one scheme of all ``endpoints`` (no scheme means http)."""
    schemes = {urlsplit(e).scheme if "://" in e else "http" for e in endpoints}
    if len(schemes) > 1:
        raise EtcdConfigError(f"etcd endpoints mix schemes: {', '.join(endpoints)}")
    return schemes.pop() if schemes else "http"


def _unix_target(endpoints: Sequence[str]) -> str:
    """The gRPC target of one ``unix:///absolute/path`` endpoint (a local etcd's socket; no TLS)."""
    if len(endpoints) > 1:
        raise EtcdConfigError(f"a unix:// etcd endpoint cannot go with others: {', '.join(endpoints)}")
    parts = urlsplit(endpoints[0])
    if parts.netloc or not parts.path.startswith("/"):
        raise EtcdConfigError(f"etcd endpoint {endpoints[0]!r}: a unix:// endpoint is an absolute path, unix:///path")
    return f"unix:{parts.path}"


def grpc_target(endpoints: Sequence[str]) -> str:
    """The gRPC target for etcd client URLs (``https://host:port``, ``http://host:port``,
    ``host:port`` or one ``unix:///path``).

    Several endpoints must be IP literals of one family; gRPC then fails over between
    them. Over TLS, gRPC checks every server's certificate against one name, so there
    several endpoints are refused: one DNS name that resolves to every member (etcd's
    headless Service) does the same, and every member's certificate must name it.
    """
    if not endpoints:
        raise EtcdConfigError("at least one etcd endpoint is required")
    scheme = endpoint_scheme(endpoints)
    if scheme == "unix":
        return _unix_target(endpoints)
    if scheme == "https" and len(endpoints) > 1:
        raise EtcdConfigError(
            f"several https:// etcd endpoints are not supported ({', '.join(endpoints)}): give one DNS name "
            "that resolves to every member (e.g. etcd's headless Service) and that every member's certificate names"
        )
    addresses: list[tuple[str, int]] = []
    for endpoint in endpoints:
        parts = urlsplit(endpoint if "://" in endpoint else f"http://{endpoint}")
        if parts.scheme not in ("http", "https"):
            raise EtcdConfigError(
                f"etcd endpoint {endpoint!r}: only http://, https:// and unix:// endpoints are supported"
            )
        if parts.hostname is None:
            raise EtcdConfigError(f"etcd endpoint {endpoint!r} has no host")
        addresses.append((parts.hostname, parts.port or 2379))
    if len(addresses) == 1:
        host, port = addresses[0]
        return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    try:
        versions = {ipaddress.ip_address(host).version for host, _ in addresses}
    except ValueError:
        raise EtcdConfigError(
            f"several etcd endpoints must be IP addresses, got {list(endpoints)}; "
            "or give one DNS name that resolves to every member"
        ) from None
    if versions == {4}:
        return "ipv4:" + ",".join(f"{host}:{port}" for host, port in addresses)
    if versions == {6}:
        return "ipv6:" + ",".join(f"[{host}]:{port}" for host, port in addresses)
    raise EtcdConfigError(f"etcd endpoints mix IPv4 and IPv6 addresses: {list(endpoints)}")
