"""A ClusterQueue whose quota is a quantity past int64 (``1e400``: legal, kube reads it) is
counted as int64's largest, as Kueue counts quotas in int64. The admission cycle, which reports
every quota as a float metric, failed on it each time after its decisions: no ClusterQueue's or
LocalQueue's status was written again, in any queue of the hub, and the log filled with retries."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from prometheus_client import CollectorRegistry

from controlplane.admission.metrics import QueueMetrics
from controlplane.apiserver.objects import ObjectStore
from controlplane.controllers.manager import ControllerManager

from .conftest import FAST
from .fleet import eventually, node_shape, propagation_policy, put_cluster, settled
from .test_admission import GPU, KUEUE, PLACEMENT, admitted_probe, create, get, kueue_obj, queued

INT64_MAX = 2**63 - 1


@pytest.fixture
async def metered(objects: ObjectStore, registry: CollectorRegistry) -> AsyncIterator[ControllerManager]:
    async with ControllerManager(objects, settings=FAST, queue_metrics=QueueMetrics(registry)) as running:
        yield running


async def test_a_quota_past_int64_leaves_admission_working(
    objects: ObjectStore, metered: ControllerManager, registry: CollectorRegistry
) -> None:
    await put_cluster(objects, "onprem", node_shape(2, gpus=8), labels={"gpufed.io/pool": "onprem"}, pods=[])
    await create(objects, kueue_obj("ResourceFlavor", "onprem", spec={"nodeLabels": {"gpufed.io/pool": "onprem"}}))
    await create(objects, kueue_obj("ClusterQueue", "boundless", spec={
        "namespaceSelector": {},
        "resourceGroups": [{"coveredResources": ["cpu", GPU], "flavors": [{"name": "onprem", "resources": [
            {"name": "cpu", "nominalQuota": "1e400"}, {"name": GPU, "nominalQuota": "1e400"}]}]}],
        "fairSharing": {"weight": "1e400"},
    }))
    await create(objects, kueue_obj("LocalQueue", "boundless", "default", spec={"clusterQueue": "boundless"}))
    await create(objects, propagation_policy("all", placement=PLACEMENT))
    await settled(metered)

    await create(objects, queued("wide", "boundless"))
    assert await eventually(admitted_probe(objects, "wide"), what="wide admitted under the 1e400 quota") == "boundless"

    async def counted() -> int | None:
        cq = await get(objects, KUEUE, "ClusterQueue", "boundless", None)
        return ((cq or {}).get("status") or {}).get("admittedWorkloads")

    assert await eventually(counted, what="the ClusterQueue's status counting wide") == 1
    labels = {"cohort": "", "cluster_queue": "boundless", "flavor": "onprem"}
    assert registry.get_sample_value("kueue_cluster_queue_nominal_quota", {**labels, "resource": GPU}) == float(INT64_MAX)
    assert registry.get_sample_value("kueue_cluster_queue_nominal_quota", {**labels, "resource": "cpu"}) == INT64_MAX / 1000
