"""CA pinning (kubeadm's SPKI hash), the agent's flags, the ledger and the Cluster merge."""

from __future__ import annotations

import argparse
import datetime as dt
import hashlib
import os
import stat
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import NameOID

from member_agent import config as agent_config
from member_agent import ledger as ledger_module
from member_agent import registering, trust
from member_agent.hubclient import Credential, StateDir
from member_agent.ledger import Ledger


def make_ca(common_name: str, *, rsa_key: bool = False) -> tuple[bytes, bytes]:
    """A self-signed CA PEM and, computed independently, its SPKI DER."""
    key: ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey = (
        rsa.generate_private_key(public_exponent=65537, key_size=2048)
        if rsa_key
        else ec.generate_private_key(ec.SECP256R1())
    )
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
    now = dt.datetime.now(dt.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now)
        .not_valid_after(now + dt.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    spki = key.public_key().public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    return cert.public_bytes(serialization.Encoding.PEM), spki


@pytest.mark.parametrize("rsa_key", [False, True])
def test_ca_hash_is_sha256_of_the_spki(rsa_key: bool) -> None:
    pem, spki = make_ca("hub-ca", rsa_key=rsa_key)
    expected = "sha256:" + hashlib.sha256(spki).hexdigest()
    assert trust.ca_pem_hash(pem) == expected
    assert trust.verify_ca(pem, expected.upper().replace("SHA256:", "sha256:")) == pem


def test_verify_ca_picks_the_pinned_certificate_from_a_bundle_and_rejects_others() -> None:
    pinned, spki = make_ca("hub-ca")
    other, _ = make_ca("intruder")
    pin = "sha256:" + hashlib.sha256(spki).hexdigest()
    assert trust.verify_ca(other + pinned, pin) == pinned
    with pytest.raises(trust.TrustError, match="does not match"):
        trust.verify_ca(other, pin)
    with pytest.raises(trust.TrustError, match="not a PEM"):
        trust.verify_ca(b"garbage", pin)


@pytest.mark.parametrize("bad", ["", "sha256:abc", "md5:" + "0" * 64, "0" * 64, "sha256:" + "g" * 64])
def test_malformed_hash_is_refused(bad: str) -> None:
    with pytest.raises(trust.TrustError):
        trust.normalize_hash(bad)


def parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    agent_config.add_arguments(parser)
    return parser.parse_args(list(argv))


BASE = ("--hub", "https://hub:6443", "--cluster-name", "onprem-a", "--state-dir", "/tmp/x")


def test_config_from_flags_and_cluster_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(agent_config.TOKEN_ENV, "abcdef.0123456789abcdef")
    cluster_file = tmp_path / "cluster.yaml"
    cluster_file.write_text(
        "provider: aws\nregion: us-east-1\nlabels: {team: ml}\npricing: {NVIDIA-H100-80GB-HBM3: 9.5}\n"
    )
    cfg = agent_config.config_from_args(
        parse(
            *BASE,
            "--cluster-file",
            str(cluster_file),
            "--region",
            "eu-west-1",
            "--label",
            "env=prod",
            "--price",
            "NVIDIA-A100-SXM4-80GB=1.2",
            "--hub-ca-hash",
            "sha256:" + "A" * 64,
            "--heartbeat-interval",
            "2",
            "--dcgm-max-bytes",
            "1048576",
            "--resync-interval",
            "2",
        )
    )
    assert cfg.provider == "aws"
    assert cfg.region == "eu-west-1"  # the flag wins over the file
    assert cfg.labels == {"team": "ml", "env": "prod"}
    assert cfg.pricing == {"NVIDIA-H100-80GB-HBM3": 9.5, "NVIDIA-A100-SXM4-80GB": 1.2}
    assert cfg.hub_ca_hash == "sha256:" + "a" * 64
    assert cfg.heartbeat_interval == 2
    assert cfg.dcgm_max_bytes == 1048576
    assert agent_config.config_from_args(parse(*BASE)).dcgm_max_bytes == 64 * 2**20
    assert cfg.resync_interval == 2
    assert agent_config.config_from_args(parse(*BASE)).resync_interval == 300
    assert (
        cfg.bootstrap_token is not None
        and cfg.bootstrap_token.get_secret_value() == "abcdef.0123456789abcdef"
    )
    assert "0123456789abcdef" not in repr(cfg)


def test_the_member_node_scoring_is_a_flag_defaulting_to_kubes_least_allocated(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv(agent_config.TOKEN_ENV, "abcdef.0123456789abcdef")
    assert agent_config.config_from_args(parse(*BASE)).member_node_scoring == "LeastAllocated"
    told = agent_config.config_from_args(parse(*BASE, "--member-node-scoring", "MostAllocated"))
    assert told.member_node_scoring == "MostAllocated"
    with pytest.raises(SystemExit):
        parse(*BASE, "--member-node-scoring", "most-allocated")
    assert "argument --member-node-scoring: invalid choice: 'most-allocated'" in capsys.readouterr().err


@pytest.mark.parametrize("source", ["file", "env", "flag"])
def test_the_join_token_comes_from_a_file_the_environment_or_a_flag(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, source: str
) -> None:
    monkeypatch.delenv(agent_config.TOKEN_ENV, raising=False)
    token_file = tmp_path / "token"
    token_file.write_text("abcdef.0123456789abcdef\n")
    extra: tuple[str, ...] = ()
    if source == "file":
        extra = ("--token-file", str(token_file))
    elif source == "env":
        monkeypatch.setenv(agent_config.TOKEN_ENV, "abcdef.0123456789abcdef")
    else:
        extra = ("--bootstrap-token", "abcdef.0123456789abcdef")
    cfg = agent_config.config_from_args(parse(*BASE, *extra))
    assert cfg.bootstrap_token is not None
    assert cfg.bootstrap_token.get_secret_value() == "abcdef.0123456789abcdef"


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (("--token-file", "/nonexistent/token"), "cannot read the join token from --token-file"),
        (("--token-file", "/dev/null"), "is empty"),
        (("--token-file", "/dev/null", "--bootstrap-token", "abcdef.0123456789abcdef"), "not both"),
        (("--cluster-name", "Bad_Name"), "DNS-1123"),
        (("--hub", "hub:6443"), "http"),
        (("--price", "A100=-1"), "negative"),
        (("--price", "A100=cheap"), "not a number"),
        (("--hub-ca-hash", "sha256:1234"), "sha256"),
        (("--dcgm-max-bytes", "0"), "greater than 0"),
        (("--resync-interval", "0"), "greater than 0"),
        (("--proxy-reconnect-initial-backoff", "0"), "greater than 0"),
        (("--proxy-reconnect-initial-backoff", "5", "--proxy-reconnect-max-backoff", "2"),
         r"--proxy-reconnect-max-backoff \(2\) must not be less than --proxy-reconnect-initial-backoff \(5\)"),
    ],
)
def test_bad_flags_are_explained(
    extra: tuple[str, ...], message: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(agent_config.TOKEN_ENV, raising=False)
    with pytest.raises(ValueError, match=message):
        agent_config.config_from_args(parse(*BASE, *extra))


def test_cluster_file_unknown_field(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text("provider: aws\nprice: 3\n")
    with pytest.raises(ValueError, match="unknown field"):
        agent_config.config_from_args(parse(*BASE, "--cluster-file", str(path)))


def test_state_dir_keeps_credential_private_and_scoped(tmp_path: Path) -> None:
    state = StateDir(tmp_path / "state")
    credential = Credential(hub="https://hub:6443", cluster_name="a", token="id.secret-value")
    assert "secret-value" not in repr(credential)
    state.save_credential(credential)
    path = tmp_path / "state" / "credential.json"
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert state.load_credential(hub="https://hub:6443", cluster_name="a") == credential
    assert state.load_credential(hub="https://other:6443", cluster_name="a") is None
    assert state.load_credential(hub="https://hub:6443", cluster_name="b") is None
    state.forget_credential()
    assert state.load_credential(hub="https://hub:6443", cluster_name="a") is None


def test_ledger_survives_restart(tmp_path: Path) -> None:
    ledger = Ledger(tmp_path)
    ledger.set("gpufed-es-a/w1", [{"kind": "ConfigMap", "name": "c"}])
    ledger.set("gpufed-es-a/w2", [])
    again = Ledger(tmp_path)
    assert again.keys() == ["gpufed-es-a/w1", "gpufed-es-a/w2"]
    assert again.get("gpufed-es-a/w1") == [{"kind": "ConfigMap", "name": "c"}]
    again.drop("gpufed-es-a/w1")
    assert "gpufed-es-a/w1" not in Ledger(tmp_path)
    assert stat.S_IMODE(os.stat(tmp_path / "applied-works.journal").st_mode) == 0o600
    for index in range(2 * ledger_module.COMPACT_AFTER):  # enough changes to write the whole ledger
        again.set(f"gpufed-es-a/w{index % 7}", [{"kind": "ConfigMap", "name": str(index)}])
    assert stat.S_IMODE(os.stat(tmp_path / "applied-works.json").st_mode) == 0o600


def test_desired_cluster_declares_only_the_agents_fields() -> None:
    desired = registering.desired_cluster(
        "a",
        provider="aws",
        region="us-east-1",
        zone=None,
        tier=None,
        labels={"team": "ml"},
        pricing={"H100": 9.0},
    )
    assert desired == {
        "apiVersion": "cluster.gpufed.io/v1alpha1",
        "kind": "Cluster",
        "metadata": {"name": "a", "labels": {"team": "ml"}},
        # No zone/tier (not given), and never taints or unschedulable (the hub's to set).
        "spec": {"provider": "aws", "region": "us-east-1", "pricing": {"H100": 9.0}},
    }


def test_desired_cluster_declares_no_empty_map() -> None:
    """An empty ``labels`` or ``pricing`` would be a field of its own under server-side apply,
    one an agent that registered entries there before does not own: the hub refuses that gain,
    and an agent re-joined without the first one's cluster file could not register."""
    desired = registering.desired_cluster(
        "a", provider="onprem", region=None, zone=None, tier=None, labels={}, pricing={}
    )
    assert desired["metadata"] == {"name": "a"}
    assert desired["spec"] == {"provider": "onprem"}
