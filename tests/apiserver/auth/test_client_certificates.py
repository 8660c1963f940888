"""Client certificates on a real hub (real etcd, HTTPS, the real kubectl), as kube-apiserver's x509
authenticator: a certificate the hub's CA (or ``--client-ca-file``'s) signed authenticates its Common
Name with its Organizations as groups and kube's credential id; RBAC decides the rest; a certificate
of another CA or one that expired is refused in the handshake; without a certificate the bearer
token counts."""

from __future__ import annotations

import base64
import datetime as dt
import hashlib
import json
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest
import yaml
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from controlplane.apiserver.kubeconfig import load_kubeconfig
from controlplane.apiserver.tls import client_ca
from controlplane.hub import Hub, HubConfig
from controlplane.pki import PkiError

from ..test_real_clients import kubectl, needs_kubectl
from .realhub import Client, eventually

pytestmark = needs_kubectl

Key = ec.EllipticCurvePrivateKey


def new_ca(name: str) -> tuple[x509.Certificate, Key]:
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    now = dt.datetime.now(dt.UTC)
    cert = (x509.CertificateBuilder().subject_name(subject).issuer_name(subject).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(now - dt.timedelta(minutes=5))
            .not_valid_after(now + dt.timedelta(days=1))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .sign(key, hashes.SHA256()))
    return cert, key


def client_certificate(
    ca: tuple[x509.Certificate, Key], name: str | None, *orgs: str, expired: bool = False
) -> tuple[bytes, bytes]:
    """A client certificate (PEM) and its key (PEM), as ``openssl x509 -req -CA`` would sign it."""
    key = ec.generate_private_key(ec.SECP256R1())
    attributes = [x509.NameAttribute(NameOID.ORGANIZATION_NAME, org) for org in orgs]
    if name is not None:
        attributes.append(x509.NameAttribute(NameOID.COMMON_NAME, name))
    now = dt.datetime.now(dt.UTC) - (dt.timedelta(days=3) if expired else dt.timedelta())
    cert = (x509.CertificateBuilder().subject_name(x509.Name(attributes)).issuer_name(ca[0].subject)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - dt.timedelta(minutes=5)).not_valid_after(now + dt.timedelta(days=1))
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False)
            .sign(ca[1], hashes.SHA256()))
    key_pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                serialization.NoEncryption())
    return cert.public_bytes(serialization.Encoding.PEM), key_pem


def hub_ca(hub: Hub) -> tuple[x509.Certificate, Key]:
    pki = hub.config.state_dir / "pki"
    key = serialization.load_pem_private_key((pki / "ca.key").read_bytes(), password=None)
    assert isinstance(key, ec.EllipticCurvePrivateKey)
    return x509.load_pem_x509_certificate((pki / "ca.crt").read_bytes()), key


def certificate_kubeconfig(path: Path, hub: Hub, cert: tuple[bytes, bytes], token: str | None = None) -> Path:
    """A kubeconfig with a client certificate (kind's and kubeadm's kind of credential)."""
    b64 = lambda data: base64.b64encode(data).decode()  # noqa: E731
    user = {"client-certificate-data": b64(cert[0]), "client-key-data": b64(cert[1]), **({"token": token} if token else {})}
    path.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "hub",
        "clusters": [{"name": "hub", "cluster": {"server": hub.url,
                                                 "certificate-authority-data": b64(load_kubeconfig(hub.kubeconfig_path).ca_pem)}}],
        "users": [{"name": "u", "user": user}],
        "contexts": [{"name": "hub", "context": {"cluster": "hub", "user": "u"}}],
    }))
    return path


async def whoami(path: Path) -> dict[str, object]:
    code, out, err = await kubectl(path, "auth", "whoami", "-o", "json")
    assert code == 0, err
    info: dict[str, object] = json.loads(out)["status"]["userInfo"]
    return info


async def test_a_certificate_signed_by_the_hubs_ca_authenticates_its_common_name_and_organizations(
    hub: Hub, admin: Client, tmp_path: Path
) -> None:
    cert = client_certificate(hub_ca(hub), "carol", "team-a", "ml")
    config = certificate_kubeconfig(tmp_path / "carol.kubeconfig", hub, cert)
    der = x509.load_pem_x509_certificate(cert[0]).public_bytes(serialization.Encoding.DER)
    assert await whoami(config) == {
        "username": "carol", "groups": ["team-a", "ml", "system:authenticated"],
        "extra": {"authentication.kubernetes.io/credential-id": [f"X509SHA256={hashlib.sha256(der).hexdigest()}"]},
    }
    # RBAC decides what the user may do: nothing yet, then what a binding of its group gives.
    code, _, err = await kubectl(config, "get", "configmaps", "-n", "default")
    assert code != 0 and 'User "carol" cannot list resource "configmaps"' in err, err
    code, body = await admin("POST", "/apis/rbac.authorization.k8s.io/v1/namespaces/default/rolebindings", {
        "metadata": {"name": "team-a-view"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "view"},
        "subjects": [{"kind": "Group", "name": "team-a"}]})
    assert code == 201, body

    async def carol_reads() -> bool:
        return (await kubectl(config, "get", "configmaps", "-n", "default"))[0] == 0

    await eventually(carol_reads)

    # A certificate comes before a token (kube's order); a certificate without a Common Name
    # authenticates nobody, so the token counts.
    token = load_kubeconfig(hub.kubeconfig_path).token
    both = certificate_kubeconfig(tmp_path / "both.kubeconfig", hub, cert, token=token)
    assert (await whoami(both))["username"] == "carol"
    nameless = certificate_kubeconfig(tmp_path / "nameless.kubeconfig", hub,
                                      client_certificate(hub_ca(hub), None, "team-a"), token=token)
    assert (await whoami(nameless))["username"] == "gpufed-admin"
    code, _, err = await kubectl(certificate_kubeconfig(tmp_path / "n.kubeconfig", hub, client_certificate(
        hub_ca(hub), None, "team-a")), "auth", "whoami")
    assert code != 0 and "Unauthorized" in err, err


async def test_a_certificate_of_another_ca_or_an_expired_one_is_refused(hub: Hub, tmp_path: Path) -> None:
    for name, cert in (("stranger", client_certificate(new_ca("other-ca"), "mallory", "system:masters")),
                       ("expired", client_certificate(hub_ca(hub), "carol", expired=True))):
        code, _, err = await kubectl(certificate_kubeconfig(tmp_path / f"{name}.kubeconfig", hub, cert), "auth", "whoami")
        # The handshake ends (kube answers 401 instead): the connection, not a request, fails.
        assert code != 0 and "Unable to connect to the server" in err, (name, err)


@pytest.fixture
async def hub_with_client_ca(tmp_path: Path) -> AsyncIterator[tuple[Hub, tuple[x509.Certificate, Key]]]:
    ca = new_ca("team-ca")
    ca_file = tmp_path / "client-ca.crt"
    ca_file.write_bytes(ca[0].public_bytes(serialization.Encoding.PEM))
    async with Hub(HubConfig(state_dir=tmp_path / "hub", port=0, client_ca_file=ca_file)) as running:
        yield running, ca


async def test_client_ca_file_names_the_ca_that_signs_client_certificates(
    hub_with_client_ca: tuple[Hub, tuple[x509.Certificate, Key]], tmp_path: Path
) -> None:
    hub, ca = hub_with_client_ca
    ours = certificate_kubeconfig(tmp_path / "ours.kubeconfig", hub, client_certificate(ca, "dana", "team-b"))
    assert (await whoami(ours))["username"] == "dana"
    # The hub's own CA no longer signs client certificates the hub accepts.
    code, _, err = await kubectl(certificate_kubeconfig(tmp_path / "hubs.kubeconfig", hub, client_certificate(
        hub_ca(hub), "carol")), "auth", "whoami")
    assert code != 0 and "Unable to connect to the server" in err, err
    not_a_ca = tmp_path / "empty.crt"
    not_a_ca.write_text("no certificate here\n")
    with pytest.raises(PkiError, match=f"--client-ca-file {not_a_ca} holds no PEM certificate"):
        client_ca(not_a_ca, own_ca_pem=None)


async def test_a_client_without_a_certificate_still_uses_its_token(hub: Hub, session: aiohttp.ClientSession) -> None:
    code, review = await Client(session, hub, load_kubeconfig(hub.kubeconfig_path).token)(
        "POST", "/apis/authentication.k8s.io/v1/selfsubjectreviews",
        {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"})
    assert code == 201 and review["status"]["userInfo"]["username"] == "gpufed-admin", review
