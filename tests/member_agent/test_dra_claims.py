"""The agent caches the member's DRA claims, claim templates and DeviceClasses (trimmed to what the
count of a pod's GPUs reads) once the member serves resource.k8s.io/v1, and asks nothing of a member
that does not; a claim not yet allocated counts by its class's selectors, the member's own class of
the name first."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from member_agent import draclaims
from member_agent.apierrors import NotFound
from member_agent.capacity import pod_requests
from member_agent.draclaims import DraClaims
from member_agent.kubeapi import Request
from tests.member_agent.test_informer_turns import IdleWatchServer

DISCOVERY = "/apis/resource.k8s.io/v1"
CLAIM = {
    "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
    "metadata": {"name": "p-gpu-ab12c", "namespace": "ml", "resourceVersion": "5", "uid": "u1",
                 "managedFields": [{"manager": "kube-controller-manager"}]},
    "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com", "count": 2}}]}},
    "status": {"allocation": {
        "devices": {"results": [{"request": "gpu", "driver": "gpu.nvidia.com", "pool": "n1", "device": "gpu-0"},
                                {"request": "gpu", "driver": "gpu.nvidia.com", "pool": "n1", "device": "gpu-1"}]},
        "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In",
                                                                 "values": ["n1"]}]}]},
    }, "reservedFor": [{"resource": "pods", "name": "p", "uid": "u2"}]},
}
TEMPLATE = {
    "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
    "metadata": {"name": "two", "namespace": "ml", "resourceVersion": "4"},
    "spec": {"metadata": {"labels": {"team": "a"}},
             "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com"}}]}}},
}

#: A class of the member's own (not NVIDIA's published two) that selects NVIDIA's whole GPUs of one model.
H100 = {
    "apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass",
    "metadata": {"name": "h100.example.com", "resourceVersion": "3", "uid": "u3"},
    "spec": {"selectors": [{"cel": {"expression": "device.driver == 'gpu.nvidia.com' && "
                                                  "device.attributes['gpu.nvidia.com'].type == 'gpu' && "
                                                  "device.attributes['gpu.nvidia.com'].productName == 'NVIDIA H100 80GB HBM3'"}}],
             "config": [{"opaque": {"driver": "gpu.nvidia.com", "parameters": {"sharing": {}}}}]},
}
ITEMS = {"resourceclaims": CLAIM, "resourceclaimtemplates": TEMPLATE, "deviceclasses": H100}


class Member(IdleWatchServer):
    """A member that serves resource.k8s.io/v1 once ``serving`` is set, with one claim and one template."""

    def __init__(self, *, serving: bool) -> None:
        super().__init__()
        self.serving = serving
        self.asked = asyncio.Event()
        #: (path, whether the member served DRA then) of every list request.
        self.lists: list[tuple[str, bool]] = []

    async def _exchange(self, request: Request) -> dict[str, Any]:
        if request.path == DISCOVERY:
            self.asked.set()
            if not self.serving:
                raise NotFound(404, "NotFound", "the server could not find the requested resource")
            return {"kind": "APIResourceList", "groupVersion": "resource.k8s.io/v1", "resources": [
                {"name": "resourceclaims", "kind": "ResourceClaim", "namespaced": True},
                {"name": "resourceclaimtemplates", "kind": "ResourceClaimTemplate", "namespaced": True},
                {"name": "deviceclasses", "kind": "DeviceClass", "namespaced": False},
            ]}
        self.lists.append((request.path, self.serving))
        return {"items": [ITEMS[request.path.rsplit("/", 1)[-1]]], "metadata": {"resourceVersion": "9"}}


async def _synced(claims: DraClaims) -> None:
    async with asyncio.timeout(10):
        for informer in claims.informers.values():
            await informer.synced.wait()


async def _listed(claims: DraClaims) -> DraClaims:
    """``claims`` once it has listed all it caches (then stopped)."""
    running = asyncio.create_task(claims.run())
    try:
        await _synced(claims)
    finally:
        running.cancel()
        await asyncio.gather(running, return_exceptions=True)
    return claims


async def test_the_claims_and_templates_are_cached_trimmed_and_a_change_is_reported() -> None:
    changed: list[str] = []
    claims = await _listed(DraClaims(Member(serving=True), on_change=changed.append))
    lookup = claims.snapshot()
    claim = lookup("ResourceClaim", "ml", "p-gpu-ab12c")
    assert claim == {
        "metadata": {"name": "p-gpu-ab12c", "namespace": "ml", "resourceVersion": "5"},
        "spec": CLAIM["spec"],
        "status": {"allocation": {"devices": CLAIM["status"]["allocation"]["devices"]}},  # type: ignore[index]
    }
    assert lookup("ResourceClaimTemplate", "ml", "two") == {
        "metadata": {"name": "two", "namespace": "ml", "resourceVersion": "4"}, "spec": {"spec": TEMPLATE["spec"]["spec"]},  # type: ignore[index]
    }
    assert lookup("ResourceClaim", "other", "p-gpu-ab12c") is None
    assert lookup("DeviceClass", "", "h100.example.com") == {
        "metadata": {"name": "h100.example.com", "namespace": None, "resourceVersion": "3"},
        "spec": {"selectors": H100["spec"]["selectors"]},  # type: ignore[index]
    }
    assert sorted(changed) == ["h100.example.com", "ml/p-gpu-ab12c", "ml/two"]


async def test_a_member_without_dra_is_not_listed_until_it_serves_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(draclaims, "RETRY_SECONDS", 0.0)
    member = Member(serving=False)
    claims = DraClaims(member)
    running = asyncio.create_task(claims.run())
    try:
        async with asyncio.timeout(10):
            await member.asked.wait()
        member.serving = True
        member.discovery.recheck()  # what the agent learns when the member changes
        await _synced(claims)
    finally:
        running.cancel()
        await asyncio.gather(running, return_exceptions=True)
    assert sorted(member.lists) == [
        ("/apis/resource.k8s.io/v1/deviceclasses", True), ("/apis/resource.k8s.io/v1/resourceclaims", True),
        ("/apis/resource.k8s.io/v1/resourceclaimtemplates", True),
    ]


async def test_a_claim_not_yet_allocated_counts_by_the_members_own_device_class() -> None:
    claims = await _listed(DraClaims(Member(serving=True)))
    requests = [{"name": "gpu", "exactly": {"deviceClassName": "h100.example.com", "count": 4}}]
    pod = {
        "metadata": {"name": "p", "namespace": "ml"},
        "spec": {"containers": [{"name": "c"}], "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "h100s"}]},
    }

    def lookup(kind: str, namespace: str, name: str) -> dict[str, Any] | None:
        if (kind, namespace, name) == ("ResourceClaimTemplate", "ml", "h100s"):  # not yet made into a claim
            return {"spec": {"spec": {"devices": {"requests": requests}}}}
        return claims.snapshot()(kind, namespace, name)  # type: ignore[return-value]

    assert pod_requests(pod, lookup).get("nvidia.com/gpu") == 4
    requests[0]["exactly"]["deviceClassName"] = "nics.example.com"  # type: ignore[index]
    assert "nvidia.com/gpu" not in pod_requests(pod, lookup)  # a class the member does not hold: not a GPU
