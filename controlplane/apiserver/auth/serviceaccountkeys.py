"""The keys of service account tokens, as kube-apiserver reads and names them.

The hub signs with one private key: the one ``--service-account-signing-key-file`` names, else an
RSA key created once, by the first hub to start, and kept in the hub's store (etcd) under
:data:`SIGNING_KEY_KEY`, outside the API keyspace as the token records are, so every replica and
every restart signs with the same key without a file to copy between replicas. It verifies with
that key and with every public key ``--service-account-key-file`` lists (public or private keys,
or certificates, RSA or ECDSA, several to a file: kube's ``keyutil.ParsePublicKeysPEM``), which is
how a key is rotated: the old key keeps verifying the tokens it signed while a new one signs.

A key's ``kid`` is kube's: the base64url SHA-256 of its DER (PKIX) public key; its algorithm is
kube's for its type (``RS256`` for RSA, ``ES256``/``ES384``/``ES512`` by ECDSA curve). Never logged.

In: PEM bytes, a Store. Out: :class:`SigningKey` (sign), :class:`PublicKey` (verify, JWK).
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import logging
from dataclasses import dataclass
from typing import Any, Final, TypeAlias

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, padding, rsa
from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature, encode_dss_signature

from controlplane.storage.interface import AlreadyExists, NotFound, Store, Unavailable

log = logging.getLogger(__name__)

#: Where the hub's own signing key lives in the store (not an API object key, as the token records).
SIGNING_KEY_KEY: Final = "/gpufed-auth/service-account-signing-key"
_RSA_BITS: Final = 2048
_STORE_TIMEOUT_SECONDS: Final = 10.0
#: kube's JWS algorithm, hash and signature half-length of each ECDSA curve.
_CURVES: Final[dict[str, tuple[str, hashes.HashAlgorithm, int]]] = {
    "secp256r1": ("ES256", hashes.SHA256(), 32),
    "secp384r1": ("ES384", hashes.SHA384(), 48),
    "secp521r1": ("ES512", hashes.SHA512(), 66),
}
_JWK_CURVES: Final = {"secp256r1": "P-256", "secp384r1": "P-384", "secp521r1": "P-521"}
_NO_PUBLIC_KEYS: Final = "data does not contain any valid RSA or ECDSA public keys"
_NO_PRIVATE_KEY: Final = "data does not contain a valid RSA or ECDSA private key"

Public: TypeAlias = rsa.RSAPublicKey | ec.EllipticCurvePublicKey
Private: TypeAlias = rsa.RSAPrivateKey | ec.EllipticCurvePrivateKey


def b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _unsigned(value: int, size: int | None = None) -> bytes:
    return value.to_bytes(size or (value.bit_length() + 7) // 8, "big")


def _supported(key: object) -> bool:
    return isinstance(key, rsa.RSAPublicKey) or (
        isinstance(key, ec.EllipticCurvePublicKey) and key.curve.name in _CURVES
    )


@dataclass(frozen=True)
class PublicKey:
    """A key that verifies service account tokens."""

    key: Public

    @property
    def kid(self) -> str:
        """kube's key id: the base64url SHA-256 of the DER (PKIX) public key."""
        der = self.key.public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
        return b64(hashlib.sha256(der).digest())

    @property
    def algorithm(self) -> str:
        return "RS256" if isinstance(self.key, rsa.RSAPublicKey) else _CURVES[self.key.curve.name][0]

    def jwk(self) -> dict[str, str]:
        """The key as a JWK, as kube's ``/openid/v1/jwks`` lists it."""
        common = {"use": "sig", "kid": self.kid, "alg": self.algorithm}
        if isinstance(self.key, rsa.RSAPublicKey):
            numbers = self.key.public_numbers()
            return {**common, "kty": "RSA", "n": b64(_unsigned(numbers.n)), "e": b64(_unsigned(numbers.e))}
        point, size = self.key.public_numbers(), _CURVES[self.key.curve.name][2]
        return {**common, "kty": "EC", "crv": _JWK_CURVES[self.key.curve.name],
                "x": b64(_unsigned(point.x, size)), "y": b64(_unsigned(point.y, size))}

    def verifies(self, algorithm: str, signing_input: bytes, signature: bytes) -> bool:
        """Whether ``signature`` is this key's over ``signing_input`` with ``algorithm`` (the JWS ``alg``)."""
        if algorithm != self.algorithm:
            return False
        try:
            if isinstance(self.key, rsa.RSAPublicKey):
                self.key.verify(signature, signing_input, padding.PKCS1v15(), hashes.SHA256())
                return True
            _, digest, size = _CURVES[self.key.curve.name]
            if len(signature) != 2 * size:
                return False
            r, s = int.from_bytes(signature[:size], "big"), int.from_bytes(signature[size:], "big")
            self.key.verify(encode_dss_signature(r, s), signing_input, ec.ECDSA(digest))
            return True
        except InvalidSignature:
            return False


@dataclass(frozen=True)
class SigningKey:
    """The private key the hub signs service account tokens with."""

    private: Private

    @classmethod
    def generate(cls) -> SigningKey:
        return cls(rsa.generate_private_key(public_exponent=65537, key_size=_RSA_BITS))

    @classmethod
    def from_pem(cls, data: bytes) -> SigningKey:
        """The first RSA or ECDSA private key of a PEM file (PKCS#1, SEC 1 or PKCS#8), as kube's
        ``keyutil.ParsePrivateKeyPEM``; ValueError with kube's message otherwise."""
        for block in _pem_blocks(data):
            try:
                private = serialization.load_pem_private_key(block, password=None)
            except (ValueError, TypeError):
                continue
            if isinstance(private, rsa.RSAPrivateKey | ec.EllipticCurvePrivateKey) and _supported(private.public_key()):
                return cls(private)
        raise ValueError(_NO_PRIVATE_KEY)

    @classmethod
    async def load_or_create(cls, store: Store) -> SigningKey:
        """The key in ``store``, created there by the first hub that finds none."""
        try:
            async with asyncio.timeout(_STORE_TIMEOUT_SECONDS):
                return await cls._load_or_create(store)
        except TimeoutError:
            raise Unavailable(
                f"the store did not answer within {_STORE_TIMEOUT_SECONDS:g}s for the service account signing key"
            ) from None

    @classmethod
    async def _load_or_create(cls, store: Store) -> SigningKey:
        try:
            return cls._of(await store.get(SIGNING_KEY_KEY))
        except NotFound:
            pass
        key = cls.generate()
        try:
            await store.create(SIGNING_KEY_KEY, key.pem())
        except AlreadyExists:  # another replica made it first: use that one
            return cls._of(await store.get(SIGNING_KEY_KEY))
        log.info("created the service account signing key (kid %s)", key.public.kid)
        return key

    @classmethod
    def _of(cls, kv: Any) -> SigningKey:
        try:
            return cls.from_pem(kv.value)
        except ValueError:
            raise ValueError(
                f"the store's {SIGNING_KEY_KEY} does not hold a PEM private key: delete it to have a new one "
                "made (service account tokens signed with the old one stop working)"
            ) from None

    def pem(self) -> bytes:
        return self.private.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )

    @property
    def public(self) -> PublicKey:
        return PublicKey(self.private.public_key())

    def sign(self, signing_input: bytes) -> bytes:
        """The JWS signature of ``signing_input`` with this key's algorithm (ECDSA's as ``r||s``)."""
        if isinstance(self.private, rsa.RSAPrivateKey):
            return self.private.sign(signing_input, padding.PKCS1v15(), hashes.SHA256())
        _, digest, size = _CURVES[self.private.curve.name]
        r, s = decode_dss_signature(self.private.sign(signing_input, ec.ECDSA(digest)))
        return _unsigned(r, size) + _unsigned(s, size)


def _pem_blocks(data: bytes) -> list[bytes]:
    """Each ``-----BEGIN ...-----`` to ``-----END ...-----`` block of ``data``, whole."""
    blocks, rest = [], data
    while (start := rest.find(b"-----BEGIN ")) >= 0:
        end = rest.find(b"-----END ", start)
        if end < 0:
            break
        close = rest.find(b"-----", end + 9)
        if close < 0:
            break
        blocks.append(rest[start:close + 5] + b"\n")
        rest = rest[close + 5:]
    return blocks


def _public_of_block(block: bytes) -> object:
    """The public key of one PEM block: a public key, a private key's, or a certificate's."""
    loaders = (
        serialization.load_pem_public_key,
        lambda b: serialization.load_pem_private_key(b, password=None).public_key(),
        lambda b: x509.load_pem_x509_certificate(b).public_key(),
    )
    for load in loaders:
        try:
            return load(block)
        except (ValueError, TypeError):
            continue
    return None


def public_keys_from_pem(data: bytes) -> list[PublicKey]:
    """Every RSA or ECDSA public key of a PEM file (public keys, private keys, certificates), as
    kube's ``keyutil.ParsePublicKeysPEM``; ValueError with kube's message when there is none."""
    keys = []
    for block in _pem_blocks(data):
        key = _public_of_block(block)
        if isinstance(key, rsa.RSAPublicKey | ec.EllipticCurvePublicKey) and _supported(key):
            keys.append(PublicKey(key))
    if not keys:
        raise ValueError(_NO_PUBLIC_KEYS)
    return keys
