"""etcd over TLS: the embedded etcd admits only the client certificate it issued, the store
says clearly which setting is wrong (and does not retry a refused handshake), and settings
that cannot work are refused before any connection.

The happy path -- the whole Store contract over TLS -- runs in test_contract.py (the
``etcd-tls`` store of tests/storage/conftest.py).
"""

from __future__ import annotations

import asyncio
import datetime as dt
import re
import subprocess
import sys
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from controlplane.pki import ensure_certificate, load_or_create_ca
from controlplane.storage import EtcdStore, Unavailable
from controlplane.storage.connecting import EtcdClientTls, EtcdConfigError
from controlplane.storage.embedded import EmbeddedEtcd, EtcdClientTransport
from gpufed.cli import build_parser
from gpufed.commands.controlplane import conflicting_flags

ROOT = Path(__file__).resolve().parents[2]
GRPC_CORE_LOG = re.compile(r"^[IWE]\d{4} \d\d:\d\d:\d\d\.\d+ +\d+ \S+:\d+\] ")


def other_pki(directory: Path) -> EtcdClientTls:
    """A CA and a client certificate that have nothing to do with the embedded etcd."""
    directory.mkdir(parents=True, exist_ok=True)
    ca = load_or_create_ca(directory / "ca.crt", directory / "ca.key", common_name="other-ca")
    ensure_certificate(
        directory / "client.crt", directory / "client.key", ca_cert=ca, ca_key_path=directory / "ca.key",
        common_name="intruder", usages=(ExtendedKeyUsageOID.CLIENT_AUTH,),
    )
    return EtcdClientTls(
        ca_file=directory / "ca.crt", cert_file=directory / "client.crt", key_file=directory / "client.key"
    )


def write_expired_client_cert(directory: Path, *, ca: EtcdClientTls) -> EtcdClientTls:
    """A client certificate from ``ca`` that expired yesterday."""
    assert ca.cert_file is not None
    ca_cert = x509.load_pem_x509_certificate(ca.ca_file.read_bytes())
    ca_key = serialization.load_pem_private_key(ca.ca_file.with_name("ca.key").read_bytes(), password=None)
    assert isinstance(ca_key, ec.EllipticCurvePrivateKey)
    key = ec.generate_private_key(ec.SECP256R1())
    now = dt.datetime.now(dt.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "late")]))
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(days=30))
        .not_valid_after(now - dt.timedelta(days=1))
        .sign(ca_key, hashes.SHA256())
    )
    cert_file, key_file = directory / "expired.crt", directory / "expired.key"
    cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    return EtcdClientTls(ca_file=ca.ca_file, cert_file=cert_file, key_file=key_file)


@pytest.mark.parametrize(
    ("client", "message"),
    [
        ("no-certificate", "it refused our client certificate: check that --etcd-certfile/--etcd-keyfile"),
        ("certificate-of-another-ca", "it refused our client certificate"),
        ("wrong-ca", "its serving certificate is not trusted: check that --etcd-cafile holds the CA"),
    ],
)
async def test_a_refused_handshake_is_a_clear_error_and_is_not_retried(
    etcd_tls_server: tuple[str, EtcdClientTls], tmp_path: Path, caplog: pytest.LogCaptureFixture,
    client: str, message: str,
) -> None:
    url, good = etcd_tls_server
    other = other_pki(tmp_path / "other")
    tls = {
        "no-certificate": EtcdClientTls(ca_file=good.ca_file),
        "certificate-of-another-ca": EtcdClientTls(
            ca_file=good.ca_file, cert_file=other.cert_file, key_file=other.key_file
        ),
        "wrong-ca": EtcdClientTls(ca_file=other.ca_file, cert_file=good.cert_file, key_file=good.key_file),
    }[client]
    with caplog.at_level("DEBUG", logger="controlplane.storage.etcd"), pytest.raises(Unavailable) as failure:
        async with EtcdStore([url], tls=tls, retry_budget=30.0) as store:
            await store.get("/anything")
    assert str(failure.value).startswith(f"TLS handshake with etcd at {url} failed, {message}")
    assert "\n" not in str(failure.value)
    # gRPC names the certificate problem once the handshake has run; an attempt that fails
    # before it does (a busy machine) looks like a dropped connection and is retried. Treated
    # as transient, a refusal would be retried for the whole 30 s budget: dozens of times.
    retries = [r for r in caplog.records if r.getMessage() == "etcd call failed, retrying"]
    assert len(retries) <= 3


async def test_a_plaintext_client_gets_nothing_from_the_embedded_etcd(
    etcd_tls_server: tuple[str, EtcdClientTls],
) -> None:
    url, _ = etcd_tls_server
    with pytest.raises(Unavailable, match="is unreachable"):
        async with EtcdStore([url.replace("https://", "http://")], retry_budget=0.5) as store:
            await store.get("/anything")


async def test_the_client_certificate_works_under_the_name_localhost(
    etcd_tls_server: tuple[str, EtcdClientTls],
) -> None:
    url, tls = etcd_tls_server
    async with EtcdStore([url.replace("127.0.0.1", "localhost")], tls=tls, prefix="/tls-localhost") as store:
        created = await store.create("/a", b"1")
        assert (await store.get("/a")).value == b"1" and created.value == b"1"


async def test_a_twin_reaches_the_same_keys_from_another_threads_event_loop(
    etcd_tls_server: tuple[str, EtcdClientTls],
) -> None:
    """``twin()`` (the leader's renewals use one on their own thread) has the same endpoint,
    TLS and prefix, and a connection of its own, opened and closed in the thread's loop."""
    url, tls = etcd_tls_server
    async with EtcdStore([url], tls=tls, prefix=f"/tls-twin-{uuid.uuid4().hex}") as store:
        await store.create("/a", b"1")
        twin = store.twin()

        async def read_and_write() -> bytes:
            try:
                await twin.create("/b", b"2")
                return (await twin.get("/a")).value
            finally:
                await twin.close()

        assert await asyncio.to_thread(asyncio.run, read_and_write()) == b"1"
        assert (await store.get("/b")).value == b"2"  # the original's connection is still open


async def test_embedded_etcd_issues_its_own_pki_with_private_keys(tmp_path: Path) -> None:
    etcd = EmbeddedEtcd(tmp_path / "etcd", unsafe_no_fsync=True, transport=EtcdClientTransport.TLS)
    url = await etcd.start()
    try:
        tls = etcd.client_tls
        assert url.startswith("https://127.0.0.1:")
        assert tls is not None and tls.cert_file is not None and tls.key_file is not None
        for key in etcd.pki_dir.glob("*.key"):
            assert key.stat().st_mode & 0o777 == 0o600, key
        ca = x509.load_pem_x509_certificate(tls.ca_file.read_bytes())
        client = x509.load_pem_x509_certificate(tls.cert_file.read_bytes())
        server = x509.load_pem_x509_certificate((etcd.pki_dir / "server.crt").read_bytes())
        client.verify_directly_issued_by(ca)
        server.verify_directly_issued_by(ca)
        usages = client.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
        assert list(usages) == [ExtendedKeyUsageOID.CLIENT_AUTH]
        sans = server.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
        assert {"localhost"} <= set(sans.get_values_for_type(x509.DNSName))
        assert {"127.0.0.1", "::1"} <= {str(ip) for ip in sans.get_values_for_type(x509.IPAddress)}
    finally:
        await etcd.stop()


def write(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        (lambda d, good: (["https://127.0.0.1:2379"], None), "is https:// but no CA was given: pass --etcd-cafile"),
        (lambda d, good: (["http://127.0.0.1:2379"], good), "the endpoint http://127.0.0.1:2379 is http://; use https://"),
        (lambda d, good: ([f"unix://{d}/etcd.sock"], good), "the endpoint unix:///.*/etcd.sock is unix://; use https://"),
        (lambda d, good: (["https://127.0.0.1:2379"], EtcdClientTls(ca_file=d / "missing.crt")),
         r"--etcd-cafile .*missing.crt: cannot read it: No such file or directory"),
        (lambda d, good: (["https://127.0.0.1:2379"], EtcdClientTls(ca_file=write(d / "junk.crt", b"junk"))),
         r"--etcd-cafile .*junk.crt holds no PEM certificate"),
        (lambda d, good: (["https://127.0.0.1:2379"],
                          EtcdClientTls(ca_file=good.ca_file, cert_file=good.cert_file, key_file=d / "none.key")),
         r"--etcd-keyfile .*none.key: cannot read it"),
        (lambda d, good: (["https://127.0.0.1:2379"],
                          EtcdClientTls(ca_file=good.ca_file, cert_file=good.cert_file,
                                        key_file=other_pki(d / "other").key_file)),
         r"--etcd-keyfile .*other/client.key does not match the certificate in --etcd-certfile"),
        (lambda d, good: (["https://127.0.0.1:2379"], write_expired_client_cert(d, ca=good)),
         r"the client certificate in --etcd-certfile .*expired.crt expired at .*; renew it"),
        (lambda d, good: (["https://127.0.0.1:2379"], EtcdClientTls(ca_file=good.ca_file, cert_file=good.cert_file)),
         "--etcd-certfile and --etcd-keyfile go together"),
    ],
    ids=["https-without-ca", "tls-on-http", "tls-on-unix", "missing-ca", "ca-not-pem", "missing-key", "key-of-another-cert",
         "expired-client-cert", "cert-without-key"],
)
def test_settings_that_cannot_work_are_refused_before_connecting(
    tmp_path: Path,
    settings: Callable[[Path, EtcdClientTls], tuple[list[str], EtcdClientTls | None]],
    message: str,
) -> None:
    good = other_pki(tmp_path / "good")
    with pytest.raises(EtcdConfigError, match=message):
        endpoints, tls = settings(tmp_path, good)
        EtcdStore(endpoints, tls=tls)


def test_controlplane_prints_one_line_for_a_wrong_etcd_ca(
    etcd_tls_server: tuple[str, EtcdClientTls], tmp_path: Path
) -> None:
    url, good = etcd_tls_server
    other = other_pki(tmp_path / "other")
    assert good.cert_file is not None and good.key_file is not None
    result = subprocess.run(
        [sys.executable, "-m", "gpufed.cli", "controlplane", "--state-dir", str(tmp_path / "hub"),
         "--listen", "127.0.0.1:0", "--etcd-endpoints", url, "--etcd-cafile", str(other.ca_file),
         "--etcd-certfile", str(good.cert_file), "--etcd-keyfile", str(good.key_file), "--log-level", "ERROR"],
        capture_output=True, text=True, timeout=60, check=False, cwd=ROOT,
    )
    assert result.returncode == 1, result.stderr
    # gRPC's C core logs the failed handshake itself ("I1130 12:00:00.000 ... Handshake failed")
    # unless GRPC_VERBOSITY=ERROR; everything else on stderr is the one error line.
    ours = [line for line in result.stderr.splitlines() if line.strip() and not GRPC_CORE_LOG.match(line)]
    errors = [line for line in ours if line.startswith("error:")]
    assert errors == ours and len(errors) == 1, result.stderr
    assert errors[0].startswith(f"error: TLS handshake with etcd at {url} failed, its serving certificate is not")
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--etcd-endpoints", "https://e:2379", "--etcd-certfile", "c.crt", "--etcd-keyfile", "c.key"],
         "--etcd-certfile needs --etcd-cafile"),
        (["--etcd-endpoints", "https://e:2379", "--etcd-cafile", "ca.crt", "--etcd-certfile", "c.crt"],
         "--etcd-certfile and --etcd-keyfile go together"),
        (["--etcd-cafile", "ca.crt"], "--etcd-cafile/--etcd-certfile/--etcd-keyfile need --etcd-endpoints"),
        (["--etcd-endpoints", "https://e:2379", "--etcd-cafile", "ca.crt"], None),
        (["--etcd-endpoints", "https://e:2379", "--etcd-cafile", "ca.crt", "--etcd-certfile", "c.crt",
          "--etcd-keyfile", "c.key"], None),
        ([], None),
        (["--embedded-etcd-transport", "tls"], None),
        (["--etcd-endpoints", "https://e:2379", "--etcd-cafile", "ca.crt", "--embedded-etcd-transport", "tls"],
         "--embedded-etcd-transport is for the embedded etcd"),
    ],
    ids=["cert-without-ca", "cert-without-key", "tls-for-embedded", "ca-only", "all-three", "embedded",
         "embedded-over-tls", "transport-with-endpoints"],
)
def test_controlplane_etcd_flags_that_cannot_work_together(flags: list[str], message: str | None) -> None:
    conflict = conflicting_flags(build_parser().parse_args(["controlplane", *flags]))
    if message is None:
        assert conflict is None
    else:
        assert conflict is not None and conflict.startswith(message)
