"""Kueue's Job webhook default on the hub's API: a batch/v1 Job created with a queue name is
stored suspended (so it starts only once admitted, with the admitted flavor's node labels); one
without a queue name, or of another kind, is stored as sent. A real hub (embedded etcd, HTTPS)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from controlplane.hub import Hub, HubConfig


@pytest.fixture
async def hub(tmp_path: Path) -> AsyncIterator[Hub]:
    async with Hub(HubConfig(state_dir=tmp_path / "hub", port=0)) as running:
        yield running


def job(name: str, labels: dict[str, str]) -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name, "namespace": "default", "labels": labels},
        "spec": {"template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "main", "image": "train:1"}]}}},
    }


@pytest.mark.parametrize(("labels", "suspended"), [
    ({"kueue.x-k8s.io/queue-name": "team-a"}, True),
    ({"app": "train"}, False),
])
async def test_a_job_created_with_a_queue_name_is_stored_suspended(
    hub: Hub, labels: dict[str, str], suspended: bool
) -> None:
    objects = hub.objects
    assert objects is not None
    jobs = objects.registry.require("batch/v1", "Job")
    created = await objects.create(jobs, job("train", labels))
    assert created["spec"]["suspend"] is suspended
    stored = await objects.get(jobs, namespace="default", name="train")
    assert stored["spec"]["suspend"] is suspended
