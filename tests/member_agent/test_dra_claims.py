"""The agent caches the member's DRA claims and claim templates (trimmed to what the count of a pod's
GPUs reads) once the member serves resource.k8s.io/v1, and asks nothing of a member that does not."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from member_agent import draclaims
from member_agent.apierrors import NotFound
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
            ]}
        self.lists.append((request.path, self.serving))
        item = CLAIM if request.path.endswith("/resourceclaims") else TEMPLATE
        return {"items": [item], "metadata": {"resourceVersion": "9"}}


async def _synced(claims: DraClaims) -> None:
    async with asyncio.timeout(10):
        for informer in claims.informers.values():
            await informer.synced.wait()


async def test_the_claims_and_templates_are_cached_trimmed_and_a_change_is_reported() -> None:
    changed: list[str] = []
    claims = DraClaims(Member(serving=True), on_change=changed.append)
    running = asyncio.create_task(claims.run())
    try:
        await _synced(claims)
    finally:
        running.cancel()
        await asyncio.gather(running, return_exceptions=True)
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
    assert sorted(changed) == ["ml/p-gpu-ab12c", "ml/two"]


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
        ("/apis/resource.k8s.io/v1/resourceclaims", True), ("/apis/resource.k8s.io/v1/resourceclaimtemplates", True),
    ]
