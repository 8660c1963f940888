"""Server-side apply merges an operator's kind by its CRD's list types, as kube merges the CRD: a
JobSet's ``replicatedJobs`` are keyed by name (so two managers keep their own replicated Jobs and
their fields), where a kind without such a schema would have one atomic list."""

from __future__ import annotations

import copy
import json
from typing import Any

from aiohttp.test_utils import TestClient

from controlplane.apiserver.objects import ObjectStore

from .test_kueue_defaults import served  # noqa: F401 (fixture)
from .test_operator_schema_types import JOBSETS, jobset

APPLY = {"Content-Type": "application/apply-patch+yaml"}


async def _apply(client: TestClient[Any, Any], manager: str, body: dict[str, Any]) -> dict[str, Any]:
    response = await client.patch(f"{JOBSETS}/js?fieldManager={manager}", data=json.dumps(body), headers=APPLY)
    answer = await response.json()
    assert response.status in (200, 201), answer
    return answer


async def test_two_managers_keep_their_own_replicated_jobs(served: tuple[TestClient[Any, Any], ObjectStore]) -> None:  # noqa: F811
    client, _ = served
    first = jobset(1)
    await _apply(client, "trainer", first)
    second = copy.deepcopy(first)
    second["spec"]["replicatedJobs"][0]["name"] = "evaluators"
    merged = await _apply(client, "evaluator", second)
    assert [job["name"] for job in merged["spec"]["replicatedJobs"]] == ["workers", "evaluators"]
    # Each manager owns its own item's fields, not the list: the trainer's next apply changes its
    # replicas without a conflict and leaves the evaluator's item.
    first["spec"]["replicatedJobs"][0]["replicas"] = 3
    again = await _apply(client, "trainer", first)
    assert [(job["name"], job["replicas"]) for job in again["spec"]["replicatedJobs"]] == [
        ("workers", 3),
        ("evaluators", 1),
    ]
