"""A placed binding's explanation follows the clusters: a rejection that stopped being true (the
label an affinity wanted was added) is not quoted any more, while the decision stands."""

from __future__ import annotations

from typing import Any

from controlplane.apiserver.objects import ObjectStore
from controlplane.controllers.manager import ControllerManager
from controlplane.scheduler.controller.explaining import ELIGIBLE_NOW, refreshed_explanation

from .fleet import A100, TIERED, deployment, eventually, node_shape, propagation_policy, put_cluster, settled

TEAM = {"team": "ml"}


def entries(binding: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {e["cluster"]: e for e in (binding.get("status") or {}).get("explanation") or ()}


async def test_explanation_drops_a_label_rejection_once_the_label_is_added(
    objects: ObjectStore, manager: ControllerManager
) -> None:
    await put_cluster(objects, "onprem", node_shape(2, gpus=4), labels=TEAM)
    await put_cluster(objects, "cloud", node_shape(2, gpus=8), provider="aws", pricing={A100: 4.1})
    await settled(manager)
    placement = {**TIERED, "clusterAffinity": {"labelSelector": {"matchLabels": TEAM}}}
    await objects.create(objects.registry.require("policy.gpufed.io/v1alpha1", "PropagationPolicy"),
                         propagation_policy("ml-only", placement=placement))
    await objects.create(objects.registry.require("apps/v1", "Deployment"), deployment("infer", replicas=4))
    binding_rt = objects.registry.require("work.gpufed.io/v1alpha1", "ResourceBinding")

    async def binding_where(check: Any) -> dict[str, Any] | None:
        found = (await objects.list(binding_rt, namespace="default")).items
        return found[0] if found and check(found[0]) else None

    before = await eventually(lambda: binding_where(lambda b: "cloud" in entries(b)), what="an explained binding")
    rejected = " ".join(entries(before)["cloud"]["reasons"])
    assert "labels do not match" in rejected, rejected
    clusters = before["spec"]["clusters"]

    await put_cluster(objects, "cloud", node_shape(2, gpus=8), provider="aws", pricing={A100: 4.1}, labels=TEAM)

    def current(binding: dict[str, Any]) -> bool:
        return "labels do not match" not in " ".join(entries(binding)["cloud"].get("reasons") or ())

    after = await eventually(lambda: binding_where(current), what="the explanation to stop quoting the label")
    assert after["spec"]["clusters"] == clusters  # the decision stands
    assert entries(after)["onprem"] == entries(before)["onprem"]
    assert entries(after)["cloud"]["chosen"] is False


def test_refreshed_explanation_keeps_the_decision_and_judges_the_rest_anew() -> None:
    stored = [
        {"cluster": "a", "chosen": True, "replicas": 4, "reasons": ["holds 8 replica(s)"]},
        {"cluster": "b", "chosen": False, "replicas": 0, "reasons": ["cluster affinity: no label team"]},
        {"cluster": "c", "chosen": False, "replicas": 0, "reasons": ["taint x:NoSchedule"]},
    ]
    fresh = [
        {"cluster": "a", "chosen": True, "replicas": 2, "reasons": ["holds 6 replica(s)"]},
        {"cluster": "b", "chosen": True, "replicas": 2, "reasons": ["holds 2 replica(s)"]},
        {"cluster": "c", "chosen": False, "replicas": 0, "reasons": ["not needed"]},
    ]
    assert refreshed_explanation(stored, fresh, placed={"a": 4}) == [
        stored[0],
        {"cluster": "b", "chosen": False, "replicas": 0, "reasons": [ELIGIBLE_NOW]},
        fresh[2],
    ]
