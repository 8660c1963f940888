"""A Duplicated workload goes to every feasible cluster with all its replicas, as a kind without
replicas does: the controller schedules it again when a cluster it does not run in joins or changes
(reading.goes_everywhere_but), and the decision adds that cluster and keeps the others."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from controlplane.interpreter.requirements import ReplicaRequirements
from controlplane.scheduler.controller.reading import goes_everywhere_but
from controlplane.scheduler.core.deciding import schedule
from controlplane.scheduler.core.framework import BindingRequest
from policies.models import Placement

from .builders import cluster, shape

NOW = datetime(2024, 5, 1, 10, 0, tzinfo=UTC)
DUPLICATED = {"replicaScheduling": {"replicaSchedulingType": "Duplicated"}}
DIVIDED = {"replicaScheduling": {"replicaSchedulingType": "Divided", "replicaDivisionPreference": "Aggregated"}}
REQUIREMENTS = {"resourceRequest": {"nvidia.com/gpu": "1"}}


def _binding(placement: dict[str, Any] | None, *, replicas: int = 2, **spec: Any) -> dict[str, Any]:
    more: dict[str, Any] = {"placement": placement} if placement is not None else {}
    return {
        "metadata": {"name": "serve-deployment", "namespace": "ns"},
        "spec": {
            "replicas": replicas,
            "replicaRequirements": REQUIREMENTS,
            "clusters": [{"name": "onprem", "replicas": replicas}],
            **more,
            **spec,
        },
    }


@pytest.mark.parametrize(
    ("binding", "expected"),
    [
        (_binding(DUPLICATED), True),
        (_binding({"clusterAffinity": {"clusterNames": ["onprem", "late"]}}), True),  # Karmada's default
        (_binding(None), True),
        (_binding(DIVIDED), False),  # Divided replicas are not sent to every cluster
        (_binding(DUPLICATED, requiredBy=[{"name": "x", "namespace": "ns"}]), False),  # propagateDeps' placement
        (_binding(DUPLICATED, clusters=None), True),  # its first decision may be on its way
        (_binding(DIVIDED, clusters=None), False),
    ],
    ids=["duplicated", "no-replica-scheduling", "no-placement", "divided", "required-by", "undecided", "undecided-divided"],
)
def test_a_duplicated_workload_is_requeued_for_a_cluster_it_is_not_in(binding: dict[str, Any], expected: bool) -> None:
    assert goes_everywhere_but(binding, "late") is expected
    placed = binding["spec"]["clusters"] is not None
    assert goes_everywhere_but(binding, "onprem") is (expected and not placed)  # False: it runs there already


def test_a_cluster_that_joins_gets_all_the_replicas_and_the_others_keep_theirs() -> None:
    request = BindingRequest(
        key="ns/serve-deployment",
        replicas=2,
        requirements=ReplicaRequirements.build({"nvidia.com/gpu": 1}),
        placement=Placement.model_validate(DUPLICATED),
        previous={"onprem": 2},
    )
    fleet = [cluster("onprem", shape(2, gpus=8)), cluster("late", shape(1, gpus=8))]
    result = schedule(request, fleet, now=NOW)
    assert result.clusters == {"late": 2, "onprem": 2}
    assert result.condition.status
