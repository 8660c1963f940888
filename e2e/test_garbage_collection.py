"""Cascading deletion on the hub with real kubectl: ``--cascade=foreground`` keeps the owner
(with a deletionTimestamp) until its blocking dependent is gone, ``--cascade=orphan`` leaves the
dependent without the reference, and the default (background) deletes the dependent after."""

from __future__ import annotations

import json
from typing import Any

import pytest

from e2e.harness import Kubectl, ProcessGroup, wait_for

pytestmark = pytest.mark.e2e


def _dependent(kubectl: Kubectl, name: str, owner: str, *, hold: bool = False) -> None:
    uid = kubectl.json("get", "configmap", owner)["metadata"]["uid"]
    meta: dict[str, Any] = {
        "name": name,
        "ownerReferences": [{"apiVersion": "v1", "kind": "ConfigMap", "name": owner, "uid": uid,
                             "blockOwnerDeletion": True}],
    }
    if hold:
        meta["finalizers"] = ["example.com/hold"]
    kubectl.run("create", "-f", "-", input_text=json.dumps({"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta}))


def _gone(kubectl: Kubectl, name: str) -> bool:
    return kubectl.json_or_none("get", "configmap", name) is None


def test_kubectl_delete_cascades(processes: ProcessGroup) -> None:
    _, kubectl = processes.start_hub()
    for owner in ("fg-owner", "orphan-owner", "bg-owner"):
        kubectl.run("create", "configmap", owner)
    _dependent(kubectl, "fg-child", "fg-owner", hold=True)
    _dependent(kubectl, "orphan-child", "orphan-owner")
    _dependent(kubectl, "bg-child", "bg-owner")

    # Foreground: the owner stays, marked, while its blocking dependent (held by a finalizer of
    # its own) is being deleted; it goes once the dependent has gone.
    kubectl.run("delete", "configmap", "fg-owner", "--cascade=foreground", "--wait=false")
    wait_for(lambda: (kubectl.json_or_none("get", "configmap", "fg-child") or {}).get("metadata", {})
             .get("deletionTimestamp"), timeout=30, what="the blocking dependent to be deleted")
    owner = kubectl.json("get", "configmap", "fg-owner")
    assert owner["metadata"]["deletionTimestamp"]
    assert owner["metadata"]["finalizers"] == ["foregroundDeletion"]
    kubectl.run("patch", "configmap", "fg-child", "--type=json",
                "-p", '[{"op": "remove", "path": "/metadata/finalizers"}]')
    wait_for(lambda: _gone(kubectl, "fg-child") and _gone(kubectl, "fg-owner"), timeout=30,
             what="the dependent, then the owner, to go")

    # Orphan: the owner goes, the dependent stays without the reference.
    kubectl.run("delete", "configmap", "orphan-owner", "--cascade=orphan")
    assert _gone(kubectl, "orphan-owner")
    assert "ownerReferences" not in kubectl.json("get", "configmap", "orphan-child")["metadata"]

    # Background (kubectl's default): the owner goes at once, the dependent after it.
    kubectl.run("delete", "configmap", "bg-owner")
    wait_for(lambda: _gone(kubectl, "bg-child"), timeout=30, what="the dependent of the deleted owner to go")
    assert kubectl.json("get", "configmap", "orphan-child")["metadata"]["name"] == "orphan-child"
