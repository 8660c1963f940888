"""Client certificates on a real hub (real etcd, HTTPS, the real kubectl), as kube-apiserver's x509
authenticator: a certificate the hub's CA (or ``--client-ca-file``'s) signed authenticates its Common
Name with its Organizations as groups and kube's credential id; RBAC decides the rest; a certificate
of another CA, one expired or one for another usage is answered 401 (the handshake takes it) unless a
bearer token authenticates the request; without a certificate the bearer token counts."""

from __future__ import annotations

import asyncio
import base64
import datetime as dt
import hashlib
import json
import ssl
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import httpx
import pytest
import requests
import yaml
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from controlplane.apiserver.kubeconfig import load_kubeconfig
from controlplane.apiserver.tls import client_ca
from controlplane.hub import Hub
from controlplane.hubconfig import HubConfig
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
    ca: tuple[x509.Certificate, Key], name: str | None, *orgs: str, expired: bool = False,
    usage: x509.ObjectIdentifier = ExtendedKeyUsageOID.CLIENT_AUTH,
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
            .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
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


def bad_certificates(hub: Hub) -> dict[str, tuple[bytes, bytes]]:
    """Certificates the hub's client CA does not accept, each with the error kube logs for it."""
    return {
        "x509: certificate signed by unknown authority": client_certificate(
            new_ca("other-ca"), "mallory", "system:masters"),
        "x509: certificate has expired or is not yet valid: current time": client_certificate(
            hub_ca(hub), "carol", expired=True),
        "x509: certificate specifies an incompatible key usage": client_certificate(
            hub_ca(hub), "carol", usage=ExtendedKeyUsageOID.SERVER_AUTH),
    }


async def test_a_certificate_of_another_ca_expired_or_for_another_usage_is_answered_401(
    hub: Hub, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    token = load_kubeconfig(hub.kubeconfig_path).token
    for index, (reason, cert) in enumerate(bad_certificates(hub).items()):
        config = certificate_kubeconfig(tmp_path / f"{index}.kubeconfig", hub, cert)
        caplog.clear()
        code, _, err = await kubectl(config, "auth", "whoami")
        # The handshake takes the certificate; the authenticator refuses it with kube's 401.
        assert (code, err.strip()) == (1, "error: You must be logged in to the server (Unauthorized)"), err
        logged = [r.getMessage() for r in caplog.records if "Unable to authenticate the request" in r.getMessage()]
        serial = x509.load_pem_x509_certificate(cert[0]).serial_number
        assert logged and f"verifying certificate SN={serial}, SKID=, AKID= failed: {reason}" in logged[-1], logged
        # As kube's union of authenticators: a bearer token sent with it still authenticates.
        with_token = certificate_kubeconfig(tmp_path / f"{index}-token.kubeconfig", hub, cert, token=token)
        assert (await whoami(with_token))["username"] == "gpufed-admin"
    # Where kubectl reads discovery first, client-go words the same 401 as for any credential.
    code, _, err = await kubectl(config, "get", "configmaps", "-n", "default")
    assert code != 0 and err.strip().splitlines()[-1] == (
        "error: You must be logged in to the server (the server has asked for the client to provide credentials)"), err


async def test_real_clients_get_kubes_401_status_and_the_expiration_histogram_counts(
    hub: Hub, tmp_path: Path
) -> None:
    """aiohttp, requests and httpx with a certificate of another CA: a 401 Status, never anonymous
    (``/version`` and ``/healthz`` are open to a client without credentials, not to one whose
    certificate fails)."""
    ca_file = tmp_path / "hub-ca.crt"
    ca_file.write_bytes(load_kubeconfig(hub.kubeconfig_path).ca_pem)
    cert_file, key_file = tmp_path / "mallory.crt", tmp_path / "mallory.key"
    cert, key = client_certificate(new_ca("other-ca"), "mallory")
    cert_file.write_bytes(cert)
    key_file.write_bytes(key)
    status = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
              "message": "Unauthorized", "reason": "Unauthorized", "code": 401}
    def observed() -> list[float]:
        """The histogram's count, and its buckets of 12 hours and one day."""
        sample = hub.metrics.registry.get_sample_value
        name = "apiserver_client_certificate_expiration_seconds"
        return [sample(f"{name}_count") or 0.0, *(sample(f"{name}_bucket", {"le": b}) or 0.0 for b in ("43200.0", "86400.0"))]

    before = observed()

    context = ssl.create_default_context(cafile=str(ca_file))
    context.load_cert_chain(cert_file, key_file)
    async with aiohttp.ClientSession() as session:
        for path in ("/api/v1/namespaces", "/version", "/healthz"):
            async with session.get(hub.url + path, ssl=context) as response:
                assert (response.status, await response.json()) == (401, status), path

    def blocking_clients() -> list[tuple[int, object]]:
        with httpx.Client(verify=context) as client:
            by_httpx = client.get(hub.url + "/healthz")
        by_requests = requests.get(hub.url + "/version", verify=str(ca_file), cert=(str(cert_file), str(key_file)),
                                   timeout=10)
        return [(by_httpx.status_code, by_httpx.json()), (by_requests.status_code, by_requests.json())]

    assert await asyncio.to_thread(blocking_clients) == [(401, status), (401, status)]
    # Five requests, each with a certificate that expires within the day but not within 12 hours.
    assert [after - earlier for after, earlier in zip(observed(), before, strict=True)] == [5, 0, 5]


def intermediate_ca(parent: tuple[x509.Certificate, Key], name: str) -> tuple[x509.Certificate, Key]:
    key = ec.generate_private_key(ec.SECP256R1())
    now = dt.datetime.now(dt.UTC)
    cert = (x509.CertificateBuilder().subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)]))
            .issuer_name(parent[0].subject).public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - dt.timedelta(minutes=5)).not_valid_after(now + dt.timedelta(days=1))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .sign(parent[1], hashes.SHA256()))
    return cert, key


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
    assert code != 0 and "error: You must be logged in to the server (Unauthorized)" in err, err
    not_a_ca = tmp_path / "empty.crt"
    not_a_ca.write_text("no certificate here\n")
    with pytest.raises(PkiError, match=f"--client-ca-file {not_a_ca} holds no PEM certificate"):
        client_ca(not_a_ca, own_ca_pem=None)


async def test_a_client_without_a_certificate_still_uses_its_token(hub: Hub, session: aiohttp.ClientSession) -> None:
    code, review = await Client(session, hub, load_kubeconfig(hub.kubeconfig_path).token)(
        "POST", "/apis/authentication.k8s.io/v1/selfsubjectreviews",
        {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"})
    assert code == 201 and review["status"]["userInfo"]["username"] == "gpufed-admin", review


async def test_intermediates_the_client_sends_build_the_chain(
    hub_with_client_ca: tuple[Hub, tuple[x509.Certificate, Key]], tmp_path: Path
) -> None:
    """As kube's: a certificate of an intermediate CA that the client sends after its own verifies
    against the client CA; sent alone, it is signed by an unknown authority. (The hub's own CA
    signs no intermediates: its path length is 0.)"""
    hub, ca = hub_with_client_ca
    team_ca = intermediate_ca(ca, "team-intermediate")
    cert, key = client_certificate(team_ca, "erin", "team-c")
    intermediate = team_ca[0].public_bytes(serialization.Encoding.PEM)
    (tmp_path / "erin.key").write_bytes(key)
    ca_pem = load_kubeconfig(hub.kubeconfig_path).ca_pem
    review = {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"}
    answers = []
    for name, chain in (("chain", cert + intermediate), ("alone", cert)):
        (tmp_path / f"{name}.crt").write_bytes(chain)
        context = ssl.create_default_context(cadata=ca_pem.decode())
        context.load_cert_chain(tmp_path / f"{name}.crt", tmp_path / "erin.key")
        async with aiohttp.ClientSession() as session, session.post(
            hub.url + "/apis/authentication.k8s.io/v1/selfsubjectreviews", json=review, ssl=context
        ) as response:
            answers.append((response.status, await response.json()))
    assert answers[0][0] == 201 and answers[0][1]["status"]["userInfo"]["username"] == "erin", answers[0]
    assert answers[1][0] == 401 and answers[1][1]["message"] == "Unauthorized", answers[1]
