"""``kubectl get`` cells of built-in kinds as kube's printers (pkg/printers/internalversion/printers.go)
make them, for the cases where a cell is more than a field: a pod's READY, STATUS and RESTARTS, a
Job's STATUS and COMPLETIONS, an Event's times, count and object, a StorageClass's name, a
PersistentVolumeClaim's capacity and access modes, a Node's wide columns."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from controlplane.apis.podstatus import pod_cells
from controlplane.apiserver.kinds.core import core_resources
from controlplane.apiserver.kinds.workloads import workload_resources
from controlplane.apiserver.resources import Registry
from controlplane.apiserver.tables import IncludeObject, column_definitions, row
from controlplane.hub import hub_registry

#: Every kind the hub serves, RBAC's among them.
HUB = hub_registry()
NOW = datetime(2024, 1, 1, 1, 0, tzinfo=UTC)
THREE_MINUTES_AGO = "2024-01-01T00:57:00Z"


def _running(name: str, *, ready: bool = True, restarts: int = 0, last: str | None = None) -> dict[str, Any]:
    status: dict[str, Any] = {
        "name": name,
        "ready": ready,
        "restartCount": restarts,
        "state": {"running": {}},
    }
    if last:
        status["lastState"] = {"terminated": {"exitCode": 1, "finishedAt": last}}
    return status


def _pod(spec: dict[str, Any], status: dict[str, Any], **metadata: Any) -> dict[str, Any]:
    return {"metadata": {"name": "p", **metadata}, "spec": spec, "status": status}


TWO = {"containers": [{"name": "a"}, {"name": "b"}]}
INIT = {
    "initContainers": [{"name": "setup"}, {"name": "proxy", "restartPolicy": "Always"}],
    "containers": [{"name": "main"}],
}


@pytest.mark.parametrize(
    ("pod", "cells"),
    [
        # A container that ended without a reason is named by its exit code or its signal.
        (
            _pod(
                TWO,
                {
                    "phase": "Running",
                    "containerStatuses": [
                        _running("a"),
                        {
                            "name": "b",
                            "restartCount": 3,
                            "state": {"terminated": {"exitCode": 137}},
                            "lastState": {"terminated": {"exitCode": 1, "finishedAt": THREE_MINUTES_AGO}},
                        },
                    ],
                },
            ),
            ("1/2", "ExitCode:137", "3 (3m ago)"),
        ),
        (
            _pod(
                TWO,
                {
                    "phase": "Running",
                    "containerStatuses": [
                        _running("a"),
                        {"name": "b", "state": {"terminated": {"exitCode": 0, "signal": 9}}},
                    ],
                },
            ),
            ("1/2", "Signal:9", "0"),
        ),
        # The containers are read from the last to the first: the first one's state is shown.
        (
            _pod(
                TWO,
                {
                    "phase": "Running",
                    "containerStatuses": [
                        {"name": "a", "state": {"waiting": {"reason": "ImagePullBackOff"}}},
                        {"name": "b", "state": {"waiting": {"reason": "CrashLoopBackOff"}}},
                    ],
                },
            ),
            ("0/2", "ImagePullBackOff", "0"),
        ),
        # Completed beside a container still running: Running when the pod is ready, else NotReady.
        (
            _pod(
                TWO,
                {
                    "phase": "Running",
                    "conditions": [{"type": "Ready", "status": "True"}],
                    "containerStatuses": [
                        {"name": "a", "state": {"terminated": {"exitCode": 0, "reason": "Completed"}}},
                        _running("b"),
                    ],
                },
            ),
            ("1/2", "Running", "0"),
        ),
        (
            _pod(
                TWO,
                {
                    "phase": "Running",
                    "containerStatuses": [
                        {"name": "a", "state": {"terminated": {"exitCode": 0, "reason": "Completed"}}},
                        _running("b"),
                    ],
                },
            ),
            ("1/2", "NotReady", "0"),
        ),
        # A ready container that is not running is not counted ready.
        (
            _pod(
                TWO,
                {
                    "phase": "Running",
                    "containerStatuses": [
                        _running("a"),
                        {"name": "b", "ready": True, "state": {"waiting": {}}},
                    ],
                },
            ),
            ("1/2", "Running", "0"),
        ),
        # Initializing: the init container's wait or failure, or how many have run; its restarts.
        (
            _pod(
                INIT,
                {
                    "phase": "Pending",
                    "initContainerStatuses": [
                        {
                            "name": "setup",
                            "restartCount": 2,
                            "state": {"waiting": {"reason": "CrashLoopBackOff"}},
                            "lastState": {"terminated": {"exitCode": 1, "finishedAt": THREE_MINUTES_AGO}},
                        },
                    ],
                },
            ),
            ("0/2", "Init:CrashLoopBackOff", "2 (3m ago)"),
        ),
        (
            _pod(
                INIT,
                {
                    "phase": "Pending",
                    "initContainerStatuses": [
                        {"name": "setup", "state": {"terminated": {"exitCode": 2}}},
                    ],
                },
            ),
            ("0/2", "Init:ExitCode:2", "0"),
        ),
        (
            _pod(
                INIT,
                {
                    "phase": "Pending",
                    "initContainerStatuses": [
                        {"name": "setup", "state": {"terminated": {"exitCode": 0, "reason": "Completed"}}},
                        {"name": "proxy", "state": {"waiting": {"reason": "PodInitializing"}}},
                    ],
                },
            ),
            ("0/2", "Init:1/2", "0"),
        ),
        # Initialized: a started, ready sidecar counts among the ready containers, its restarts too.
        (
            _pod(
                INIT,
                {
                    "phase": "Running",
                    "conditions": [{"type": "Initialized", "status": "True"}],
                    "initContainerStatuses": [
                        {
                            "name": "setup",
                            "restartCount": 1,
                            "state": {"terminated": {"exitCode": 0, "reason": "Completed"}},
                        },
                        {
                            "name": "proxy",
                            "started": True,
                            "ready": True,
                            "restartCount": 4,
                            "state": {"running": {}},
                            "lastState": {"terminated": {"exitCode": 1, "finishedAt": THREE_MINUTES_AGO}},
                        },
                    ],
                    "containerStatuses": [_running("main")],
                },
            ),
            ("2/2", "Running", "4 (3m ago)"),
        ),
        # Being deleted: Terminating until the pod has finished; Unknown on a lost node.
        (
            _pod(
                TWO,
                {"phase": "Running", "containerStatuses": [_running("a"), _running("b")]},
                deletionTimestamp="2024-01-01T00:59:00Z",
            ),
            ("2/2", "Terminating", "0"),
        ),
        (
            _pod(
                TWO,
                {
                    "phase": "Succeeded",
                    "containerStatuses": [
                        {"name": "a", "state": {"terminated": {"exitCode": 0, "reason": "Completed"}}},
                        {"name": "b", "state": {"terminated": {"exitCode": 0, "reason": "Completed"}}},
                    ],
                },
                deletionTimestamp="2024-01-01T00:59:00Z",
            ),
            ("0/2", "Completed", "0"),
        ),
        (
            _pod(TWO, {"phase": "Running", "reason": "NodeLost"}, deletionTimestamp="2024-01-01T00:59:00Z"),
            ("0/2", "Unknown", "0"),
        ),
        (_pod(TWO, {"phase": "Failed", "reason": "Evicted"}), ("0/2", "Evicted", "0")),
    ],
)
def test_pod_cells_are_kubes(pod: dict[str, Any], cells: tuple[str, str, str]) -> None:
    assert tuple(pod_cells(pod, NOW))[:3] == cells


def test_pod_table_reads_its_cells_from_kubes_printer() -> None:
    pods = Registry(core_resources()).require("v1", "Pod")
    pod = _pod(
        INIT,
        {
            "phase": "Pending",
            "initContainerStatuses": [
                {"name": "setup", "state": {"waiting": {"reason": "ErrImagePull"}}},
            ],
        },
        creationTimestamp="2024-01-01T00:55:00Z",
    )
    shown = {c.name: c.getter(pod, NOW) for c in pods.columns if not c.priority}
    assert shown == {"Ready": "0/2", "Status": "Init:ErrImagePull", "Restarts": "0", "Age": "5m"}


def _job(
    spec: dict[str, Any], conditions: tuple[tuple[str, str], ...] = (), **metadata: Any
) -> dict[str, Any]:
    status = {"succeeded": 1, "conditions": [{"type": t, "status": s} for t, s in conditions]}
    return {"metadata": {"name": "j", **metadata}, "spec": spec, "status": status}


@pytest.mark.parametrize(
    ("job", "status", "completions"),
    [
        (_job({"completions": 3, "parallelism": 3}), "Running", "1/3"),
        # Without completions the Job is done once one pod succeeds; kube names its parallelism.
        (_job({"parallelism": 4}), "Running", "1/1 of 4"),
        (_job({"parallelism": 1}), "Running", "1/1"),
        (_job({}, (("Complete", "True"),)), "Complete", "1/1"),
        (_job({}, (("FailureTarget", "True"), ("Failed", "True"))), "Failed", "1/1"),
        (_job({}, (("Suspended", "True"),), deletionTimestamp="2024-01-01T00:59:00Z"), "Terminating", "1/1"),
        (_job({}, (("Suspended", "True"),)), "Suspended", "1/1"),
        (_job({}, (("FailureTarget", "True"),)), "FailureTarget", "1/1"),
        # The first condition of a type decides, as kube's hasJobCondition reads them.
        (_job({}, (("Complete", "False"), ("Complete", "True"))), "Running", "1/1"),
    ],
)
def test_job_status_and_completions_are_kubes(job: dict[str, Any], status: str, completions: str) -> None:
    jobs = Registry(workload_resources()).require("batch/v1", "Job")
    shown = {c.name: c.getter(job, NOW) for c in jobs.columns}
    assert (shown["Status"], shown["Completions"]) == (status, completions)


def _event_cells(event: dict[str, Any]) -> dict[str, Any]:
    events = Registry(core_resources()).require("v1", "Event")
    return {c.name: c.getter({"metadata": {"name": "e"}, **event}, NOW) for c in events.columns}


def test_a_series_event_is_shown_by_its_series() -> None:
    """An Event written through events.k8s.io: first seen at its eventTime, last seen and counted by its series."""
    shown = _event_cells(
        {
            "eventTime": "2024-01-01T00:50:00.000000Z",
            "series": {"count": 7, "lastObservedTime": "2024-01-01T00:58:00.000000Z"},
            "involvedObject": {"kind": "Node"},
            "message": "  rebooted  ",
            "reportingComponent": "ex.com/ctl",
            "reportingInstance": "ctl-1",
        }
    )
    assert (shown["Last Seen"], shown["First Seen"], shown["Count"]) == ("2m", "10m", 7)
    assert (shown["Object"], shown["Message"], shown["Source"]) == ("node", "rebooted", "ex.com/ctl, ctl-1")


@pytest.mark.parametrize(
    ("event", "last", "first", "count"),
    [
        ({"firstTimestamp": "2024-01-01T00:50:00Z", "count": 0}, "10m", "10m", 1),
        (
            {"firstTimestamp": "2024-01-01T00:50:00Z", "lastTimestamp": "2024-01-01T00:59:00Z", "count": 3},
            "60s",
            "10m",
            3,
        ),
        # Neither time: kube's translateTimestampSince of a zero time.
        (
            {"metadata": {"name": "e", "creationTimestamp": "2024-01-01T00:59:00Z"}},
            "<unknown>",
            "<unknown>",
            1,
        ),
    ],
)
def test_event_times_and_count_are_kubes(event: dict[str, Any], last: str, first: str, count: int) -> None:
    shown = _event_cells(event)
    assert (shown["Last Seen"], shown["First Seen"], shown["Count"]) == (last, first, count)


def _cells(api_version: str, kind: str, obj: dict[str, Any]) -> dict[str, Any]:
    rt = HUB.require(api_version, kind)
    names = [d["name"] for d in column_definitions(rt)]
    return dict(zip(names, row(rt, obj, include=IncludeObject.NONE, now=NOW)["cells"], strict=True))


def test_the_default_storage_class_is_named_so() -> None:
    fast = {"metadata": {"name": "fast"}, "provisioner": "example.com/x"}
    assert _cells("storage.k8s.io/v1", "StorageClass", fast)["Name"] == "fast"
    for annotation in (
        "storageclass.kubernetes.io/is-default-class",
        "storageclass.beta.kubernetes.io/is-default-class",
    ):
        default = {**fast, "metadata": {"name": "fast", "annotations": {annotation: "true"}}}
        assert _cells("storage.k8s.io/v1", "StorageClass", default)["Name"] == "fast (default)"


def test_a_claims_capacity_and_access_modes_show_once_it_names_its_volume() -> None:
    claim = {
        "metadata": {"name": "data"},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}},
        "status": {"phase": "Pending"},
    }
    shown = _cells("v1", "PersistentVolumeClaim", claim)
    assert (shown["Volume"], shown["Capacity"], shown["Access Modes"]) == ("", "", "")
    bound = {
        **claim,
        "spec": {**claim["spec"], "volumeName": "pv-1"},
        "status": {
            "phase": "Bound",
            "capacity": {"storage": "2Gi"},
            "accessModes": ["ReadWriteOncePod", "ReadWriteMany", "ReadWriteOnce", "ReadWriteOnce"],
        },
    }
    shown = _cells("v1", "PersistentVolumeClaim", bound)
    assert (shown["Volume"], shown["Capacity"], shown["Access Modes"]) == ("pv-1", "2Gi", "RWO,RWX,RWOP")


def test_a_volumes_access_modes_are_in_kubes_order() -> None:
    volume = {
        "metadata": {"name": "pv-1"},
        "spec": {"accessModes": ["ReadWriteMany", "ReadOnlyMany", "Other"]},
    }
    assert _cells("v1", "PersistentVolume", volume)["Access Modes"] == "ROX,RWX"


def test_node_columns_are_kubes() -> None:
    node = {
        "metadata": {
            "name": "n1",
            "labels": {
                "node-role.kubernetes.io/control-plane": "",
                "kubernetes.io/role": "gpu",
                "node-role.kubernetes.io/": "",
            },
        },
        "spec": {"unschedulable": True},
        "status": {
            "conditions": [{"type": "Ready", "status": "False"}],
            "addresses": [
                {"type": "ExternalIP", "address": "34.1.2.3"},
                {"type": "InternalIP", "address": "10.0.0.4"},
            ],
            "nodeInfo": {"kubeletVersion": "v1.32.0", "osImage": "Ubuntu 22.04.4 LTS", "kernelVersion": ""},
            "allocatable": {"nvidia.com/gpu": "8"},
        },
    }
    assert _cells("v1", "Node", node) == {
        "Name": "n1",
        "Status": "NotReady,SchedulingDisabled",
        "Roles": "control-plane,gpu",
        "Age": "<unknown>",
        "Version": "v1.32.0",
        "Internal-IP": "10.0.0.4",
        "External-IP": "34.1.2.3",
        "OS-Image": "Ubuntu 22.04.4 LTS",
        "Kernel-Version": "<unknown>",
        "Container-Runtime": "<unknown>",
        "GPU": "gpu=8",
    }


@pytest.mark.parametrize(
    ("api_version", "kind"),
    [("apps/v1", "Deployment"), ("apps/v1", "ReplicaSet"), ("apps/v1", "DaemonSet"), ("batch/v1", "Job")],
)
def test_a_selector_with_expressions_is_printed_whole(api_version: str, kind: str) -> None:
    """``-o wide``'s SELECTOR is kube's LabelSelectorAsSelector: every requirement, sorted by key."""
    selector = {
        "matchLabels": {"app": "web"},
        "matchExpressions": [
            {"key": "tier", "operator": "In", "values": ["front", "back"]},
            {"key": "env", "operator": "Exists"},
            {"key": "canary", "operator": "DoesNotExist"},
            {"key": "zone", "operator": "NotIn", "values": ["b"]},
        ],
    }
    obj = {
        "metadata": {"name": "w"},
        "spec": {"selector": selector, "template": {"spec": {"containers": []}}},
    }
    shown = _cells(api_version, kind, obj)["Selector"]
    assert shown == "app=web,!canary,env,tier in (back,front),zone notin (b)"


@pytest.mark.parametrize(
    ("hosts", "shown"),
    [
        ([], "*"),
        ([None, None], "*"),
        (["a", None, "b", "c"], "a,b,c"),
        # A rule after the third host makes "more", counting every rule past three.
        (["a", "b", None, "c", "d"], "a,b,c + 2 more..."),
        (["a", "b", "c", None], "a,b,c + 1 more..."),
    ],
)
def test_ingress_hosts_are_kubes(hosts: list[str | None], shown: str) -> None:
    rules = [{"host": host} if host else {} for host in hosts]
    ingress = {"metadata": {"name": "i"}, "spec": {"rules": rules}}
    assert _cells("networking.k8s.io/v1", "Ingress", ingress)["Hosts"] == shown


def _metric(kind: str, body: dict[str, Any]) -> dict[str, Any]:
    return {"type": kind, kind[:1].lower() + kind[1:]: body}


@pytest.mark.parametrize(
    ("metrics", "current", "shown"),
    [
        ([], [], "<none>"),
        (
            [
                _metric(
                    "Resource", {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 80}}
                )
            ],
            [_metric("Resource", {"name": "cpu", "current": {"averageUtilization": 45}})],
            "cpu: 45%/80%",
        ),
        (
            [
                _metric(
                    "Resource", {"name": "memory", "target": {"type": "AverageValue", "averageValue": "1Gi"}}
                )
            ],
            [],
            "memory: <unknown>/1Gi",
        ),
        # Pods, Object and External metrics are not named; an average of the last two says so.
        (
            [
                _metric(
                    "Pods",
                    {"metric": {"name": "qps"}, "target": {"type": "AverageValue", "averageValue": "1k"}},
                )
            ],
            [_metric("Pods", {"metric": {"name": "qps"}, "current": {"averageValue": "250"}})],
            "250/1k",
        ),
        (
            [
                _metric(
                    "External",
                    {"metric": {"name": "queue"}, "target": {"type": "AverageValue", "averageValue": "30"}},
                )
            ],
            [],
            "<unknown>/30 (avg)",
        ),
        (
            [_metric("Object", {"metric": {"name": "rps"}, "target": {"type": "Value", "value": "10"}})],
            [_metric("Object", {"metric": {"name": "rps"}, "current": {"value": "12"}})],
            "12/10",
        ),
        # Two metrics shown, then how many more.
        (
            [
                _metric(
                    "Resource", {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 80}}
                ),
                _metric(
                    "Resource",
                    {"name": "memory", "target": {"type": "Utilization", "averageUtilization": 70}},
                ),
                _metric(
                    "Pods",
                    {"metric": {"name": "qps"}, "target": {"type": "AverageValue", "averageValue": "1k"}},
                ),
            ],
            [],
            "cpu: <unknown>/80%, memory: <unknown>/70% + 1 more...",
        ),
    ],
)
def test_hpa_targets_are_kubes(metrics: list[Any], current: list[Any], shown: str) -> None:
    hpa = {"metadata": {"name": "h"}, "spec": {"metrics": metrics}, "status": {"currentMetrics": current}}
    assert _cells("autoscaling/v2", "HorizontalPodAutoscaler", hpa)["Targets"] == shown


def test_a_volume_or_claim_being_deleted_is_terminating_and_its_class_annotated_first() -> None:
    deleted = {"name": "d", "deletionTimestamp": "2024-01-01T00:59:00Z"}
    annotated = {"name": "a", "annotations": {"volume.beta.kubernetes.io/storage-class": "old"}}
    for kind in ("PersistentVolume", "PersistentVolumeClaim"):
        shown = _cells(
            "v1",
            kind,
            {"metadata": deleted, "spec": {"storageClassName": "fast"}, "status": {"phase": "Bound"}},
        )
        assert (shown["Status"], shown["StorageClass"]) == ("Terminating", "fast")
        shown = _cells(
            "v1",
            kind,
            {"metadata": annotated, "spec": {"storageClassName": "fast"}, "status": {"phase": "Bound"}},
        )
        assert (shown["Status"], shown["StorageClass"]) == ("Bound", "old")


@pytest.mark.parametrize(
    ("api_version", "kind", "column", "kube_type"),
    [
        # kube's column definitions declare these counts strings (their cells are numbers).
        ("v1", "Secret", "Data", "string"),
        ("v1", "ConfigMap", "Data", "string"),
        ("v1", "ServiceAccount", "Secrets", "string"),
        ("v1", "Event", "Count", "string"),
        ("apps/v1", "ControllerRevision", "Revision", "string"),
        ("scheduling.k8s.io/v1", "PriorityClass", "Global-Default", "boolean"),
        ("scheduling.k8s.io/v1", "PriorityClass", "Value", "integer"),
        # A kind without a printer gets kube's default table convertor's column.
        ("v1", "LimitRange", "Created At", "date"),
        ("rbac.authorization.k8s.io/v1", "ClusterRole", "Created At", "date"),
        ("rbac.authorization.k8s.io/v1", "Role", "Created At", "date"),
    ],
)
def test_column_types_are_kubes(api_version: str, kind: str, column: str, kube_type: str) -> None:
    definitions = {d["name"]: d for d in column_definitions(HUB.require(api_version, kind))}
    assert (definitions[column]["type"], definitions[column]["format"]) == (kube_type, "")
