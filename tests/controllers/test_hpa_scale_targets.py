"""The hub's hpa-scale-target-marker: a Deployment a propagated HPA targets is labelled
``resourcetemplate.karmada.io/retain-replicas: "true"`` (so each member keeps the replicas its
HPA sets), and unlabelled when the HPA is retargeted or deleted; an HPA no policy propagates marks
nothing, and a label the user set by hand is left alone. Runs against the real object store."""

from __future__ import annotations

from typing import Any

from controlplane.apiserver.objects import ObjectStore
from controlplane.controllers.manager import ControllerManager

from .conftest import FAST
from .fleet import deployment, eventually, get_object, node_shape, propagation_policy, put_cluster, settled

RETAIN = "resourcetemplate.karmada.io/retain-replicas"
WORK_API = "work.gpufed.io/v1alpha1"
MARKED_BY_HPA = "gpufed.io/retain-replicas-by-hpa"


def hpa(name: str, target: str, *, namespace: str = "default") -> dict[str, Any]:
    return {
        "apiVersion": "autoscaling/v2",
        "kind": "HorizontalPodAutoscaler",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": target},
                 "minReplicas": 1, "maxReplicas": 8},
    }


def rt(objects: ObjectStore, api_version: str, kind: str) -> Any:
    return objects.registry.require(api_version, kind)


get = get_object


async def label_of(objects: ObjectStore, name: str, namespace: str = "default") -> str | None:
    found = await get(objects, "apps/v1", "Deployment", name, namespace)
    assert found is not None
    return (found["metadata"].get("labels") or {}).get(RETAIN)


async def labelled(objects: ObjectStore, name: str) -> bool:
    return await label_of(objects, name) == "true"


async def unlabelled(objects: ObjectStore, name: str) -> bool:
    return await label_of(objects, name) is None


async def test_the_target_of_a_propagated_hpa_keeps_its_members_replicas(objects: ObjectStore) -> None:
    deployments, hpas = rt(objects, "apps/v1", "Deployment"), rt(objects, "autoscaling/v2", "HorizontalPodAutoscaler")
    await put_cluster(objects, "onprem", node_shape(2, gpus=8))
    policy = propagation_policy("web")
    policy["spec"]["resourceSelectors"].append({"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler"})
    await objects.create(rt(objects, "policy.gpufed.io/v1alpha1", "PropagationPolicy"), policy)
    for name in ("web", "api"):
        await objects.create(deployments, deployment(name, replicas=2))
    by_hand = deployment("by-hand", replicas=2, labels={"app": "by-hand", RETAIN: "true"})
    await objects.create(deployments, by_hand)
    # No policy in namespace solo: its HPA stays on the hub and marks nothing.
    await objects.create(rt(objects, "v1", "Namespace"), {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "solo"}})
    await objects.create(deployments, deployment("alone", replicas=2, namespace="solo"))
    await objects.create(hpas, hpa("alone", "alone", namespace="solo"))
    await objects.create(hpas, hpa("web", "web"))  # before any hub runs: marked once one does

    async with ControllerManager(objects, settings=FAST) as manager:
        await eventually(lambda: labelled(objects, "web"), what="web labelled retain-replicas")

        async def work_manifest() -> dict[str, Any]:
            work = await get(objects, WORK_API, "Work", "default-web-deployment", "gpufed-es-onprem")
            manifest: dict[str, Any] = (work or {}).get("spec", {}).get("workload", {}).get("manifests", [{}])[0]
            return manifest

        async def work_carries_label() -> bool:
            return ((await work_manifest()).get("metadata", {}).get("labels") or {}).get(RETAIN) == "true"

        await eventually(work_carries_label, what="web's Work carrying the label")
        # The marker's own annotation stays on the hub: the member's copy carries the label only.
        web = await get(objects, "apps/v1", "Deployment", "web")
        assert web is not None and web["metadata"]["annotations"][MARKED_BY_HPA] == "true"
        assert MARKED_BY_HPA not in ((await work_manifest())["metadata"].get("annotations") or {})

        # Retargeted: the old target is unmarked, the new one marked.
        current = await get(objects, "autoscaling/v2", "HorizontalPodAutoscaler", "web")
        assert current is not None
        current["spec"]["scaleTargetRef"]["name"] = "api"
        await objects.update(hpas, current)
        await eventually(lambda: labelled(objects, "api"), what="api labelled")
        await eventually(lambda: unlabelled(objects, "web"), what="web unlabelled")

        # An HPA aimed at the hand-labelled one, then deleted: the user's label stays.
        await objects.create(hpas, hpa("by-hand", "by-hand"))
        await settled(manager)
        await objects.delete(hpas, namespace="default", name="by-hand")

        # Deleted: its target goes back to the hub's replicas.
        await objects.delete(hpas, namespace="default", name="web")
        await eventually(lambda: unlabelled(objects, "api"), what="api unlabelled after its HPA is deleted")
        await settled(manager)
        assert await label_of(objects, "by-hand") == "true"
        assert await label_of(objects, "alone", "solo") is None
        api = await get(objects, "apps/v1", "Deployment", "api")
        assert api is not None and MARKED_BY_HPA not in (api["metadata"].get("annotations") or {})
