"""Kueue's kinds served at ``kueue.x-k8s.io/v1beta2`` beside v1beta1, one stored object: a write at
either version reads back at the other as Kueue's conversion webhook converts it; validation,
discovery, tables, watches, server-side apply and ``kubectl explain`` work at v1beta2 (through
the hub's HTTP API on a real etcd, and with the real kubectl)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from controlplane.apis.kueue_conversion import V1BETA2_FIELDS_ANNOTATION
from controlplane.controllers.workloads import propagatable_types
from controlplane.hub import hub_registry

from .test_kube_validation import Client, hub, hub_kubeconfig  # noqa: F401 (fixtures)
from .test_kueue_kubectl import CREATED, KUEUE_YAML
from .test_real_clients import kubectl, needs_kubectl

Obj = dict[str, Any]
GROUP = "/apis/kueue.x-k8s.io"
V1B1, V1B2 = f"{GROUP}/v1beta1", f"{GROUP}/v1beta2"
TABLE = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json"
GPU_GROUP = [{"coveredResources": ["nvidia.com/gpu"], "flavors": [
    {"name": "a100", "resources": [{"name": "nvidia.com/gpu", "nominalQuota": 8, "borrowingLimit": 4}]}]}]


def cluster_queue(version: str, name: str = "team-a", **spec: Any) -> Obj:
    return {"apiVersion": f"kueue.x-k8s.io/{version}", "kind": "ClusterQueue", "metadata": {"name": name},
            "spec": {"namespaceSelector": {}, **spec}}


def workload(version: str, **spec: Any) -> Obj:
    return {"apiVersion": f"kueue.x-k8s.io/{version}", "kind": "Workload", "metadata": {"name": "job-a", "namespace": "default"},
            "spec": {"queueName": "team-a", "podSets": [{"name": "main", "count": 1, "template": {"spec": {"containers": []}}}], **spec}}


async def ok(response: Any, status: int = 200) -> Obj:
    body: Obj = await response.json()
    assert response.status == status, body
    return body


async def test_a_v1beta2_cluster_queue_reads_back_at_v1beta1(hub: Client) -> None:  # noqa: F811
    created = await ok(await hub.post(f"{V1B2}/clusterqueues", json=cluster_queue(
        "v1beta2", cohortName="research", resourceGroups=GPU_GROUP,
        flavorFungibility={"whenCanBorrow": "TryNextFlavor", "whenCanPreempt": "TryNextFlavor", "preference": "PreemptionOverBorrowing"},
        concurrentAdmissionPolicy={"migration": {"mode": "RetainFirstAdmission"}},
    )), 201)
    assert created["apiVersion"] == "kueue.x-k8s.io/v1beta2"
    assert created["spec"]["cohortName"] == "research"
    assert created["spec"]["concurrentAdmissionPolicy"] == {"migration": {"mode": "RetainFirstAdmission"}}
    assert "annotations" not in created["metadata"]
    stored = await ok(await hub.get(f"{V1B1}/clusterqueues/team-a"))
    assert stored["apiVersion"] == "kueue.x-k8s.io/v1beta1"
    assert stored["spec"]["cohort"] == "research" and "cohortName" not in stored["spec"]
    assert stored["spec"]["flavorFungibility"] == {"whenCanBorrow": "TryNextFlavor", "whenCanPreempt": "TryNextFlavor"}
    assert json.loads(stored["metadata"]["annotations"][V1BETA2_FIELDS_ANNOTATION]) == {
        "concurrentAdmissionPolicy": {"migration": {"mode": "RetainFirstAdmission"}},
        "flavorFungibility": {"preference": "PreemptionOverBorrowing"},
    }
    assert stored["metadata"]["resourceVersion"] == created["metadata"]["resourceVersion"]
    assert await ok(await hub.get(f"{V1B2}/clusterqueues/team-a")) == created


async def test_v1beta2_defaults_are_kueues_and_stored_in_v1beta1_names(hub: Client) -> None:  # noqa: F811
    created = await ok(await hub.post(f"{V1B2}/clusterqueues", json=cluster_queue("v1beta2")), 201)
    assert created["spec"]["flavorFungibility"] == {"whenCanBorrow": "MayStopSearch", "whenCanPreempt": "TryNextFlavor"}
    stored = await ok(await hub.get(f"{V1B1}/clusterqueues/team-a"))
    assert stored["spec"]["flavorFungibility"] == {"whenCanBorrow": "Borrow", "whenCanPreempt": "TryNextFlavor"}


async def test_a_v1beta1_cluster_queue_reads_at_v1beta2_as_kueue_converts_it(hub: Client) -> None:  # noqa: F811
    await ok(await hub.post(f"{V1B1}/clusterqueues", json=cluster_queue(
        "v1beta1", cohort="research", admissionChecks=["prov"], flavorFungibility={"whenCanPreempt": "Preempt"},
    )), 201)
    served = await ok(await hub.get(f"{V1B2}/clusterqueues/team-a"))
    assert served["spec"]["cohortName"] == "research"
    assert served["spec"]["admissionChecksStrategy"] == {"admissionChecks": [{"name": "prov"}]}
    assert "admissionChecks" not in served["spec"] and "cohort" not in served["spec"]
    assert served["spec"]["flavorFungibility"] == {"whenCanBorrow": "MayStopSearch", "whenCanPreempt": "MayStopSearch"}


async def test_a_merge_patch_at_v1beta2_keeps_the_rest(hub: Client) -> None:  # noqa: F811
    await ok(await hub.post(f"{V1B1}/clusterqueues", json=cluster_queue("v1beta1", cohort="research", resourceGroups=GPU_GROUP)), 201)
    patched = await ok(await hub.patch(f"{V1B2}/clusterqueues/team-a", json={"spec": {"cohortName": "prod"}},
                                       headers={"Content-Type": "application/merge-patch+json"}))
    assert patched["spec"]["cohortName"] == "prod" and patched["spec"]["resourceGroups"] == GPU_GROUP
    stored = await ok(await hub.get(f"{V1B1}/clusterqueues/team-a"))
    assert stored["spec"]["cohort"] == "prod"
    assert stored["metadata"]["generation"] == 2


async def test_concurrent_admission_policy_is_kept_as_created(hub: Client) -> None:  # noqa: F811
    """Kueue's webhook refuses a change of ``concurrentAdmissionPolicy``; other changes go through."""
    policy = {"migration": {"mode": "TryPreferredFlavors", "constraints": {"lastAcceptableFlavorName": "a100"}}}
    await ok(await hub.post(f"{V1B2}/clusterqueues", json=cluster_queue(
        "v1beta2", resourceGroups=GPU_GROUP, cohortName="research", concurrentAdmissionPolicy=policy)), 201)
    merge = {"Content-Type": "application/merge-patch+json"}
    for change in ({"concurrentAdmissionPolicy": {"migration": {"mode": "RetainFirstAdmission"}}},
                   {"concurrentAdmissionPolicy": None}):
        status = await ok(await hub.patch(f"{V1B2}/clusterqueues/team-a", json={"spec": change}, headers=merge), 422)
        assert status["details"]["causes"] == [{"reason": "FieldValueInvalid", "field": "spec.concurrentAdmissionPolicy",
                                               "message": 'Invalid value: "object": field is immutable'}]
    patched = await ok(await hub.patch(f"{V1B2}/clusterqueues/team-a", json={"spec": {"cohortName": "prod"}}, headers=merge))
    assert patched["spec"]["concurrentAdmissionPolicy"] == policy
    # A v1beta1 write that carries the stored annotation along keeps it too.
    stored = await ok(await hub.get(f"{V1B1}/clusterqueues/team-a"))
    stored["spec"]["queueingStrategy"] = "StrictFIFO"
    await ok(await hub.put(f"{V1B1}/clusterqueues/team-a", json=stored))
    status = await ok(await hub.post(f"{V1B2}/clusterqueues", json=cluster_queue(
        "v1beta2", "team-b", concurrentAdmissionPolicy={"migration": {
            "mode": "TryPreferredFlavors", "constraints": {"lastAcceptableFlavorName": "A100"}}})), 422)
    assert "spec.concurrentAdmissionPolicy.migration.constraints.lastAcceptableFlavorName" in status["message"]


async def test_v1beta2_is_validated_with_its_own_field_names(hub: Client) -> None:  # noqa: F811
    status = await ok(await hub.post(f"{V1B2}/clusterqueues", json=cluster_queue("v1beta2", resourceGroups=GPU_GROUP)), 422)
    assert status["reason"] == "Invalid"
    assert 'spec: Invalid value: "object": borrowingLimit must be nil when cohort is empty' in status["message"]
    await ok(await hub.post(f"{V1B2}/clusterqueues", json=cluster_queue("v1beta2", cohortName="research", resourceGroups=GPU_GROUP)), 201)
    status = await ok(await hub.post(f"{V1B2}/clusterqueues", json=cluster_queue(
        "v1beta2", flavorFungibility={"whenCanBorrow": "MayStopSearch", "preference": "BorrowingOverPreemption"})), 422)
    assert "preference can only be set when both whenCanBorrow and whenCanPreempt are TryNextFlavor" in status["message"]
    status = await ok(await hub.post(f"{V1B2}/clusterqueues", json=cluster_queue(
        "v1beta2", flavorFungibility={"whenCanBorrow": "Borrow"})), 422)
    assert "spec.flavorFungibility.whenCanBorrow" in status["message"]
    # v1beta1's field names are not v1beta2's.
    status = await ok(await hub.post(f"{V1B2}/clusterqueues", json=cluster_queue("v1beta2", cohort="research"),
                                     params={"fieldValidation": "Strict"}), 400)
    assert status["message"].endswith('strict decoding error: unknown field "spec.cohort"')
    status = await ok(await hub.post(f"{V1B2}/namespaces/default/workloads", json=workload(
        "v1beta2", priorityClassRef={"group": "scheduling.k8s.io", "kind": "WorkloadPriorityClass", "name": "x"}, priority=1)), 422)
    assert "only the PriorityClass kind is allowed for the scheduling.k8s.io group" in status["message"]
    status = await ok(await hub.post(f"{V1B2}/namespaces/default/workloads", json=workload(
        "v1beta2", priorityClassRef={"group": "kueue.x-k8s.io", "kind": "WorkloadPriorityClass", "name": "high"})), 422)
    assert "priority should not be nil when priorityClassRef is set" in status["message"]


async def test_workload_priority_class_ref_and_local_queue_usage(hub: Client) -> None:  # noqa: F811
    ref = {"group": "kueue.x-k8s.io", "kind": "WorkloadPriorityClass", "name": "high"}
    await ok(await hub.post(f"{V1B2}/namespaces/default/workloads", json=workload("v1beta2", priorityClassRef=ref, priority=100)), 201)
    stored = await ok(await hub.get(f"{V1B1}/namespaces/default/workloads/job-a"))
    assert (stored["spec"]["priorityClassSource"], stored["spec"]["priorityClassName"]) == ("kueue.x-k8s.io/workloadpriorityclass", "high")
    assert (await ok(await hub.get(f"{V1B2}/namespaces/default/workloads/job-a")))["spec"]["priorityClassRef"] == ref

    queue = {"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "LocalQueue", "metadata": {"name": "team-a", "namespace": "default"},
             "spec": {"clusterQueue": "team-a"}}
    created = await ok(await hub.post(f"{V1B1}/namespaces/default/localqueues", json=queue), 201)
    usage = [{"name": "a100", "resources": [{"name": "nvidia.com/gpu", "total": "2"}]}]
    status = {**created, "status": {"flavorUsage": usage, "pendingWorkloads": 1}}
    await ok(await hub.put(f"{V1B1}/namespaces/default/localqueues/team-a/status", json=status))
    served = await ok(await hub.get(f"{V1B2}/namespaces/default/localqueues/team-a"))
    assert served["status"] == {"flavorsUsage": usage, "pendingWorkloads": 1}


async def test_cohorts_and_the_same_field_kinds_at_every_version(hub: Client) -> None:  # noqa: F811
    cohort = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Cohort", "metadata": {"name": "org"},
              "spec": {"parentName": "root", "fairSharing": {"weight": "2"}}}
    await ok(await hub.post(f"{V1B2}/cohorts", json=cohort), 201)
    for version in ("v1beta1", "v1beta2"):
        read = await ok(await hub.get(f"{GROUP}/{version}/cohorts/org"))
        assert (read["apiVersion"], read["spec"]) == (f"kueue.x-k8s.io/{version}", cohort["spec"])
    # Kueue's v1alpha1 names the parent ``parent`` (renamed when the kind moved to v1beta1).
    old = await ok(await hub.get(f"{GROUP}/v1alpha1/cohorts/org"))
    assert old["spec"] == {"parent": "root", "fairSharing": {"weight": "2"}}
    old["spec"]["parent"] = "other"
    await ok(await hub.put(f"{GROUP}/v1alpha1/cohorts/org", json=old))
    assert (await ok(await hub.get(f"{V1B1}/cohorts/org")))["spec"]["parentName"] == "other"
    refused = await ok(await hub.post(f"{GROUP}/v1alpha1/cohorts?fieldValidation=Strict", json={
        "apiVersion": "kueue.x-k8s.io/v1alpha1", "kind": "Cohort", "metadata": {"name": "b"}, "spec": {"parentName": "root"}}), 400)
    assert 'unknown field "spec.parentName"' in refused["message"]
    flavor = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor", "metadata": {"name": "a100"},
              "spec": {"nodeLabels": {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB"}}}
    await ok(await hub.post(f"{V1B2}/resourceflavors", json=flavor), 201)
    assert (await ok(await hub.get(f"{V1B1}/resourceflavors/a100")))["spec"] == flavor["spec"]
    priority = {"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "WorkloadPriorityClass", "metadata": {"name": "high"}, "value": 100}
    await ok(await hub.post(f"{V1B1}/workloadpriorityclasses", json=priority), 201)
    assert (await ok(await hub.get(f"{V1B2}/workloadpriorityclasses/high")))["value"] == 100


async def test_discovery_prefers_v1beta2_and_one_object_is_stored(hub: Client) -> None:  # noqa: F811
    groups = (await ok(await hub.get("/apis")))["groups"]
    kueue = next(g for g in groups if g["name"] == "kueue.x-k8s.io")
    assert [v["version"] for v in kueue["versions"]] == ["v1beta2", "v1beta1", "v1alpha1"]
    assert kueue["preferredVersion"]["version"] == "v1beta2"
    v1beta2 = {r["name"]: r for r in (await ok(await hub.get(V1B2)))["resources"]}
    v1beta1 = {r["name"]: r for r in (await ok(await hub.get(V1B1)))["resources"]}
    assert sorted(n for n in v1beta2 if "/" not in n) == [
        "admissionchecks", "clusterqueues", "cohorts", "localqueues", "multikueueclusters", "multikueueconfigs",
        "provisioningrequestconfigs", "resourceflavors", "topologies", "workloadpriorityclasses", "workloads"]
    assert v1beta2.keys() == v1beta1.keys()
    assert all(v1beta2[n].get("storageVersionHash") == v1beta1[n].get("storageVersionHash") for n in v1beta2)


async def test_table_and_watch_at_v1beta2(hub: Client) -> None:  # noqa: F811
    watch = await hub.get(f"{V1B2}/clusterqueues", params={"watch": "true", "resourceVersion": "0"})
    await ok(await hub.post(f"{V1B1}/clusterqueues", json=cluster_queue("v1beta1", cohort="research")), 201)
    added = json.loads(await asyncio.wait_for(watch.content.readline(), 10))
    assert (added["type"], added["object"]["apiVersion"], added["object"]["spec"]["cohortName"]) == (
        "ADDED", "kueue.x-k8s.io/v1beta2", "research")
    watch.close()
    table = await ok(await hub.get(f"{V1B2}/clusterqueues", headers={"Accept": TABLE}))
    assert [c["name"] for c in table["columnDefinitions"]][:2] == ["Name", "Cohort"]
    assert table["rows"][0]["cells"][:2] == ["team-a", "research"]


async def test_openapi_v2_and_v3_describe_each_version(hub: Client) -> None:  # noqa: F811
    definitions = (await ok(await hub.get("/openapi/v2")))["definitions"]
    v1beta2 = definitions["io.x-k8s.kueue.v1beta2.ClusterQueue"]
    assert v1beta2["x-kubernetes-group-version-kind"] == [{"group": "kueue.x-k8s.io", "version": "v1beta2", "kind": "ClusterQueue"}]
    spec_ref = v1beta2["properties"]["spec"]["$ref"].rpartition("/")[2]
    assert "cohortName" in definitions[spec_ref]["properties"] and "cohort" not in definitions[spec_ref]["properties"]
    paths = (await ok(await hub.get("/openapi/v3")))["paths"]
    assert {"apis/kueue.x-k8s.io/v1beta2", "apis/kueue.x-k8s.io/v1beta1"} <= paths.keys()
    schemas = (await ok(await hub.get("/openapi/v3/apis/kueue.x-k8s.io/v1beta2")))["components"]["schemas"]
    workload_spec = schemas[schemas["io.x-k8s.kueue.v1beta2.Workload"]["properties"]["spec"]["allOf"][0]["$ref"].rpartition("/")[2]]
    assert "priorityClassRef" in workload_spec["properties"] and "priorityClassName" not in workload_spec["properties"]


def test_controllers_and_namespace_deletion_see_the_stored_version_only() -> None:
    registry = hub_registry()
    for kind in ("Workload", "LocalQueue"):
        assert [rt.api_version for rt in registry.namespaced_types() if rt.kind == kind] == ["kueue.x-k8s.io/v1beta1"]
    assert not [rt for rt in propagatable_types(registry) if rt.group == "kueue.x-k8s.io"]


#: Kueue's docs' single-cluster setup (the v1beta1 YAML of test_kueue_kubectl.py) as Kueue 0.15+'s
#: docs write it: at v1beta2, ``cohortName`` for ``cohort``, ``MayStopSearch`` for ``Borrow``.
KUEUE_V1BETA2_YAML = (
    KUEUE_YAML.replace("kueue.x-k8s.io/v1beta1", "kueue.x-k8s.io/v1beta2")
    .replace("  cohort: ", "  cohortName: ").replace("whenCanBorrow: Borrow", "whenCanBorrow: MayStopSearch")
)


@needs_kubectl
async def test_kubectl_applies_kueue_v1beta2_yaml(hub_kubeconfig: Path, tmp_path: Path) -> None:  # noqa: F811
    manifest = tmp_path / "kueue.yaml"
    manifest.write_text(KUEUE_V1BETA2_YAML)
    assert "v1beta1" not in KUEUE_V1BETA2_YAML and 'cohortName: "team-ab"' in KUEUE_V1BETA2_YAML
    created = CREATED.splitlines()
    code, out, err = await kubectl(hub_kubeconfig, "apply", "-f", str(manifest))
    assert (code, out.splitlines()) == (0, created), err
    code, out, err = await kubectl(hub_kubeconfig, "apply", "-f", str(manifest))
    assert (code, out.splitlines()) == (0, [line.replace("created", "unchanged") for line in created]), err
    code, out, err = await kubectl(hub_kubeconfig, "get", "cq")
    assert code == 0, err
    assert [row.split()[:2] for row in out.splitlines()] == [["NAME", "COHORT"], ["cluster-queue", "<none>"], ["team-b-cq", "team-ab"]]
    code, out, err = await kubectl(hub_kubeconfig, "get", "cq", "team-b-cq", "-o", "yaml")
    served = yaml.safe_load(out)
    assert (served["apiVersion"], served["spec"]["cohortName"]) == ("kueue.x-k8s.io/v1beta2", "team-ab"), err
    assert served["spec"]["flavorFungibility"]["whenCanBorrow"] == "MayStopSearch"
    code, out, err = await kubectl(hub_kubeconfig, "get", "clusterqueues.v1beta1.kueue.x-k8s.io", "team-b-cq", "-o", "yaml")
    stored = yaml.safe_load(out)
    assert (stored["apiVersion"], stored["spec"]["cohort"]) == ("kueue.x-k8s.io/v1beta1", "team-ab"), err
    code, out, err = await kubectl(hub_kubeconfig, "explain", "clusterqueue.spec.cohortName", "--api-version", "kueue.x-k8s.io/v1beta2")
    assert code == 0 and "FIELD: cohortName <string>" in out, err
    code, out, err = await kubectl(hub_kubeconfig, "explain", "clusterqueue.spec.cohort", "--api-version", "kueue.x-k8s.io/v1beta1")
    assert code == 0 and "FIELD: cohort <string>" in out, err

    # Server-side apply at v1beta2: its managedFields name v1beta2's fields.
    changed = KUEUE_V1BETA2_YAML.replace('cohortName: "team-ab"', 'cohortName: "team-cd"')
    code, out, err = await kubectl(hub_kubeconfig, "apply", "--server-side", "-f", "-", stdin=changed)
    assert code == 0, err
    code, out, err = await kubectl(hub_kubeconfig, "get", "cq", "team-b-cq", "-o", "json", "--show-managed-fields")
    managed = json.loads(out)["metadata"]["managedFields"]
    applied = next(m for m in managed if m["manager"] == "kubectl" and m["operation"] == "Apply")
    assert applied["apiVersion"] == "kueue.x-k8s.io/v1beta2"
    assert "f:cohortName" in applied["fieldsV1"]["f:spec"]
    code, out, err = await kubectl(hub_kubeconfig, "get", "clusterqueues.v1beta1.kueue.x-k8s.io", "team-b-cq", "-o", "jsonpath={.spec.cohort}")
    assert (code, out) == (0, "team-cd"), err


async def test_at_most_one_pod_set_may_use_min_count(hub: Client) -> None:  # noqa: F811
    def pod_set(name: str) -> Obj:
        return {"name": name, "count": 4, "minCount": 2, "template": {"spec": {"containers": []}}}

    for version, base in (("v1beta1", V1B1), ("v1beta2", V1B2)):
        status = await ok(await hub.post(f"{base}/namespaces/default/workloads", json=workload(
            version, podSets=[pod_set("main"), pod_set("worker")])), 403)
        assert status["reason"] == "Forbidden"
        assert status["message"].startswith('admission webhook "vworkload.kb.io" denied the request: '), status
        assert status["message"].endswith(": at most one podSet can use minCount"), status["message"]
    await ok(await hub.post(f"{V1B1}/namespaces/default/workloads", json=workload("v1beta1", podSets=[pod_set("main")])), 201)


async def test_a_workloads_admission_check_states_are_kueues_at_either_version(hub: Client) -> None:  # noqa: F811
    await ok(await hub.post(f"{V1B2}/namespaces/default/workloads", json=workload("v1beta2")), 201)
    state = {"name": "budget", "state": "Ready", "lastTransitionTime": "2026-01-01T00:00:00Z", "message": "within budget"}
    patch = {"status": {"admissionChecks": [state]}}
    merge = {"Content-Type": "application/merge-patch+json"}
    written = await ok(await hub.patch(f"{V1B2}/namespaces/default/workloads/job-a/status", json=patch, headers=merge))
    assert written["status"]["admissionChecks"] == [state]
    assert (await ok(await hub.get(f"{V1B1}/namespaces/default/workloads/job-a")))["status"]["admissionChecks"] == [state]
    refused = await ok(await hub.patch(f"{V1B1}/namespaces/default/workloads/job-a/status", headers=merge,
                                       json={"status": {"admissionChecks": [{**state, "state": "Done"}]}}), 422)
    assert "status.admissionChecks[0].state" in refused["message"] and "Done" in refused["message"]


@pytest.mark.parametrize(("update", "field", "message"), [
    ({"name": "main", "tolerations": [{"operator": "Equal", "value": "x"}]}, "tolerations",
     "operator must be Exists when 'key' is empty, which means 'match all values and all keys'"),
    ({"name": "main", "tolerations": [{"key": "spot", "tolerationSeconds": 5}]}, "tolerations",
     "effect must be 'NoExecute' when 'tolerationSeconds' is set"),
    ({"name": "main", "tolerations": [{"key": "spot", "operator": "Exists", "value": "x"}]}, "tolerations",
     "a value must be empty when 'operator' is 'Exists'"),
    ({"name": "main", "tolerations": [{"key": "spot", "operator": "In"}]}, "tolerations",
     "supported toleration values: 'Equal'(default), 'Exists'"),
    ({"labels": {"a": "b"}}, "name", "Required value"),
])
async def test_pod_set_updates_follow_kueues_schema(hub: Client, update: Obj, field: str, message: str) -> None:  # noqa: F811
    await ok(await hub.post(f"{V1B1}/namespaces/default/workloads", json=workload("v1beta1")), 201)
    state = {"name": "budget", "state": "Ready", "lastTransitionTime": "2026-01-01T00:00:00Z", "message": "",
             "podSetUpdates": [update]}
    merge = {"Content-Type": "application/merge-patch+json"}
    refused = await ok(await hub.patch(f"{V1B1}/namespaces/default/workloads/job-a/status", headers=merge,
                                       json={"status": {"admissionChecks": [state]}}), 422)
    assert f"status.admissionChecks[0].podSetUpdates[0].{field}" in refused["message"], refused["message"]
    assert message in refused["message"], refused["message"]
    good = {**state, "podSetUpdates": [{"name": "main", "nodeSelector": {"zone": "z1"},
                                        "tolerations": [{"key": "spot", "operator": "Exists", "effect": "NoSchedule"}]}],
            "requeueAfterSeconds": 60}
    written = await ok(await hub.patch(f"{V1B1}/namespaces/default/workloads/job-a/status", headers=merge,
                                       json={"status": {"admissionChecks": [good]}}))
    assert written["status"]["admissionChecks"] == [good]


@pytest.mark.parametrize("version", ["v1beta2", "v1beta1"])
async def test_a_local_queues_fair_sharing_status_is_in_the_served_openapi(hub: Client, version: str) -> None:  # noqa: F811
    """Kueue's FairSharingStatus on a LocalQueue: weightedShare, and admission fair sharing's
    consumedResources (quantities) and lastUpdate, both required as in Kueue's CRD."""
    document = await ok(await hub.get(f"/openapi/v3/apis/kueue.x-k8s.io/{version}"))
    schemas = document["components"]["schemas"]
    prefix = f"io.x-k8s.kueue.{version}"

    def ref(schema: Obj) -> str:  # a $ref with a description is wrapped in allOf, as kube's v3
        return str(schema["allOf"][0]["$ref"]).removeprefix("#/components/schemas/")

    fair_sharing = schemas[f"{prefix}.LocalQueueStatus"]["properties"]["fairSharing"]
    status = schemas[ref(fair_sharing)]
    assert status["properties"]["weightedShare"]["type"] == "integer"
    history = schemas[ref(status["properties"]["admissionFairSharingStatus"])]
    assert set(history["properties"]) == {"consumedResources", "lastUpdate"}
    assert set(history["required"]) == {"consumedResources", "lastUpdate"}
    assert history["properties"]["consumedResources"]["additionalProperties"]["x-kubernetes-int-or-string"] is True


@needs_kubectl
@pytest.mark.parametrize("version", ["v1beta2", "v1beta1"])
async def test_kubectl_explains_a_local_queues_fair_sharing_status(hub_kubeconfig: Path, version: str) -> None:  # noqa: F811
    code, out, err = await kubectl(hub_kubeconfig, "explain", "localqueue.status.fairSharing", "--api-version", f"kueue.x-k8s.io/{version}")
    assert code == 0, err
    assert "FIELD: fairSharing <FairSharingStatus>" in out
    assert "weightedShare\t<integer>" in out and "admissionFairSharingStatus\t<AdmissionFairSharingStatus>" in out
    code, out, err = await kubectl(hub_kubeconfig, "explain", "localqueue.status.fairSharing.admissionFairSharingStatus",
                                   "--api-version", f"kueue.x-k8s.io/{version}")
    assert code == 0, err
    assert "consumedResources\t<map[string]Object> -required-" in out and "lastUpdate\t<string> -required-" in out


async def test_a_v1beta2_workload_without_a_priority_class_holding_quota_takes_updates(hub: Client) -> None:  # noqa: F811
    """v1beta1's rule that keeps ``priorityClassSource`` while quota is held is not run on the
    v1beta2 form, which has no such field (it was kube's ``no such key`` refusal of any update)."""
    created = await ok(await hub.post(f"{V1B2}/namespaces/default/workloads", json=workload("v1beta2")), 201)
    created["status"] = {"conditions": [{"type": "QuotaReserved", "status": "True", "reason": "QuotaReserved",
                                         "message": "reserved", "lastTransitionTime": "2026-01-01T00:00:00Z"}]}
    reserved = await ok(await hub.put(f"{V1B2}/namespaces/default/workloads/job-a/status", json=created))
    reserved["metadata"]["labels"] = {"team": "a"}
    updated = await ok(await hub.put(f"{V1B2}/namespaces/default/workloads/job-a", json=reserved))
    assert updated["metadata"]["labels"] == {"team": "a"} and "priorityClassRef" not in updated["spec"]
