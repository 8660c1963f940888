"""A placed binding's explanation follows the clusters: a rejection that stopped being true (the
label an affinity wanted was added) is not quoted any more, while the decision stands."""

from __future__ import annotations

import json
from typing import Any

from controlplane.apis.explanations import LIST_EVERY_CLUSTER_UP_TO, compacted, expanded
from controlplane.apiserver.objects import ObjectStore
from controlplane.controllers.manager import ControllerManager
from controlplane.scheduler.controller.explaining import ELIGIBLE_NOW, refreshed_explanation
from gpufed.commands.explain import render_explanation

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


async def test_a_large_fleet_explanation_is_stored_compact_and_explained_in_full(
    objects: ObjectStore, manager: ControllerManager
) -> None:
    """Past 16 clusters, clusters that were not chosen for the same reasons share one stored entry
    (``alike``); the chosen cluster and every other verdict keep their own, and ``gpufed explain``
    still lists every cluster with its verdict."""
    names = [f"m{index:02d}" for index in range(24)]
    for name in names[:20]:
        await put_cluster(objects, name, node_shape(2, gpus=8))
    for name in names[20:]:  # four clusters a label selector rejects
        await put_cluster(objects, name, node_shape(2, gpus=8), labels={"team": "other"})
    await settled(manager)
    placement = {**TIERED, "clusterAffinity": {"labelSelector": {"matchExpressions": [
        {"key": "team", "operator": "DoesNotExist"}]}}}
    await objects.create(objects.registry.require("policy.gpufed.io/v1alpha1", "PropagationPolicy"),
                         propagation_policy("all", placement=placement))
    await objects.create(objects.registry.require("apps/v1", "Deployment"), deployment("infer", replicas=2))
    binding_rt = objects.registry.require("work.gpufed.io/v1alpha1", "ResourceBinding")

    async def explained() -> dict[str, Any] | None:
        found = (await objects.list(binding_rt, namespace="default")).items
        return found[0] if found and (found[0].get("status") or {}).get("explanation") else None

    binding = await eventually(explained, what="an explained binding")
    stored = binding["status"]["explanation"]
    full = expanded(stored)
    assert [entry["cluster"] for entry in full] == names
    assert len(stored) < 8, stored  # 24 clusters, a handful of distinct verdicts
    chosen = [entry for entry in stored if entry["chosen"]]
    assert chosen and all("alike" not in entry for entry in chosen)
    rejected = [entry for entry in full if entry["cluster"] in names[20:]]
    assert all("labels do not match" in " ".join(entry["reasons"]) for entry in rejected), rejected
    assert compacted(full) == stored
    deployment_obj = (await objects.list(objects.registry.require("apps/v1", "Deployment"), namespace="default")).items[0]
    text = render_explanation(deployment_obj, binding)
    for name in names:
        assert f"\n{name} " in text, name


def test_compacted_explanations_expand_to_what_was_compacted() -> None:
    import random

    rng = random.Random(3)
    reasons = (["feasible but not needed by the division"], ["taint x:NoSchedule"], ["labels do not match"])
    for size in (1, 16, 17, 60, 200):
        full = []
        for index in range(size):
            chosen = rng.random() < 0.1
            entry: dict[str, Any] = {"cluster": f"c{index:03d}", "chosen": chosen, "replicas": 2 if chosen else 0,
                                     "reasons": list(rng.choice(reasons))}
            if rng.random() < 0.5:
                entry["tier"] = rng.choice((0, 1))
            full.append(entry)
        stored = compacted(full)
        assert expanded(stored) == full
        if size <= LIST_EVERY_CLUSTER_UP_TO:
            assert stored == full
        else:  # at most the chosen clusters plus one entry per distinct verdict (3 reasons x 3 tiers)
            assert len(stored) <= sum(entry["chosen"] for entry in full) + 9
            assert len(json.dumps(stored)) < len(json.dumps(full))
