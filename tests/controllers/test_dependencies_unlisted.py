"""``propagateDeps`` waits for an informer that has not listed yet, as the detector and the
binding controller do: a parent's workload absent from it (a custom kind just watched, or one
whose list fails on its conversion webhook) is not taken for gone, so its attached bindings, and
the member copies they place, stay."""

from __future__ import annotations

import asyncio

from controlplane.apiserver.objects import ObjectStore
from controlplane.controllers.attachments import DependencyKey
from controlplane.controllers.context import UNSYNCED_RETRY_SECONDS, ControllerContext
from controlplane.controllers.dependencies import DependenciesController
from controlplane.controllers.informing import Informer
from controlplane.controllers.manager import ControllerManager
from controlplane.interpreter import Dependency

from .conftest import FAST
from .test_dependencies import (
    CM,
    NS,
    binding_of,
    config_map,
    create,
    parents,
    policy,
    two_clusters,
    web,
    works_in,
)


async def _listed(informers: list[Informer]) -> None:
    await asyncio.wait_for(asyncio.gather(*(i.synced.wait() for i in informers)), 10)


async def test_a_parent_in_an_informer_not_listed_yet_keeps_its_attached_binding(objects: ObjectStore) -> None:
    async with ControllerManager(objects, settings=FAST) as manager:
        await two_clusters(objects, manager)
        await create(objects, config_map("model-config"))
        await create(objects, policy("web", clusters=["onprem"]))
        await create(objects, web(token=None))
        await works_in(objects, "model-config-configmap", {"onprem"})
    attached = await binding_of(objects, "model-config-configmap")
    assert attached is not None and parents(attached) == {"web-deployment": ("onprem",)}

    # A new term whose Deployment informer has not listed yet; every other informer has.
    ctx = ControllerContext(objects, settings=FAST)
    controller = DependenciesController(ctx)
    deployments = ctx.workload_informer("apps/v1", "Deployment")
    assert deployments is not None
    others = [i for i in ctx.informers if i is not deployments]
    running = [asyncio.create_task(i.run()) for i in others]
    parent, key = (NS, "web-deployment"), DependencyKey.of(NS, Dependency(CM, "model-config"))
    try:
        await _listed(others)
        assert await controller.reconcile_parent(parent) == UNSYNCED_RETRY_SECONDS
        assert await controller.reconcile_dependency(key) == UNSYNCED_RETRY_SECONDS
        kept = await binding_of(objects, "model-config-configmap")
        assert kept is not None and kept["metadata"]["uid"] == attached["metadata"]["uid"]
        assert parents(kept) == {"web-deployment": ("onprem",)}

        # Listed: the same reconciles find the workload and keep what it needs.
        running.append(asyncio.create_task(deployments.run()))
        await _listed([deployments])
        assert await controller.reconcile_parent(parent) is None
        assert await controller.reconcile_dependency(key) is None
        kept = await binding_of(objects, "model-config-configmap")
        assert kept is not None and kept["metadata"]["uid"] == attached["metadata"]["uid"]
        assert parents(kept) == {"web-deployment": ("onprem",)}
    finally:
        for task in running:
            task.cancel()
        await asyncio.gather(*running, return_exceptions=True)
