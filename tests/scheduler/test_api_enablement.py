"""The APIEnablement filter: a cluster whose ``status.apiEnablements`` does not list the workload's
kind takes none of it, in Karmada's words; one already scheduled keeps its place whatever its
list says (Karmada's ``TargetContains``); one that lists no APIs (an older agent, a fresh Cluster) is not judged by it."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from controlplane.apis.work_v1alpha1 import ResourceBinding
from controlplane.interpreter.requirements import ReplicaRequirements
from controlplane.scheduler.core.deciding import schedule
from controlplane.scheduler.core.framework import BindingRequest
from policies.models import Placement

from .builders import cluster, shape

NOW = datetime(2024, 5, 1, 10, 0, tzinfo=UTC)
RAY = "ray.io/v1"
CORE = {"groupVersion": "v1", "resources": [{"name": "pods", "kind": "Pod"}]}
WITH_RAY = [CORE, {"groupVersion": RAY, "resources": [{"name": "rayjobs", "kind": "RayJob"}]}]
WITHOUT_RAY = [CORE]
DUPLICATED = Placement.model_validate({"replicaScheduling": {"replicaSchedulingType": "Duplicated"}})
REFUSAL = "APIEnablement: cluster(s) did not have the API resource"

#: name: (the cluster's apiEnablements, its list complete, the binding already there, placed there)
CASES: dict[str, tuple[list[dict[str, Any]] | None, bool, bool, bool]] = {
    "served": (WITH_RAY, True, False, True),
    "not-served": (WITHOUT_RAY, True, False, False),
    "not-served-already-scheduled-complete-list": (WITHOUT_RAY, True, True, True),
    "not-served-already-scheduled-incomplete-list": (WITHOUT_RAY, False, True, True),
    "not-served-incomplete-list-not-scheduled": (WITHOUT_RAY, False, False, False),
    "no-list": (None, False, False, True),
    "no-list-already-scheduled": (None, False, True, True),
}


def request(
    *, previous: dict[str, int] | None = None, api_version: str = RAY, kind: str = "RayJob"
) -> BindingRequest:
    return BindingRequest(
        key="ml/train",
        replicas=1,
        requirements=ReplicaRequirements.build({"nvidia.com/gpu": 1}),
        placement=DUPLICATED,
        previous=previous or {},
        api_version=api_version,
        kind=kind,
    )


@pytest.mark.parametrize("name", sorted(CASES))
def test_a_cluster_is_judged_by_the_apis_it_lists(name: str) -> None:
    apis, complete, scheduled, placed = CASES[name]
    member = cluster("member", shape(1, gpus=8), apis=apis, apis_complete=complete)
    result = schedule(request(previous={"member": 1} if scheduled else None), [member], now=NOW)
    assert ("member" in result.clusters) is placed
    if not placed:
        [entry] = result.explanation
        assert entry.reasons == (REFUSAL,)
        assert "0/1 clusters are available: 1 rejected by APIEnablement." in result.condition.message


def test_a_crd_kind_goes_only_to_the_member_that_serves_it() -> None:
    fleet = [
        cluster("has-kuberay", shape(1, gpus=8), apis=WITH_RAY),
        cluster("no-kuberay", shape(4, gpus=8), apis=WITHOUT_RAY),  # more room: preferred otherwise
    ]
    aggregated = Placement.model_validate(
        {"replicaScheduling": {"replicaSchedulingType": "Divided", "replicaDivisionPreference": "Aggregated"}}
    )
    binding = ResourceBinding.model_validate(
        {
            "metadata": {"name": "train-rayjob", "namespace": "ml"},
            "spec": {
                "resource": {"apiVersion": RAY, "kind": "RayJob", "name": "train", "namespace": "ml"},
                "replicas": 2,
                "replicaRequirements": {"resourceRequest": {"nvidia.com/gpu": "1"}},
                "placement": aggregated.model_dump(mode="json", by_alias=True, exclude_none=True),
            },
        }
    )
    built = BindingRequest.from_binding(binding)
    assert (built.api_version, built.kind) == (RAY, "RayJob")
    assert schedule(built, fleet, now=NOW).clusters == {"has-kuberay": 2}
    # A Deployment (served by both) may go to either: the filter judges the workload's own kind.
    deployment = request(api_version="v1", kind="Pod")
    assert set(schedule(deployment, fleet, now=NOW).clusters) == {"has-kuberay", "no-kuberay"}
