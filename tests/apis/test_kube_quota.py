"""What a ResourceQuota counts and refuses, as kube's quota evaluators and its admission's
``CheckRequest`` (pure: objects in, usage and kube's messages out)."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any

import pytest

from controlplane.apis.kube import quota

NOW = datetime(2026, 1, 1, tzinfo=UTC)


def _used(kind: quota.Kind, obj: dict[str, Any]) -> dict[str, str]:
    return quota.written_list(quota.object_usage(kind, obj, now=NOW))


def _pod(*, requests: dict[str, str] | None = None, limits: dict[str, str] | None = None, **spec: Any) -> dict[str, Any]:
    resources = {k: v for k, v in (("requests", requests), ("limits", limits)) if v}
    return {"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "resources": resources}], **spec}}


def _quota(name: str, hard: dict[str, str], used: dict[str, str] | None = None, **spec: Any) -> dict[str, Any]:
    status: dict[str, Any] = {"hard": hard}
    if used is not None:
        status["used"] = used
    return {"metadata": {"name": name, "namespace": "ns"}, "spec": {"hard": hard, **spec}, "status": status}


@pytest.mark.parametrize(("resource", "kind"), [
    ("count/deployments.apps", ("apps", "deployments")),
    ("count/configmaps", ("", "configmaps")),
    ("count/widgets.example.com", ("example.com", "widgets")),
    ("configmaps", ("", "configmaps")),
    ("resourcequotas", ("", "resourcequotas")),
    ("services.nodeports", quota.SERVICES),
    ("requests.storage", quota.CLAIMS),
    ("gold.storageclass.storage.k8s.io/requests.storage", quota.CLAIMS),
    ("requests.nvidia.com/gpu", quota.PODS),
    ("limits.memory", quota.PODS),
    ("cpu", quota.PODS),
    ("requests.hugepages-2Mi", quota.PODS),
    ("nvidia.com/gpu", None),
])
def test_each_resource_name_counts_one_kind(resource: str, kind: quota.Kind | None) -> None:
    assert quota.counted_kind(resource) == kind


@pytest.mark.parametrize(("spec", "expected"), [
    ({"type": "ClusterIP", "ports": [{"port": 80}]},
     {"count/services": "1", "services": "1", "services.loadbalancers": "0", "services.nodeports": "0"}),
    ({"type": "NodePort", "ports": [{"port": 80}, {"port": 443}]},
     {"count/services": "1", "services": "1", "services.loadbalancers": "0", "services.nodeports": "2"}),
    ({"type": "LoadBalancer", "ports": [{"port": 80}]},
     {"count/services": "1", "services": "1", "services.loadbalancers": "1", "services.nodeports": "1"}),
    ({"type": "LoadBalancer", "allocateLoadBalancerNodePorts": False, "ports": [{"port": 80}, {"port": 81, "nodePort": 30001}]},
     {"count/services": "1", "services": "1", "services.loadbalancers": "1", "services.nodeports": "1"}),
])
def test_a_service_uses_its_ports_by_type(spec: dict[str, Any], expected: dict[str, str]) -> None:
    assert _used(quota.SERVICES, {"metadata": {"name": "s"}, "spec": spec}) == expected


def test_a_claim_uses_its_storage_and_its_class() -> None:
    claim = {"metadata": {"name": "c"}, "spec": {"storageClassName": "gold", "resources": {"requests": {"storage": "10Gi"}}}}
    assert _used(quota.CLAIMS, claim) == {
        "count/persistentvolumeclaims": "1", "persistentvolumeclaims": "1", "requests.storage": "10Gi",
        "gold.storageclass.storage.k8s.io/persistentvolumeclaims": "1",
        "gold.storageclass.storage.k8s.io/requests.storage": "10Gi",
    }


def test_a_pod_uses_requests_limits_and_gpus_until_it_ends() -> None:
    pod = _pod(requests={"cpu": "500m", "memory": "1Gi"}, limits={"cpu": "1", "memory": "1Gi", "nvidia.com/gpu": "2"})
    assert _used(quota.PODS, pod) == {
        "count/pods": "1", "pods": "1", "cpu": "500m", "requests.cpu": "500m", "limits.cpu": "1",
        "memory": "1Gi", "requests.memory": "1Gi", "limits.memory": "1Gi", "requests.nvidia.com/gpu": "2",
    }
    pod["status"] = {"phase": "Succeeded"}
    assert _used(quota.PODS, pod) == {"count/pods": "1"}  # object counts count every pod


@pytest.mark.parametrize(("scopes", "pod", "matches"), [
    (["BestEffort"], _pod(), True),
    (["BestEffort"], _pod(requests={"cpu": "1"}), False),
    (["NotBestEffort"], _pod(limits={"memory": "1Gi"}), True),
    (["Terminating"], _pod(activeDeadlineSeconds=60), True),
    (["NotTerminating"], _pod(activeDeadlineSeconds=60), False),
    ([{"scopeName": "PriorityClass", "operator": "In", "values": ["high"]}], _pod(priorityClassName="high"), True),
    ([{"scopeName": "PriorityClass", "operator": "NotIn", "values": ["high"]}], _pod(priorityClassName="high"), False),
    ([{"scopeName": "PriorityClass", "operator": "Exists"}], _pod(), False),
])
def test_scopes_select_pods(scopes: list[Any], pod: dict[str, Any], matches: bool) -> None:
    names = [s for s in scopes if isinstance(s, str)]
    selector = [s for s in scopes if isinstance(s, dict)]
    q = _quota("q", {"pods": "1"}, scopes=names, scopeSelector={"matchExpressions": selector})
    requirements = quota.scope_requirements(q)
    assert quota.matches_scopes(quota.PODS, requirements, pod) is matches
    # A scoped quota matches no other kind.
    assert not quota.matches_scopes(("", "configmaps"), requirements, {"metadata": {"name": "c"}})


def test_usage_stats_sums_matching_objects_and_zero_when_none() -> None:
    pods = [_pod(requests={"nvidia.com/gpu": "1"}), _pod(requests={"nvidia.com/gpu": "2"}), _pod()]
    pods[2]["status"] = {"phase": "Failed"}
    stats = quota.usage_stats(
        quota.PODS, pods, resources=["pods", "count/pods", "requests.nvidia.com/gpu", "count/secrets"],
        requirements=[], now=NOW,
    )
    assert quota.written_list(stats) == {"count/pods": "3", "pods": "2", "requests.nvidia.com/gpu": "3"}
    assert quota.written_list(quota.usage_stats(quota.PODS, [], resources=["pods"], requirements=[], now=NOW)) == {"pods": "0"}


def _check(quotas: list[dict[str, Any]], kind: quota.Kind, obj: dict[str, Any], *, old: dict[str, Any] | None = None) -> dict[int, dict[str, str]]:
    charged = quota.check_request(quotas, kind, operation="UPDATE" if old else "CREATE", obj=obj, old=old, now=NOW)
    return {index: quota.written_list(used) for index, used in charged.items()}


def test_a_create_is_charged_to_each_quota_it_matches() -> None:
    quotas = [
        _quota("a", {"count/configmaps": "3"}, {"count/configmaps": "1"}),
        _quota("b", {"configmaps": "5", "secrets": "1"}, {"configmaps": "0", "secrets": "1"}),
        _quota("c", {"pods": "1"}, {"pods": "0"}),
    ]
    assert _check(quotas, ("", "configmaps"), {"metadata": {"name": "x"}}) == {
        0: {"count/configmaps": "2"}, 1: {"configmaps": "1", "secrets": "1"},
    }


def test_the_last_slot_taken_is_kubes_exceeded_quota() -> None:
    quotas = [_quota("q", {"count/deployments.apps": "2"}, {"count/deployments.apps": "2"})]
    with pytest.raises(quota.QuotaRefused) as refused:
        _check(quotas, ("apps", "deployments"), {"metadata": {"name": "d"}})
    assert refused.value.message == (
        "exceeded quota: q, requested: count/deployments.apps=1, used: count/deployments.apps=2, "
        "limited: count/deployments.apps=2"
    )


def test_a_quota_not_counted_yet_is_status_unknown() -> None:
    quotas = [_quota("q", {"count/configmaps": "2", "configmaps": "2"}, {"count/configmaps": "0"})]
    with pytest.raises(quota.QuotaRefused) as refused:
        _check(quotas, ("", "configmaps"), {"metadata": {"name": "c"}})
    assert refused.value.message == "status unknown for quota: q, resources: configmaps,count/configmaps"
    # One the controller has not seen at all (no status.hard) limits nothing yet, as in kube.
    fresh = {"metadata": {"name": "q"}, "spec": {"hard": {"count/configmaps": "0"}}}
    assert _check([fresh], ("", "configmaps"), {"metadata": {"name": "c"}}) == {}


def test_a_service_type_change_is_charged_on_update() -> None:
    quotas = [_quota("q", {"services.loadbalancers": "1"}, {"services.loadbalancers": "1"})]
    old = {"metadata": {"name": "s"}, "spec": {"type": "ClusterIP", "ports": [{"port": 80}]}}
    new = {"metadata": {"name": "s"}, "spec": {"type": "LoadBalancer", "ports": [{"port": 80}]}}
    with pytest.raises(quota.QuotaRefused, match=re.escape("requested: services.loadbalancers=1, used: services.loadbalancers=1")):
        _check(quotas, quota.SERVICES, new, old=old)
    # A change that adds nothing charges nothing; a ConfigMap's update is never charged.
    assert _check(quotas, quota.SERVICES, new, old=new) == {}
    assert quota.check_request(
        [_quota("c", {"configmaps": "0"}, {"configmaps": "0"})], ("", "configmaps"),
        operation="UPDATE", obj={"metadata": {"name": "c"}}, old={"metadata": {"name": "c"}}, now=NOW,
    ) == {}


def test_a_quota_on_cpu_needs_every_container_to_ask_for_it() -> None:
    quotas = [_quota("q", {"requests.cpu": "4", "pods": "10"}, {"requests.cpu": "0", "pods": "0"})]
    with pytest.raises(quota.QuotaRefused) as refused:
        _check(quotas, quota.PODS, _pod(requests={"memory": "1Gi"}))
    assert refused.value.message == "failed quota: q: must specify requests.cpu for: c"
    assert _check(quotas, quota.PODS, _pod(limits={"cpu": "2"})) == {0: {"pods": "1", "requests.cpu": "2"}}
