"""Kueue's job webhooks' queue-name rule on the hub's API: a job of a kind Kueue suspends may move
to another LocalQueue (its label ``kueue.x-k8s.io/queue-name`` added, changed or removed) only
while it is suspended. Otherwise the update is refused as Kueue's webhook refuses it (a 403
admission webhook denial with kube's field error), and nothing is written. A job created for a
LocalQueue whose ClusterQueue has a MultiKueue check is answered managedBy MultiKueue."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiohttp.test_utils import TestClient

from controlplane.apis import kueue_jobs
from controlplane.apiserver.kueuepods import check_job_queue_name, check_managed_label
from controlplane.apiserver.objects import ObjectStore
from controlplane.controllers.admissiongate import default_managed_by, hold_queued_workload

from .hubapi import hub_api

JOBS = "/apis/batch/v1/namespaces/default/jobs"
MERGE = {"Content-Type": "application/merge-patch+json"}
LABEL = "kueue.x-k8s.io/queue-name"


@pytest.fixture
async def api() -> AsyncIterator[TestClient[Any, Any]]:
    def wire(objects: ObjectStore) -> None:  # as the hub does
        objects.check_creates(hold_queued_workload)
        objects.admit_writes(check_job_queue_name)
        objects.admit_writes(check_managed_label)

    async with hub_api(wire) as client:
        yield client


def job(name: str, *, queue: str | None = None, suspend: bool | None = None) -> dict[str, Any]:
    labels = {LABEL: queue} if queue else {}
    spec: dict[str, Any] = {"template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox"}]}}}
    if suspend is not None:
        spec["suspend"] = suspend
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name, "labels": labels}, "spec": spec}


async def created(api: TestClient[Any, Any], body: dict[str, Any]) -> dict[str, Any]:
    response = await api.post(JOBS, json=body)
    stored: dict[str, Any] = await response.json()
    assert response.status == 201, stored
    return stored


def denial(kind: str, *field_errors: str) -> dict[str, Any]:
    """The Status kube answers when Kueue's webhook for ``kind`` refuses a write with these field
    errors (controller-runtime's ``admission.Denied``: 403, the errors aggregated)."""
    text = field_errors[0] if len(field_errors) == 1 else "[" + ", ".join(field_errors) + "]"
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "reason": "Forbidden", "code": 403,
            "message": f'admission webhook "v{kind.lower()}.kb.io" denied the request: {text}'}


def immutable(value: str, path: str = f"metadata.labels[{LABEL}]") -> str:
    return f'{path}: Invalid value: "{value}": field is immutable'


@pytest.mark.parametrize(("before", "after"), [(None, "team-lq"), ("team-lq", "other-lq"), ("team-lq", None)])
async def test_a_running_job_keeps_its_queue_name(api: TestClient[Any, Any], before: str | None, after: str | None) -> None:
    """Added, changed or removed on a Job that runs (not suspended): 403, and the Job as it was."""
    stored = await created(api, job("j", queue=before, suspend=False))
    if before is not None:  # queued jobs are created suspended; this one was started
        response = await api.patch(f"{JOBS}/j", json={"spec": {"suspend": False}}, headers=MERGE)
        assert response.status == 200, await response.text()
        stored = await response.json()
    response = await api.patch(f"{JOBS}/j", json={"metadata": {"labels": {LABEL: after}}}, headers=MERGE)
    assert (response.status, await response.json()) == (403, denial("Job", immutable(after or "")))
    current = await (await api.get(f"{JOBS}/j")).json()
    assert current["metadata"]["resourceVersion"] == stored["metadata"]["resourceVersion"]
    assert (current["metadata"].get("labels") or {}).get(LABEL) == before


async def test_a_suspended_job_may_change_queue(api: TestClient[Any, Any]) -> None:
    """Kueue lets a suspended job be queued, moved or unqueued, and a running one be suspended in
    the same write that moves it; a write that leaves the label alone is never checked."""
    await created(api, job("j", suspend=True))
    for labels in ({LABEL: "team-lq"}, {LABEL: "other-lq"}, {LABEL: None}):
        response = await api.patch(f"{JOBS}/j", json={"metadata": {"labels": labels}}, headers=MERGE)
        assert response.status == 200, await response.text()
    response = await api.patch(f"{JOBS}/j", json={"spec": {"suspend": False}, "metadata": {"labels": {"a": "b"}}}, headers=MERGE)
    assert response.status == 200, await response.text()
    moved = {"spec": {"suspend": True}, "metadata": {"labels": {LABEL: "team-lq"}}}
    response = await api.patch(f"{JOBS}/j", json=moved, headers=MERGE)
    assert response.status == 200, await response.text()
    assert (await response.json())["metadata"]["labels"][LABEL] == "team-lq"


@pytest.mark.parametrize(("api_version", "kind", "path"), [
    ("batch/v1", "Job", ("spec", "suspend")),
    ("jobset.x-k8s.io/v1alpha2", "JobSet", ("spec", "suspend")),
    ("ray.io/v1", "RayJob", ("spec", "suspend")),
    ("ray.io/v1", "RayCluster", ("spec", "suspend")),
    ("kubeflow.org/v1", "PyTorchJob", ("spec", "runPolicy", "suspend")),
    ("kubeflow.org/v2beta1", "MPIJob", ("spec", "runPolicy", "suspend")),
])
def test_the_rule_reads_each_kinds_suspend_flag(api_version: str, kind: str, path: tuple[str, ...]) -> None:
    def obj(queue: str | None, suspend: bool | None) -> dict[str, Any]:
        out: dict[str, Any] = {"apiVersion": api_version, "kind": kind, "metadata": {"labels": {LABEL: queue} if queue else {}}}
        if suspend is not None:
            parent = out
            for key in path[:-1]:
                parent = parent.setdefault(key, {})
            parent[path[-1]] = suspend
        return out

    assert [e.field for e in kueue_jobs.queue_name_update_errors(obj("lq", False), obj(None, False))] == [f"metadata.labels[{LABEL}]"]
    assert kueue_jobs.queue_name_update_errors(obj("lq", None), obj(None, None)) != []  # unset: not suspended
    assert kueue_jobs.queue_name_update_errors(obj("lq", True), obj(None, False)) == []
    assert kueue_jobs.queue_name_update_errors(obj("lq", False), obj("lq", True)) == []


def test_other_kinds_are_not_kueues_jobs() -> None:
    new = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"labels": {LABEL: "lq"}}}
    assert kueue_jobs.queue_name_update_errors(new, {"metadata": {}}) == []


def apps(kind: str, name: str, *, queue: str | None = None) -> dict[str, Any]:
    labels = {LABEL: queue} if queue else {}
    template = {"metadata": {"labels": {"app": name}}, "spec": {"containers": [{"name": "c", "image": "busybox"}]}}
    return {"apiVersion": "apps/v1", "kind": kind, "metadata": {"name": name, "labels": labels},
            "spec": {"replicas": 1, "selector": {"matchLabels": {"app": name}}, "template": template}}


async def test_a_deployment_keeps_its_queue_name_once_it_has_ready_replicas(api: TestClient[Any, Any]) -> None:
    """Kueue's Deployment webhook: the queue may change while no replica is ready, never once one
    is (the error shows the old name), and the label may never be removed."""
    path = "/apis/apps/v1/namespaces/default/deployments"
    assert (await api.post(path, json=apps("Deployment", "d", queue="team-lq"))).status == 201
    response = await api.patch(f"{path}/d", json={"metadata": {"labels": {LABEL: "other-lq"}}}, headers=MERGE)
    assert response.status == 200, await response.text()
    response = await api.patch(f"{path}/d", json={"metadata": {"labels": {LABEL: None}}}, headers=MERGE)
    assert (response.status, await response.json()) == (403, denial("Deployment", immutable("other-lq")))
    response = await api.patch(f"{path}/d/status", json={"status": {"replicas": 1, "readyReplicas": 1}}, headers=MERGE)
    assert response.status == 200, await response.text()
    response = await api.patch(f"{path}/d", json={"metadata": {"labels": {LABEL: "team-lq"}}}, headers=MERGE)
    assert (response.status, await response.json()) == (403, denial("Deployment", immutable("other-lq")))
    current = await (await api.get(f"{path}/d")).json()
    assert current["metadata"]["labels"][LABEL] == "other-lq"
    # Without a queue name to begin with, one may be added while no replica is ready.
    assert (await api.post(path, json=apps("Deployment", "plain"))).status == 201
    response = await api.patch(f"{path}/plain", json={"metadata": {"labels": {LABEL: "team-lq"}}}, headers=MERGE)
    assert response.status == 200, await response.text()


async def test_a_statefulsets_queue_name_never_changes(api: TestClient[Any, Any]) -> None:
    """Kueue's StatefulSet webhook: the label is immutable (the old name shown), and so is the one
    in its Pod template (the new name shown); other labels change freely."""
    path = "/apis/apps/v1/namespaces/default/statefulsets"
    assert (await api.post(path, json=apps("StatefulSet", "s", queue="team-lq"))).status == 201
    response = await api.patch(f"{path}/s", json={"metadata": {"labels": {"a": "b"}}}, headers=MERGE)
    assert response.status == 200, await response.text()
    for after in ("other-lq", None):
        response = await api.patch(f"{path}/s", json={"metadata": {"labels": {LABEL: after}}}, headers=MERGE)
        assert (response.status, await response.json()) == (403, denial("StatefulSet", immutable("team-lq")))
    both = {"metadata": {"labels": {LABEL: None}}, "spec": {"template": {"metadata": {"labels": {LABEL: "other-lq"}}}}}
    response = await api.patch(f"{path}/s", json=both, headers=MERGE)
    assert (response.status, await response.json()) == (403, denial(
        "StatefulSet", immutable("team-lq"), immutable("other-lq", f"spec.template.metadata.labels[{LABEL}]")))
    current = await (await api.get(f"{path}/s")).json()
    assert current["metadata"]["labels"] == {LABEL: "team-lq", "a": "b"}
    assert LABEL not in current["spec"]["template"]["metadata"]["labels"]


async def test_a_pod_changes_queues_only_while_gated_or_finished(api: TestClient[Any, Any]) -> None:
    """Kueue's pod webhook: a Pod that carries Kueue's scheduling gate may move; once ungated (or
    never gated) its queue name is refused a change (the new value shown, "" when removed), until
    it has finished."""
    path = "/api/v1/namespaces/default/pods"
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "labels": {LABEL: "team-lq"}},
           "spec": {"containers": [{"name": "c", "image": "busybox"}]}}
    assert (await api.post(path, json=pod)).status == 201  # gated, as Kueue's webhook gates it
    response = await api.patch(f"{path}/p", json={"metadata": {"labels": {LABEL: "other-lq"}}}, headers=MERGE)
    assert response.status == 200, await response.text()
    response = await api.patch(f"{path}/p", json={"spec": {"schedulingGates": None}}, headers=MERGE)
    assert response.status == 200, await response.text()

    for after in ("team-lq", None):
        response = await api.patch(f"{path}/p", json={"metadata": {"labels": {LABEL: after}}}, headers=MERGE)
        assert (response.status, await response.json()) == (403, denial("Pod", immutable(after or "")))
    response = await api.patch(f"{path}/p/status", json={"status": {"phase": "Succeeded"}}, headers=MERGE)
    assert response.status == 200, await response.text()
    response = await api.patch(f"{path}/p", json={"metadata": {"labels": {LABEL: None}}}, headers=MERGE)
    assert response.status == 200, await response.text()
    plain = {**pod, "metadata": {"name": "plain"}}  # never queued, never gated
    assert (await api.post(path, json=plain)).status == 201
    response = await api.patch(f"{path}/plain", json={"metadata": {"labels": {LABEL: "team-lq"}}}, headers=MERGE)
    assert (response.status, await response.json()) == (403, denial("Pod", immutable("team-lq")))


async def test_a_leaderworkersets_queue_name_never_changes(api: TestClient[Any, Any]) -> None:
    """Kueue's LeaderWorkerSet webhook: the label may be neither added, changed nor removed (the
    new value shown, "" when removed); other labels change freely."""
    path = "/apis/leaderworkerset.x-k8s.io/v1/namespaces/default/leaderworkersets"
    for name, queue in (("w", "team-lq"), ("plain", None)):
        body = {"apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet",
                "metadata": {"name": name, "labels": {LABEL: queue} if queue else {}},
                "spec": {"replicas": 1, "leaderWorkerTemplate": {"workerTemplate": {}}}}
        assert (await api.post(path, json=body)).status == 201
    response = await api.patch(f"{path}/w", json={"metadata": {"labels": {"a": "b"}}}, headers=MERGE)
    assert response.status == 200, await response.text()
    for name, after in (("w", "other-lq"), ("w", None), ("plain", "team-lq")):
        response = await api.patch(f"{path}/{name}", json={"metadata": {"labels": {LABEL: after}}}, headers=MERGE)
        assert (response.status, await response.json()) == (403, denial("LeaderWorkerSet", immutable(after or "")))
    current = await (await api.get(f"{path}/w")).json()
    assert current["metadata"]["labels"] == {LABEL: "team-lq", "a": "b"}


GROUP_LABEL = "kueue.x-k8s.io/pod-group-name"


async def test_a_statefulsets_pod_group_name_never_changes(api: TestClient[Any, Any]) -> None:
    """Kueue's StatefulSet webhook keeps the label ``kueue.x-k8s.io/pod-group-name`` of any
    StatefulSet (queued or not) as it was created: added, changed or removed, the new value shown."""
    path = "/apis/apps/v1/namespaces/default/statefulsets"
    body = apps("StatefulSet", "s")
    body["metadata"]["labels"][GROUP_LABEL] = "g"
    assert (await api.post(path, json=body)).status == 201
    for after in ("h", None):
        response = await api.patch(f"{path}/s", json={"metadata": {"labels": {GROUP_LABEL: after}}}, headers=MERGE)
        assert (response.status, await response.json()) == (
            403, denial("StatefulSet", immutable(after or "", f"metadata.labels[{GROUP_LABEL}]")))
    current = await (await api.get(f"{path}/s")).json()
    assert current["metadata"]["labels"] == {GROUP_LABEL: "g"}


async def test_a_queued_statefulset_scales_only_to_and_from_zero(api: TestClient[Any, Any]) -> None:
    """Kueue's StatefulSet webhook: a queued StatefulSet's ``spec.replicas`` may go to 0 and back
    up, not from one count to another (the new count shown); up from 0 is forbidden while Pods of
    the scale down remain (``status.replicas``). A StatefulSet without a queue name scales freely;
    so does any through its scale subresource, which Kueue's webhook does not see."""
    path = "/apis/apps/v1/namespaces/default/statefulsets"
    assert (await api.post(path, json=apps("StatefulSet", "s", queue="team-lq"))).status == 201
    response = await api.patch(f"{path}/s", json={"spec": {"replicas": 3}}, headers=MERGE)
    assert (response.status, await response.json()) == (
        403, denial("StatefulSet", "spec.replicas: Invalid value: 3: field is immutable"))
    response = await api.patch(f"{path}/s", json={"spec": {"replicas": 0}}, headers=MERGE)
    assert response.status == 200, await response.text()
    response = await api.patch(f"{path}/s/status", json={"status": {"replicas": 1}}, headers=MERGE)
    assert response.status == 200, await response.text()
    response = await api.patch(f"{path}/s", json={"spec": {"replicas": 2}}, headers=MERGE)
    assert (response.status, await response.json()) == (
        403, denial("StatefulSet", "spec.replicas: Forbidden: scaling down is still in progress"))
    response = await api.patch(f"{path}/s/status", json={"status": {"replicas": 0}}, headers=MERGE)
    assert response.status == 200, await response.text()
    response = await api.patch(f"{path}/s", json={"spec": {"replicas": 2}}, headers=MERGE)
    assert response.status == 200, await response.text()
    # Both at once: Kueue's order, the group name before the replicas.
    both = {"metadata": {"labels": {GROUP_LABEL: "g"}}, "spec": {"replicas": 5}}
    response = await api.patch(f"{path}/s", json=both, headers=MERGE)
    assert (response.status, await response.json()) == (403, denial(
        "StatefulSet", immutable("g", f"metadata.labels[{GROUP_LABEL}]"), "spec.replicas: Invalid value: 5: field is immutable"))
    assert (await (await api.get(f"{path}/s")).json())["spec"]["replicas"] == 2
    scale = {"spec": {"replicas": 4}}
    response = await api.patch(f"{path}/s/scale", json=scale, headers=MERGE)
    assert response.status == 200, await response.text()
    assert (await api.post(path, json=apps("StatefulSet", "plain"))).status == 201
    response = await api.patch(f"{path}/plain", json={"spec": {"replicas": 3}}, headers=MERGE)
    assert response.status == 200, await response.text()


TRAINJOBS = "/apis/trainer.kubeflow.org/v1alpha1/namespaces/default/trainjobs"
KUEUE_PATCH = {"manager": "kueue.x-k8s.io/manager", "trainingRuntimeSpec": {"template": {"spec": {}}}}


def trainjob(name: str, *, queue: str | None = None) -> dict[str, Any]:
    return {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob",
            "metadata": {"name": name, "labels": {LABEL: queue} if queue else {}},
            "spec": {"runtimeRef": {"name": "torch-distributed"}, "trainer": {"numNodes": 2}}}


async def test_a_queued_trainjob_is_created_suspended_with_kueues_empty_runtime_patch(api: TestClient[Any, Any]) -> None:
    """Kueue's TrainJob webhook default: suspended, and the runtime patch it fills on admission."""
    response = await api.post(TRAINJOBS, json=trainjob("queued", queue="team-lq"))
    stored = await response.json()
    assert response.status == 201, stored
    assert (stored["spec"]["suspend"], stored["spec"]["runtimePatches"]) == (True, [KUEUE_PATCH])
    response = await api.post(TRAINJOBS, json=trainjob("plain"))
    stored = await response.json()
    assert response.status == 201, stored
    assert stored["spec"]["suspend"] is False and "runtimePatches" not in stored["spec"]


async def test_a_running_trainjob_keeps_its_queue_name(api: TestClient[Any, Any]) -> None:
    """``vtrainjob.kb.io``: the queue name of a TrainJob that runs may not change; suspended, it may."""
    response = await api.post(TRAINJOBS, json=trainjob("t", queue="team-lq"))
    assert response.status == 201, await response.text()
    response = await api.patch(f"{TRAINJOBS}/t", json={"metadata": {"labels": {LABEL: "other-lq"}}}, headers=MERGE)
    assert response.status == 200, await response.text()  # suspended: it may move
    response = await api.patch(f"{TRAINJOBS}/t", json={"spec": {"suspend": False}}, headers=MERGE)
    assert response.status == 200, await response.text()
    stored = await response.json()
    response = await api.patch(f"{TRAINJOBS}/t", json={"metadata": {"labels": {LABEL: "team-lq"}}}, headers=MERGE)
    assert (response.status, await response.json()) == (403, denial("TrainJob", immutable("team-lq")))
    current = await (await api.get(f"{TRAINJOBS}/t")).json()
    assert current["metadata"]["resourceVersion"] == stored["metadata"]["resourceVersion"]


MULTIKUEUE = "kueue.x-k8s.io/multikueue"
KUEUE = "/apis/kueue.x-k8s.io/v1beta2"


@pytest.fixture
async def multikueue_api() -> AsyncIterator[TestClient[Any, Any]]:
    def wire(objects: ObjectStore) -> None:  # as the hub does
        objects.check_creates(hold_queued_workload)
        objects.check_creates(default_managed_by(objects))

    async with hub_api(wire) as client:
        check = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "AdmissionCheck", "metadata": {"name": "dispatch"},
                 "spec": {"controllerName": MULTIKUEUE,
                          "parameters": {"apiGroup": "kueue.x-k8s.io", "kind": "MultiKueueConfig", "name": "workers"}}}
        queue = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "metadata": {"name": "fleet"},
                 "spec": {"admissionChecksStrategy": {"admissionChecks": [{"name": "dispatch"}]}}}
        local = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue", "metadata": {"name": "fleet"},
                 "spec": {"clusterQueue": "fleet"}}
        for path, body in ((f"{KUEUE}/admissionchecks", check), (f"{KUEUE}/clusterqueues", queue),
                           (f"{KUEUE}/namespaces/default/localqueues", local)):
            response = await client.post(path, json=body)
            assert response.status == 201, await response.text()
        yield client


async def test_a_job_created_for_a_multikueue_queue_is_answered_managed_by_multikueue(
    multikueue_api: TestClient[Any, Any],
) -> None:
    """Kueue's webhook defaulting, seen in the create's answer, a dry run's included."""
    response = await multikueue_api.post(f"{JOBS}?dryRun=All", json=job("dry", queue="fleet"))
    assert response.status == 201 and (await response.json())["spec"]["managedBy"] == MULTIKUEUE
    stored = await created(multikueue_api, job("a1", queue="fleet"))
    assert (stored["spec"]["managedBy"], stored["spec"]["suspend"]) == (MULTIKUEUE, True)
    assert "managedBy" not in (await created(multikueue_api, job("a2", queue="elsewhere")))["spec"]
