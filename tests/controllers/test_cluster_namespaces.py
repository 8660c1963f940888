"""The execution-namespace controller: a Cluster's namespace is made when the Cluster comes,
made again when it is deleted by hand, removed with the Cluster, and a Cluster's status
reports cost nothing."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest

from controlplane.apis.constants import LABEL_CLUSTER, LABEL_MANAGED_BY, MANAGED_BY_VALUE
from controlplane.apiserver.objects import ObjectStore
from controlplane.controllers.clusters import ClusterNamespaceController
from controlplane.objectclient import errors
from tests.controllers.fleet import eventually, namespace_controller, node_shape, put_cluster

NAMESPACE = "gpufed-es-east"


@pytest.fixture
async def controller(objects: ObjectStore) -> AsyncIterator[ClusterNamespaceController]:
    running = ClusterNamespaceController(objects)
    reconciled: list[str] = []
    reconcile = running.reconcile

    async def counted(name: str) -> None:
        reconciled.append(name)
        await reconcile(name)

    running.reconcile = counted  # type: ignore[method-assign]
    running.reconciled = reconciled  # type: ignore[attr-defined]
    task = asyncio.create_task(running.run())
    yield running
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)


async def namespace(objects: ObjectStore) -> dict[str, Any] | None:
    try:
        return await objects.get(objects.registry.require("v1", "Namespace"), name=NAMESPACE)
    except errors.NotFound:
        return None


async def test_a_clusters_namespace_is_made_with_its_labels(objects: ObjectStore, controller: ClusterNamespaceController) -> None:
    await put_cluster(objects, "east", node_shape(2, gpus=8))
    made = await eventually(lambda: namespace(objects), what="the execution namespace")
    labels = made["metadata"]["labels"]
    assert (labels[LABEL_CLUSTER], labels[LABEL_MANAGED_BY]) == ("east", MANAGED_BY_VALUE)


async def test_status_reports_reconcile_nothing(objects: ObjectStore, controller: ClusterNamespaceController) -> None:
    await put_cluster(objects, "east", node_shape(2, gpus=8))
    await eventually(lambda: namespace(objects), what="the execution namespace")
    await eventually(lambda: asyncio.sleep(0, controller.namespaces.get(None, NAMESPACE)), what="the namespace cached")
    seen = len(controller.reconciled)  # type: ignore[attr-defined]
    for minute in range(5):
        await put_cluster(objects, "east", node_shape(2 + minute, gpus=8), report_time=f"2026-01-01T00:0{minute}:00Z")
    await put_cluster(objects, "west", node_shape(1, gpus=8))  # a later event: the reports' were handed out before it
    await eventually(lambda: asyncio.sleep(0, "west" in controller.reconciled), what="west reconciled")  # type: ignore[attr-defined]
    assert controller.reconciled[seen:] == ["west"]  # type: ignore[attr-defined]


async def test_a_namespace_deleted_by_hand_is_made_again(objects: ObjectStore, controller: ClusterNamespaceController) -> None:
    await put_cluster(objects, "east", node_shape(2, gpus=8))
    first = await eventually(lambda: namespace(objects), what="the execution namespace")
    await objects.delete(objects.registry.require("v1", "Namespace"), name=NAMESPACE)

    async def made_again() -> dict[str, Any] | None:
        current = await namespace(objects)
        return current if current and current["metadata"]["uid"] != first["metadata"]["uid"] else None

    async with namespace_controller(objects):  # removes the terminating namespace
        again = await eventually(made_again, what="the namespace made again")
    assert again["metadata"]["labels"][LABEL_CLUSTER] == "east"


async def test_a_deleted_clusters_namespace_goes(objects: ObjectStore, controller: ClusterNamespaceController) -> None:
    await put_cluster(objects, "east", node_shape(2, gpus=8))
    await eventually(lambda: namespace(objects), what="the execution namespace")
    await objects.delete(objects.registry.require("cluster.gpufed.io/v1alpha1", "Cluster"), name="east")

    async def gone_or_terminating() -> bool:
        current = await namespace(objects)
        return current is None or bool(current["metadata"].get("deletionTimestamp"))

    assert await eventually(gone_or_terminating, what="the namespace removed")
