"""CertificateSigningRequests on a real hub (real etcd, HTTPS, the real kubectl), as kube serves
them: ``kubectl apply`` a CSR, ``kubectl certificate approve`` it, the hub's signer issues a
certificate from the hub's CA that then authenticates the CSR's subject; deny; kube's validation,
the signer's refusal of usages it does not sign, and the approve permission on the signer."""

from __future__ import annotations

import base64
import datetime as dt
import json
from pathlib import Path
from typing import Any

import yaml
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from controlplane.hub import Hub

from ..test_real_clients import kubectl, needs_kubectl
from .realhub import SHARED_HUB, Client, eventually
from .test_client_certificates import certificate_kubeconfig, hub_ca, whoami

#: One hub for the module: each test has CSRs of its own names, and the one ClusterRole and its
#: bindings a test makes are for a group (``reviewers``) no other test's users are in.
pytestmark = [needs_kubectl, SHARED_HUB]

CLIENT_SIGNER = "kubernetes.io/kube-apiserver-client"


def signing_request(name: str, *orgs: str) -> tuple[bytes, bytes]:
    """A PEM CSR for CN=``name``, O=``orgs`` and its key (PEM), as ``openssl req -new`` makes them."""
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([*(x509.NameAttribute(NameOID.ORGANIZATION_NAME, o) for o in orgs),
                         x509.NameAttribute(NameOID.COMMON_NAME, name)])
    request = x509.CertificateSigningRequestBuilder().subject_name(subject).sign(key, hashes.SHA256())
    key_pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                serialization.NoEncryption())
    return request.public_bytes(serialization.Encoding.PEM), key_pem


def manifest(name: str, request: bytes, *, signer: str | None = CLIENT_SIGNER, usages: tuple[str, ...] = ("client auth",),
             expiration: int | None = 3600) -> str:
    spec: dict[str, Any] = {"request": base64.b64encode(request).decode(), "usages": list(usages)}
    if signer is not None:
        spec["signerName"] = signer
    if expiration is not None:
        spec["expirationSeconds"] = expiration
    return yaml.safe_dump({"apiVersion": "certificates.k8s.io/v1", "kind": "CertificateSigningRequest",
                           "metadata": {"name": name}, "spec": spec})


async def get_csr(config: Path, name: str) -> dict[str, Any]:
    code, out, err = await kubectl(config, "get", "csr", name, "-o", "json")
    assert code == 0, err
    csr: dict[str, Any] = json.loads(out)
    return csr


async def row(config: Path, name: str) -> list[str]:
    code, out, err = await kubectl(config, "get", "csr", name)
    assert code == 0, err
    header, line = out.splitlines()
    assert header.split() == ["NAME", "AGE", "SIGNERNAME", "REQUESTOR", "REQUESTEDDURATION", "CONDITION"]
    return line.split()


async def condition_becomes(config: Path, name: str, condition: str) -> None:
    async def shown() -> bool:
        return (await row(config, name))[-1] == condition

    await eventually(shown)


async def test_a_csr_approved_with_kubectl_is_signed_by_the_hubs_ca_and_authenticates_its_subject(
    hub: Hub, admin: Client, tmp_path: Path
) -> None:
    config = hub.kubeconfig_path
    request, key = signing_request("erin", "team-a")
    code, out, err = await kubectl(config, "apply", "-f", "-", stdin=manifest("erin", request))
    assert code == 0 and "certificatesigningrequest.certificates.k8s.io/erin created" in out, err
    name, _age, *rest = await row(config, "erin")
    assert [name, *rest] == ["erin", CLIENT_SIGNER, "gpufed-admin", "60m", "Pending"]
    stored = await get_csr(config, "erin")
    assert stored["spec"]["username"] == "gpufed-admin" and "system:masters" in stored["spec"]["groups"], stored
    code, out, err = await kubectl(config, "certificate", "approve", "erin")
    assert code == 0 and "approved" in out, err
    await condition_becomes(config, "erin", "Approved,Issued")
    csr = await get_csr(config, "erin")
    approved = csr["status"]["conditions"][0]
    assert approved["type"] == "Approved" and approved["reason"] == "KubectlApprove", approved
    assert approved["lastUpdateTime"] and approved["lastTransitionTime"], approved
    cert_pem = base64.b64decode(csr["status"]["certificate"])
    cert = x509.load_pem_x509_certificate(cert_pem)
    ca_cert, _ = hub_ca(hub)
    cert.verify_directly_issued_by(ca_cert)
    assert cert.subject.rfc4514_string() == "CN=erin,O=team-a"
    # expirationSeconds (1 h, below the 1 year default) and kube's 5 minutes backdate.
    assert cert.not_valid_after_utc - cert.not_valid_before_utc == dt.timedelta(minutes=65)
    usage = cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert list(usage) == [ExtendedKeyUsageOID.CLIENT_AUTH]
    assert cert.extensions.get_extension_for_class(x509.BasicConstraints).value.ca is False
    code, out, err = await kubectl(config, "describe", "csr", "erin")
    assert code == 0, err
    described = [line.split() for line in out.splitlines()]
    assert ["Requesting", "User:", "gpufed-admin"] in described and ["Status:", "Approved,Issued"] in described, out
    assert ["Common", "Name:", "erin"] in described and ["Organization:", "team-a"] in described, out
    # The certificate and the key authenticate the CSR's subject.
    erin = certificate_kubeconfig(tmp_path / "erin.kubeconfig", hub, (cert_pem, key))
    info = await whoami(erin)
    assert (info["username"], info["groups"]) == ("erin", ["team-a", "system:authenticated"])
    # Approved and Issued stay: the certificate is set once, the approval cannot be taken back.
    denied = {**csr, "status": {**csr["status"], "conditions": [
        *csr["status"]["conditions"], {"type": "Denied", "status": "True", "reason": "Late"}]}}
    code, refused = await admin("PUT", "/apis/certificates.k8s.io/v1/certificatesigningrequests/erin/approval", denied)
    assert code == 422 and refused["details"]["causes"] == [{
        "reason": "FieldValueInvalid", "field": "status.conditions[1].type",
        "message": 'Invalid value: "Denied": Approved and Denied conditions are mutually exclusive'}], refused
    csr["status"]["certificate"] = base64.b64encode(b"junk").decode()
    code, refused = await admin("PUT", "/apis/certificates.k8s.io/v1/certificatesigningrequests/erin/status", csr)
    assert code == 422 and "updates may not modify existing certificate content" in refused["message"], refused


async def test_a_denied_csr_is_never_signed(hub: Hub) -> None:
    config = hub.kubeconfig_path
    code, _, err = await kubectl(config, "apply", "-f", "-", stdin=manifest("frank", signing_request("frank")[0]))
    assert code == 0, err
    code, out, err = await kubectl(config, "certificate", "deny", "frank")
    assert code == 0 and "denied" in out, err
    assert (await row(config, "frank"))[-1] == "Denied"
    csr = await get_csr(config, "frank")
    assert [c["type"] for c in csr["status"]["conditions"]] == ["Denied"] and "certificate" not in csr["status"]


async def test_kubes_validation_refuses_a_bad_request(hub: Hub) -> None:
    config = hub.kubeconfig_path
    request = signing_request("gina")[0]
    cases = {
        manifest("bad-pem", b"not a pem"):
            'spec.request: Invalid value: []byte{0x6e, 0x6f, 0x74, 0x20, 0x61, 0x20, 0x70, 0x65, 0x6d}: '
            "PEM block type must be CERTIFICATE REQUEST",
        manifest("no-signer", request, signer=None): "spec.signerName: Required value",
        manifest("short", request, expiration=599):
            "spec.expirationSeconds: Invalid value: 599: may not specify a duration less than 600 seconds (10 minutes)",
        manifest("no-usages", request, usages=()): "spec.usages: Required value",
        manifest("one-part", request, signer="example"):
            "must be a fully qualified domain and path of the form 'example.com/signer-name'",
        manifest("legacy", request, signer="kubernetes.io/legacy-unknown"):
            "the legacy signerName is not allowed via this API version",
    }
    for body, message in cases.items():
        code, _, err = await kubectl(config, "apply", "-f", "-", stdin=body)
        assert code != 0 and 'The CertificateSigningRequest "' in err and message in err, (message, err)
    # kube's CertificateSubjectRestriction: no client certificate for system:masters.
    code, _, err = await kubectl(config, "apply", "-f", "-", stdin=manifest("root", signing_request("root", "system:masters")[0]))
    assert code != 0 and (
        'certificatesigningrequests.certificates.k8s.io "root" is forbidden: use of kubernetes.io/kube-apiserver-client '
        "signer with system:masters group is not allowed"
    ) in err, err


async def test_usages_the_signer_refuses_fail_the_csr_and_other_signers_are_left_alone(hub: Hub) -> None:
    config = hub.kubeconfig_path
    code, _, err = await kubectl(config, "apply", "-f", "-", stdin=manifest(
        "server", signing_request("web")[0], usages=("server auth",)) + "---\n" + manifest(
        "custom", signing_request("hal")[0], signer="example.com/custom"))
    assert code == 0, err
    code, _, err = await kubectl(config, "certificate", "approve", "server", "custom")
    assert code == 0, err
    await condition_becomes(config, "server", "Approved,Failed")
    failed = (await get_csr(config, "server"))["status"]["conditions"][-1]
    assert (failed["type"], failed["reason"], failed["message"]) == (
        "Failed", "SignerValidationFailure", "invalid usage for client certificate: server auth")
    assert (await row(config, "custom"))[-1] == "Approved"  # nobody here signs for example.com
    assert "certificate" not in (await get_csr(config, "custom"))["status"]


async def test_approving_needs_the_approve_verb_on_the_signer(hub: Hub, admin: Client, tmp_path: Path) -> None:
    request, key = signing_request("ivy", "reviewers")
    config = hub.kubeconfig_path
    code, _, err = await kubectl(config, "apply", "-f", "-", stdin=manifest("ivy", request))
    assert code == 0, err
    await condition_becomes(config, "ivy", "Pending")
    code, _, err = await kubectl(config, "certificate", "approve", "ivy")
    assert code == 0, err
    await condition_becomes(config, "ivy", "Approved,Issued")
    ivy = certificate_kubeconfig(tmp_path / "ivy.kubeconfig", hub, (
        base64.b64decode((await get_csr(config, "ivy"))["status"]["certificate"]), key))
    # The reviewers may read CSRs and write their approval, but not approve for the signer yet.
    rules = [{"apiGroups": ["certificates.k8s.io"], "resources": ["certificatesigningrequests"], "verbs": ["get", "list", "create"]},
             {"apiGroups": ["certificates.k8s.io"], "resources": ["certificatesigningrequests/approval"], "verbs": ["update"]}]
    for path, body in (
        ("clusterroles", {"metadata": {"name": "csr-reviewer"}, "rules": rules}),
        ("clusterrolebindings", {"metadata": {"name": "csr-reviewers"}, "subjects": [{"kind": "Group", "name": "reviewers"}],
                                 "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "csr-reviewer"}}),
    ):
        code, created = await admin("POST", f"/apis/rbac.authorization.k8s.io/v1/{path}", body)
        assert code == 201, created
    code, _, err = await kubectl(config, "apply", "-f", "-", stdin=manifest("jay", signing_request("jay")[0]))
    assert code == 0, err

    async def ivy_reads() -> bool:
        return (await kubectl(ivy, "get", "csr", "jay"))[0] == 0

    await eventually(ivy_reads)
    code, _, err = await kubectl(ivy, "certificate", "approve", "jay")
    assert code != 0 and (
        'certificatesigningrequests.certificates.k8s.io "jay" is forbidden: user not permitted to approve requests '
        'with signerName "kubernetes.io/kube-apiserver-client"'
    ) in err, err
    assert (await row(config, "jay"))[-1] == "Pending"
    # kube's approver role for the client signer lets them.
    code, created = await admin("POST", "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings", {
        "metadata": {"name": "csr-approvers"}, "subjects": [{"kind": "Group", "name": "reviewers"}],
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                    "name": "system:certificates.k8s.io:kube-apiserver-client-approver"}})
    assert code == 201, created

    async def ivy_approves() -> bool:
        return (await kubectl(ivy, "certificate", "approve", "jay"))[0] == 0

    await eventually(ivy_approves)
    await condition_becomes(config, "jay", "Approved,Issued")
    # A CSR ivy makes names ivy, with her certificate's credential id (sent back by approve as protobuf).
    code, _, err = await kubectl(ivy, "apply", "-f", "-", stdin=manifest("kay", signing_request("kay")[0]))
    assert code == 0, err
    spec = (await get_csr(config, "kay"))["spec"]
    assert (spec["username"], spec["groups"]) == ("ivy", ["reviewers", "system:authenticated"]), spec
    assert list(spec["extra"]) == ["authentication.kubernetes.io/credential-id"], spec
    code, _, err = await kubectl(ivy, "certificate", "approve", "kay")
    assert code == 0, err
    await condition_becomes(config, "kay", "Approved,Issued")


async def test_discovery_and_openapi_list_the_kind_and_its_subresources(hub: Hub, admin: Client) -> None:
    code, out, err = await kubectl(hub.kubeconfig_path, "api-resources", "--api-group=certificates.k8s.io")
    assert code == 0 and out.splitlines()[1].split() == [
        "certificatesigningrequests", "csr", "certificates.k8s.io/v1", "false", "CertificateSigningRequest"], (out, err)
    code, listed = await admin("GET", "/apis/certificates.k8s.io/v1")
    assert code == 200 and [r["name"] for r in listed["resources"]] == [
        "certificatesigningrequests", "certificatesigningrequests/approval", "certificatesigningrequests/status"], listed
    code, document = await admin("GET", "/openapi/v3/apis/certificates.k8s.io/v1")
    approval = document["paths"]["/apis/certificates.k8s.io/v1/certificatesigningrequests/{name}/approval"]
    assert code == 200 and approval["put"]["operationId"].endswith("CertificateSigningRequestApproval"), approval
    assert {"get", "put", "patch"} <= set(approval)
