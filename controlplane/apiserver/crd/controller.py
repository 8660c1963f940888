"""Serving CustomResourceDefinitions: watch them, swap the registry, keep their status.

Every API server replica runs one :class:`CrdController` (HA hubs each watch CRDs and
converge on the same set of served kinds). It lists and then watches the CRDs in the
store; on every change it decides which CRDs' names are accepted, hands the served custom
kinds to the :class:`DynamicRegistry` (one atomic swap), and writes each CRD's status as
kube does: ``NamesAccepted`` and ``Established`` conditions and ``acceptedNames`` (the CRD's
writes add its storage version to ``storedVersions``). A CRD being deleted gets ``Terminating``; its objects are deleted
and then its cleanup finalizer is removed, which lets it go. Status writes are
compare-and-swap on the read version, so replicas racing to write the same status settle
with one write.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import logging
from typing import Any

from controlplane.apis.apiextensions.builtin import is_view
from controlplane.apis.apiextensions.crd import api_approval_condition, invalid_ca_bundle
from controlplane.apiserver import errors
from controlplane.apiserver.crd.registry import DynamicRegistry, NamesDecision, name_decisions
from controlplane.apiserver.crd.types import CLEANUP_FINALIZER, custom_types
from controlplane.apiserver.objects import ObjectEvent, ObjectStore, WatchEventType
from controlplane.apiserver.resources import ResourceType

logger = logging.getLogger(__name__)

#: How often a CRD whose objects are still going away is looked at again.
CLEANUP_RESYNC_SECONDS = 1.0
RETRY_SECONDS = 1.0


def _condition(kind: str, status: str, reason: str, message: str) -> dict[str, str]:
    return {"type": kind, "status": status, "reason": reason, "message": message}


def _established(crd: dict[str, Any]) -> dict[str, Any] | None:
    """The CRD's ``Established=True`` condition, if it has one."""
    for condition in (crd.get("status") or {}).get("conditions") or []:
        if condition.get("type") == "Established" and condition.get("status") == "True":
            return dict(condition)
    return None


def desired_status(crd: dict[str, Any], names: NamesDecision | None = None) -> dict[str, Any]:
    """The status kube's controllers give ``crd`` (without transition times); ``names`` is what
    the naming controller made of its names (None: all accepted)."""
    conflict = names.conflict if names is not None else None
    if conflict is None:
        established = (
            _condition("Established", "False", "InvalidCABundle", "The conversion webhook CABundle is invalid")
            if invalid_ca_bundle(crd) else
            _condition("Established", "True", "InitialNamesAccepted", "the initial names have been accepted")
        )
        conditions = [_condition("NamesAccepted", "True", "NoConflicts", "no conflicts found"), established]
    else:
        # As kube's naming controller: an established CRD stays established (served by the
        # names it was given); one never established waits for its names.
        kept = _established(crd)
        if kept is not None:
            kept.pop("lastTransitionTime", None)
        conditions = [
            _condition("NamesAccepted", "False", conflict[0], conflict[1]),
            kept or _condition("Established", "False", "NotAccepted", "not all names are accepted"),
        ]
    if (approval := api_approval_condition(crd)) is not None:
        conditions.insert(0, approval)
    if crd["metadata"].get("deletionTimestamp"):
        conditions.append(
            _condition("Terminating", "True", "InstanceDeletionInProgress", "CustomResource deletion is in progress")
        )
    return {
        "conditions": conditions,
        "acceptedNames": names.accepted if names is not None else dict(crd["spec"]["names"]),
        # The writes add the storage version (kube's strategy); a status write's list is kept.
        "storedVersions": list((crd.get("status") or {}).get("storedVersions") or []),
    }


def served_as(crd: dict[str, Any], names: NamesDecision) -> dict[str, Any] | None:
    """``crd`` with the names it is served by (its accepted ones), or None when it is not served:
    kube serves an established CRD by ``status.acceptedNames``, also when newer names were refused."""
    if names.conflict is not None and _established(crd) is None:
        return None
    if names.accepted == crd["spec"]["names"]:
        return crd
    # The accepted names whole: a field they leave out (no short names accepted) is not served
    # from the spec.
    return {**crd, "spec": {**crd["spec"], "names": dict(names.accepted)}}


def _without_times(status: dict[str, Any]) -> dict[str, Any]:
    conditions = [{k: v for k, v in c.items() if k != "lastTransitionTime"} for c in status.get("conditions") or []]
    return {**status, "conditions": conditions}


class CrdController:
    """Keeps ``registry`` serving the established CRDs in ``objects`` and their status current."""

    def __init__(self, objects: ObjectStore, registry: DynamicRegistry, crd_type: ResourceType) -> None:
        self._objects = objects
        self._registry = registry
        self._crd_type = crd_type
        self._crds: dict[str, dict[str, Any]] = {}
        #: CRD name → (its spec's hash, its served types): types are rebuilt only when a spec changes.
        self._built: dict[str, tuple[str, list[ResourceType]]] = {}
        self._synced = asyncio.Event()
        #: (name, resourceVersion) of the malformed CRDs already logged: one warning per version.
        self._complained: set[tuple[str, str]] = set()

    async def wait_synced(self) -> None:
        """Return once the CRDs in the store at start are served."""
        await self._synced.wait()

    async def run(self, stop: asyncio.Event) -> None:
        """List, then watch, until ``stop``; a broken watch is re-listed after a pause."""
        while not stop.is_set():
            try:
                await self._list_and_watch(stop)
            except asyncio.CancelledError:
                raise
            except errors.ApiError as exc:  # the store is unavailable: expected, and said once per try
                logger.warning("watch of customresourcedefinitions interrupted: %s; retrying", exc)
            except Exception:
                logger.exception("watching CustomResourceDefinitions failed; retrying")
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(RETRY_SECONDS):
                    await stop.wait()

    async def _list_and_watch(self, stop: asyncio.Event) -> None:
        listed = await self._objects.list(self._crd_type)
        self._crds = {obj["metadata"]["name"]: obj for obj in listed.items}
        await self.sync()
        self._synced.set()
        # The watch is read by its own task into a queue, so that waiting with a timeout (to look
        # at terminating CRDs again) never cancels the watch stream itself.
        queue: asyncio.Queue[ObjectEvent | None] = asyncio.Queue()
        pump = asyncio.create_task(self._pump(listed.resource_version, queue), name="crd-watch")
        try:
            while not stop.is_set():
                try:
                    async with asyncio.timeout(CLEANUP_RESYNC_SECONDS):
                        event = await queue.get()
                except TimeoutError:
                    if any(c["metadata"].get("deletionTimestamp") for c in self._crds.values()):
                        await self.sync()
                    continue
                if event is None:
                    await pump  # the watch ended (its error, if any, is raised here): list again
                    return
                if event.type is WatchEventType.ERROR:
                    return  # e.g. 410 Gone: list again
                name = event.object.get("metadata", {}).get("name")
                if event.type is WatchEventType.DELETED:
                    self._crds.pop(name, None)
                elif event.type in (WatchEventType.ADDED, WatchEventType.MODIFIED):
                    self._crds[name] = event.object
                else:
                    continue
                await self.sync()
        finally:
            pump.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await pump

    async def _pump(self, resource_version: str, queue: asyncio.Queue[ObjectEvent | None]) -> None:
        events = self._objects.watch(self._crd_type, resource_version=resource_version)
        try:
            async for event in events:
                queue.put_nowait(event)
        finally:
            queue.put_nowait(None)
            aclose = getattr(events, "aclose", None)
            if aclose is not None:
                await aclose()

    def _types_of(self, crd: dict[str, Any]) -> list[ResourceType]:
        name = crd["metadata"]["name"]
        stored_versions = (crd.get("status") or {}).get("storedVersions")
        deleting = crd["metadata"].get("deletionTimestamp")
        digest = hashlib.sha256(json.dumps([crd["spec"], stored_versions, deleting], sort_keys=True).encode()).hexdigest()
        cached = self._built.get(name)
        if cached is None or cached[0] != digest:
            cached = (digest, custom_types(crd))
            self._built[name] = cached
        return cached[1]

    async def sync(self) -> None:
        """Serve what the CRDs now say, then bring their status and termination along."""
        # The CRDs published for the kinds served built in define nothing (:mod:`.views`).
        crds = [crd for crd in self._crds.values() if not is_view(crd)]
        decisions = name_decisions(crds, self._registry.static)
        served: list[ResourceType] = []
        for crd in crds:
            serving = served_as(crd, decisions[crd["metadata"]["name"]])
            if serving is None:
                continue
            try:
                served.extend(self._types_of(serving))
            except (KeyError, TypeError, ValueError) as exc:
                # Only a CRD written around the API (straight into etcd) can be malformed here.
                self._complain(crd, f"not serving it: it is malformed ({exc!r})")
        for gone in set(self._built) - set(self._crds):
            del self._built[gone]
        self._registry.serve(served)
        for crd in crds:
            try:
                await self._write_status(crd, decisions[crd["metadata"]["name"]])
                if crd["metadata"].get("deletionTimestamp"):
                    await self._clean_up(crd)
            except (errors.Conflict, errors.NotFound):
                continue  # another replica (or the user) wrote first: the watch brings it back
            except (errors.ApiError, KeyError, TypeError, ValueError) as exc:
                self._complain(crd, f"its status cannot be written: {exc}")

    def _complain(self, crd: dict[str, Any], problem: str) -> None:
        meta = crd["metadata"]
        marker = (str(meta.get("name")), str(meta.get("resourceVersion")))
        if marker not in self._complained:
            self._complained.add(marker)
            logger.warning("CustomResourceDefinition %s: %s", marker[0], problem)

    async def _write_status(self, crd: dict[str, Any], names: NamesDecision) -> None:
        current = crd.get("status") or {}
        wanted = desired_status(crd, names)
        if _without_times(current) == wanted:
            return
        now = self._objects.now()
        before = {c.get("type"): c for c in current.get("conditions") or []}
        for condition in wanted["conditions"]:
            old = before.get(condition["type"])
            same = old is not None and old.get("status") == condition["status"]
            condition["lastTransitionTime"] = old.get("lastTransitionTime", now) if same and old else now
        updated = {**crd, "status": wanted}
        written = await self._objects.update_status(self._crd_type, updated, name=crd["metadata"]["name"])
        self._crds[crd["metadata"]["name"]] = written

    async def _clean_up(self, crd: dict[str, Any]) -> None:
        """Delete ``crd``'s objects; once none is left, drop the cleanup finalizer."""
        name = crd["metadata"]["name"]
        crd = self._crds.get(name, crd)
        for rt in self._built.get(name, ("", []))[1]:
            await self._objects.delete_collection(rt)
            if (await self._objects.list(rt, limit=1)).items:
                return  # objects with finalizers of their own: looked at again shortly
        finalizers = [f for f in crd["metadata"].get("finalizers") or [] if f != CLEANUP_FINALIZER]
        if finalizers == crd["metadata"].get("finalizers"):
            return
        updated = {**crd, "metadata": {**crd["metadata"], "finalizers": finalizers}}
        await self._objects.update(self._crd_type, updated, name=name)
