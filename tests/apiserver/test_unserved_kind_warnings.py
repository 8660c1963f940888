"""A policy selecting a kind the hub cannot propagate is accepted with a warning per selector:
a kind the hub does not serve, a cluster-scoped kind, one of the hub's own kinds. Served
namespaced kinds (built-in, LeaderWorkerSet, JobSet) draw none. Through the hub's real registry
(``hub_registry()``) and HTTP app."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer

from controlplane.apiserver.app import create_app
from controlplane.apiserver.objects import ObjectStore
from controlplane.hub import hub_registry
from controlplane.storage import MemoryStore
from policies.matching import ImplicitPriority, selector_match
from policies.models import ResourceSelector
from policies.served import KindStatus, selectors_served_condition, unpropagatable_selector_warnings

POLICIES = "/apis/policy.karmada.io/v1alpha1/clusterpropagationpolicies"


def policy(*selectors: tuple[str, str]) -> dict[str, Any]:
    return {
        "apiVersion": "policy.karmada.io/v1alpha1",
        "kind": "ClusterPropagationPolicy",
        "metadata": {"name": "everywhere"},
        "spec": {"resourceSelectors": [{"apiVersion": a, "kind": k} for a, k in selectors]},
    }


@pytest.fixture
async def hub() -> AsyncIterator[TestClient[Any, Any]]:
    async with MemoryStore() as memory:
        objects = ObjectStore(memory, hub_registry())
        await objects.bootstrap()
        async with TestClient(TestServer(create_app(objects, objects.registry))) as client:
            yield client


def warnings_of(headers: list[str]) -> list[str]:
    return [h.removeprefix('299 - "').removesuffix('"') for h in headers]


async def test_selectors_the_hub_cannot_propagate_warn_and_the_policy_is_accepted(hub: TestClient[Any, Any]) -> None:
    created = await hub.post(
        POLICIES,
        json=policy(
            ("apps/v1", "DaemonSet"),
            ("example.com/v1", "Widget"),
            ("v1", "PersistentVolume"),
            ("v1", "Event"),
            ("leaderworkerset.x-k8s.io/v1", "LeaderWorkerSet"),
        ),
    )
    assert created.status == 201, await created.text()
    warnings = warnings_of(created.headers.getall("Warning", []))
    assert len(warnings) == 3, warnings
    assert warnings[0].startswith("spec.resourceSelectors[1]: the hub does not serve kind Widget in example.com/v1")
    # It says which cluster-scoped kinds do propagate.
    assert warnings[1] == (
        "spec.resourceSelectors[2]: PersistentVolume (v1) is cluster-scoped and gpufed propagates "
        "namespaced kinds and, of the cluster-scoped ones, only ClusterRoleBindings, ClusterRoles, "
        "ClusterTrainingRuntimes, CustomResourceDefinitions, DeviceClasses, IngressClasses, PriorityClasses, RuntimeClasses and StorageClasses, so "
        "this selector matches nothing"
    )
    assert warnings[2].startswith("spec.resourceSelectors[3]: Event (v1) is part of the hub's own machinery")


@pytest.mark.parametrize(
    ("api_version", "kind"),
    [
        ("apps/v1", "DaemonSet"),
        ("batch/v1", "CronJob"),
        ("v1", "Service"),
        ("v1", "Pod"),
        ("networking.k8s.io/v1", "Ingress"),
        ("policy/v1", "PodDisruptionBudget"),
        ("autoscaling/v2", "HorizontalPodAutoscaler"),
        ("jobset.x-k8s.io/v1alpha2", "JobSet"),
        ("discovery.k8s.io/v1", "EndpointSlice"),
        # The cluster-scoped kinds that propagate.
        ("apiextensions.k8s.io/v1", "CustomResourceDefinition"),
        ("node.k8s.io/v1", "RuntimeClass"),
        ("resource.k8s.io/v1", "DeviceClass"),
        ("resource.k8s.io/v1", "ResourceClaimTemplate"),
        ("scheduling.k8s.io/v1", "PriorityClass"),
        ("storage.k8s.io/v1", "StorageClass"),
        ("networking.k8s.io/v1", "IngressClass"),
        ("rbac.authorization.k8s.io/v1", "ClusterRole"),
        ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding"),
        ("trainer.kubeflow.org/v1alpha1", "ClusterTrainingRuntime"),
    ],
)
async def test_served_namespaced_kinds_draw_no_warning(hub: TestClient[Any, Any], api_version: str, kind: str) -> None:
    created = await hub.post(POLICIES, json=policy((api_version, kind)))
    assert created.status == 201, await created.text()
    assert created.headers.getall("Warning", []) == []


async def test_nodes_are_served_but_stay_in_the_members(hub: TestClient[Any, Any]) -> None:
    # The hub serves Nodes (as kube-apiserver does, for RBAC rules and kubectl); a policy that
    # selects them is told that they do not propagate, not that the hub lacks them.
    created = await hub.post(POLICIES, json=policy(("v1", "Node")))
    assert created.status == 201, await created.text()
    (warning,) = warnings_of(created.headers.getall("Warning", []))
    assert warning.startswith("spec.resourceSelectors[0]: Node (v1) is cluster-scoped"), warning


async def test_an_empty_kind_or_api_version_is_accepted_with_a_warning(hub: TestClient[Any, Any]) -> None:
    """Karmada's CRD takes an empty apiVersion or kind (such a selector matches nothing there):
    the hub stores the policy and says so, on the write and in its condition."""
    created = await hub.post(POLICIES, json=policy(("apps/v1", ""), ("", "Deployment"), ("apps/v1", "Deployment")))
    assert created.status == 201, await created.text()
    assert warnings_of(created.headers.getall("Warning", [])) == [
        f"spec.resourceSelectors[{i}]: an empty apiVersion or kind names no kind, so this selector matches nothing"
        for i in (0, 1)
    ]
    condition = selectors_served_condition(await created.json(), lambda a, k: KindStatus.PROPAGATABLE)
    assert (condition["status"], condition["reason"]) == ("False", "UnservedKind")
    assert condition["message"] == (
        "these selectors match nothing: spec.resourceSelectors[0] names no kind (an empty apiVersion or kind); "
        "spec.resourceSelectors[1] names no kind (an empty apiVersion or kind)"
    )  # no advice to apply a CRD, which cannot help an empty selector
    empty = ResourceSelector.model_validate({"apiVersion": "apps/v1", "kind": ""})
    deployment = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "namespace": "default"}}
    assert selector_match(deployment, empty) is ImplicitPriority.MISMATCH


def test_a_malformed_selector_list_is_left_to_validation() -> None:
    assert unpropagatable_selector_warnings({"spec": {"resourceSelectors": "x"}}, lambda a, k: KindStatus.UNSERVED) == []
    assert unpropagatable_selector_warnings(
        {"spec": {"resourceSelectors": [{"kind": "Widget"}, "x"]}}, lambda a, k: KindStatus.UNSERVED
    ) == []
