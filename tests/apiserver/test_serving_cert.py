"""A serving certificate the operator provides (--tls-cert-file, --tls-private-key-file,
--tls-ca-file): the hub serves exactly it, advertises the CA that signed it (kubeconfig,
/.well-known/gpufed/ca.crt, the agents' pin), picks up a renewed one on restart, and
refuses unusable files with one clear line before starting anything."""

from __future__ import annotations

import asyncio
import datetime as dt
import ipaddress
import ssl
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import aiohttp
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec

from controlplane.apis.constants import CA_PATH
from controlplane.apiserver.kubeconfig import load_kubeconfig
from controlplane.apiserver.tls import ca_hash, client_ssl_context, load_serving_certificate
from controlplane.hub import Hub
from controlplane.hubconfig import HubConfig
from controlplane.pki import PkiError
from gpufed.cli import build_parser
from gpufed.commands.controlplane import conflicting_flags

ROOT = Path(__file__).resolve().parents[2]
NOW = dt.datetime.now(dt.UTC)


@dataclass
class Issued:
    cert: x509.Certificate
    key: ec.EllipticCurvePrivateKey

    @property
    def pem(self) -> bytes:
        return self.cert.public_bytes(serialization.Encoding.PEM)

    @property
    def key_pem(self) -> bytes:
        return self.key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )


def issue(
    name: str,
    *,
    signer: Issued | None = None,
    ca: bool = False,
    sans: tuple[str, ...] = (),
    not_before: dt.datetime = NOW - dt.timedelta(days=1),
    not_after: dt.datetime = NOW + dt.timedelta(days=90),
) -> Issued:
    """A certificate as an operator's tooling (openssl, cert-manager) would make it."""
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(x509.NameOID.COMMON_NAME, name)])
    builder = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(signer.cert.subject if signer else subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(not_before)
        .not_valid_after(not_after)
        .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
    )
    if sans:
        names: list[x509.GeneralName] = [
            x509.IPAddress(ipaddress.ip_address(s)) if s[0].isdigit() else x509.DNSName(s) for s in sans
        ]
        builder = builder.add_extension(x509.SubjectAlternativeName(names), critical=False)
    signing_key = signer.key if signer is not None else key
    return Issued(cert=builder.sign(signing_key, hashes.SHA256()), key=key)


def files(directory: Path, **contents: bytes) -> dict[str, Path]:
    directory.mkdir(parents=True, exist_ok=True)
    paths = {}
    for name, data in contents.items():
        paths[name] = directory / name.replace("_", ".")
        paths[name].write_bytes(data)
    return paths


async def peer_certificate(url: str, *, ca_pem: bytes) -> bytes:
    """The DER certificate the server at ``url`` presents to a client trusting ``ca_pem``."""
    host, port = url.removeprefix("https://").rsplit(":", 1)
    async with asyncio.timeout(10):
        _, writer = await asyncio.open_connection(host, int(port), ssl=client_ssl_context(ca_pem))
    try:
        ssl_object = writer.get_extra_info("ssl_object")
        assert isinstance(ssl_object, ssl.SSLObject)
        der = ssl_object.getpeercert(binary_form=True)
        assert der is not None
        return der
    finally:
        writer.close()
        await writer.wait_closed()


async def test_hub_serves_the_provided_certificate_and_reloads_it_on_restart(tmp_path: Path) -> None:
    ca = issue("operator-ca", ca=True)
    first = issue("hub", signer=ca, sans=("127.0.0.1", "localhost"))
    tls = files(tmp_path / "secret", tls_crt=first.pem, tls_key=first.key_pem, ca_crt=ca.pem)
    config = HubConfig(
        state_dir=tmp_path / "hub", port=0,
        tls_cert_file=tls["tls_crt"], tls_private_key_file=tls["tls_key"], tls_ca_file=tls["ca_crt"],
    )
    async with Hub(config) as hub:
        # The embedded etcd behind it listens on the state dir's private socket, without TLS:
        # the serving certificate is the hub's alone.
        assert hub.etcd is not None and hub.etcd.client_url == f"unix://{hub.etcd.socket_path}"
        assert hub.etcd.client_tls is None
        served = await peer_certificate(hub.url, ca_pem=ca.pem)
        assert served == first.cert.public_bytes(serialization.Encoding.DER)
        assert hub.pki is not None and hub.pki.ca_hash == ca_hash(ca.pem)  # what agents pin
        credentials = load_kubeconfig(hub.kubeconfig_path)
        assert credentials.ca_pem == ca.pem
        async with (
            aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=10)) as session,
            session.get(hub.url + CA_PATH, ssl=client_ssl_context(ca.pem)) as response,
        ):
            assert await response.read() == ca.pem
        async with (
            aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=10)) as session,
            session.get(hub.url + "/readyz", ssl=client_ssl_context(credentials.ca_pem),
                        headers={"Authorization": f"Bearer {credentials.token}"}) as response,
        ):
            assert response.status == 200
    assert not (tmp_path / "hub" / "pki").exists()  # no CA of its own was made

    # The Secret was renewed: a restart serves the new certificate.
    renewed = issue("hub", signer=ca, sans=("127.0.0.1", "localhost"))
    files(tmp_path / "secret", tls_crt=renewed.pem, tls_key=renewed.key_pem)
    async with Hub(config) as hub:
        assert await peer_certificate(hub.url, ca_pem=ca.pem) == renewed.cert.public_bytes(serialization.Encoding.DER)


def test_a_self_signed_certificate_is_its_own_ca(tmp_path: Path) -> None:
    alone = issue("hub", ca=True, sans=("127.0.0.1",))
    tls = files(tmp_path, tls_crt=alone.pem, tls_key=alone.key_pem)
    serving = load_serving_certificate(tls["tls_crt"], key_file=tls["tls_key"])
    assert serving.ca_pem == alone.pem


def test_intermediates_follow_the_certificate_and_the_root_is_pinned(tmp_path: Path) -> None:
    root = issue("root", ca=True)
    intermediate = issue("intermediate", signer=root, ca=True)
    leaf = issue("hub", signer=intermediate, sans=("127.0.0.1",))
    tls = files(tmp_path, tls_crt=leaf.pem + intermediate.pem, tls_key=leaf.key_pem, ca_crt=root.pem)
    serving = load_serving_certificate(tls["tls_crt"], key_file=tls["tls_key"], ca_file=tls["ca_crt"])
    assert serving.ca_pem == root.pem
    assert serving.server_ssl_context() is not None  # the key and chain load into OpenSSL


def test_a_missing_host_is_warned_about(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    ca = issue("ca", ca=True)
    leaf = issue("hub", signer=ca, sans=("hub.example.com",))
    tls = files(tmp_path, tls_crt=leaf.pem, tls_key=leaf.key_pem, ca_crt=ca.pem)
    with caplog.at_level("WARNING", logger="controlplane.apiserver.tls"):
        load_serving_certificate(tls["tls_crt"], key_file=tls["tls_key"], ca_file=tls["ca_crt"],
                                 hosts=["hub.example.com", "10.0.0.7"])
    assert [r.getMessage() for r in caplog.records if "does not name" in r.getMessage()] == [
        f"the provided serving certificate {tls['tls_crt']} does not name 10.0.0.7; "
        "clients using those names will reject it"
    ]


CA = issue("ca", ca=True)
OTHER_CA = issue("other-ca", ca=True)
GOOD = issue("hub", signer=CA, sans=("127.0.0.1",))


def signed_by(
    ca: Issued, *, not_before: dt.datetime = NOW - dt.timedelta(days=1), not_after: dt.datetime = NOW + dt.timedelta(days=90)
) -> dict[str, bytes]:
    leaf = issue("hub", signer=ca, not_before=not_before, not_after=not_after)
    return {"tls_crt": leaf.pem, "tls_key": leaf.key_pem, "ca_crt": ca.pem}


@pytest.mark.parametrize(
    ("contents", "message"),
    [
        (lambda: {"tls_crt": GOOD.pem, "tls_key": issue("x").key_pem, "ca_crt": CA.pem},
         r"--tls-private-key-file .*tls.key does not match the certificate in --tls-cert-file .*tls.crt"),
        (lambda: signed_by(CA, not_after=NOW - dt.timedelta(hours=1)),
         r"the certificate in --tls-cert-file .*tls.crt expired at .*Z; renew it"),
        (lambda: signed_by(CA, not_before=NOW + dt.timedelta(days=2)),
         r"is not valid before .*check this machine's clock"),
        (lambda: signed_by(issue("old-ca", ca=True, not_after=NOW - dt.timedelta(hours=1))),
         r"the CA certificate CN=old-ca \(from .*ca.crt or .*tls.crt\) expired at .*Z; renew it"),
        (lambda: {"tls_crt": GOOD.pem, "tls_key": GOOD.key_pem, "ca_crt": OTHER_CA.pem},
         r"the certificate in --tls-cert-file .*tls.crt is not signed by the CA in --tls-ca-file .*ca.crt"),
        (lambda: {"tls_crt": GOOD.pem, "tls_key": GOOD.key_pem},
         r"--tls-cert-file .*tls.crt does not end in a self-signed CA certificate; pass --tls-ca-file"),
        (lambda: {"tls_crt": b"junk", "tls_key": GOOD.key_pem, "ca_crt": CA.pem},
         r"--tls-cert-file .*tls.crt holds no PEM certificate"),
        (lambda: {"tls_crt": GOOD.pem, "tls_key": b"junk", "ca_crt": CA.pem},
         r"--tls-private-key-file .*tls.key is not an unencrypted PEM private key"),
        (lambda: {"tls_crt": GOOD.pem, "ca_crt": CA.pem},
         r"--tls-private-key-file .*tls.key: cannot read it: No such file or directory"),
    ],
    ids=["key-of-another-cert", "expired", "not-yet-valid", "expired-ca", "other-ca", "no-ca", "cert-not-pem",
         "key-not-pem", "missing-key"],
)
def test_unusable_files_are_a_clear_error(
    tmp_path: Path, contents: Callable[[], dict[str, bytes]], message: str
) -> None:
    written = files(tmp_path, **contents())
    with pytest.raises(PkiError, match=message):
        load_serving_certificate(
            tmp_path / "tls.crt", key_file=tmp_path / "tls.key", ca_file=written.get("ca_crt")
        )


def test_controlplane_prints_one_line_for_a_mismatched_key_and_starts_nothing(tmp_path: Path) -> None:
    tls = files(tmp_path / "secret", tls_crt=GOOD.pem, tls_key=issue("x").key_pem, ca_crt=CA.pem)
    state = tmp_path / "hub"
    result = subprocess.run(
        [sys.executable, "-m", "gpufed.cli", "controlplane", "--state-dir", str(state), "--listen", "127.0.0.1:0",
         "--tls-cert-file", str(tls["tls_crt"]), "--tls-private-key-file", str(tls["tls_key"]),
         "--tls-ca-file", str(tls["ca_crt"]), "--log-level", "ERROR"],
        capture_output=True, text=True, timeout=60, check=False, cwd=ROOT,
    )
    assert result.returncode == 1
    assert result.stderr == (
        f"error: --tls-private-key-file {tls['tls_key']} does not match the certificate in "
        f"--tls-cert-file {tls['tls_crt']}\n"
    )
    assert not (state / "etcd").exists()


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--tls-cert-file", "t.crt"], "--tls-cert-file and --tls-private-key-file go together"),
        (["--tls-private-key-file", "t.key"], "--tls-cert-file and --tls-private-key-file go together"),
        (["--tls-ca-file", "ca.crt"], "--tls-ca-file needs --tls-cert-file"),
        (["--tls-cert-file", "t.crt", "--tls-private-key-file", "t.key"], None),
        (["--tls-cert-file", "t.crt", "--tls-private-key-file", "t.key", "--tls-ca-file", "ca.crt"], None),
    ],
    ids=["cert-only", "key-only", "ca-only", "cert-and-key", "all-three"],
)
def test_serving_certificate_flags_that_cannot_work_together(flags: list[str], message: str | None) -> None:
    conflict = conflicting_flags(build_parser().parse_args(["controlplane", *flags]))
    if message is None:
        assert conflict is None
    else:
        assert conflict is not None and conflict.startswith(message)
