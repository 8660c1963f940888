"""A provider's agent that has just started (its member's EndpointSlices not listed yet) keeps the
slices its Work status last reported, so the hub does not withdraw them from the consumer clusters
meanwhile; and a Work status whose reported slices are malformed has only its well-formed ones
dispatched, never a failed reconcile."""

from __future__ import annotations

from typing import Any

from controlplane.apis.mcs_endpointslices import collected_slices
from member_agent.collecting import EndpointSliceCollector

IDENTIFIER = {"version": "v1", "kind": "Service", "namespace": "ml", "name": "infer", "ordinal": 0}
REPORTED = [{"name": "infer-abcde", "addressType": "IPv4", "endpoints": [{"addresses": ["10.0.0.7"]}], "ports": []}]
TRUNCATED = {"type": "EndpointSlicesCollected", "status": "False", "reason": "EndpointSlicesTruncated", "message": "m"}


def _work(status: dict[str, Any] | None) -> dict[str, Any]:
    work: dict[str, Any] = {
        "metadata": {"labels": {"endpointslice.gpufed.io/collect": "true"}},
        "spec": {
            "workload": {
                "manifests": [{"apiVersion": "v1", "kind": "Service", "metadata": {"name": "infer", "namespace": "ml"}}]
            }
        },
    }
    if status is not None:
        work["status"] = status
    return work


def test_until_the_slices_are_listed_the_reported_ones_stay() -> None:
    collector = EndpointSliceCollector(member=None, on_due=lambda key: None)  # type: ignore[arg-type]
    stored = {"manifestStatuses": [{"identifier": IDENTIFIER, "endpointSlices": REPORTED, "conditions": [TRUNCATED]}]}
    fresh = {"manifestStatuses": [{"identifier": IDENTIFIER, "status": {}, "health": "Healthy"}]}

    [entry] = collector.annotate(_work(stored), fresh)["manifestStatuses"]

    assert entry["endpointSlices"] == REPORTED
    assert entry["conditions"] == [TRUNCATED]
    assert entry["health"] == "Healthy"
    # A Work that never reported slices gets none made up.
    assert collector.annotate(_work(None), fresh) == fresh


def test_malformed_reported_slices_are_left_out() -> None:
    reported = [
        {"name": "ok", "endpoints": [], "ports": []},
        {"name": "bad-endpoints", "endpoints": 5},
        {"name": "bad-ports", "ports": "80"},
        {"name": 7},
        {"endpoints": []},
        "not an object",
        {"name": "no-lists"},
    ]
    work = {"status": {"manifestStatuses": [{"identifier": IDENTIFIER, "endpointSlices": reported}]}}
    assert [s["name"] for s in collected_slices(work, "infer") or []] == ["ok", "no-lists"]
