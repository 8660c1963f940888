"""CustomResourceDefinitions across hub replicas on one etcd: a CRD written through one replica
is served by the other, and a replica started later serves it from its first request on."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from controlplane.apiserver.validation import FieldValidation
from controlplane.storage import EmbeddedEtcd

from .test_hub_ha import replica

CRD: dict[str, Any] = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": "trainers.ml.example.com"},
    "spec": {
        "group": "ml.example.com",
        "scope": "Namespaced",
        "names": {"plural": "trainers", "kind": "Trainer"},
        "versions": [{"name": "v1", "served": True, "storage": True, "schema": {"openAPIV3Schema": {
            "type": "object", "properties": {"spec": {"type": "object", "properties": {"model": {"type": "string"}}}},
        }}}],
    },
}


async def test_replicas_converge_on_the_crds_and_a_new_one_serves_them_at_once(tmp_path: Path, etcd: EmbeddedEtcd) -> None:
    async with replica(tmp_path, etcd, "hub-a") as a, replica(tmp_path, etcd, "hub-b") as b:
        assert a.objects is not None and b.objects is not None
        await a.objects.create(a.objects.registry.require("apiextensions.k8s.io/v1", "CustomResourceDefinition"), CRD)
        async with asyncio.timeout(20):
            while True:
                if (trainers := b.objects.registry.get("ml.example.com", "v1", "trainers")) is not None:
                    break
                await asyncio.sleep(0.05)
        obj = {"apiVersion": "ml.example.com/v1", "kind": "Trainer", "metadata": {"name": "t", "namespace": "default"},
               "spec": {"model": "m", "junk": 1}}
        await b.objects.create(trainers, obj, field_validation=FieldValidation.IGNORE)
        served_by_a = a.objects.registry.require("ml.example.com/v1", "Trainer")
        assert (await a.objects.get(served_by_a, namespace="default", name="t"))["spec"] == {"model": "m"}

    # A replica started now serves the kind as soon as it is up: no wait for a watch.
    async with replica(tmp_path, etcd, "hub-c") as c:
        assert c.objects is not None
        served = c.objects.registry.get("ml.example.com", "v1", "trainers")
        assert served is not None
        assert (await c.objects.get(served, namespace="default", name="t"))["spec"] == {"model": "m"}
