"""Server-side apply across the versions of one stored kind: a managedFields entry keeps the
version its manager wrote, and a write at another version is compared with it in that version,
as kube's field manager converts the object to each entry's version. So an HPA applied at
autoscaling/v1 (``targetCPUUtilizationPercentage``) conflicts with an apply of a different CPU
metric at v2 (``metrics``), and a ClusterQueue's ``cohort`` (v1beta1) with ``cohortName``
(v1beta2); ``force`` takes the field over. Through the hub's HTTP API on a real etcd, and with
the real kubectl."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from controlplane.apiserver.objects.versions import KindVersions
from controlplane.hub import hub_registry

from .test_hpa_versions import V1, V2, cpu, hpa_v1, hpa_v2
from .test_kube_validation import Client, hub, hub_kubeconfig  # noqa: F401 (fixtures)
from .test_kueue_versions import V1B1, V1B2, cluster_queue
from .test_real_clients import kubectl, needs_kubectl

Obj = dict[str, Any]
APPLY = {"Content-Type": "application/apply-patch+yaml"}


async def apply(hub: Client, url: str, obj: Obj, manager: str, *, force: bool = False) -> Any:  # noqa: F811
    params = {"fieldManager": manager, **({"force": "true"} if force else {})}
    return await hub.patch(url, params=params, data=yaml.safe_dump(obj), headers=APPLY)


async def ok(response: Any) -> Obj:
    body: Obj = await response.json()
    assert response.status in (200, 201), body
    return body


def entry(obj: Obj, manager: str) -> Obj:
    return next(e for e in obj["metadata"]["managedFields"] if e["manager"] == manager)


HPA_V1_URL, HPA_V2_URL = f"{V1}/web", f"{V2}/web"
CQ_V1B1_URL, CQ_V1B2_URL = f"{V1B1}/clusterqueues/team-a", f"{V1B2}/clusterqueues/team-a"

# (first url, first object, its owned spec field; second url, second object, its spec field,
#  the conflict message naming the first manager's field in its own version)
CASES = {
    "hpa v1 then v2": (
        HPA_V1_URL, hpa_v1(targetCPUUtilizationPercentage=70), "f:targetCPUUtilizationPercentage",
        HPA_V2_URL, hpa_v2(metrics=[cpu(60)]), "f:metrics",
        'Apply failed with 1 conflict: conflict with "first": .spec.targetCPUUtilizationPercentage',
    ),
    "hpa v2 then v1": (
        HPA_V2_URL, hpa_v2(metrics=[cpu(60)]), "f:metrics",
        HPA_V1_URL, hpa_v1(targetCPUUtilizationPercentage=70), "f:targetCPUUtilizationPercentage",
        'Apply failed with 1 conflict: conflict with "first": .spec.metrics',
    ),
    "cluster queue v1beta1 then v1beta2": (
        CQ_V1B1_URL, cluster_queue("v1beta1", cohort="research"), "f:cohort",
        CQ_V1B2_URL, cluster_queue("v1beta2", cohortName="training"), "f:cohortName",
        'Apply failed with 1 conflict: conflict with "first": .spec.cohort',
    ),
    "cluster queue v1beta2 then v1beta1": (
        CQ_V1B2_URL, cluster_queue("v1beta2", cohortName="research"), "f:cohortName",
        CQ_V1B1_URL, cluster_queue("v1beta1", cohort="training"), "f:cohort",
        'Apply failed with 1 conflict: conflict with "first": .spec.cohortName',
    ),
}


def collection(url: str) -> str:
    return url.rsplit("/", 1)[0]


@pytest.mark.parametrize("case", CASES.values(), ids=list(CASES))
async def test_a_field_applied_at_one_version_conflicts_at_the_other(hub: Client, case: tuple[Any, ...]) -> None:  # noqa: F811
    first_url, first, first_field, second_url, second, second_field, message = case
    created = await ok(await apply(hub, first_url, first, "first"))
    first_version = created["apiVersion"]

    refused = await apply(hub, second_url, second, "second")
    status = await refused.json()
    assert refused.status == 409, status
    assert (status["reason"], status["message"]) == ("Conflict", message)
    assert [c["reason"] for c in status["details"]["causes"]] == ["FieldManagerConflict"]
    assert status["details"]["causes"][0]["message"] == 'conflict with "first"'

    # Applying the value the field already has is no conflict at any version: the two share it.
    shared = {**second, "spec": {**second["spec"]}}
    current = await ok(await hub.get(second_url))
    shared["spec"][second_field[2:]] = current["spec"][second_field[2:]]
    both = await ok(await apply(hub, second_url, shared, "sharer"))
    assert second_field in entry(both, "sharer")["fieldsV1"]["f:spec"]
    assert first_field in entry(both, "first")["fieldsV1"]["f:spec"]

    forced = await ok(await apply(hub, second_url, second, "second", force=True))
    assert forced["spec"][second_field[2:]] == second["spec"][second_field[2:]]
    taken = entry(forced, "second")
    assert (taken["apiVersion"], taken["operation"]) == (second["apiVersion"], "Apply")
    assert second_field in taken["fieldsV1"]["f:spec"]
    # The first manager keeps its entry in its own version, without the field it lost.
    kept = entry(forced, "first")
    assert kept["apiVersion"] == first_version
    assert first_field not in kept["fieldsV1"]["f:spec"]
    # So it no longer conflicts with what it gave up, and reads back the same at either version.
    assert (await ok(await hub.get(first_url)))["metadata"]["managedFields"] == forced["metadata"]["managedFields"]
    again = await apply(hub, second_url, {**second, "spec": {**second["spec"]}}, "second")
    assert again.status == 200


async def test_an_update_at_one_version_takes_the_field_an_applier_owns_at_the_other(hub: Client) -> None:  # noqa: F811
    await ok(await apply(hub, CQ_V1B1_URL, cluster_queue("v1beta1", cohort="research"), "first"))
    patched = await ok(await hub.patch(
        CQ_V1B2_URL, params={"fieldManager": "editor"}, json={"spec": {"cohortName": "training"}},
        headers={"Content-Type": "application/merge-patch+json"},
    ))
    assert "f:cohort" not in entry(patched, "first")["fieldsV1"].get("f:spec", {})
    editor = entry(patched, "editor")
    assert (editor["apiVersion"], editor["operation"]) == ("kueue.x-k8s.io/v1beta2", "Update")
    assert "f:cohortName" in editor["fieldsV1"]["f:spec"]
    # The applier gave the field up: applying its old value again conflicts with the editor.
    refused = await apply(hub, CQ_V1B1_URL, cluster_queue("v1beta1", cohort="research"), "first")
    assert refused.status == 409
    assert (await refused.json())["message"] == (
        'Apply failed with 1 conflict: conflict with "editor" using kueue.x-k8s.io/v1beta2: .spec.cohortName'
    )


async def test_an_applier_that_leaves_out_at_one_version_what_it_applied_at_the_other_removes_it(hub: Client) -> None:  # noqa: F811
    await ok(await apply(hub, CQ_V1B1_URL, cluster_queue("v1beta1", cohort="research", queueingStrategy="StrictFIFO"), "first"))
    applied = await ok(await apply(hub, CQ_V1B2_URL, cluster_queue("v1beta2", queueingStrategy="StrictFIFO"), "first"))
    assert "cohortName" not in applied["spec"]
    assert "cohort" not in (await ok(await hub.get(CQ_V1B1_URL)))["spec"]
    own = entry(applied, "first")
    assert own["apiVersion"] == "kueue.x-k8s.io/v1beta2"
    assert set(own["fieldsV1"]["f:spec"]) == {"f:namespaceSelector", "f:queueingStrategy"}


async def test_a_field_another_manager_shares_stays_when_the_applier_leaves_it_out(hub: Client) -> None:  # noqa: F811
    await ok(await apply(hub, CQ_V1B1_URL, cluster_queue("v1beta1", cohort="research"), "first"))
    await ok(await apply(hub, CQ_V1B2_URL, cluster_queue("v1beta2", cohortName="research"), "second"))
    applied = await ok(await apply(hub, CQ_V1B2_URL, cluster_queue("v1beta2"), "first"))
    assert applied["spec"]["cohortName"] == "research"


async def test_one_version_applies_never_convert(hub: Client) -> None:  # noqa: F811
    await ok(await apply(hub, HPA_V2_URL, hpa_v2(metrics=[cpu(60)]), "first"))
    refused = await apply(hub, HPA_V2_URL, hpa_v2(metrics=[cpu(50)]), "second")
    assert refused.status == 409
    assert (await refused.json())["message"] == 'Apply failed with 1 conflict: conflict with "first": .spec.metrics'


HPA_V1_YAML = """\
apiVersion: autoscaling/v1
kind: HorizontalPodAutoscaler
metadata: {name: web, namespace: default}
spec:
  scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: web}
  maxReplicas: 5
  targetCPUUtilizationPercentage: 70
"""
HPA_V2_YAML = """\
apiVersion: autoscaling/v2
kind: HorizontalPodAutoscaler
metadata: {name: web, namespace: default}
spec:
  scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: web}
  maxReplicas: 5
  metrics:
  - type: Resource
    resource: {name: cpu, target: {type: Utilization, averageUtilization: 60}}
"""


@needs_kubectl
async def test_kubectl_server_side_applies_at_both_versions(hub_kubeconfig: Path) -> None:  # noqa: F811
    code, out, err = await kubectl(hub_kubeconfig, "apply", "--server-side", "--field-manager=team-v1", "-f", "-", stdin=HPA_V1_YAML)
    assert code == 0, err
    code, out, err = await kubectl(hub_kubeconfig, "apply", "--server-side", "--field-manager=team-v2", "-f", "-", stdin=HPA_V2_YAML)
    assert code != 0
    assert 'conflict with "team-v1": .spec.targetCPUUtilizationPercentage' in err, err
    code, out, err = await kubectl(
        hub_kubeconfig, "apply", "--server-side", "--force-conflicts", "--field-manager=team-v2", "-f", "-", stdin=HPA_V2_YAML
    )
    assert code == 0, err
    code, out, err = await kubectl(
        hub_kubeconfig, "get", "horizontalpodautoscalers.v1.autoscaling", "web", "-o", "json", "--show-managed-fields"
    )
    assert code == 0, err
    served = json.loads(out)
    assert served["spec"]["targetCPUUtilizationPercentage"] == 60
    managers = {e["manager"]: e for e in served["metadata"]["managedFields"]}
    assert managers["team-v2"]["apiVersion"] == "autoscaling/v2"
    assert "f:metrics" in managers["team-v2"]["fieldsV1"]["f:spec"]
    assert managers["team-v1"]["apiVersion"] == "autoscaling/v1"
    assert "f:targetCPUUtilizationPercentage" not in managers["team-v1"]["fieldsV1"]["f:spec"]


def test_only_kinds_served_at_several_versions_have_a_converter() -> None:
    registry = hub_registry()
    versions = KindVersions(registry)
    cq_v1beta1 = registry.require("kueue.x-k8s.io/v1beta1", "ClusterQueue")
    converter = versions.converter(cq_v1beta1)
    assert converter is not None
    converted = converter(cluster_queue("v1beta1", cohort="research"), "kueue.x-k8s.io/v1beta2")
    assert converted is not None and converted[0]["spec"]["cohortName"] == "research"
    assert converter(cluster_queue("v1beta1"), "kueue.x-k8s.io/v9") is None
    for api_version, kind in (("autoscaling/v1", "HorizontalPodAutoscaler"), ("events.k8s.io/v1", "Event")):
        assert versions.converter(registry.require(api_version, kind)) is not None
    assert versions.converter(registry.require("apps/v1", "Deployment")) is None
