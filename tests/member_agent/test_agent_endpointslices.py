"""The agent collects a MultiClusterService's EndpointSlices from a provider cluster: the Service's
Work, labelled for collection by the hub, reports the slices kube's endpointslice controller
manages in the member (not those dispatched from other clusters) on its status, and follows them.
What the agent may write is its own Works' status: writing a Work (an EndpointSlice) into another
cluster's namespace, or its own, is refused with a 403."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from controlplane.apiserver.kinds.networking import ENDPOINT_SLICE
from member_agent.agent import Agent
from member_agent.agentbase import WORK_API
from member_agent.kubeapi import ApiError
from tests.member_agent.test_agent_integration import (
    WORK_NS,
    Hub,
    Member,
    eventually,
    hub,
    joining_agent_config,
    member,
    work_object,
)

__all__ = ["hub", "member"]  # the fixtures

pytestmark = [pytest.mark.timeout(120), pytest.mark.waiting]

SERVICE = {
    "apiVersion": "v1",
    "kind": "Service",
    "metadata": {"name": "infer", "namespace": "ml"},
    "spec": {"selector": {"app": "infer"}, "ports": [{"port": 80}]},
}
ENDPOINT = {"addresses": ["10.4.0.9"], "conditions": {"ready": True, "serving": True, "terminating": False}}


def _slice(name: str, managed_by: str) -> dict[str, Any]:
    return {
        "apiVersion": "discovery.k8s.io/v1",
        "kind": "EndpointSlice",
        "metadata": {
            "name": name,
            "namespace": "ml",
            "labels": {
                "kubernetes.io/service-name": "infer",
                "endpointslice.kubernetes.io/managed-by": managed_by,
            },
        },
        "addressType": "IPv4",
        "endpoints": [ENDPOINT],
        "ports": [{"name": "", "port": 80, "protocol": "TCP"}],
    }


@pytest.mark.parametrize("member", [(ENDPOINT_SLICE,)], indirect=True)
async def test_a_providers_agent_reports_the_services_slices_and_writes_nothing_else(
    hub: Hub, member: Member, tmp_path: Path
) -> None:
    assert hub.objects is not None
    work_rt = hub.objects.registry.require("work.gpufed.io/v1alpha1", "Work")
    slice_rt = member.rt("discovery.k8s.io/v1", "EndpointSlice")
    namespace_rt = member.rt("v1", "Namespace")
    await member.objects.create(
        namespace_rt, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ml"}}
    )
    await member.objects.create(slice_rt, _slice("infer-abcde", "endpointslice-controller.k8s.io"))
    await member.objects.create(
        slice_rt, _slice("other-infer-fghij", "endpointslice-dispatch-controller.karmada.io")
    )
    work = work_object("ml-infer-service", [SERVICE])
    work["metadata"]["labels"] = {"endpointslice.gpufed.io/collect": "true"}
    await hub.objects.create(work_rt, work)

    async def reported() -> list[Any] | None:
        current = await hub.objects.get(work_rt, namespace=WORK_NS, name="ml-infer-service")
        statuses = (current.get("status") or {}).get("manifestStatuses") or []
        return [statuses[0].get("endpointSlices")] if statuses and "endpointSlices" in statuses[0] else None

    cfg = await joining_agent_config(hub, member, tmp_path / "agent")
    async with Agent(cfg) as agent:
        [slices] = await eventually(reported, what="the Service's slices on its Work")
        assert slices == [
            {
                "name": "infer-abcde",
                "addressType": "IPv4",
                "endpoints": [ENDPOINT],
                "ports": [{"name": "", "port": 80, "protocol": "TCP"}],
            }
        ]

        await member.objects.delete(slice_rt, namespace="ml", name="infer-abcde")

        async def emptied() -> bool:
            return await reported() == [[]]

        await eventually(emptied, what="the deleted slice gone from the Work's status")

        assert agent.hub is not None
        body = work_object("ml-member1-infer-abcde-endpointslice", [_slice("member1-infer-abcde", "x")])
        for namespace in ("gpufed-es-other", WORK_NS):
            body["metadata"]["namespace"] = namespace
            with pytest.raises(ApiError) as refused:
                await agent.hub.create(f"{WORK_API}/namespaces/{namespace}/works", body)
            assert refused.value.code == 403
        with pytest.raises(ApiError) as refused:
            await agent.hub.replace(
                f"{WORK_API}/namespaces/gpufed-es-other/works/ml-infer-service/status", work
            )
        assert refused.value.code == 403
        assert "agents may only update the status of the Works of their own cluster" in refused.value.message
