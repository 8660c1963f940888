"""The Work applier's pure decisions: desired objects, conflicts, pruning, health, status."""

from __future__ import annotations

from typing import Any

import pytest

from controlplane.apis.conflictresolution import ConflictResolution
from controlplane.apis.work_v1alpha1 import Health
from member_agent import applying, manifests, podstates
from member_agent.applying import ManifestResult
from member_agent.manifests import ApplyDecision, Identifier

NOW = "2025-01-01T00:00:00Z"


def work(manifests: list[dict[str, Any]], **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "work.gpufed.io/v1alpha1",
        "kind": "Work",
        "metadata": {"name": "web-deployment", "namespace": "gpufed-es-a", "generation": 3},
        "spec": {"workload": {"manifests": manifests}, **spec},
    }


DEPLOY: dict[str, Any] = {
    "apiVersion": "apps/v1",
    "kind": "Deployment",
    "metadata": {
        "name": "web",
        "namespace": "ml",
        "labels": {"app": "web"},
        "resourceVersion": "9",
        "uid": "u1",
    },
    "spec": {"replicas": 2},
    "status": {"replicas": 2},
}
NAMESPACE = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ml"}}
CONFIG = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cfg", "namespace": "ml"}}


def test_desired_manifests_add_ownership_strip_server_fields_and_order() -> None:
    desired = manifests.desired_manifests(work([DEPLOY, CONFIG, NAMESPACE]))
    assert [ident.kind for ident, _ in desired] == ["Namespace", "ConfigMap", "Deployment"]
    ident, body = desired[2]
    assert ident == Identifier("apps", "v1", "Deployment", "ml", "web", 0)
    assert "status" not in body
    assert "resourceVersion" not in body["metadata"] and "uid" not in body["metadata"]
    assert body["metadata"]["labels"] == {
        "app": "web",
        "app.kubernetes.io/managed-by": "gpufed",
        "work.gpufed.io/namespace": "gpufed-es-a",
        "work.gpufed.io/name": "web-deployment",
    }
    # The Work itself is not modified.
    assert DEPLOY["metadata"]["labels"] == {"app": "web"}
    assert desired[0][0] == Identifier("", "v1", "Namespace", "", "ml", 2)


def manifest(api_version: str, kind: str) -> dict[str, Any]:
    return {"apiVersion": api_version, "kind": kind, "metadata": {"name": kind.lower(), "namespace": "ml"}}


def test_manifests_apply_in_dependency_order() -> None:
    shuffled = [
        manifest("autoscaling/v2", "HorizontalPodAutoscaler"),
        manifest("example.com/v1", "Widget"),
        manifest("apps/v1", "DaemonSet"),
        manifest("v1", "Service"),
        manifest("v1", "Secret"),
        manifest("v1", "ResourceQuota"),
        manifest("apiextensions.k8s.io/v1", "CustomResourceDefinition"),
        manifest("v1", "Namespace"),
    ]
    order = [ident.kind for ident, _ in manifests.desired_manifests(work(shuffled))]
    assert order == [
        "Namespace", "CustomResourceDefinition", "ResourceQuota", "Secret", "Service", "Widget", "DaemonSet",
        "HorizontalPodAutoscaler",
    ]


OWNED = {"metadata": {"labels": manifests.ownership_labels("gpufed-es-a", "web-deployment")}}
OTHER_WORK = {"metadata": {"labels": manifests.ownership_labels("gpufed-es-a", "other")}}
FOREIGN = {"metadata": {"labels": {"app": "web"}}}


@pytest.mark.parametrize(
    ("live", "resolution", "expected"),
    [
        (None, ConflictResolution.ABORT, ApplyDecision.APPLY),
        (OWNED, ConflictResolution.ABORT, ApplyDecision.APPLY),
        (FOREIGN, ConflictResolution.ABORT, ApplyDecision.SKIP_CONFLICT),
        (OTHER_WORK, ConflictResolution.ABORT, ApplyDecision.SKIP_CONFLICT),
        (FOREIGN, ConflictResolution.OVERWRITE, ApplyDecision.APPLY),
        (OTHER_WORK, ConflictResolution.OVERWRITE, ApplyDecision.APPLY),
    ],
)
def test_decide_apply(
    live: dict[str, Any] | None, resolution: ConflictResolution, expected: ApplyDecision
) -> None:
    assert (
        manifests.decide_apply(
            live, work_namespace="gpufed-es-a", work_name="web-deployment", resolution=resolution
        )
        == expected
    )


@pytest.mark.parametrize(
    ("value", "expected"),
    [(None, "Abort"), ("Abort", "Abort"), ("Overwrite", "Overwrite"), ("bogus", "Abort")],
)
def test_conflict_resolution_defaults_to_abort(value: str | None, expected: str) -> None:
    spec = {} if value is None else {"conflictResolution": value}
    assert manifests.conflict_resolution(work([], **spec)) == expected


def ident(
    kind: str, name: str, *, ns: str = "ml", group: str = "", version: str = "v1", ordinal: int = 0
) -> Identifier:
    return Identifier(group, version, kind, ns, name, ordinal)


@pytest.mark.parametrize(
    ("previous", "desired", "expected"),
    [
        (
            [ident("ConfigMap", "a"), ident("ConfigMap", "b")],
            [ident("ConfigMap", "a")],
            [ident("ConfigMap", "b")],
        ),
        # Same object at another position or API version is not pruned.
        (
            [ident("Deployment", "w", group="apps", ordinal=0)],
            [ident("Deployment", "w", group="apps", ordinal=4)],
            [],
        ),
        (
            [ident("Job", "j", group="batch", version="v1")],
            [ident("Job", "j", group="batch", version="v2")],
            [],
        ),
        # Deleted Work: everything goes, workloads before their namespace.
        (
            [
                ident("Namespace", "ml", ns=""),
                ident("Deployment", "w", group="apps"),
                ident("ConfigMap", "c"),
            ],
            [],
            [
                ident("Deployment", "w", group="apps"),
                ident("ConfigMap", "c"),
                ident("Namespace", "ml", ns=""),
            ],
        ),
        ([ident("ConfigMap", "a"), ident("ConfigMap", "a", ordinal=1)], [], [ident("ConfigMap", "a")]),
    ],
)
def test_prune_targets(
    previous: list[Identifier], desired: list[Identifier], expected: list[Identifier]
) -> None:
    assert manifests.prune_targets(previous, desired) == expected


def obj(
    kind: str,
    *,
    spec: dict[str, Any] | None = None,
    status: dict[str, Any] | None = None,
    generation: int = 1,
) -> dict[str, Any]:
    return {
        "kind": kind,
        "metadata": {"name": "x", "generation": generation},
        "spec": spec or {},
        "status": status or {},
    }


def conds(**values: str) -> list[dict[str, str]]:
    return [{"type": k, "status": v} for k, v in values.items()]


@pytest.mark.parametrize(
    ("live", "expected"),
    [
        (None, Health.UNKNOWN),
        (obj("ConfigMap"), Health.HEALTHY),
        (
            obj(
                "Deployment",
                spec={"replicas": 3},
                status={"availableReplicas": 3, "updatedReplicas": 3, "observedGeneration": 1},
            ),
            Health.HEALTHY,
        ),
        (
            obj(
                "Deployment",
                spec={"replicas": 3},
                status={"availableReplicas": 1, "updatedReplicas": 3, "observedGeneration": 1},
            ),
            Health.UNHEALTHY,
        ),
        (
            obj(
                "Deployment",
                spec={"replicas": 3},
                status={"availableReplicas": 3, "observedGeneration": 1},
                generation=2,
            ),
            Health.UNKNOWN,
        ),
        (obj("Deployment", spec={"replicas": 0}), Health.HEALTHY),
        (obj("StatefulSet", spec={"replicas": 2}, status={"readyReplicas": 2}), Health.HEALTHY),
        (obj("Job", status={"conditions": conds(Failed="True")}), Health.UNHEALTHY),
        (obj("Job", status={"active": 1}), Health.HEALTHY),
        (obj("PyTorchJob", status={"conditions": conds(Created="True", Running="True")}), Health.HEALTHY),
        (obj("PyTorchJob", status={"conditions": conds(Created="True")}), Health.UNKNOWN),
        (obj("MPIJob", status={"conditions": conds(Running="False", Failed="True")}), Health.UNHEALTHY),
        (obj("RayJob", status={"jobStatus": "RUNNING"}), Health.HEALTHY),
        (obj("RayJob", status={"jobStatus": "FAILED"}), Health.UNHEALTHY),
        (obj("RayCluster", status={"state": "ready"}), Health.HEALTHY),
        (obj("Pod", status={"phase": "Running", "conditions": conds(Ready="True")}), Health.HEALTHY),
        (obj("Pod", status={"phase": "Pending"}), Health.UNKNOWN),
        (obj("Pod", status={"phase": "Failed"}), Health.UNHEALTHY),
        # Karmada's default interpretation: no health convention, so healthy once applied.
        (obj("Widget"), Health.HEALTHY),
        (obj("Widget", status={"conditions": conds(Ready="False")}), Health.UNHEALTHY),
        (obj("PyTorchJob"), Health.UNKNOWN),
        (
            obj("DaemonSet", status={"desiredNumberScheduled": 4, "updatedNumberScheduled": 4, "numberAvailable": 4, "observedGeneration": 1}),
            Health.HEALTHY,
        ),
        (
            obj("DaemonSet", status={"desiredNumberScheduled": 4, "updatedNumberScheduled": 4, "numberAvailable": 2, "observedGeneration": 1}),
            Health.UNHEALTHY,
        ),
        (obj("DaemonSet", status={"desiredNumberScheduled": 4, "observedGeneration": 1}, generation=2), Health.UNKNOWN),
        (obj("Service", spec={"type": "ClusterIP"}), Health.HEALTHY),
        (obj("Service", spec={"type": "LoadBalancer"}), Health.UNHEALTHY),
        (obj("Service", spec={"type": "LoadBalancer"}, status={"loadBalancer": {"ingress": [{"ip": "203.0.113.7"}]}}), Health.HEALTHY),
        (obj("Ingress", status={"loadBalancer": {}}), Health.UNHEALTHY),
        (obj("CronJob"), Health.HEALTHY),
        (obj("PodDisruptionBudget", status={"currentHealthy": 1, "desiredHealthy": 2}), Health.UNHEALTHY),
        (obj("LeaderWorkerSet", spec={"replicas": 2}, status={"readyReplicas": 2}), Health.HEALTHY),
        (obj("LeaderWorkerSet", spec={"replicas": 2}, status={"readyReplicas": 1, "conditions": conds(Available="False")}), Health.UNHEALTHY),
    ],
)
def test_assess_health(live: dict[str, Any] | None, expected: Health) -> None:
    assert applying.assess_health(live) == expected


def pending_pod(
    name: str, owner: dict[str, Any], *, message: str, labels: dict[str, str] | None = None, ns: str = "ml"
) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": ns, "labels": labels or {}, "ownerReferences": [owner]},
        "spec": {},
        "status": {
            "phase": "Pending",
            "conditions": [
                {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": message}
            ],
        },
    }


MSG = "0/12 nodes are available: 8 Insufficient nvidia.com/mig-3g.40gb, 4 node(s) didn't match Pod's node affinity/selector."


def test_unschedulable_summary_counts_the_workloads_pending_pods() -> None:
    deploy = {"kind": "Deployment", "metadata": {"name": "web", "namespace": "ml", "uid": "d1"}}
    rs = {"kind": "ReplicaSet", "name": "web-7f9", "uid": "rs1"}
    pods = [
        pending_pod("web-7f9-a", rs, message=MSG, labels={"pod-template-hash": "7f9"}),
        pending_pod("web-7f9-b", rs, message=MSG, labels={"pod-template-hash": "7f9"}),
        pending_pod("web-7f9-c", rs, message="other", labels={"pod-template-hash": "7f9"}),
        pending_pod(
            "webby-1-a",
            {"kind": "ReplicaSet", "name": "webby-1"},
            message="x",
            labels={"pod-template-hash": "1"},
        ),
        pending_pod("web-7f9-z", rs, message="x", labels={"pod-template-hash": "7f9"}, ns="other"),
        {
            "metadata": {
                "name": "web-7f9-r",
                "namespace": "ml",
                "labels": {"pod-template-hash": "7f9"},
                "ownerReferences": [rs],
            },
            "spec": {"nodeName": "n1"},
            "status": {"phase": "Running"},
        },
    ]
    assert podstates.unschedulable_summary(deploy, pods) == {"pods": 3, "message": MSG}
    job = {"kind": "PyTorchJob", "metadata": {"name": "bert", "namespace": "ml", "uid": "j1"}}
    assert podstates.unschedulable_summary(job, pods) is None
    job_pods = [
        pending_pod(f"bert-worker-{i}", {"kind": "PyTorchJob", "name": "bert", "uid": "j1"}, message=MSG)
        for i in range(4)
    ]
    assert podstates.unschedulable_summary(job, job_pods) == {"pods": 4, "message": MSG}


def test_pending_pods_hold_only_pods_no_node_holds_by_namespace() -> None:
    rs = {"kind": "ReplicaSet", "name": "web-7f9", "uid": "rs1"}
    pending = podstates.PendingPods()
    waiting = pending_pod("web-7f9-a", rs, message=MSG)
    other_ns = pending_pod("web-7f9-b", rs, message=MSG, ns="other")
    pending.changed("ml/web-7f9-a", waiting)
    pending.changed("other/web-7f9-b", other_ns)
    assert list(pending("ml")) == [waiting] and list(pending("other")) == [other_ns]
    assert list(pending("absent")) == []

    pending.changed("ml/web-7f9-a", {**waiting, "spec": {"nodeName": "n1"}})  # bound: no longer pending
    assert list(pending("ml")) == []
    pending.changed("other/web-7f9-b", None)  # deleted
    assert list(pending("other")) == []

    pending.changed("ml/web-7f9-a", waiting)
    pending.clear()  # a new pod cache reports every pod it lists again
    assert list(pending("ml")) == []


def test_a_work_status_counts_the_pending_pods_of_its_namespace_only() -> None:
    """The applier reads the pending pods of the namespaces its Work's objects live in."""
    rs = {"kind": "ReplicaSet", "name": "web-7f9", "uid": "rs1"}
    live = {"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "web", "namespace": "ml", "uid": "d1"}, "status": {}}
    pending = podstates.PendingPods()
    for name, ns in (("web-7f9-a", "ml"), ("web-7f9-b", "ml"), ("web-7f9-c", "other")):
        pending.changed(f"{ns}/{name}", pending_pod(name, rs, message=MSG, labels={"pod-template-hash": "7f9"}, ns=ns))
    pods = applying.pending_of([result("Deployment", live=live)], pending)
    assert sorted(p["metadata"]["name"] for p in pods) == ["web-7f9-a", "web-7f9-b"]
    status = applying.work_status(work([live]), [result("Deployment", live=live)], pods, now=NOW)
    assert status["manifestStatuses"][0]["unschedulable"] == {"pods": 2, "message": MSG}


def result(
    kind: str,
    *,
    conflict: bool = False,
    error: str | None = None,
    live: dict[str, Any] | None = None,
    ordinal: int = 0,
) -> ManifestResult:
    return ManifestResult(
        identifier=ident(kind, kind.lower(), ordinal=ordinal),
        applied=not (conflict or error),
        conflict=conflict,
        error=error,
        live=live,
    )


@pytest.mark.parametrize(
    ("results", "healths", "applied", "available"),
    [
        (
            [result("ConfigMap")],
            [Health.HEALTHY],
            ("True", "AppliedSuccessful"),
            ("True", "ResourcesAvailable"),
        ),
        (
            [result("ConfigMap", conflict=True, error="exists")],
            [Health.UNKNOWN],
            ("False", "ApplyConflict"),
            ("Unknown", "ResourcesHealthUnknown"),
        ),
        (
            [result("ConfigMap", error="admission denied"), result("Deployment", ordinal=1)],
            [Health.UNKNOWN, Health.UNHEALTHY],
            ("False", "AppliedFailed"),
            ("False", "ResourcesUnhealthy"),
        ),
    ],
)
def test_work_conditions(
    results: list[ManifestResult], healths: list[Health], applied: tuple[str, str], available: tuple[str, str]
) -> None:
    conditions = applying.work_conditions(results, healths, generation=3, now=NOW)
    assert [(c["type"], c["status"], c["reason"]) for c in conditions] == [
        ("Applied", *applied),
        ("Available", *available),
    ]
    assert all(c["observedGeneration"] == 3 for c in conditions)


def test_conflict_message_says_what_was_left_untouched() -> None:
    conditions = applying.work_conditions(
        [result("ConfigMap", conflict=True, error="exists")], [Health.UNKNOWN], generation=1, now=NOW
    )
    assert "ConfigMap configmap in namespace ml" in conditions[0]["message"]
    assert "Abort" in conditions[0]["message"]


def test_work_status_shape_and_transition_times() -> None:
    live = {**DEPLOY, "status": {"availableReplicas": 2, "updatedReplicas": 2}}
    pods = [
        pending_pod(
            "web-1-a", {"kind": "ReplicaSet", "name": "web-1"}, message=MSG, labels={"pod-template-hash": "1"}
        )
    ]
    w = work([DEPLOY])
    status = applying.work_status(w, [result("Deployment", live=live)], pods, now=NOW)
    entry = status["manifestStatuses"][0]
    assert entry["health"] == "Healthy"
    assert entry["status"] == live["status"]
    assert entry["unschedulable"] == {"pods": 1, "message": MSG}
    assert entry["identifier"] == {
        "group": "",
        "version": "v1",
        "kind": "Deployment",
        "namespace": "ml",
        "name": "deployment",
        "ordinal": 0,
    }
    later = applying.work_status(
        {**w, "status": status}, [result("Deployment", live=live)], pods, now="2025-01-02T00:00:00Z"
    )
    assert later["conditions"][0]["lastTransitionTime"] == NOW
    assert not applying.status_changed(status, later)
    assert applying.status_changed(
        status, applying.work_status(w, [result("Deployment", live=DEPLOY)], [], now=NOW)
    )


def test_a_manifest_status_carries_the_member_objects_generation() -> None:
    """The hub compares it with the status's observedGeneration to tell a status of the object's
    current spec from one of an earlier spec (a rollout not yet observed by the member)."""
    live = {**DEPLOY, "metadata": {**DEPLOY["metadata"], "generation": 3}, "status": {"observedGeneration": 2}}
    entry, _ = applying.manifest_status(result("Deployment", live=live), [])
    assert entry["generation"] == 3
    assert entry["status"] == {"observedGeneration": 2}
    entry, _ = applying.manifest_status(result("Deployment", live=None), [])
    assert "generation" not in entry
