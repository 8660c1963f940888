"""The real kubectl over the API Priority and Fairness objects: ``kubectl get flowschemas`` and
``kubectl get prioritylevelconfigurations`` print kube's columns for the bootstrap objects the
leader's ensurer wrote, ``MISSINGPL`` from each schema's Dangling condition."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

import pytest

from controlplane.apiserver.objects import ObjectStore
from controlplane.apiserver.resources import Registry
from controlplane.controllers.flowcontrolconfig import FlowControlConfigController
from controlplane.hub import hub_registry

from ..test_real_clients import kubeconfig, kubectl, needs_kubectl, server_url  # noqa: F401 (fixtures)

pytestmark = needs_kubectl


@pytest.fixture
def api_registry() -> Registry:
    return hub_registry()


def rows(out: str) -> list[list[str]]:
    return [re.split(r"\s{2,}", line.strip()) for line in out.strip().splitlines()]


async def test_kubectl_get_prints_kubes_columns(objects: ObjectStore, kubeconfig: Path) -> None:  # noqa: F811
    controller = FlowControlConfigController(objects)
    task = asyncio.create_task(controller.run())
    try:
        async with asyncio.timeout(20):
            while True:
                schemas = (await objects.list(objects.registry.require("flowcontrol.apiserver.k8s.io/v1", "FlowSchema"))).items
                if schemas and all((s.get("status") or {}).get("conditions") for s in schemas) and len(schemas) >= 15:
                    break
                await asyncio.sleep(0.05)
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)

    code, out, err = await kubectl(kubeconfig, "get", "flowschemas")
    assert code == 0, err
    table = rows(out)
    assert table[0] == ["NAME", "PRIORITYLEVEL", "MATCHINGPRECEDENCE", "DISTINGUISHERMETHOD", "AGE", "MISSINGPL"]
    by_name = {row[0]: row for row in table[1:]}
    assert by_name["exempt"][1:4] == ["exempt", "1", "<none>"] and by_name["exempt"][5] == "False"
    assert by_name["system-agents"][1:4] == ["system", "50", "ByUser"]
    assert by_name["kube-scheduler"][1:4] == ["workload-high", "800", "ByNamespace"]

    code, out, err = await kubectl(kubeconfig, "get", "prioritylevelconfigurations")
    assert code == 0, err
    table = rows(out)
    assert table[0] == ["NAME", "TYPE", "NOMINALCONCURRENCYSHARES", "QUEUES", "HANDSIZE", "QUEUELENGTHLIMIT", "AGE"]
    by_name = {row[0]: row[:-1] for row in table[1:]}
    assert by_name["exempt"] == ["exempt", "Exempt", "<none>", "<none>", "<none>", "<none>"]
    assert by_name["catch-all"] == ["catch-all", "Limited", "5", "<none>", "<none>", "<none>"]
    assert by_name["global-default"] == ["global-default", "Limited", "20", "128", "6", "50"]
