"""kube's x509 authenticator, table-driven over certificates made here: which verify against the
client CA bundle, the error kube logs for each that does not, and the server context that takes
any certificate in the handshake (the authenticator judges it)."""

from __future__ import annotations

import datetime as dt
import ssl

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from controlplane.apiserver import requestclientcert
from controlplane.apiserver.clientcertificates import (
    CertificateRejected,
    ClientCertificates,
    expiration_histogram,
)
from controlplane.apiserver.requestclientcert import request_client_certificates

NOW = dt.datetime(2026, 6, 1, 12, 0, tzinfo=dt.UTC)
Key = ec.EllipticCurvePrivateKey
Pair = tuple[x509.Certificate, Key]


def certificate(
    name: str, issuer: Pair | None, *, ca: bool = False, usages: list[x509.ObjectIdentifier] | None = None,
    valid: tuple[dt.timedelta, dt.timedelta] = (dt.timedelta(hours=-1), dt.timedelta(days=1)), key_ids: bool = False,
    serial: int | None = None,
) -> Pair:
    key = ec.generate_private_key(ec.SECP256R1())
    names = [x509.NameAttribute(NameOID.COMMON_NAME, name)] if name else []
    subject = x509.Name([*names, x509.NameAttribute(NameOID.ORGANIZATION_NAME, "team-a")])
    signer = issuer or (None, key)
    builder = (x509.CertificateBuilder().subject_name(subject)
               .issuer_name(issuer[0].subject if issuer else subject).public_key(key.public_key())
               .serial_number(serial or x509.random_serial_number()).not_valid_before(NOW + valid[0]).not_valid_after(NOW + valid[1]))
    if ca:
        builder = builder.add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
    if usages is not None:
        builder = builder.add_extension(x509.ExtendedKeyUsage(usages), critical=False)
    if key_ids:
        builder = builder.add_extension(x509.SubjectKeyIdentifier(b"\x0a\xbc\x01"), critical=False).add_extension(
            x509.AuthorityKeyIdentifier(b"\xff\x00", None, None), critical=False)
    return builder.sign(signer[1], hashes.SHA256()), key


CA = certificate("ca", None, ca=True)
OTHER_CA = certificate("other", None, ca=True)
INTERMEDIATE = certificate("intermediate", CA, ca=True)
SERVER_ONLY_CA = certificate("server-ca", CA, ca=True, usages=[ExtendedKeyUsageOID.SERVER_AUTH])


def der(pair: Pair) -> bytes:
    return pair[0].public_bytes(serialization.Encoding.DER)


def bundle(*pairs: Pair) -> bytes:
    return b"".join(p[0].public_bytes(serialization.Encoding.PEM) for p in pairs)


@pytest.mark.parametrize(("leaf", "cas", "user"), [
    pytest.param(certificate("carol", CA, usages=[ExtendedKeyUsageOID.CLIENT_AUTH]), (CA,), "carol", id="client-auth"),
    pytest.param(certificate("carol", CA), (CA,), "carol", id="no-extended-usage-is-any"),
    pytest.param(certificate("carol", CA, usages=[ExtendedKeyUsageOID.ANY_EXTENDED_KEY_USAGE]), (CA,), "carol", id="any"),
    pytest.param(certificate("carol", OTHER_CA), (CA, OTHER_CA), "carol", id="second-ca-of-the-bundle"),
    pytest.param(certificate("carol", INTERMEDIATE), (CA, INTERMEDIATE), "carol", id="intermediate-in-the-bundle"),
    pytest.param(certificate("", CA), (CA,), None, id="no-common-name-is-nobody"),
])
def test_a_certificate_of_the_bundle_names_its_user(leaf: Pair, cas: tuple[Pair, ...], user: str | None) -> None:
    verified = ClientCertificates(bundle(*cas), clock=lambda: NOW).user(der(leaf))
    assert (verified.name if verified else None) == user
    if verified is not None:
        assert verified.groups == ("team-a", "system:authenticated")


def test_intermediates_the_client_sends_build_the_chain() -> None:
    leaf = certificate("carol", INTERMEDIATE)
    authenticator = ClientCertificates(bundle(CA), clock=lambda: NOW)
    verified = authenticator.user(der(leaf), [der(INTERMEDIATE)])
    assert verified is not None and verified.name == "carol"
    with pytest.raises(CertificateRejected, match="unknown authority"):  # the same certificate, sent alone
        authenticator.user(der(leaf))


@pytest.mark.parametrize(("leaf", "reason"), [
    pytest.param(certificate("mallory", OTHER_CA), "x509: certificate signed by unknown authority", id="other-ca"),
    pytest.param(certificate("mallory", INTERMEDIATE), "x509: certificate signed by unknown authority",
                 id="intermediate-not-in-the-bundle"),
    pytest.param(certificate("carol", CA, valid=(dt.timedelta(days=-3), dt.timedelta(days=-2))),
                 "x509: certificate has expired or is not yet valid: current time 2026-06-01T12:00:00Z is after "
                 "2026-05-30T12:00:00Z", id="expired"),
    pytest.param(certificate("carol", CA, valid=(dt.timedelta(hours=1), dt.timedelta(days=1))),
                 "x509: certificate has expired or is not yet valid: current time 2026-06-01T12:00:00Z is before "
                 "2026-06-01T13:00:00Z", id="not-yet-valid"),
    pytest.param(certificate("carol", CA, usages=[ExtendedKeyUsageOID.SERVER_AUTH]),
                 "x509: certificate specifies an incompatible key usage", id="server-usage"),
    pytest.param(certificate("carol", SERVER_ONLY_CA), "x509: certificate specifies an incompatible key usage",
                 id="issuer-restricts-usage"),
])
def test_a_certificate_that_does_not_verify_is_kubes_error(leaf: Pair, reason: str) -> None:
    authenticator = ClientCertificates(bundle(CA, SERVER_ONLY_CA), clock=lambda: NOW)
    with pytest.raises(CertificateRejected) as caught:
        authenticator.user(der(leaf))
    assert str(caught.value) == f"verifying certificate SN={leaf[0].serial_number}, SKID=, AKID= failed: {reason}"


def test_the_error_names_the_certificate_as_kube_does_and_the_histogram_sees_every_one() -> None:
    histogram = expiration_histogram()
    clock = [NOW]
    authenticator = ClientCertificates(bundle(CA), expiration=histogram, clock=lambda: clock[0])
    stranger = certificate("mallory", OTHER_CA, key_ids=True, serial=1007)
    with pytest.raises(CertificateRejected, match=r"^verifying certificate SN=1007, SKID=0A:BC:01, AKID=FF:00 failed"):
        authenticator.user(der(stranger))
    carol = certificate("carol", CA)
    assert authenticator.user(der(carol)) is not None
    count = histogram.collect()[0]
    samples = {(s.name, s.labels.get("le")): s.value for s in count.samples}
    assert samples[("apiserver_client_certificate_expiration_seconds_count", None)] == 2
    assert samples[("apiserver_client_certificate_expiration_seconds_bucket", "43200.0")] == 0
    assert samples[("apiserver_client_certificate_expiration_seconds_bucket", "86400.0")] == 2
    # A certificate verified once is judged again once it has expired.
    clock[0] = NOW + dt.timedelta(days=2)
    with pytest.raises(CertificateRejected, match="has expired"):
        authenticator.user(der(carol))


def test_the_server_context_asks_for_a_certificate_and_leaves_judging_it_to_the_authenticator() -> None:
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_verify_locations(cadata=bundle(CA).decode())
    assert request_client_certificates(context)
    assert context.verify_mode == ssl.CERT_OPTIONAL
    context.verify_mode = ssl.CERT_OPTIONAL  # setting the mode again keeps the callback (Python keeps it)
    assert context.verify_mode == ssl.CERT_OPTIONAL


def test_without_openssl_access_the_handshake_verifies_as_before(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(requestclientcert, "_LIBRARY", None)
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    assert not requestclientcert.request_client_certificates(context)
    assert context.verify_mode == ssl.CERT_OPTIONAL
    assert "ends the TLS handshake instead of being answered 401" in caplog.text
