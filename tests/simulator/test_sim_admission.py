"""A simulated member's pod admission: kube's Priority plugin (and its system classes)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from controlplane.apiserver.objects import ObjectStore
from controlplane.objectclient import errors
from controlplane.storage.memory import MemoryStore
from simulator.admitting import admit_pods, system_priority_classes
from simulator.resources import member_registry

PRIORITY_CLASS = ("scheduling.k8s.io/v1", "PriorityClass")


@pytest.fixture
async def member() -> AsyncIterator[ObjectStore]:
    objects = ObjectStore(MemoryStore(), member_registry())
    admit_pods(objects, objects.check_creates)
    await objects.bootstrap()
    await objects.create(
        objects.registry.require("v1", "ServiceAccount"),
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "default", "namespace": "default"}},
    )
    for priority_class in system_priority_classes():
        await objects.create(objects.registry.require(*PRIORITY_CLASS), priority_class)
    yield objects


async def _create_class(objects: ObjectStore, name: str, value: int, **fields: Any) -> None:
    await objects.create(
        objects.registry.require(*PRIORITY_CLASS),
        {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": name}, "value": value,
         **fields},
    )


async def _create_pod(objects: ObjectStore, **spec: Any) -> dict[str, Any]:
    pod = {
        "apiVersion": "v1", "kind": "Pod", "metadata": {"generateName": "web-7f9c4-", "namespace": "default"},
        "spec": {"containers": [{"name": "main", "image": "app:1"}], **spec},
    }
    return await objects.create(objects.registry.require("v1", "Pod"), pod)


async def test_a_pod_naming_a_missing_priority_class_is_refused_as_kube_refuses_it(member: ObjectStore) -> None:
    with pytest.raises(errors.Forbidden) as refused:
        await _create_pod(member, priorityClassName="high")
    assert str(refused.value) == 'pods "web-7f9c4-" is forbidden: no PriorityClass with name high was found'
    assert (await member.list(member.registry.require("v1", "Pod"), namespace="default")).items == []

    await _create_class(member, "high", 1000, preemptionPolicy="Never")
    pod = await _create_pod(member, priorityClassName="high")
    assert (pod["spec"]["priority"], pod["spec"]["preemptionPolicy"]) == (1000, "Never")


@pytest.mark.parametrize(("name", "value"), [("system-node-critical", 2_000_001_000),
                                             ("system-cluster-critical", 2_000_000_000)])
async def test_the_system_classes_exist_in_every_member(member: ObjectStore, name: str, value: int) -> None:
    pod = await _create_pod(member, priorityClassName=name)
    assert (pod["spec"]["priority"], pod["spec"]["preemptionPolicy"]) == (value, "PreemptLowerPriority")


async def test_a_pod_naming_no_class_gets_the_global_default_or_zero(member: ObjectStore) -> None:
    pod = await _create_pod(member)
    assert pod["spec"]["priority"] == 0
    assert "priorityClassName" not in pod["spec"]
    await _create_class(member, "batch", 100, globalDefault=True)
    pod = await _create_pod(member)
    assert (pod["spec"]["priorityClassName"], pod["spec"]["priority"]) == ("batch", 100)


async def test_a_pod_setting_another_priority_itself_is_refused(member: ObjectStore) -> None:
    await _create_class(member, "high", 1000)
    with pytest.raises(errors.Forbidden) as refused:
        await _create_pod(member, priorityClassName="high", priority=5)
    assert str(refused.value) == (
        'pods "web-7f9c4-" is forbidden: the integer value of priority (5) must not be provided in pod spec; '
        "priority admission controller computed 1000 from the given PriorityClass name"
    )
    pod = await _create_pod(member, priorityClassName="high", priority=1000)
    assert pod["spec"]["priority"] == 1000
