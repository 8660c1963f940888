"""`gpufed explain` against a real hub (embedded etcd, HTTPS, token auth, controllers running)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from controlplane.hub import Hub
from controlplane.hubconfig import HubConfig
from gpufed.cli import main


@pytest.fixture
async def hub(tmp_path: Path) -> AsyncIterator[Hub]:
    async with Hub(HubConfig(state_dir=tmp_path / "hub", port=0)) as running:
        yield running


async def gpufed(hub: Hub, *argv: str) -> int:
    """Run the real command line (it runs its own event loop, so in a thread)."""
    return await asyncio.to_thread(main, [*argv, "--kubeconfig", str(hub.kubeconfig_path)])


def deployment(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "replicas": 1, "selector": {"matchLabels": {"app": name}},
            "template": {"metadata": {"labels": {"app": name}},
                         "spec": {"containers": [{"name": "c", "image": "busybox"}]}},
        },
    }


async def test_explain_of_a_workload_no_policy_selects_says_what_to_do(
    hub: Hub, capsys: pytest.CaptureFixture[str]
) -> None:
    assert hub.objects is not None
    rt = hub.objects.registry.require("apps/v1", "Deployment")
    await hub.objects.create(rt, deployment("lonely"))
    for _ in range(200):  # the detector marks it NoPolicyMatched within its first pass
        obj = await hub.objects.get(rt, namespace="default", name="lonely")
        if any(cd.get("type") == "Propagated" for cd in (obj.get("status") or {}).get("conditions") or ()):
            break
        await asyncio.sleep(0.05)
    assert await gpufed(hub, "explain", "deployment/lonely") == 0
    out, err = capsys.readouterr()
    assert "Error from server" not in out + err
    assert "Propagated:  False (NoPolicyMatched)" in out
    assert "no PropagationPolicy selects deployment/lonely; create one in namespace default" in out
    assert "{apiVersion: apps/v1, kind: Deployment, name: lonely}" in out


async def test_explain_of_a_missing_workload_is_one_line(hub: Hub, capsys: pytest.CaptureFixture[str]) -> None:
    assert await gpufed(hub, "explain", "deployment/nope") == 1
    assert capsys.readouterr().err == 'Error from server (NotFound): deployments.apps "nope" not found\n'
