"""Returns to a cheaper cluster respect ``tieredOverflow.priceBandPercent``: clusters of one tier
whose prices share a band tie, as in the division, so no replica moves between them.

The scheduler controller on an in-process hub store, as in test_tier_return_loop.py.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from controlplane.apis.constants import ANNOTATION_REBALANCE
from controlplane.apiserver.objects import ObjectStore
from controlplane.controllers.manager import ControllerManager

from .fleet import A100, TIERED, deployment, eventually, node_shape, propagation_policy, put_cluster, settled
from .test_tier_return_loop import REBALANCE, binding_of, events_of, later, placed, placed_as, report_ready

pytestmark = pytest.mark.waiting


@pytest.mark.parametrize(
    ("band", "moves"),
    [
        (None, True),
        (10, True),  # bands $1.20-1.32 and $1.50-1.65: "cheap" ranks better
        (50, False),  # one band $1.20-1.80: the two clusters tie
    ],
)
async def test_a_return_needs_a_better_price_band(
    objects: ObjectStore, manager: ControllerManager, band: float | None, moves: bool
) -> None:
    # web's 4 replicas run on-prem in "dear" ($1.50) while "cheap" ($1.20, same tier) is full;
    # then "cheap" reports 4 free GPUs.
    await put_cluster(objects, "cheap", node_shape(1, gpus=0), pricing={A100: 1.2}, pods=[])
    await put_cluster(objects, "dear", node_shape(1, gpus=8), pricing={A100: 1.5}, pods=[])
    await settled(manager)
    tiered: dict[str, Any] = {"rebalance": REBALANCE}
    if band is not None:
        tiered["priceBandPercent"] = band
    placement = {"replicaScheduling": {**TIERED["replicaScheduling"], "tieredOverflow": tiered}}
    rt = objects.registry.require("policy.gpufed.io/v1alpha1", "PropagationPolicy")
    await objects.create(rt, propagation_policy("tiered", placement=placement))
    await objects.create(objects.registry.require("apps/v1", "Deployment"), deployment("web", replicas=4))
    assert await eventually(lambda: placed(objects, "web"), what="web placed") == {"dear": 4}
    await report_ready(objects, "dear", "web", 4)
    await settled(manager)
    await put_cluster(objects, "cheap", node_shape(1, gpus=4), pricing={A100: 1.2}, report_time=later(30), pods=[])

    if moves:
        # Added in "cheap" first; the saving is the real price difference: 4 x ($1.50 - $1.20).
        await eventually(placed_as(objects, {"dear": 4, "cheap": 4}), what="4 replicas added in cheap")
        binding = await binding_of(objects, "web")
        assert binding is not None
        record = json.loads(binding["metadata"]["annotations"][ANNOTATION_REBALANCE])
        assert (record["source"], record["target"], record["savingPerHour"]) == ("dear", "cheap", 1.2)
    else:
        await settled(manager)
        assert await placed(objects, "web") == {"dear": 4}
        binding = await binding_of(objects, "web")
        assert binding is not None
        assert ANNOTATION_REBALANCE not in (binding["metadata"].get("annotations") or {})
        assert await events_of(objects, "ReplicasMoved") == []
