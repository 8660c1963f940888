"""The audit policy's rules and the audit log file, as kube-apiserver's (policy/checker.go, the
policy validation, lumberjack's rotation): pure, no hub."""

from __future__ import annotations

import base64
import json
import os
from pathlib import Path
from typing import Any

import pytest
from aiohttp.test_utils import make_mocked_request

from controlplane.apiserver.audit import AuditLog, AuditPolicy, Level, PolicyError, Stage
from controlplane.apiserver.audit.recording import _attempted_authentication
from controlplane.apiserver.identity import RequestAttributes, Role, UserInfo

ALICE = UserInfo(name="alice", role=Role.USER, user_groups=("team-a", "system:authenticated"))
NODE = UserInfo(name="system:node:n1", role=Role.USER, user_groups=("system:nodes", "system:authenticated"))

POLICY: dict[str, Any] = {
    "apiVersion": "audit.k8s.io/v1", "kind": "Policy", "omitStages": ["RequestReceived"],
    "rules": [
        {"level": "None", "users": ["system:kube-proxy"]},
        {"level": "None", "userGroups": ["system:nodes"], "verbs": ["get"]},
        {"level": "None", "nonResourceURLs": ["/healthz*", "/version"]},
        {"level": "Metadata", "resources": [{"group": "", "resources": ["secrets", "configmaps/*"]}]},
        {"level": "Request", "resources": [{"group": "", "resources": ["pods/log", "*/status"]}]},
        {"level": "RequestResponse", "resources": [{"group": "apps", "resources": ["deployments"],
                                                    "resourceNames": ["web"]}], "omitStages": ["ResponseStarted"]},
        {"level": "Request", "namespaces": [""], "verbs": ["create"]},
        {"level": "Metadata", "omitStages": ["ResponseComplete"]},
    ],
}


def res(user: UserInfo, verb: str, group: str, resource: str, *, sub: str = "", ns: str | None = "team-a",
        name: str | None = None) -> RequestAttributes:
    return RequestAttributes(user=user, verb=verb, api_group=group, resource=resource, subresource=sub,
                             namespace=ns, name=name)


def path(user: UserInfo, p: str) -> RequestAttributes:
    return RequestAttributes(user=user, verb="get", api_group="", resource="", non_resource_path=p)


@pytest.mark.parametrize(("attrs", "level"), [
    (res(NODE, "get", "", "pods"), Level.NONE),  # userGroups and verbs both match
    (res(NODE, "list", "", "secrets"), Level.METADATA),  # the verb does not: the next rule
    (path(ALICE, "/healthz/etcd"), Level.NONE),  # a trailing * is a prefix
    (path(ALICE, "/version/"), Level.METADATA),  # no *: the exact path only; the catch-all rule
    (res(ALICE, "get", "", "secrets", name="s"), Level.METADATA),
    (res(ALICE, "get", "", "configmaps"), Level.METADATA),  # configmaps/* covers the resource itself too
    (res(ALICE, "get", "", "pods", sub="log"), Level.REQUEST),
    (res(ALICE, "update", "", "pods", sub="status"), Level.REQUEST),  # */status
    (res(ALICE, "update", "apps", "deployments", sub="status"), Level.METADATA),  # another group
    (res(ALICE, "patch", "apps", "deployments", name="web"), Level.REQUEST_RESPONSE),
    (res(ALICE, "patch", "apps", "deployments", name="api"), Level.METADATA),  # resourceNames
    (res(ALICE, "create", "rbac.authorization.k8s.io", "clusterroles", ns=None), Level.REQUEST),  # "" = cluster scope
    (res(ALICE, "create", "", "configmaps/x", ns=None), Level.REQUEST),
])
def test_the_first_matching_rule_decides_the_level(attrs: RequestAttributes, level: Level) -> None:
    assert AuditPolicy.parse(POLICY).decide(attrs).level is level


def test_stages_are_omitted_by_the_policy_and_the_rule() -> None:
    policy = AuditPolicy.parse(POLICY)
    web = policy.decide(res(ALICE, "patch", "apps", "deployments", name="web"))
    assert web.omit_stages == {Stage.REQUEST_RECEIVED, Stage.RESPONSE_STARTED}
    assert web.records(Stage.RESPONSE_COMPLETE) and not web.records(Stage.REQUEST_RECEIVED)
    other = policy.decide(res(ALICE, "get", "batch", "jobs"))
    assert not other.records(Stage.RESPONSE_COMPLETE) and other.records(Stage.RESPONSE_STARTED)
    assert not policy.decide(path(ALICE, "/healthz")).records(Stage.RESPONSE_COMPLETE)  # level None writes nothing


def test_no_rule_matching_is_level_none() -> None:
    policy = AuditPolicy.parse({"apiVersion": "audit.k8s.io/v1", "kind": "Policy",
                                "rules": [{"level": "Metadata", "users": ["bob"]}]})
    assert policy.decide(res(ALICE, "get", "", "pods")).level is Level.NONE


@pytest.mark.parametrize(("document", "message"), [
    ({"apiVersion": "v1", "kind": "ConfigMap"}, "kind: Policy with apiVersion: audit.k8s.io/v1 expected"),
    ({"apiVersion": "audit.k8s.io/v1", "kind": "Policy", "rules": []}, "rules: Required value"),
    ({"apiVersion": "audit.k8s.io/v1", "kind": "Policy", "rules": [{"level": "Verbose"}]},
     'rules[0].level: Unsupported value: "Verbose"'),
    ({"apiVersion": "audit.k8s.io/v1", "kind": "Policy",
      "rules": [{"level": "None", "nonResourceURLs": ["/x"], "namespaces": ["a"]}]},
     "rules[0].nonResourceURLs: Invalid value: rules cannot apply to both"),
    ({"apiVersion": "audit.k8s.io/v1", "kind": "Policy", "rules": [{"level": "None", "nonResourceURLs": ["/a*/b"]}]},
     'must be the final character'),
    ({"apiVersion": "audit.k8s.io/v1", "kind": "Policy",
      "rules": [{"level": "None", "resources": [{"group": "apps/v1"}]}]}, "rules[0].resources[0].group: Invalid value"),
    ({"apiVersion": "audit.k8s.io/v1", "kind": "Policy", "omitStages": ["Done"], "rules": [{"level": "None"}]},
     'omitStages[0]: Unsupported value: "Done"'),
])
def test_a_policy_kube_would_refuse_is_refused_naming_the_field(document: dict[str, Any], message: str) -> None:
    with pytest.raises(PolicyError, match=message.replace("[", r"\[").replace("]", r"\]").replace("*", r"\*")):
        AuditPolicy.parse(document)


async def test_the_log_appends_json_lines_to_a_private_file_and_rotates_it(tmp_path: Path) -> None:
    log = AuditLog(str(tmp_path / "audit" / "audit.log"), max_backups=2)
    log.max_bytes = 300  # the flag counts megabytes; a few events here
    for i in range(12):
        log.write({"kind": "Event", "auditID": str(i), "pad": "x" * 60})
    await log.close()
    current = tmp_path / "audit" / "audit.log"
    assert os.stat(current).st_mode & 0o777 == 0o600
    backups = log.backups()
    assert len(backups) == 2, backups  # --audit-log-maxbackup: older ones removed
    assert all(b.name.startswith("audit-") and b.suffix == ".log" for b in backups)
    seen = [json.loads(line)["auditID"] for f in [*backups, current] for line in f.read_text().splitlines()]
    assert seen == [str(i) for i in range(12 - len(seen), 12)]  # in order, the newest kept, none torn
    assert all(f.stat().st_size <= 300 for f in [*backups, current])


@pytest.mark.parametrize(
    ("headers", "query", "message"),
    [
        ({}, "", "Authentication failed, no credentials provided"),
        ({"Authorization": "Bearer abc"}, "", "Authentication failed, attempted: bearer"),
        ({"Authorization": "Basic " + base64.b64encode(b"u:p").decode()}, "", "Authentication failed, attempted: basic"),
        ({"Authorization": "Basic not-base64!"}, "", "Authentication failed, no credentials provided"),
        ({"Authorization": "Bearer"}, "?access_token=t", "Authentication failed, attempted: access_token"),
    ],
)
def test_a_failed_authentications_event_names_the_credentials_tried_as_kube(
    headers: dict[str, str], query: str, message: str
) -> None:
    request = make_mocked_request("GET", "/api/v1/pods" + query, headers=headers)
    assert _attempted_authentication(request) == message
