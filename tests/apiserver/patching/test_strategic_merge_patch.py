"""Strategic merge patch: merge keys per list, directives, nulls, kubectl's 3-way patches.

Every case states the expected object. Cases whose behaviour the hub shares with
Kubernetes (``like_kube``) are also run through real ``kubectl patch --local``, which
uses Kubernetes' own implementation, and must give the same object.
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass, field
from typing import Any

import pytest

from controlplane.apiserver.patching import PatchError, strategic_merge_patch, supported_strategic_kinds
from controlplane.hub import hub_registry

from .builders import make_object
from .conftest import KubectlPatch

LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"


def container(name: str, image: str | None = None, **extra: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"name": name, **extra}
    if image is not None:
        out["image"] = image
    return out


def deployment(containers: list[dict[str, Any]] | None = None, **spec: Any) -> dict[str, Any]:
    pod_spec = {"containers": containers if containers is not None else [container("a", "a:1")]}
    pod_spec.update(spec.pop("pod", {}))
    metadata = spec.pop("metadata", {})
    body = {
        "selector": {"matchLabels": {"app": "x"}},
        "template": {"metadata": {"labels": {"app": "x"}}, "spec": pod_spec},
        **spec,
    }
    return make_object("Deployment", "web", metadata=metadata, spec=body)


def pod_template(patch_spec: dict[str, Any]) -> dict[str, Any]:
    return {"spec": {"template": {"spec": patch_spec}}}


def containers_of(obj: dict[str, Any]) -> list[dict[str, Any]]:
    result: list[dict[str, Any]] = obj["spec"]["template"]["spec"]["containers"]
    return result


@dataclass(frozen=True)
class Case:
    id: str
    kind: str
    original: dict[str, Any]
    patch: dict[str, Any]
    expected: dict[str, Any]
    like_kube: bool = True
    extra: dict[str, Any] = field(default_factory=dict)


def _with(obj: dict[str, Any], path: str, value: Any) -> dict[str, Any]:
    """A copy of ``obj`` with the dotted ``path`` set to ``value`` (``...`` deletes it)."""
    out = copy.deepcopy(obj)
    node = out
    *parents, last = path.split(".")
    for name in parents:
        node = node[name]
    if value is ...:
        del node[last]
    else:
        node[last] = value
    return out


THREE = deployment([container("a", "a:1"), container("b", "b:1"), container("c", "c:1")])
ORDER_ABC = [{"name": "a"}, {"name": "b"}, {"name": "c"}]
POD = "spec.template.spec"

CASES = [
    Case(
        "maps merge recursively",
        "Deployment",
        deployment(metadata={"labels": {"app": "x"}}, replicas=1),
        {"metadata": {"labels": {"tier": "gpu"}}, "spec": {"replicas": 3}},
        _with(
            _with(deployment(metadata={"labels": {"app": "x"}}, replicas=1), "metadata.labels.tier", "gpu"),
            "spec.replicas",
            3,
        ),
    ),
    Case(
        "null deletes a key",
        "Deployment",
        deployment(metadata={"labels": {"app": "x", "tier": "gpu"}}),
        {"metadata": {"labels": {"tier": None}}},
        deployment(metadata={"labels": {"app": "x"}}),
    ),
    Case(
        "null for a key that is not there stores nothing",
        "Deployment",
        deployment(metadata={"labels": {"app": "x"}}),
        {"metadata": {"labels": {"gone": None}, "annotations": {"a": None, "b": "1"}}},
        deployment(metadata={"labels": {"app": "x"}, "annotations": {"b": "1"}}),
    ),
    Case(
        "containers merge by name: only the named one changes",
        "Deployment",
        THREE,
        pod_template({"containers": [{"name": "b", "image": "new"}]}),
        deployment([container("a", "a:1"), container("b", "new"), container("c", "c:1")]),
    ),
    Case(
        "a new container without anchor goes before the stored ones",
        "Deployment",
        deployment([container("a", "a:1")]),
        pod_template({"containers": [container("z", "z:1")]}),
        deployment([container("z", "z:1"), container("a", "a:1")]),
    ),
    Case(
        "new items go after the patch items they follow",
        "Deployment",
        THREE,
        pod_template({"containers": [{"name": "b", "image": "new"}, container("d", "d:1")]}),
        deployment(
            [container("a", "a:1"), container("b", "new"), container("d", "d:1"), container("c", "c:1")]
        ),
    ),
    Case(
        "$patch: delete removes the list item with that merge key",
        "Deployment",
        THREE,
        pod_template({"containers": [{"$patch": "delete", "name": "a"}]}),
        deployment([container("b", "b:1"), container("c", "c:1")]),
    ),
    Case(
        "$patch: replace in a list takes the list as sent",
        "Deployment",
        THREE,
        pod_template({"containers": [container("z", "z:1"), {"$patch": "replace"}]}),
        deployment([container("z", "z:1")]),
    ),
    Case(
        "$patch: replace on a map takes the map as sent",
        "Deployment",
        deployment(),
        {"spec": {"template": {"metadata": {"labels": {"$patch": "replace", "app": "y"}}}}},
        _with(deployment(), "spec.template.metadata.labels", {"app": "y"}),
    ),
    Case(
        "$patch: delete on a map removes it",
        "Deployment",
        deployment(strategy={"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1}}),
        {"spec": {"strategy": {"rollingUpdate": {"$patch": "delete"}}}},
        deployment(strategy={"type": "RollingUpdate"}),
        like_kube=False,  # Kubernetes leaves `rollingUpdate: {}` and then defaults it again
    ),
    Case(
        "$patch: merge on a map is the default merge",
        "Deployment",
        deployment(replicas=1),
        {"spec": {"$patch": "merge", "replicas": 2}},
        deployment(replicas=2),
        like_kube=False,  # Kubernetes accepts `merge` only in its type tags
    ),
    Case(
        "env merges by name inside a container",
        "Deployment",
        deployment([container("a", "a:1", env=[{"name": "A", "value": "1"}, {"name": "B", "value": "2"}])]),
        pod_template(
            {"containers": [{"name": "a", "env": [{"name": "B", "value": "3"}, {"name": "C", "value": "4"}]}]}
        ),
        deployment(
            [
                container(
                    "a",
                    "a:1",
                    env=[
                        {"name": "A", "value": "1"},
                        {"name": "B", "value": "3"},
                        {"name": "C", "value": "4"},
                    ],
                )
            ]
        ),
    ),
    Case(
        "envFrom has no merge key and is replaced",
        "Deployment",
        deployment([container("a", "a:1", envFrom=[{"configMapRef": {"name": "x"}}])]),
        pod_template({"containers": [{"name": "a", "envFrom": [{"secretRef": {"name": "y"}}]}]}),
        deployment([container("a", "a:1", envFrom=[{"secretRef": {"name": "y"}}])]),
    ),
    Case(
        "container ports merge by containerPort",
        "Deployment",
        deployment(
            [
                container(
                    "a",
                    "a:1",
                    ports=[{"containerPort": 80, "name": "http"}, {"containerPort": 443, "name": "https"}],
                )
            ]
        ),
        pod_template({"containers": [{"name": "a", "ports": [{"containerPort": 80, "name": "web"}]}]}),
        deployment(
            [
                container(
                    "a",
                    "a:1",
                    ports=[{"containerPort": 80, "name": "web"}, {"containerPort": 443, "name": "https"}],
                )
            ]
        ),
    ),
    Case(
        "Service ports merge by port",
        "Service",
        make_object(
            "Service", spec={"ports": [{"port": 80, "targetPort": 8080}, {"port": 443, "targetPort": 8443}]}
        ),
        {"spec": {"ports": [{"port": 443, "targetPort": 9443}]}},
        make_object(
            "Service", spec={"ports": [{"port": 80, "targetPort": 8080}, {"port": 443, "targetPort": 9443}]}
        ),
    ),
    Case(
        "volumeMounts merge by mountPath",
        "Deployment",
        deployment(
            [
                container(
                    "a",
                    "a:1",
                    volumeMounts=[
                        {"name": "data", "mountPath": "/data"},
                        {"name": "cfg", "mountPath": "/etc/cfg"},
                    ],
                )
            ]
        ),
        pod_template(
            {"containers": [{"name": "a", "volumeMounts": [{"mountPath": "/data", "readOnly": True}]}]}
        ),
        deployment(
            [
                container(
                    "a",
                    "a:1",
                    volumeMounts=[
                        {"name": "data", "mountPath": "/data", "readOnly": True},
                        {"name": "cfg", "mountPath": "/etc/cfg"},
                    ],
                )
            ]
        ),
    ),
    Case(
        "volumes merge by name and $retainKeys switches the volume source",
        "Deployment",
        deployment(pod={"volumes": [{"name": "v", "emptyDir": {}}, {"name": "w", "emptyDir": {}}]}),
        pod_template(
            {"volumes": [{"$retainKeys": ["configMap", "name"], "name": "v", "configMap": {"name": "cm"}}]}
        ),
        deployment(
            pod={"volumes": [{"name": "v", "configMap": {"name": "cm"}}, {"name": "w", "emptyDir": {}}]}
        ),
    ),
    Case(
        "$retainKeys on the deployment strategy drops rollingUpdate",
        "Deployment",
        deployment(strategy={"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1}}),
        {"spec": {"strategy": {"$retainKeys": ["type"], "type": "Recreate"}}},
        deployment(strategy={"type": "Recreate"}),
    ),
    Case(
        "imagePullSecrets merge by name",
        "Deployment",
        deployment(pod={"imagePullSecrets": [{"name": "a"}]}),
        pod_template({"imagePullSecrets": [{"name": "b"}]}),
        deployment(pod={"imagePullSecrets": [{"name": "b"}, {"name": "a"}]}),
    ),
    Case(
        "tolerations have no merge key and are replaced",
        "Deployment",
        deployment(pod={"tolerations": [{"key": "a", "operator": "Exists"}]}),
        pod_template({"tolerations": [{"key": "b", "operator": "Exists"}]}),
        deployment(pod={"tolerations": [{"key": "b", "operator": "Exists"}]}),
    ),
    Case(
        "hostAliases merge by ip",
        "Deployment",
        deployment(pod={"hostAliases": [{"ip": "10.0.0.1", "hostnames": ["a"]}]}),
        pod_template(
            {"hostAliases": [{"ip": "10.0.0.1", "hostnames": ["b"]}, {"ip": "10.0.0.2", "hostnames": ["c"]}]}
        ),
        deployment(
            pod={
                "hostAliases": [
                    {"ip": "10.0.0.1", "hostnames": ["b"]},
                    {"ip": "10.0.0.2", "hostnames": ["c"]},
                ]
            }
        ),
    ),
    Case(
        "topologySpreadConstraints merge by topologyKey",
        "Deployment",
        deployment(pod={"topologySpreadConstraints": [{"topologyKey": "zone", "maxSkew": 1}]}),
        pod_template({"topologySpreadConstraints": [{"topologyKey": "zone", "maxSkew": 2}]}),
        deployment(pod={"topologySpreadConstraints": [{"topologyKey": "zone", "maxSkew": 2}]}),
    ),
    Case(
        "resources.claims have no patch strategy and are replaced",
        "Deployment",
        deployment([container("a", "a:1", resources={"claims": [{"name": "gpu"}], "limits": {"cpu": "1"}})]),
        pod_template({"containers": [{"name": "a", "resources": {"claims": [{"name": "mig"}]}}]}),
        deployment([container("a", "a:1", resources={"claims": [{"name": "mig"}], "limits": {"cpu": "1"}})]),
    ),
    Case(
        "resource limits are a map and merge per resource",
        "Deployment",
        deployment([container("a", "a:1", resources={"limits": {"cpu": "1", "nvidia.com/gpu": "1"}})]),
        pod_template(
            {"containers": [{"name": "a", "resources": {"limits": {"nvidia.com/gpu": "2", "cpu": None}}}]}
        ),
        deployment([container("a", "a:1", resources={"limits": {"nvidia.com/gpu": "2"}})]),
    ),
    Case(
        "args have no merge key and are replaced",
        "Deployment",
        deployment([container("a", "a:1", args=["--a", "--b"])]),
        pod_template({"containers": [{"name": "a", "args": ["--c"]}]}),
        deployment([container("a", "a:1", args=["--c"])]),
    ),
    Case(
        "finalizers merge as a set",
        "Deployment",
        deployment(metadata={"finalizers": ["a", "b"]}),
        {"metadata": {"finalizers": ["b", "c"]}},
        deployment(metadata={"finalizers": ["a", "b", "c"]}),
    ),
    Case(
        "$deleteFromPrimitiveList removes values from a merged list",
        "Deployment",
        deployment(metadata={"finalizers": ["a", "b", "c"]}),
        {"metadata": {"$deleteFromPrimitiveList/finalizers": ["b"]}},
        deployment(metadata={"finalizers": ["a", "c"]}),
    ),
    Case(
        "ownerReferences merge by uid",
        "Deployment",
        deployment(
            metadata={"ownerReferences": [{"uid": "1", "name": "x", "kind": "K", "apiVersion": "v1"}]}
        ),
        {"metadata": {"ownerReferences": [{"uid": "1", "controller": True}]}},
        deployment(
            metadata={
                "ownerReferences": [
                    {"uid": "1", "name": "x", "kind": "K", "apiVersion": "v1", "controller": True}
                ]
            }
        ),
    ),
    Case(
        "Pod status conditions merge by type",
        "Pod",
        make_object(
            "Pod",
            spec={"containers": [container("a", "a:1")]},
            status={
                "conditions": [
                    {"type": "Ready", "status": "False"},
                    {"type": "PodScheduled", "status": "True"},
                ]
            },
        ),
        {"status": {"conditions": [{"type": "Ready", "status": "True"}]}},
        make_object(
            "Pod",
            spec={"containers": [container("a", "a:1")]},
            status={
                "conditions": [
                    {"type": "Ready", "status": "True"},
                    {"type": "PodScheduled", "status": "True"},
                ]
            },
        ),
    ),
    Case(
        "Job status conditions merge by type",
        "Job",
        make_object("Job", status={"conditions": [{"type": "Suspended", "status": "True"}]}),
        {"status": {"conditions": [{"type": "Complete", "status": "True"}]}},
        make_object(
            "Job",
            status={
                "conditions": [
                    {"type": "Complete", "status": "True"},
                    {"type": "Suspended", "status": "True"},
                ]
            },
        ),
    ),
    Case(
        "$setElementOrder reorders a list without changing it",
        "Deployment",
        THREE,
        pod_template({"$setElementOrder/containers": [{"name": "c"}, {"name": "a"}, {"name": "b"}]}),
        deployment([container("c", "c:1"), container("a", "a:1"), container("b", "b:1")]),
    ),
    Case(
        "kubectl 3-way patch: changing one image of three changes only that container",
        "Deployment",
        _with(THREE, "metadata.annotations", {LAST_APPLIED: '{"old":true}'}),
        {
            "metadata": {"annotations": {LAST_APPLIED: '{"new":true}'}},
            "spec": {
                "template": {
                    "spec": {
                        "$setElementOrder/containers": ORDER_ABC,
                        "containers": [{"image": "new", "name": "b"}],
                    }
                }
            },
        },
        _with(
            deployment([container("a", "a:1"), container("b", "new"), container("c", "c:1")]),
            "metadata.annotations",
            {LAST_APPLIED: '{"new":true}'},
        ),
    ),
    Case(
        "kubectl 3-way patch: removing a container",
        "Deployment",
        THREE,
        pod_template(
            {
                "$setElementOrder/containers": [{"name": "a"}, {"name": "b"}],
                "containers": [{"$patch": "delete", "name": "c"}],
            }
        ),
        deployment([container("a", "a:1"), container("b", "b:1")]),
    ),
    Case(
        "kubectl 3-way patch: adding a container in the middle",
        "Deployment",
        deployment([container("a", "a:1"), container("c", "c:1")]),
        pod_template({"$setElementOrder/containers": ORDER_ABC, "containers": [container("b", "b:1")]}),
        THREE,
    ),
    Case(
        "kubectl 3-way patch: an env var removed and one changed",
        "Deployment",
        deployment([container("a", "a:1", env=[{"name": "X", "value": "1"}, {"name": "Y", "value": "2"}])]),
        pod_template(
            {
                "$setElementOrder/containers": [{"name": "a"}],
                "containers": [
                    {
                        "$setElementOrder/env": [{"name": "X"}],
                        "env": [{"name": "X", "value": "9"}, {"$patch": "delete", "name": "Y"}],
                        "name": "a",
                    }
                ],
            }
        ),
        deployment([container("a", "a:1", env=[{"name": "X", "value": "9"}])]),
    ),
    Case(
        "kubectl 3-way patch: finalizers reordered, added and removed",
        "Deployment",
        deployment(metadata={"finalizers": ["a", "b", "c"]}),
        {
            "metadata": {
                "$setElementOrder/finalizers": ["a", "c", "d"],
                "finalizers": ["d"],
                "$deleteFromPrimitiveList/finalizers": ["b"],
            }
        },
        deployment(metadata={"finalizers": ["a", "c", "d"]}),
    ),
    Case(
        "items the server added keep their place under $setElementOrder",
        "Deployment",
        deployment([container("a", "a:1"), container("sidecar", "s:1"), container("b", "b:1")]),
        pod_template(
            {
                "$setElementOrder/containers": [{"name": "a"}, {"name": "b"}],
                "containers": [container("b", "new")],
            }
        ),
        deployment([container("a", "a:1"), container("sidecar", "s:1"), container("b", "new")]),
    ),
    Case(
        "an empty list in the patch leaves a merged list alone",
        "Deployment",
        THREE,
        pod_template({"containers": []}),
        THREE,
    ),
    Case(
        "null removes a whole merged list",
        "Deployment",
        deployment(pod={"volumes": [{"name": "v", "emptyDir": {}}]}),
        pod_template({"volumes": None}),
        deployment(),
    ),
    Case(
        "a list the object does not have yet is taken from the patch, nulls dropped",
        "Deployment",
        deployment(),
        pod_template({"initContainers": [{"name": "init", "image": "i:1", "workingDir": None}]}),
        deployment(pod={"initContainers": [container("init", "i:1")]}),
    ),
    Case(
        "directives inside a value the object lacks are applied, not stored",
        "Deployment",
        deployment(),
        pod_template({"initContainers": [container("init", "i:1"), {"$patch": "replace"}]}),
        deployment(pod={"initContainers": [container("init", "i:1")]}),
    ),
    Case(
        "ConfigMap data merges and null deletes a key",
        "ConfigMap",
        make_object("ConfigMap", data={"a": "1", "b": "2"}),
        {"data": {"b": None, "c": "3"}},
        make_object("ConfigMap", data={"a": "1", "c": "3"}),
    ),
    Case(
        "Secret stringData is added beside data",
        "Secret",
        make_object("Secret", data={"x": "eA=="}),
        {"stringData": {"y": "z"}},
        make_object("Secret", data={"x": "eA=="}, stringData={"y": "z"}),
    ),
    Case(
        "Namespace labels merge",
        "Namespace",
        make_object("Namespace", metadata={"labels": {"team": "a"}}),
        {"metadata": {"labels": {"gpu": "yes"}}},
        make_object("Namespace", metadata={"labels": {"team": "a", "gpu": "yes"}}),
    ),
    Case(
        "Node podCIDRs merge as a set",
        "Node",
        make_object("Node", spec={"podCIDRs": ["10.0.0.0/24"]}),
        {"spec": {"podCIDRs": ["10.0.1.0/24"]}},
        make_object("Node", spec={"podCIDRs": ["10.0.1.0/24", "10.0.0.0/24"]}),
    ),
    Case(
        "Node taints are replaced",
        "Node",
        make_object("Node", spec={"taints": [{"key": "a", "effect": "NoSchedule"}]}),
        {"spec": {"taints": [{"key": "b", "effect": "NoSchedule"}]}},
        make_object("Node", spec={"taints": [{"key": "b", "effect": "NoSchedule"}]}),
    ),
    Case(
        "ServiceAccount secrets merge by name",
        "ServiceAccount",
        make_object("ServiceAccount", secrets=[{"name": "a"}]),
        {"secrets": [{"name": "b"}]},
        make_object("ServiceAccount", secrets=[{"name": "b"}, {"name": "a"}]),
    ),
    Case(
        "Lease spec fields merge",
        "Lease",
        make_object("Lease", spec={"holderIdentity": "a", "leaseDurationSeconds": 40}),
        {"spec": {"holderIdentity": "b"}},
        make_object("Lease", spec={"holderIdentity": "b", "leaseDurationSeconds": 40}),
    ),
    Case(
        "Event count updates",
        "Event",
        make_object("Event", reason="Scheduled", count=1, involvedObject={"kind": "Pod", "name": "p"}),
        {"count": 2},
        make_object("Event", reason="Scheduled", count=2, involvedObject={"kind": "Pod", "name": "p"}),
    ),
    Case(
        "an item stored twice: the patch item merges into the first",
        "Deployment",
        deployment([container("a", "a:1"), container("b", "b:1"), container("a", "a:2")]),
        pod_template({"containers": [container("a", "a:9")]}),
        deployment([container("a", "a:9"), container("a", "a:2"), container("b", "b:1")]),
    ),
    Case(
        "an item sent twice merges into one item",
        "Deployment",
        deployment([container("a", "a:1"), container("b", "b:1")]),
        pod_template(
            {"containers": [container("c", "c:1"), container("a", "a:2"), container("c", workingDir="/w")]}
        ),
        deployment(
            [{"name": "c", "image": "c:1", "workingDir": "/w"}, container("a", "a:2"), container("b", "b:1")]
        ),
    ),
    Case(
        "$patch: delete of several items, one of them not in the list",
        "Deployment",
        THREE,
        pod_template(
            {
                "containers": [
                    {"$patch": "delete", "name": "a"},
                    {"$patch": "delete", "name": "x"},
                    {"$patch": "delete", "name": "c"},
                ]
            }
        ),
        deployment([container("b", "b:1")]),
    ),
    Case(
        "$patch: delete beside a merged and a new item",
        "Deployment",
        THREE,
        pod_template(
            {"containers": [{"$patch": "delete", "name": "b"}, container("c", "c:2"), container("d", "d:1")]}
        ),
        deployment([container("a", "a:1"), container("c", "c:2"), container("d", "d:1")]),
    ),
    Case(
        "$patch: delete removes every item stored with that key",
        "Deployment",
        deployment([container("a", "a:1"), container("b", "b:1"), container("a", "a:2")]),
        pod_template({"containers": [{"$patch": "delete", "name": "a"}]}),
        deployment([container("b", "b:1")]),
    ),
    Case(
        "$patch: replace in a list wins over a delete beside it",
        "Deployment",
        deployment([container("a", "a:1"), container("b", "b:1")]),
        pod_template(
            {"containers": [container("z", "z:1"), {"$patch": "delete", "name": "a"}, {"$patch": "replace"}]}
        ),
        deployment([container("z", "z:1")]),
    ),
    Case(
        "$setElementOrder naming an item neither the list nor the patch has",
        "Deployment",
        deployment([container("a", "a:1"), container("b", "b:1")]),
        pod_template({"$setElementOrder/containers": [{"name": "b"}, {"name": "x"}, {"name": "a"}]}),
        deployment([container("b", "b:1"), container("a", "a:1")]),
    ),
    Case(
        "$setElementOrder leaving out a stored item keeps it before the item it stood before",
        "Deployment",
        THREE,
        pod_template(
            {
                "$setElementOrder/containers": [{"name": "c"}, {"name": "d"}, {"name": "a"}],
                "containers": [container("d", "d:1")],
            }
        ),
        deployment(
            [container("b", "b:1"), container("c", "c:1"), container("d", "d:1"), container("a", "a:1")]
        ),
    ),
    Case(
        "$setElementOrder placing items the object lacks",
        "Deployment",
        deployment([container("a", "a:1"), container("b", "b:1")]),
        pod_template(
            {
                "$setElementOrder/containers": [{"name": "d"}, {"name": "b"}, {"name": "c"}, {"name": "a"}],
                "containers": [container("d", "d:1"), container("c", "c:1")],
            }
        ),
        deployment(
            [container("d", "d:1"), container("b", "b:1"), container("c", "c:1"), container("a", "a:1")]
        ),
    ),
    Case(
        "a merged list of values keeps one of each value",
        "Deployment",
        deployment(metadata={"finalizers": ["a", "b", "a", "c"]}),
        {"metadata": {"finalizers": ["d", "b", "d"]}},
        deployment(metadata={"finalizers": ["d", "a", "b", "c"]}),
    ),
    Case(
        "$setElementOrder of a list of values naming a value neither side has",
        "Deployment",
        deployment(metadata={"finalizers": ["a", "b", "c"]}),
        {"metadata": {"finalizers": ["d"], "$setElementOrder/finalizers": ["c", "d", "x", "a"]}},
        deployment(metadata={"finalizers": ["b", "c", "d", "a"]}),
    ),
    Case(
        "$deleteFromPrimitiveList removes every copy of a value",
        "Deployment",
        deployment(metadata={"finalizers": ["a", "b", "a", "c"]}),
        {"metadata": {"$deleteFromPrimitiveList/finalizers": ["a", "x", "a"], "finalizers": ["e"]}},
        deployment(metadata={"finalizers": ["e", "b", "c"]}),
    ),
    Case(
        "$retainKeys on one item of a merged list",
        "Deployment",
        deployment(pod={"volumes": [{"name": "v", "emptyDir": {}}, {"name": "w", "emptyDir": {}}]}),
        pod_template(
            {"volumes": [{"$retainKeys": ["name", "hostPath"], "name": "w", "hostPath": {"path": "/d"}}]}
        ),
        deployment(
            pod={"volumes": [{"name": "v", "emptyDir": {}}, {"name": "w", "hostPath": {"path": "/d"}}]}
        ),
    ),
    Case(
        "StatefulSet volumeClaimTemplates are replaced",
        "StatefulSet",
        make_object("StatefulSet", spec={"volumeClaimTemplates": [{"metadata": {"name": "a"}}]}),
        {"spec": {"volumeClaimTemplates": [{"metadata": {"name": "b"}}]}},
        make_object("StatefulSet", spec={"volumeClaimTemplates": [{"metadata": {"name": "b"}}]}),
    ),
]


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_strategic_merge_patch(case: Case) -> None:
    original = copy.deepcopy(case.original)
    patch = copy.deepcopy(case.patch)

    result = strategic_merge_patch(original, patch, kind=case.kind)

    assert result == case.expected
    assert json.dumps(result) == json.dumps(case.expected), "list order differs"
    assert original == case.original, "the stored object must not be modified"
    assert patch == case.patch, "the patch must not be modified"


LIKE_KUBE = [c for c in CASES if c.like_kube]


@pytest.mark.parametrize("case", LIKE_KUBE, ids=[c.id for c in LIKE_KUBE])
def test_same_result_as_kubectl(case: Case, kubectl_patch: KubectlPatch) -> None:
    reference = kubectl_patch(case.original, case.patch)

    assert not isinstance(reference, str), f"kubectl refused the patch: {reference}"
    assert strategic_merge_patch(case.original, case.patch, kind=case.kind) == reference


def test_kubectl_three_way_patch_keeps_other_containers_untouched() -> None:
    live = copy.deepcopy(THREE)
    for item in containers_of(live):
        item["resources"] = {"limits": {"nvidia.com/gpu": "1"}}
    patch = pod_template(
        {"$setElementOrder/containers": ORDER_ABC, "containers": [{"image": "new", "name": "b"}]}
    )

    result = strategic_merge_patch(live, patch, kind="Deployment")

    assert [c["image"] for c in containers_of(result)] == ["a:1", "new", "c:1"]
    assert all(c["resources"] == {"limits": {"nvidia.com/gpu": "1"}} for c in containers_of(result))


@dataclass(frozen=True)
class Bad:
    id: str
    kind: str
    patch: dict[str, Any]
    message: str  # a fragment of the error a person reads
    kube_refuses: bool = True


BAD = [
    Bad(
        "unknown kind",
        "PropagationPolicy",
        {"spec": {}},
        "strategic merge patch is not supported for kind PropagationPolicy; use merge patch",
        kube_refuses=False,
    ),
    Bad("unknown directive in a map", "Deployment", {"spec": {"$patch": "bogus"}}, "unknown `$patch: bogus`"),
    Bad(
        "unknown directive in a list item",
        "Deployment",
        pod_template({"containers": [{"$patch": "bogus", "name": "a"}]}),
        "unknown `$patch: bogus`",
    ),
    Bad(
        "delete without the merge key",
        "Deployment",
        pod_template({"containers": [{"$patch": "delete", "image": "a:1"}]}),
        "needs the merge key 'name'",
    ),
    Bad(
        "list item without its merge key",
        "Deployment",
        pod_template({"containers": [{"image": "x"}]}),
        "every item of this list needs its merge key 'name'",
    ),
    Bad(
        "$retainKeys that omits a field the patch sets",
        "Deployment",
        pod_template({"volumes": [{"$retainKeys": ["name"], "name": "v", "configMap": {"name": "cm"}}]}),
        "field 'configMap' is in the patch but not in `$retainKeys`",
    ),
    Bad(
        "$retainKeys that is not a list",
        "Deployment",
        {"spec": {"$retainKeys": "type"}},
        "must be a list of field names",
    ),
    Bad(
        "$setElementOrder that contradicts the patch order",
        "Deployment",
        pod_template(
            {
                "$setElementOrder/containers": [{"name": "a"}, {"name": "b"}],
                "containers": [{"name": "b"}, {"name": "a"}],
            }
        ),
        "not in the order `$setElementOrder` gives",
    ),
    Bad(
        "$setElementOrder that is not a list",
        "Deployment",
        pod_template({"$setElementOrder/containers": {"name": "a"}}),
        "must be a list",
    ),
    Bad(
        "$deleteFromPrimitiveList with objects",
        "Deployment",
        {"metadata": {"$deleteFromPrimitiveList/finalizers": [{"name": "a"}]}},
        "must be a list of plain values",
        kube_refuses=False,
    ),
    Bad(
        "$patch: delete inside a list that is replaced whole",
        "Deployment",
        pod_template({"tolerations": [{"$patch": "delete", "key": "a"}]}),
        "send the complete list",
        kube_refuses=False,
    ),
    Bad(
        "a merged list mixing objects and plain values",
        "Deployment",
        {"metadata": {"finalizers": ["a", {"name": "b"}]}},
        "mixes objects and plain values",
    ),
    Bad(
        "$patch: delete on the whole object",
        "Deployment",
        {"$patch": "delete"},
        "send a DELETE request instead",
        kube_refuses=False,
    ),
]


def _bad_patch_target() -> dict[str, Any]:
    return deployment(
        metadata={"finalizers": ["a"]},
        pod={"tolerations": [{"key": "a", "operator": "Exists"}], "volumes": [{"name": "v", "emptyDir": {}}]},
    )


@pytest.mark.parametrize("bad", BAD, ids=[b.id for b in BAD])
def test_bad_patch_is_refused_with_a_clear_message(bad: Bad) -> None:
    live = _bad_patch_target()

    with pytest.raises(PatchError) as caught:
        strategic_merge_patch(live, bad.patch, kind=bad.kind)

    assert bad.message in str(caught.value)


KUBE_REFUSES = [b for b in BAD if b.kube_refuses]


@pytest.mark.parametrize("bad", KUBE_REFUSES, ids=[b.id for b in KUBE_REFUSES])
def test_kubectl_refuses_the_same_patches(bad: Bad, kubectl_patch: KubectlPatch) -> None:
    live = _bad_patch_target()

    assert isinstance(kubectl_patch(live, bad.patch), str)


def test_unknown_kind_message_is_exact() -> None:
    with pytest.raises(
        PatchError, match=r"^strategic merge patch is not supported for kind Cluster; use merge patch$"
    ):
        strategic_merge_patch({"kind": "Cluster"}, {"spec": {}}, kind="Cluster")


def test_unknown_directive_keys_are_ignored() -> None:
    live = deployment(replicas=1)

    result = strategic_merge_patch(
        live, {"spec": {"$futureDirective": ["x"], "replicas": 2}}, kind="Deployment"
    )

    assert result == deployment(replicas=2)


def test_every_kind_served_with_strategic_merge_has_a_schema() -> None:
    # kubectl apply (client-side) patches with strategic merge: a served kind without a
    # schema would answer every re-apply with 415.
    served = {rt.kind for rt in hub_registry() if rt.strategic_merge}
    assert {"PersistentVolumeClaim", "ReplicaSet", "CronJob", "StorageClass", "ClusterRole"} <= served
    assert served - supported_strategic_kinds() == set()
