"""kube's bootstrap API Priority and Fairness configuration (``apiserver/pkg/apis/flowcontrol/bootstrap``,
kube 1.32), with the hub's own schemas, and what its config ensurer (``pkg/registry/flowcontrol/ensurer``)
writes over a stored object.

The mandatory objects (``exempt`` and ``catch-all``, both kinds) are always put back to these specs; the
suggested ones are created when missing and updated only while annotated
``apf.kubernetes.io/autoupdate-spec: "true"``. Pure data and decisions: the leader's controller writes.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Final

from controlplane.apis.untyped import Obj
from controlplane.gojson import parse_bool

API_VERSION: Final = "flowcontrol.apiserver.k8s.io/v1"
AUTO_UPDATE_ANNOTATION: Final = "apf.kubernetes.io/autoupdate-spec"
#: kube's user and group names (``k8s.io/apiserver/pkg/authentication/user``).
_MASTERS, _AUTHENTICATED, _UNAUTHENTICATED = "system:masters", "system:authenticated", "system:unauthenticated"
_NODES, _SERVICE_ACCOUNTS = "system:nodes", "system:serviceaccounts"
_CONTROLLER_MANAGER, _SCHEDULER = "system:kube-controller-manager", "system:kube-scheduler"
#: The hub's member agents (``controlplane.apiserver.identity.AGENTS``).
AGENTS_GROUP: Final = "system:gpufed:agents"


def _level(name: str, spec: Obj) -> Obj:
    return {"apiVersion": API_VERSION, "kind": "PriorityLevelConfiguration", "metadata": {"name": name}, "spec": spec}


def _limited(shares: int, lendable: int, queuing: tuple[int, int, int] | None) -> Obj:
    response: Obj = {"type": "Reject"}
    if queuing is not None:
        queues, hand, length = queuing
        response = {"type": "Queue", "queuing": {"queues": queues, "handSize": hand, "queueLengthLimit": length}}
    return {"type": "Limited", "limited": {
        "nominalConcurrencyShares": shares, "lendablePercent": lendable, "limitResponse": response,
    }}


def _schema(name: str, level: str, precedence: int, method: str | None, *rules: Obj) -> Obj:
    spec: Obj = {"priorityLevelConfiguration": {"name": level}, "matchingPrecedence": precedence}
    if method is not None:
        spec["distinguisherMethod"] = {"type": method}
    spec["rules"] = list(rules)
    return {"apiVersion": API_VERSION, "kind": "FlowSchema", "metadata": {"name": name}, "spec": spec}


def _groups(*names: str) -> list[Obj]:
    return [{"kind": "Group", "group": {"name": name}} for name in names]


def _users(*names: str) -> list[Obj]:
    return [{"kind": "User", "user": {"name": name}} for name in names]


def _kube_system_accounts(*names: str) -> list[Obj]:
    return [{"kind": "ServiceAccount", "serviceAccount": {"name": name, "namespace": "kube-system"}} for name in names]


def _resources(verbs: list[str], groups: list[str], resources: list[str], namespaces: list[str] | None) -> Obj:
    rule: Obj = {"verbs": verbs, "apiGroups": groups, "resources": resources}
    if namespaces is None:
        rule.update(clusterScope=True, namespaces=["*"])
    else:
        rule["namespaces"] = namespaces
    return rule


_ALL_RESOURCES = _resources(["*"], ["*"], ["*"], None)
_ALL_NON_RESOURCES = {"verbs": ["*"], "nonResourceURLs": ["*"]}


def _everything(subjects: list[Obj]) -> Obj:
    return {"subjects": subjects, "resourceRules": [_ALL_RESOURCES], "nonResourceRules": [_ALL_NON_RESOURCES]}


_ELECTION_VERBS = ["get", "create", "update"]

MANDATORY_PRIORITY_LEVELS: Final[Mapping[str, Obj]] = {
    "exempt": _level("exempt", {"type": "Exempt", "exempt": {"nominalConcurrencyShares": 0, "lendablePercent": 0}}),
    "catch-all": _level("catch-all", _limited(5, 0, None)),
}
MANDATORY_FLOW_SCHEMAS: Final[Mapping[str, Obj]] = {
    "exempt": _schema("exempt", "exempt", 1, None, _everything(_groups(_MASTERS))),
    "catch-all": _schema("catch-all", "catch-all", 10000, "ByUser", _everything(_groups(_UNAUTHENTICATED, _AUTHENTICATED))),
}
SUGGESTED_PRIORITY_LEVELS: Final[Mapping[str, Obj]] = {
    level["metadata"]["name"]: level for level in (
        _level("system", _limited(30, 33, (64, 6, 50))),
        _level("node-high", _limited(40, 25, (64, 6, 50))),
        _level("leader-election", _limited(10, 0, (16, 4, 50))),
        _level("workload-high", _limited(40, 50, (128, 6, 50))),
        _level("workload-low", _limited(100, 90, (128, 6, 50))),
        _level("global-default", _limited(20, 50, (128, 6, 50))),
    )
}
SUGGESTED_FLOW_SCHEMAS: Final[Mapping[str, Obj]] = {
    schema["metadata"]["name"]: schema for schema in (
        _schema("probes", "exempt", 2, None, {
            "subjects": _groups(_UNAUTHENTICATED, _AUTHENTICATED),
            "nonResourceRules": [{"verbs": ["get"], "nonResourceURLs": ["/healthz", "/readyz", "/livez"]}],
        }),
        # The hub's own: the member agents, whose leases and reports a burst of users' LISTs never delays.
        _schema("system-agents", "system", 50, "ByUser", _everything(_groups(AGENTS_GROUP))),
        _schema("system-leader-election", "leader-election", 100, "ByUser", {
            "subjects": [*_users(_CONTROLLER_MANAGER, _SCHEDULER), *_kube_system_accounts("*")],
            "resourceRules": [_resources(_ELECTION_VERBS, ["coordination.k8s.io"], ["leases"], ["*"])],
        }),
        _schema("endpoint-controller", "workload-high", 150, "ByUser", {
            "subjects": [*_users(_CONTROLLER_MANAGER),
                         *_kube_system_accounts("endpoint-controller", "endpointslicemirroring-controller")],
            "resourceRules": [_resources(_ELECTION_VERBS, [""], ["endpoints"], ["*"])],
        }),
        _schema("workload-leader-election", "leader-election", 200, "ByUser", {
            "subjects": _kube_system_accounts("*"),
            "resourceRules": [_resources(_ELECTION_VERBS, ["coordination.k8s.io"], ["leases"], ["*"])],
        }),
        # The hub's own: any user's lease election (as before the objects).
        _schema("leader-election", "leader-election", 250, "ByUser", {
            "subjects": _groups(_AUTHENTICATED),
            "resourceRules": [_resources([*_ELECTION_VERBS, "patch"], ["coordination.k8s.io"], ["leases"], ["*"])],
        }),
        _schema("system-node-high", "node-high", 400, "ByUser", {
            "subjects": _groups(_NODES),
            "resourceRules": [_resources(["*"], [""], ["nodes", "nodes/status"], None),
                              _resources(["*"], ["coordination.k8s.io"], ["leases"], ["*"])],
        }),
        _schema("system-nodes", "system", 500, "ByUser", _everything(_groups(_NODES))),
        _schema("kube-controller-manager", "workload-high", 800, "ByNamespace", _everything(_users(_CONTROLLER_MANAGER))),
        _schema("kube-scheduler", "workload-high", 800, "ByNamespace", _everything(_users(_SCHEDULER))),
        _schema("kube-system-service-accounts", "workload-high", 900, "ByNamespace", _everything(_kube_system_accounts("*"))),
        _schema("service-accounts", "workload-low", 9000, "ByUser", _everything(_groups(_SERVICE_ACCOUNTS))),
        _schema("global-default", "global-default", 9900, "ByUser", _everything(_groups(_UNAUTHENTICATED, _AUTHENTICATED))),
    )
}
PRIORITY_LEVELS: Final[Mapping[str, Obj]] = {**MANDATORY_PRIORITY_LEVELS, **SUGGESTED_PRIORITY_LEVELS}
FLOW_SCHEMAS: Final[Mapping[str, Obj]] = {**MANDATORY_FLOW_SCHEMAS, **SUGGESTED_FLOW_SCHEMAS}


def bootstrap_object(kind: str, name: str) -> Obj | None:
    """A copy of the bootstrap ``kind`` object ``name``, annotated as kube creates it (None: not one)."""
    found = (FLOW_SCHEMAS if kind == "FlowSchema" else PRIORITY_LEVELS).get(name)
    if found is None:
        return None
    obj = copy.deepcopy(found)
    obj["metadata"]["annotations"] = {AUTO_UPDATE_ANNOTATION: "true"}
    return obj


def ensured(stored: Obj, *, mandatory: bool) -> Obj | None:
    """What kube's ensurer writes over ``stored`` (a bootstrap object's name), or None: nothing.

    A mandatory object always gets the bootstrap spec; a suggested one only while its annotation says
    ``true`` (or, without a boolean there, while it is at generation 1: the server made it). The
    annotation is set to the decision when it says otherwise."""
    kind, name = stored.get("kind"), stored["metadata"]["name"]
    wanted = (FLOW_SCHEMAS if kind == "FlowSchema" else PRIORITY_LEVELS)[name]
    annotations = stored["metadata"].get("annotations") or {}
    current = parse_bool(annotations.get(AUTO_UPDATE_ANNOTATION))
    if mandatory:
        auto_update = True
    elif current is not None:
        auto_update = current
    else:
        auto_update = stored["metadata"].get("generation") == 1
    spec_changes = auto_update and stored.get("spec") != wanted["spec"]
    if not spec_changes and current == auto_update:
        return None
    out = copy.deepcopy(stored)
    out["metadata"]["annotations"] = {**annotations, AUTO_UPDATE_ANNOTATION: "true" if auto_update else "false"}
    if spec_changes:
        out["spec"] = copy.deepcopy(wanted["spec"])
    return out
