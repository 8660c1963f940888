"""Karmada's ``apps.karmada.io/v1alpha1`` WorkloadRebalancer, served by the hub.

Cluster-scoped, with a status subresource, validated by its model
(:mod:`controlplane.apis.apps_karmada_v1alpha1`); the controller is
:mod:`controlplane.controllers.rebalancers`.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from controlplane.apis.apps_karmada_v1alpha1 import API_GROUP, KIND, WorkloadRebalancer
from controlplane.apiserver.resources import AGE, ResourceType, TableColumn


def _results(obj: dict[str, Any], _now: datetime) -> str:
    observed = (obj.get("status") or {}).get("observedWorkloads") or []
    ok = sum(1 for w in observed if isinstance(w, dict) and w.get("result") == "Successful")
    return f"{ok}/{len(((obj.get('spec') or {}).get('workloads')) or [])}"


WORKLOAD_REBALANCER = ResourceType(
    API_GROUP, "v1alpha1", KIND, "workloadrebalancers", "workloadrebalancer",
    namespaced=False, has_status=True, model=WorkloadRebalancer,
    columns=(TableColumn("Successful", _results), AGE),
)


def karmada_apps_resources() -> list[ResourceType]:
    """The kinds of ``apps.karmada.io`` the hub serves."""
    return [WORKLOAD_REBALANCER]
