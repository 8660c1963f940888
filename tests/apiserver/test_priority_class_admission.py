"""kube's Priority admission plugin on the hub: one PriorityClass at most is the global default.

A second ``globalDefault: true`` class, created or marked so by an update, is 403 Forbidden
with kube's words; before, the hub stored both, and which one a workload without a
``priorityClassName`` got depended on names.
"""

from __future__ import annotations

from typing import Any

from .test_kube_validation import Client, hub  # noqa: F401 (fixture)

CLASSES = "/apis/scheduling.k8s.io/v1/priorityclasses"


def priority_class(name: str, value: int, *, default: bool) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
        "metadata": {"name": name}, "value": value, "globalDefault": default,
    }


async def test_a_second_global_default_is_forbidden_on_create_and_update(hub: Client) -> None:  # noqa: F811
    assert (await hub.post(CLASSES, json=priority_class("first", 100, default=True))).status == 201
    assert (await hub.post(CLASSES, json=priority_class("other", 50, default=False))).status == 201
    message = (
        'priorityclasses.scheduling.k8s.io "{}" is forbidden: '
        "PriorityClass first is already marked as default. Only one default can exist"
    )

    response = await hub.post(CLASSES, json=priority_class("second", 200, default=True))
    assert response.status == 403
    status = await response.json()
    assert status["reason"] == "Forbidden"
    assert status["message"] == message.format("second")
    assert status["details"] == {"name": "second", "group": "scheduling.k8s.io", "kind": "priorityclasses"}
    assert (await hub.get(f"{CLASSES}/second")).status == 404

    marked = await hub.patch(
        f"{CLASSES}/other", json={"globalDefault": True}, headers={"Content-Type": "application/merge-patch+json"}
    )
    assert marked.status == 403
    assert (await marked.json())["message"] == message.format("other")

    # The default itself may be updated, and once it is no longer the default another may be.
    relabelled = await hub.patch(
        f"{CLASSES}/first", json={"metadata": {"labels": {"tier": "batch"}}},
        headers={"Content-Type": "application/merge-patch+json"},
    )
    assert relabelled.status == 200, await relabelled.text()
    unmarked = await hub.patch(
        f"{CLASSES}/first", json={"globalDefault": False}, headers={"Content-Type": "application/merge-patch+json"}
    )
    assert unmarked.status == 200, await unmarked.text()
    assert (await hub.post(CLASSES, json=priority_class("second", 200, default=True))).status == 201
