"""Small requests that ask for something enormous get kube's 4xx at once: a JSON patch whose
``copy`` operations would grow the object past kube's 3 MiB copy limit (each copy of the document
into itself doubles it: gigabytes from a 2 KB request), one with more operations than kube's
10,000, and a ResourceQuota counting pods in a quantity past int64."""

from __future__ import annotations

import time
from typing import Any

from aiohttp.test_utils import TestClient

from controlplane.apis.kube.jsonpatches import MAX_JSON_PATCH_COPY_BYTES

Client = TestClient[Any, Any]
CONFIGMAPS = "/api/v1/namespaces/default/configmaps"
JSON_PATCH = {"Content-Type": "application/json-patch+json"}


async def _configmap(hub: Client) -> dict[str, Any]:
    seed = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "seed"}, "data": {"a": "x" * 1000}}
    answer = await hub.post(CONFIGMAPS, json=seed)
    assert answer.status == 201, await answer.text()
    return dict(await answer.json())


async def test_json_patch_copies_past_the_copy_limit_are_refused_at_once(hub: Client) -> None:
    before = await _configmap(hub)
    doubling = [{"op": "copy", "from": "/data", "path": f"/data/k{i}"} for i in range(40)]
    started = time.perf_counter()
    answer = await hub.patch(f"{CONFIGMAPS}/seed", json=doubling, headers=JSON_PATCH)
    elapsed = time.perf_counter() - started
    status = await answer.json()
    assert (answer.status, status["reason"]) == (422, "Invalid"), status
    [cause] = status["details"]["causes"]
    assert cause["message"].startswith("Unable to complete the copy, the accumulated size increase of copy is ")
    assert cause["message"].endswith(f", exceeding the limit {MAX_JSON_PATCH_COPY_BYTES}")
    assert elapsed < 2.0, f"took {elapsed:.1f}s"
    after = await (await hub.get(f"{CONFIGMAPS}/seed")).json()
    assert after["metadata"]["resourceVersion"] == before["metadata"]["resourceVersion"]
    # Copies under the limit apply as before.
    copies = [{"op": "copy", "from": "/data/a", "path": f"/data/k{i}"} for i in range(5)]
    answer = await hub.patch(f"{CONFIGMAPS}/seed", json=copies, headers=JSON_PATCH)
    assert answer.status == 200, await answer.text()
    assert len((await answer.json())["data"]) == 6


async def test_a_json_patch_of_more_than_10000_operations_is_a_413(hub: Client) -> None:
    await _configmap(hub)
    ops = [{"op": "add", "path": "/data/b", "value": "y"}] * 10_001
    answer = await hub.patch(f"{CONFIGMAPS}/seed", json=ops, headers=JSON_PATCH)
    status = await answer.json()
    assert (answer.status, status["reason"]) == (413, "RequestEntityTooLarge"), status
    assert status["message"] == "Request entity too large: The allowed maximum operations in a JSON patch is 10000, got 10001"
    answer = await hub.patch(f"{CONFIGMAPS}/seed", json=ops[:10_000], headers=JSON_PATCH)
    assert answer.status == 200, await answer.text()


async def test_a_pod_count_past_int64_is_no_integer(hub: Client) -> None:
    """kube's ``MilliValue() % 1000`` of ``1e400`` is not 0 (int64 cannot hold it): 422, not a 500;
    the value is shown as kube prints it once decoded (``10e399``)."""
    quota = {"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "q"},
             "spec": {"hard": {"pods": "1e400", "cpu": "1e400"}}}
    answer = await hub.post("/api/v1/namespaces/default/resourcequotas", json=quota)
    status = await answer.json()
    assert (answer.status, status["reason"]) == (422, "Invalid"), status
    assert [(c["field"], c["message"]) for c in status["details"]["causes"]] == [
        ("spec.hard[pods]", 'Invalid value: "10e399": must be an integer')]


async def test_a_pod_asking_past_python_decimals_default_range_is_created(hub: Client) -> None:
    """``1e999999999`` is a quantity kube reads; adding it up for the pod's QoS class overflowed
    Python's default decimal context (a 500). Created, with the quantity kept as written."""
    huge = "1e999999999"
    resources = {"requests": {"cpu": huge, "memory": huge}, "limits": {"cpu": huge, "memory": huge}}
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "huge"},
           "spec": {"containers": [{"name": "c", "image": "i", "resources": resources}]}}
    answer = await hub.post("/api/v1/namespaces/default/pods", json=pod)
    created = await answer.json()
    assert answer.status == 201, created
    assert created["spec"]["containers"][0]["resources"] == resources
    assert created["status"]["qosClass"] == "Guaranteed"
