"""Moving objects stored under an alias group's own key to the storage they now share.

A type served under two groups (:attr:`~controlplane.apiserver.resources.ResourceType.stored_as`,
e.g. ``policy.karmada.io`` policies stored as ``policy.gpufed.io``) keeps its objects once, under
the storage group's key. Objects written before the two became one set sit under the alias
group's own prefix; :func:`merge_alias_storage` moves each of them to the shared key at
startup (idempotent, safe to run from several replicas at once: every step is a
compare-and-swap). Nothing is dropped: an object whose name is already taken in the shared
storage by a different object is moved under a free name (``<name>-<group's first label>``,
then ``-2``, ``-3``…) with an annotation naming where it came from, and a warning is logged.
"""

from __future__ import annotations

import logging
from typing import Any

from controlplane.apiserver import codec
from controlplane.apiserver.resources import Registry, ResourceType
from controlplane.storage import interface as storage

log = logging.getLogger(__name__)

#: Set on an object that had to be renamed on the move: ``<apiVersion> <namespace>/<name>`` it had.
MOVED_FROM_ANNOTATION = "gpufed.io/moved-from"
_MAX_NAME = 253


async def merge_alias_storage(store: storage.Store, registry: Registry) -> int:
    """Move every object of an alias type from its group's own prefix to the shared storage;
    return how many were moved."""
    moved = 0
    for rt in (rt for rt in registry if rt.stored_as is not None):
        listed = await store.list(own_key_prefix(rt))
        for kv in listed.items:
            if await _move(store, rt, kv):
                moved += 1
    return moved


async def _move(store: storage.Store, rt: ResourceType, kv: storage.KeyValue) -> bool:
    obj = codec.decode(kv, rt.storage_api_version)
    obj["metadata"].pop("resourceVersion", None)
    meta = obj["metadata"]
    namespace = meta.get("namespace") if rt.namespaced else None
    name = str(meta.get("name") or kv.key.rsplit("/", 1)[-1])
    for candidate in _names(name, rt.group):
        key = rt.key(namespace=namespace, name=candidate)
        try:
            existing = await store.get(key)
        except storage.NotFound:
            existing = None
        if existing is not None:
            if codec.decode(existing)["metadata"].get("uid") == meta.get("uid"):
                break  # moved by an earlier (interrupted) run or another replica
            continue
        stored = _renamed(obj, candidate, rt, namespace, name) if candidate != name else obj
        try:
            await store.create(key, codec.encode(stored, rt.storage_api_version))
        except storage.AlreadyExists:
            continue
        if candidate != name:
            log.warning(
                "%s %s was stored under both %s and %s; the %s one is now named %r",
                rt.kind, _display(namespace, name), rt.group, rt.stored_as, rt.group, candidate,
            )
        break
    else:
        log.error("%s %s: no free name to move it under; it stays at %s", rt.kind, _display(namespace, name), kv.key)
        return False
    try:
        await store.delete(kv.key, expected_revision=kv.mod_revision)
    except (storage.NotFound, storage.Conflict):
        return False
    return True


def own_key_prefix(rt: ResourceType) -> str:
    """Where objects of ``rt`` were stored before it became an alias of ``rt.stored_as``."""
    return f"/registry/{rt.group or 'core'}/{rt.plural}/"


def _names(name: str, group: str) -> list[str]:
    """``name``, then the free names tried when it is taken (kept within kube's name length)."""
    out = [name]
    for n in range(1, 100):
        suffix = f"-{group.split('.', 1)[0]}" + (f"-{n}" if n > 1 else "")
        out.append(name[: _MAX_NAME - len(suffix)].rstrip("-.") + suffix)
    return out


def _renamed(obj: dict[str, Any], name: str, rt: ResourceType, namespace: str | None, old: str) -> dict[str, Any]:
    meta = {**obj["metadata"], "name": name}
    meta["annotations"] = {**(meta.get("annotations") or {}), MOVED_FROM_ANNOTATION: f"{rt.api_version} {_display(namespace, old)}"}
    return {**obj, "metadata": meta}


def _display(namespace: str | None, name: str) -> str:
    return f"{namespace}/{name}" if namespace else name
