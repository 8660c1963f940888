"""kube-apiserver's service account flags of `gpufed controlplane`: key files read as kube's
``keyutil`` reads them (public or private keys, certificates, RSA or ECDSA, several to a file), the
issuers repeatable, the API audiences defaulting to them, and a one-line error naming the flag for
a bad value."""

from __future__ import annotations

import argparse
import datetime as dt
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import NameOID

from controlplane.apiserver.auth.serviceaccountjwt import TokenIssuer
from controlplane.apiserver.auth.serviceaccountkeys import PublicKey, SigningKey
from gpufed.commands.controlplane import add_arguments
from gpufed.commands.serviceaccountflags import service_account_options

KUBEADM = "https://kubernetes.default.svc.cluster.local"


def parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    return parser.parse_args(list(argv))


def pem(key: rsa.RSAPrivateKey | ec.EllipticCurvePrivateKey, *, public: bool = False) -> bytes:
    if public:
        return key.public_key().public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.TraditionalOpenSSL,
                             serialization.NoEncryption())


def certificate(key: ec.EllipticCurvePrivateKey) -> bytes:
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "sa")])
    now = dt.datetime.now(dt.UTC)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(1).not_valid_before(now).not_valid_after(now + dt.timedelta(days=1))
            .sign(key, hashes.SHA256()))
    return cert.public_bytes(serialization.Encoding.PEM)


def test_the_defaults_are_the_stored_key_and_kubeadms_issuer_and_audience() -> None:
    options = service_account_options(parse())
    assert (options.issuers, options.audiences, options.jwks_uri) == ((KUBEADM,), (KUBEADM,), "")
    assert options.signing_key is None and options.verification_keys == ()


def test_every_issuer_is_kept_in_order_and_the_api_audiences_default_to_them() -> None:
    options = service_account_options(parse("--service-account-issuer", "https://a.example.com",
                                            "--service-account-issuer", "legacy-issuer"))
    assert options.issuers == options.audiences == ("https://a.example.com", "legacy-issuer")
    options = service_account_options(parse("--api-audiences", "vault, api", "--api-audiences", "api,other"))
    assert options.audiences == ("vault", "api", "other")


def test_key_files_hold_public_and_private_keys_and_certificates(tmp_path: Path) -> None:
    rsa_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    ec_keys = [ec.generate_private_key(curve) for curve in (ec.SECP256R1(), ec.SECP384R1(), ec.SECP521R1())]
    bundle = tmp_path / "keys.pem"
    bundle.write_bytes(b"a comment\n" + pem(rsa_key, public=True) + pem(ec_keys[0]) + certificate(ec_keys[1]))
    single = tmp_path / "one.pem"
    single.write_bytes(pem(ec_keys[2], public=True))
    signing = tmp_path / "signing.pem"
    signing.write_bytes(pem(rsa_key))
    options = service_account_options(parse("--service-account-key-file", str(bundle), "--service-account-key-file",
                                            str(single), "--service-account-signing-key-file", str(signing)))
    keys = [PublicKey(k.public_key()) for k in (rsa_key, *ec_keys)]
    assert [k.kid for k in options.verification_keys] == [k.kid for k in keys]
    assert [k.algorithm for k in options.verification_keys] == ["RS256", "ES256", "ES384", "ES512"]
    assert options.signing_key is not None and options.signing_key.public.kid == keys[0].kid


@pytest.mark.parametrize("curve", [ec.SECP256R1(), ec.SECP384R1(), ec.SECP521R1()])
def test_an_ecdsa_key_signs_tokens_its_public_key_alone_verifies(curve: ec.EllipticCurve) -> None:
    private = ec.generate_private_key(curve)
    token = TokenIssuer(SigningKey(private), ("https://a.example.com",)).sign({"iss": "https://a.example.com"})
    verifier = TokenIssuer(SigningKey.generate(), ("https://a.example.com",), (PublicKey(private.public_key()),))
    assert verifier.verify(token) == {"iss": "https://a.example.com"}


@pytest.mark.parametrize(("argv", "why"), [
    (["--service-account-issuer", "https://a.example.com", "--service-account-issuer", "https://a.example.com"],
     'service-account-issuer "https://a.example.com" is already specified'),
    (["--service-account-issuer", "https://a.example.com", "--service-account-issuer", ""],
     "service-account-issuer should not be an empty string"),
    (["--service-account-issuer", "http://a.example.com"], "issuer URL must use https scheme, got: http://a.example.com"),
    (["--service-account-jwks-uri", "http://keys.example.com/jwks"],
     "service-account-jwks-uri requires https scheme, parsed as: http://keys.example.com/jwks"),
    (["--api-audiences", ","], "expected one or more audiences, separated by commas"),
    (["--service-account-key-file", "{missing}"], "error reading public key file {missing}: No such file or directory"),
    (["--service-account-key-file", "{garbage}"],
     "error reading public key file {garbage}: data does not contain any valid RSA or ECDSA public keys"),
    (["--service-account-key-file", "{empty}"],
     "error reading public key file {empty}: data does not contain any valid RSA or ECDSA public keys"),
    (["--service-account-signing-key-file", "{public}"],
     "failed to parse {public}: data does not contain a valid RSA or ECDSA private key"),
])
def test_a_bad_value_is_one_line_naming_the_flag(
    argv: list[str], why: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    files = {name: tmp_path / f"{name}.pem" for name in ("missing", "garbage", "empty", "public")}
    files["garbage"].write_bytes(b"-----BEGIN PUBLIC KEY-----\nbm90IGEga2V5\n-----END PUBLIC KEY-----\n")
    files["empty"].write_bytes(b"")
    files["public"].write_bytes(pem(ec.generate_private_key(ec.SECP256R1()), public=True))
    with pytest.raises(SystemExit):
        parse(*[a.format(**files) for a in argv])
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert f"argument {argv[-2]}: {why.format(**files)}" in err
