"""kube-apiserver's service account flags for `gpufed controlplane`: issuers, API audiences, the
JWKS URI, and the keys that sign and verify service account tokens.

As kube's: ``--service-account-issuer`` is repeatable (the first signs and names the discovery
documents, all are accepted), ``--api-audiences`` defaults to the issuers, ``--service-account-jwks-uri``
must be ``https``, ``--service-account-signing-key-file`` is one PEM private key and
``--service-account-key-file`` (repeatable) PEM public or private keys or certificates. A bad value
is a one-line error naming the flag; key files are read once, when the flags are parsed.

In: argv. Out: :class:`ServiceAccountOptions`.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from controlplane.apiserver.auth.serviceaccountjwt import (
    DEFAULT_ISSUER,
    ServiceAccountOptions,
    issuer_url,
    jwks_uri,
)
from controlplane.apiserver.auth.serviceaccountkeys import PublicKey, SigningKey, public_keys_from_pem


class _Issuers(argparse.Action):
    """``--service-account-issuer``, repeatable: the first an ``https`` URL without query or fragment
    (the discovery documents are its), the others any name kube accepts; each once."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: str | Sequence[Any] | None, option_string: str | None = None) -> None:
        given = getattr(namespace, self.dest)
        issuers: list[str] = [] if given is self.default else list(given)
        value = str(values)
        try:
            if not issuers:
                issuer_url(value)
        except ValueError as exc:
            raise argparse.ArgumentError(self, str(exc)) from None
        if not value:
            raise argparse.ArgumentError(self, "service-account-issuer should not be an empty string")
        if value in issuers:
            raise argparse.ArgumentError(self, f'service-account-issuer "{value}" is already specified')
        setattr(namespace, self.dest, [*issuers, value])


def _audiences(text: str) -> list[str]:
    audiences = [a.strip() for a in text.split(",") if a.strip()]
    if not audiences:
        raise argparse.ArgumentTypeError("expected one or more audiences, separated by commas")
    return audiences


def _jwks_uri(text: str) -> str:
    try:
        return jwks_uri(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _read(path: str, what: str) -> bytes:
    try:
        return Path(path).read_bytes()
    except OSError as exc:
        raise argparse.ArgumentTypeError(f"error reading {what} file {path}: {exc.strerror or exc}") from None


def _signing_key_file(path: str) -> SigningKey:
    try:
        return SigningKey.from_pem(_read(path, "private key"))
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"failed to parse {path}: {exc}") from None


def _key_file(path: str) -> list[PublicKey]:
    try:
        return public_keys_from_pem(_read(path, "public key"))
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"error reading public key file {path}: {exc}") from None


def add_service_account_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--service-account-issuer", dest="service_account_issuers", action=_Issuers,
                        default=(DEFAULT_ISSUER,), metavar="URL",
                        help="as kube-apiserver's flag: the iss of the service account tokens kubectl create "
                             "token issues, and of /.well-known/openid-configuration; an https URL where "
                             "verifiers can fetch those documents (default "
                             f"{DEFAULT_ISSUER}, kubeadm's). Repeat it to accept tokens of other issuers "
                             "too: the first signs, all are accepted")
    parser.add_argument("--api-audiences", type=_audiences, action="extend", default=None, metavar="AUD,...",
                        help="as kube-apiserver's flag: a service account token authenticates to the hub only "
                             "if it is for one of these audiences, the audiences of a TokenRequest or "
                             "TokenReview that names none (default: the --service-account-issuer URLs)")
    parser.add_argument("--service-account-jwks-uri", type=_jwks_uri, default=None, metavar="URL",
                        help="as kube-apiserver's flag: the jwks_uri of /.well-known/openid-configuration, for "
                             "keys served elsewhere than the issuer's /openid/v1/jwks; an https URL")
    parser.add_argument("--service-account-signing-key-file", type=_signing_key_file, default=None, metavar="FILE",
                        help="as kube-apiserver's flag: a PEM RSA or ECDSA private key to sign service account "
                             "tokens with, the same on every replica (default: the key the first hub created "
                             "and keeps in etcd)")
    parser.add_argument("--service-account-key-file", type=_key_file, action="append", default=None,
                        metavar="FILE",
                        help="as kube-apiserver's flag, repeatable: PEM RSA or ECDSA public or private keys, or "
                             "certificates, whose tokens the hub accepts besides the signing key's, listed "
                             "in /openid/v1/jwks: the previous signing key while tokens it signed live")


def service_account_options(args: argparse.Namespace) -> ServiceAccountOptions:
    """The service account flags, parsed."""
    return ServiceAccountOptions(
        issuers=tuple(args.service_account_issuers),
        api_audiences=tuple(dict.fromkeys(args.api_audiences or ())),
        jwks_uri=args.service_account_jwks_uri or "",
        signing_key=args.service_account_signing_key_file,
        verification_keys=tuple(key for keys in args.service_account_key_file or () for key in keys),
    )
