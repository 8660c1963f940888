"""The EndpointSlices an agent reports on a Work status are bounded: a Service with thousands of
pods in a provider reports whole slices, in name order, up to what a Work status may carry of them,
and says in the Service's manifest status condition what it left out."""

from __future__ import annotations

import asyncio
from typing import Any

import orjson

from controlplane.apis.mcs_endpointslices import MAX_COLLECTED_BYTES, bounded_slices, collected_slice
from member_agent.collecting import EndpointSliceCollector

#: etcd's default --max-request-bytes: the largest object the hub can store.
ETCD_MAX_REQUEST_BYTES = 1536 * 1024


def _endpoint(index: int) -> dict[str, Any]:
    return {
        "addresses": [f"10.{index // 65536}.{index // 256 % 256}.{index % 256}"],
        "conditions": {"ready": True, "serving": True, "terminating": False},
        "nodeName": f"gpu-node-{index // 8:04d}",
        "targetRef": {
            "kind": "Pod",
            "namespace": "ml",
            "name": f"infer-7d9f8c6b5d-{index:05x}",
            "uid": f"0b9f7c1e-5d2a-4c3b-9e8f-{index:012x}",
        },
    }


def _member_slice(index: int, endpoints: int) -> dict[str, Any]:
    return {
        "metadata": {
            "name": f"infer-{index:05d}",
            "namespace": "ml",
            "labels": {"kubernetes.io/service-name": "infer"},
        },
        "addressType": "IPv4",
        "endpoints": [_endpoint(index * endpoints + i) for i in range(endpoints)],
        "ports": [{"name": "", "port": 80, "protocol": "TCP"}],
    }


def test_slices_that_fit_are_all_reported() -> None:
    slices = [collected_slice(_member_slice(i, 100)) for i in range(3)]
    assert bounded_slices(slices, service="ml/infer") == (slices, None)


def test_whole_slices_are_reported_up_to_the_limit_and_the_rest_named() -> None:
    slices = [collected_slice(_member_slice(i, 10)) for i in range(5)]
    one = len(orjson.dumps(slices[0]))
    kept, condition = bounded_slices(slices, service="ml/infer", limit=2 + 2 * one + 1 + one // 2)
    assert kept == slices[:2]
    assert condition == {
        "type": "EndpointSlicesCollected",
        "status": "False",
        "reason": "EndpointSlicesTruncated",
        "message": f"2 of the 5 EndpointSlices of Service ml/infer are reported: the other 3 (30 endpoints, from "
        f"infer-00002) would take the Work status past the {2 + 2 * one + 1 + one // 2} bytes it carries slices in, "
        "and are not dispatched",
    }


class _Synced:
    def __init__(self, objects: dict[str, dict[str, Any]]) -> None:
        self.objects = objects
        self.synced = asyncio.Event()
        self.synced.set()


def test_a_service_of_5000_pods_reports_a_work_status_the_hub_can_store() -> None:
    work = {
        "metadata": {"labels": {"endpointslice.gpufed.io/collect": "true"}},
        "spec": {
            "workload": {
                "manifests": [
                    {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "infer", "namespace": "ml"}}
                ]
            }
        },
    }
    identifier = {"version": "v1", "kind": "Service", "namespace": "ml", "name": "infer", "ordinal": 0}
    status = {"manifestStatuses": [{"identifier": identifier, "status": {}, "health": "Healthy"}]}
    collector = EndpointSliceCollector(member=None, on_due=lambda key: None)  # type: ignore[arg-type]
    member_slices = [_member_slice(i, 100) for i in range(50)]
    collector.informer = _Synced({f"ml/{s['metadata']['name']}": s for s in member_slices})  # type: ignore[assignment]

    [entry] = collector.annotate(work, status)["manifestStatuses"]
    assert len(orjson.dumps(entry["endpointSlices"])) <= MAX_COLLECTED_BYTES
    assert len(orjson.dumps({"status": {"manifestStatuses": [entry]}})) < ETCD_MAX_REQUEST_BYTES
    reported = len(entry["endpointSlices"])
    assert 0 < reported < 50
    assert [s["name"] for s in entry["endpointSlices"]] == [f"infer-{i:05d}" for i in range(reported)]
    [condition] = entry["conditions"]
    assert (condition["type"], condition["reason"]) == ("EndpointSlicesCollected", "EndpointSlicesTruncated")
    assert condition["message"].startswith(
        f"{reported} of the 50 EndpointSlices of Service ml/infer are reported"
    )

    # Once the pods are fewer, every slice is reported and the condition goes.
    collector.informer = _Synced({f"ml/{s['metadata']['name']}": s for s in member_slices[:3]})  # type: ignore[assignment]
    [entry] = collector.annotate(work, {"manifestStatuses": [{**entry, "endpointSlices": []}]})[
        "manifestStatuses"
    ]
    assert len(entry["endpointSlices"]) == 3
    assert "conditions" not in entry
