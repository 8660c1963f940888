"""The audit log on a real hub (real etcd, HTTPS, the real kubectl), as kube-apiserver's with
``--audit-policy-file`` and ``--audit-log-path``: each request's events at its policy's level, with
the user, the impersonated user, the object's reference, the response's status, the objects at
``Request``/``RequestResponse``, the authorization decision, and the ``Audit-Id`` header."""

from __future__ import annotations

import base64
import json
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import yaml

from controlplane.apiserver.audit import AuditConfig, LogSettings
from controlplane.apiserver.identity import Role
from controlplane.apiserver.kubeconfig import load_kubeconfig
from controlplane.apiserver.tls import client_ssl_context
from controlplane.hub import Hub
from controlplane.hubconfig import HubConfig

from ..test_real_clients import kubectl, needs_kubectl
from .realhub import Client, eventually

POLICY = {
    "apiVersion": "audit.k8s.io/v1", "kind": "Policy", "omitManagedFields": True,
    "rules": [
        {"level": "None", "nonResourceURLs": ["/healthz*", "/readyz*", "/livez*", "/openapi*", "/api*", "/version"]},
        {"level": "None", "verbs": ["watch"], "users": ["gpufed-admin"]},
        {"level": "Metadata", "resources": [{"group": "", "resources": ["secrets"]}]},
        {"level": "RequestResponse", "resources": [{"group": "", "resources": ["configmaps"]}]},
        {"level": "Metadata"},
    ],
}


@pytest.fixture
async def audited(tmp_path: Path) -> AsyncIterator[tuple[Hub, Path]]:
    policy = tmp_path / "policy.yaml"
    policy.write_text(yaml.safe_dump(POLICY))
    log = tmp_path / "audit" / "audit.log"
    config = HubConfig(state_dir=tmp_path / "hub", port=0, audit=AuditConfig(policy, LogSettings(str(log))))
    async with Hub(config) as running:
        yield running, log


def events(log: Path, **match: str) -> list[dict[str, Any]]:
    found = [json.loads(line) for line in log.read_text().splitlines()]
    return [e for e in found if all(e.get(k) == v or (e.get("objectRef") or {}).get(k) == v for k, v in match.items())]


@needs_kubectl
async def test_the_audit_log_records_each_request_at_its_policys_level(audited: tuple[Hub, Path]) -> None:
    hub, log = audited
    connector = aiohttp.TCPConnector(ssl=client_ssl_context(load_kubeconfig(hub.kubeconfig_path).ca_pem))
    async with aiohttp.ClientSession(connector=connector) as session:
        admin = Client(session, hub, load_kubeconfig(hub.kubeconfig_path).token)
        # RequestResponse for ConfigMaps: what was sent and answered, without managedFields.
        async with session.post(f"{hub.url}/api/v1/namespaces/default/configmaps",
                                json={"metadata": {"name": "settings"}, "data": {"mode": "fast"}},
                                headers={"Authorization": f"Bearer {admin.token}", "User-Agent": "audit-test/1"}) as resp:
            assert resp.status == 201
            audit_id = resp.headers["Audit-Id"]
        # Metadata for Secrets: no object in the log, whatever the request carried.
        code, _ = await admin("POST", "/api/v1/namespaces/default/secrets",
                              {"metadata": {"name": "token"}, "stringData": {"password": "hunter2"}})
        assert code == 201
        # A user RBAC refuses, and the admin acting as that user.
        assert hub.tokens is not None
        alice = await hub.tokens.create(role=Role.USER, name="alice", groups=("team-a",))
        assert (await Client(session, hub, alice.token)("DELETE", "/api/v1/namespaces/default/configmaps/settings"))[0] == 403
        whoami = {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"}
        assert (await Client(session, hub, alice.token)("POST", "/apis/authentication.k8s.io/v1/selfsubjectreviews",
                                                        whoami))[0] == 201
        assert (await Client(session, hub, "not-a-token")("GET", "/api/v1/namespaces/default/pods"))[0] == 401
    code, _, err = await kubectl(hub.kubeconfig_path, "get", "configmap", "settings", "--as", "bob")
    assert code != 0 and "forbidden" in err

    [received, complete] = [e for e in events(log) if e["auditID"] == audit_id]
    assert (received["stage"], complete["stage"]) == ("RequestReceived", "ResponseComplete")
    assert complete["level"] == "RequestResponse" and complete["verb"] == "create"
    assert complete["requestURI"] == "/api/v1/namespaces/default/configmaps"
    assert complete["user"]["username"] == "gpufed-admin" and complete["userAgent"] == "audit-test/1"
    assert complete["sourceIPs"] == ["127.0.0.1"]
    assert complete["objectRef"] == {"resource": "configmaps", "namespace": "default", "name": "settings",
                                     "apiVersion": "v1"}
    assert complete["responseStatus"] == {"metadata": {}, "code": 201}
    assert complete["requestObject"] == {"metadata": {"name": "settings"}, "data": {"mode": "fast"}}
    assert complete["responseObject"]["data"] == {"mode": "fast"}
    assert "managedFields" not in complete["responseObject"]["metadata"]  # omitManagedFields
    # kube's annotations: the reason empty for system:masters, whose authorizer gives none.
    assert complete["annotations"] == {"authorization.k8s.io/decision": "allow", "authorization.k8s.io/reason": ""}
    assert complete["requestReceivedTimestamp"] == received["requestReceivedTimestamp"] <= complete["stageTimestamp"]
    assert "responseStatus" not in received and "requestObject" not in received

    [secret] = events(log, resource="secrets", stage="ResponseComplete")
    assert secret["level"] == "Metadata" and "requestObject" not in secret and "responseObject" not in secret
    assert "hunter2" not in log.read_text()

    [denied] = events(log, verb="delete", stage="ResponseComplete")
    assert denied["user"]["username"] == "alice" and denied["level"] == "RequestResponse"
    assert denied["responseStatus"]["code"] == 403 and denied["responseStatus"]["reason"] == "Forbidden"
    assert denied["responseStatus"]["status"] == "Failure"
    assert denied["annotations"] == {"authorization.k8s.io/decision": "forbid", "authorization.k8s.io/reason": ""}
    # What RBAC allowed is named as kube's RBAC authorizer names it.
    [reviewed] = events(log, resource="selfsubjectreviews", stage="ResponseComplete")
    assert reviewed["annotations"] == {"authorization.k8s.io/decision": "allow", "authorization.k8s.io/reason":
                                       'RBAC: allowed by ClusterRoleBinding "system:basic-user" of ClusterRole '
                                       '"system:basic-user" to Group "system:authenticated"'}

    # A failed authentication is one ResponseStarted event naming what was tried, as kube's.
    [unknown] = events(log, resource="pods")
    assert unknown["stage"] == "ResponseStarted" and unknown["user"] == {} and unknown["verb"] == "list"
    assert unknown["responseStatus"] == {"metadata": {}, "message": "Authentication failed, attempted: bearer", "code": 401}

    [acting] = events(log, verb="get", name="settings", stage="ResponseComplete")
    assert acting["user"]["username"] == "gpufed-admin" and acting["impersonatedUser"]["username"] == "bob"
    assert acting["userAgent"].startswith("kubectl/")
    # Rules with level None: no discovery, no health checks, no admin watches.
    assert not [e for e in events(log) if e["requestURI"].startswith(("/api?", "/apis?", "/openapi", "/healthz"))]


async def test_a_put_that_creates_is_recorded_as_an_update_answered_201(audited: tuple[Hub, Path]) -> None:
    """kube's audit event of a PUT that creates its object (a Lease): the request's verb, the create's code."""
    hub, log = audited
    admin = load_kubeconfig(hub.kubeconfig_path)
    connector = aiohttp.TCPConnector(ssl=client_ssl_context(admin.ca_pem))
    lease = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": "l"}, "spec": {}}
    async with aiohttp.ClientSession(connector=connector) as session, session.put(
        f"{hub.url}/apis/coordination.k8s.io/v1/namespaces/default/leases/l", json=lease,
        headers={"Authorization": f"Bearer {admin.token}"},
    ) as resp:
        assert resp.status == 201, await resp.text()
        audit_id = resp.headers["Audit-Id"]
    [complete] = [e for e in events(log, stage="ResponseComplete") if e["auditID"] == audit_id]
    assert (complete["verb"], complete["responseStatus"]["code"]) == ("update", 201)
    assert complete["objectRef"]["resource"] == "leases" and complete["objectRef"]["name"] == "l"


async def test_a_watch_is_recorded_when_it_starts_and_when_it_ends(audited: tuple[Hub, Path]) -> None:
    hub, log = audited
    connector = aiohttp.TCPConnector(ssl=client_ssl_context(load_kubeconfig(hub.kubeconfig_path).ca_pem))
    assert hub.tokens is not None
    viewer = await hub.tokens.create(role=Role.VIEWER, name="victor")
    async with aiohttp.ClientSession(connector=connector) as session:
        url = f"{hub.url}/api/v1/namespaces/default/configmaps?watch=true&timeoutSeconds=1"
        async with session.get(url, headers={"Authorization": f"Bearer {viewer.token}"}) as resp:
            assert resp.status == 200
            audit_id = resp.headers["Audit-Id"]
            await resp.read()
    stages = [e["stage"] for e in events(log) if e["auditID"] == audit_id]
    assert stages == ["RequestReceived", "ResponseStarted", "ResponseComplete"], stages
    assert all(e["verb"] == "watch" for e in events(log) if e["auditID"] == audit_id)


async def test_an_audit_policy_kube_would_refuse_stops_the_hub_with_the_reason(tmp_path: Path) -> None:
    policy = tmp_path / "policy.yaml"
    policy.write_text("apiVersion: audit.k8s.io/v1\nkind: Policy\nrules:\n- level: Everything\n")
    from controlplane.apiserver.audit import PolicyError

    with pytest.raises(PolicyError, match=f'--audit-policy-file {policy}: rules\\[0\\].level: Unsupported value: "Everything"'):
        async with Hub(HubConfig(state_dir=tmp_path / "hub", port=0, audit=AuditConfig(policy, LogSettings(str(tmp_path / "a.log"))))):
            pass


async def test_admission_policies_add_their_audit_annotations_and_audit_failures(audited: tuple[Hub, Path]) -> None:
    hub, log = audited
    connector = aiohttp.TCPConnector(ssl=client_ssl_context(load_kubeconfig(hub.kubeconfig_path).ca_pem))
    group = "/apis/admissionregistration.k8s.io/v1"
    match = {"resourceRules": [{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"],
                                "resources": ["configmaps"]}]}
    vap = {"metadata": {"name": "sized"}, "spec": {
        "matchConstraints": match,
        "validations": [{"expression": "size(object.data) <= 1", "message": "at most one key"}],
        "auditAnnotations": [{"key": "keys", "valueExpression": "string(size(object.data))"}]}}
    vapb = {"metadata": {"name": "sized"}, "spec": {"policyName": "sized", "validationActions": ["Audit"]}}
    async with aiohttp.ClientSession(connector=connector) as session:
        admin = Client(session, hub, load_kubeconfig(hub.kubeconfig_path).token)
        for plural, body in (("validatingadmissionpolicies", vap), ("validatingadmissionpolicybindings", vapb)):
            code, created = await admin("POST", f"{group}/{plural}", body)
            assert code == 201, created
        webhooks = hub.webhooks
        assert webhooks is not None

        async def enforced() -> bool:
            return "sized" in {b.name for _, b in webhooks.bound}

        await eventually(enforced)
        code, created = await admin("POST", "/api/v1/namespaces/default/configmaps",
                                    {"metadata": {"name": "wide"}, "data": {"a": "1", "b": "2"}})
        assert code == 201, created  # Audit only: stored
    [event] = events(log, name="wide", stage="ResponseComplete")
    assert event["annotations"]["sized/keys"] == "2"
    assert json.loads(event["annotations"]["validation.policy.admission.k8s.io/validation_failure"]) == [
        {"message": "at most one key", "policy": "sized", "binding": "sized", "validationActions": ["Audit"]}]


async def test_every_response_has_an_audit_id_without_an_audit_log(hub: Hub, session: aiohttp.ClientSession) -> None:
    """kube's audit-init filter: ``Audit-Id`` on every response, the client's own when it sends one."""
    headers = {"Authorization": f"Bearer {load_kubeconfig(hub.kubeconfig_path).token}"}
    async with session.get(f"{hub.url}/api/v1/namespaces", headers=headers) as resp:
        assert resp.status == 200 and str(uuid.UUID(resp.headers["Audit-Id"])) == resp.headers["Audit-Id"]
    async with session.get(f"{hub.url}/api/v1/namespaces/none", headers={**headers, "Audit-ID": "trace-7"}) as resp:
        assert resp.status == 404 and resp.headers["Audit-Id"] == "trace-7"


async def test_a_token_requests_event_names_the_issued_credential_id_and_its_uses_the_users(
    audited: tuple[Hub, Path],
) -> None:
    """kube's TokenRequest annotates its event with the token's credential id; the events of the
    token's requests carry it in the user's extras, so the two can be joined."""
    hub, log = audited
    connector = aiohttp.TCPConnector(ssl=client_ssl_context(load_kubeconfig(hub.kubeconfig_path).ca_pem))
    async with aiohttp.ClientSession(connector=connector) as session:
        admin = Client(session, hub, load_kubeconfig(hub.kubeconfig_path).token)
        code, account = await admin("POST", "/api/v1/namespaces/default/serviceaccounts", {"metadata": {"name": "bot"}})
        assert code == 201, account
        code, answer = await admin("POST", "/api/v1/namespaces/default/serviceaccounts/bot/token",
                                   {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {}})
        assert code == 201, answer
        token = answer["status"]["token"]
        jti = json.loads(base64.urlsafe_b64decode(token.split(".")[1] + "=="))["jti"]
        review = {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"}
        code, _ = await Client(session, hub, token)("POST", "/apis/authentication.k8s.io/v1/selfsubjectreviews", review)
        assert code == 201
    [issued] = events(log, name="bot", subresource="token", stage="ResponseComplete")
    assert issued["annotations"]["authentication.kubernetes.io/issued-credential-id"] == f"JTI={jti}", issued
    [used] = [e for e in events(log, stage="ResponseComplete") if e["user"]["username"] == "system:serviceaccount:default:bot"]
    assert used["user"]["extra"]["authentication.kubernetes.io/credential-id"] == [f"JTI={jti}"], used
