"""What the hub serves: every kind of DESIGN.md's objects table, kube's built-in kinds, and the
kinds of the CustomResourceDefinitions applied to it (a :class:`DynamicRegistry`).

In: nothing. Out: :func:`hub_registry`, the policy kinds warning about selectors the registry
cannot propagate (:func:`with_selector_warnings`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

from controlplane.apis.constants import KARMADA_POLICY_GROUP, POLICY_GROUP
from controlplane.apiserver.auth.rbac.kinds import rbac_resources
from controlplane.apiserver.crd.registry import DynamicRegistry
from controlplane.apiserver.crd.types import crd_resource_type
from controlplane.apiserver.kinds import aggregator_resources, builtin_kind_resources, gpu_workload_resources
from controlplane.apiserver.kinds.coordination import coordination_resources
from controlplane.apiserver.kinds.core import core_resources
from controlplane.apiserver.kinds.gpufed import gpufed_resources
from controlplane.apiserver.kinds.karmada_apps import karmada_apps_resources
from controlplane.apiserver.kinds.karmada_autoscaling import karmada_autoscaling_resources
from controlplane.apiserver.kinds.karmada_config import interpreter_customization_resources
from controlplane.apiserver.kinds.kueue import kueue_resources
from controlplane.apiserver.kinds.multicluster import multicluster_service_resources
from controlplane.apiserver.kinds.workloads import workload_resources
from controlplane.apiserver.resources import Registry, ResourceType, Warner
from controlplane.controllers.workloads import kind_status
from controlplane.reports.api import waste_report_type
from policies.served import KindStatus, unpropagatable_selector_warnings


def hub_registry(*, allow_no_execute_taint_policy: bool = False) -> DynamicRegistry:
    """Everything the hub serves: DESIGN.md's objects table, plus the kinds of the
    CustomResourceDefinitions applied to it. Nodes are served as kube-apiserver and Karmada's
    control plane serve them (an empty collection unless someone creates Nodes), so RBAC rules
    and ``kubectl get nodes`` name them; the fleet's nodes live in the members.
    ``allow_no_execute_taint_policy``: ClusterTaintPolicies may carry ``NoExecute`` taints
    (karmada-webhook's ``--allow-no-execute-taint-policy``)."""
    registry = DynamicRegistry(
        with_selector_warnings(
            [
                *core_resources(),
                *workload_resources(),
                *builtin_kind_resources(),
                *aggregator_resources(),
                *gpu_workload_resources(),
                *coordination_resources(),
                *gpufed_resources(allow_no_execute_taint_policy=allow_no_execute_taint_policy),
                *interpreter_customization_resources(),
                *karmada_apps_resources(),
                *karmada_autoscaling_resources(),
                *multicluster_service_resources(),
                *kueue_resources(),
                *rbac_resources(),
                waste_report_type(),
                crd_resource_type(),
            ],
            lambda: registry,  # the registry as it is at the time of a write
        )
    )
    return registry


def with_selector_warnings(types: list[ResourceType], registry: Callable[[], Registry]) -> list[ResourceType]:
    """``types`` with the policy kinds also warning about ``resourceSelectors`` that name a kind
    the served registry cannot propagate (:mod:`policies.served`); ``registry`` gives the registry
    as it is at the time of the write, so a kind a CRD added since counts as served."""

    def lookup(api_version: str, kind: str) -> KindStatus:
        return kind_status(registry(), api_version, kind)

    def warner(previous: Warner | None) -> Warner:
        def warn(obj: dict[str, Any]) -> list[str]:
            return [*(previous(obj) if previous else []), *unpropagatable_selector_warnings(obj, lookup)]

        return warn

    policy_groups = (POLICY_GROUP, KARMADA_POLICY_GROUP)
    return [replace(rt, warn=warner(rt.warn)) if rt.group in policy_groups else rt for rt in types]
