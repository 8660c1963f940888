"""A simulated member's PersistentVolume controller, as far as a claim's StorageClass goes.

kube-controller-manager provisions a volume for a PersistentVolumeClaim through the
StorageClass the claim names. When the member has no such class the claim stays ``Pending``
and the controller records a Warning Event ``ProvisioningFailed`` on it:
``storageclass.storage.k8s.io "fast" not found`` (again at each retry; the recorder counts
them). Once the class exists the claim binds: ``status.phase: Bound`` with the requested
capacity and access modes. A claim that names no class binds too (as if the member's default
class had provisioned it), and so does one whose class waits for its first consumer: the
simulated scheduler places pods on any node, so it binds at once. Until then kube-scheduler
leaves a pod of the claim unscheduled: ``pod has unbound immediate PersistentVolumeClaims``
(:func:`unbound_claim_message`).

In: the member's object client, its informers of claims and StorageClasses, an Event recorder.
Out: :class:`ClaimBinder`, a loop the simulated cluster runs; :func:`claim_status`, pure.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Mapping
from typing import Any, Final

from controlplane.apis.events import EventType
from controlplane.apis.pods import UNBOUND_IMMEDIATE_CLAIMS
from controlplane.controllers.informing import Informer
from controlplane.objectclient import ObjectClient, WatchEventType, errors
from simulator.events import EventAction, EventReason
from simulator.informers import as_handler
from simulator.recording import EventRecorder

#: The ``source.component`` of the PV controller's Events.
PV_CONTROLLER: Final = "persistentvolume-controller"
BOUND: Final = "Bound"
PENDING: Final = "Pending"


def claim_status(claim: Mapping[str, Any], class_exists: bool) -> dict[str, Any]:
    """The status the member's PV controller gives ``claim``: Bound (with the capacity and
    access modes it asked for) unless it names a StorageClass the member lacks."""
    spec = claim.get("spec") or {}
    if spec.get("storageClassName") and not class_exists:
        return {"phase": PENDING}
    status: dict[str, Any] = {"phase": BOUND, "accessModes": list(spec.get("accessModes") or [])}
    requested = ((spec.get("resources") or {}).get("requests") or {}).get("storage")
    if requested is not None:
        status["capacity"] = {"storage": requested}
    return status


def missing_class_message(name: str) -> str:
    """The PV controller's ``ProvisioningFailed`` message for a claim whose class is missing."""
    return f'storageclass.storage.k8s.io "{name}" not found'


def unbound_claim_message(node_count: int) -> str:
    """kube-scheduler's text for a pod whose claim is not bound yet: VolumeBinding's PreFilter
    status, then DefaultPreemption's."""
    return (
        f"0/{node_count} nodes are available: {UNBOUND_IMMEDIATE_CLAIMS}. "
        f"preemption: 0/{node_count} nodes are available: {node_count} Preemption is not helpful for scheduling."
    )


def is_bound(claim: Mapping[str, Any]) -> bool:
    return (claim.get("status") or {}).get("phase") == BOUND


class ClaimBinder:
    """Binds the member's claims whose class exists; records why the others wait. Level-based:
    every pass looks at every claim not bound yet (a claim, once bound, stays bound)."""

    def __init__(
        self, objects: ObjectClient, claims: Informer, classes: Informer, events: EventRecorder | None
    ) -> None:
        self._objects = objects
        self._claims = claims
        self._classes = classes
        self._events = events
        self._wake = asyncio.Event()
        claims.add_handler(as_handler(self._changed))
        classes.add_handler(as_handler(self._changed))

    def _changed(self, event: WatchEventType, old: dict[str, Any] | None, new: dict[str, Any] | None) -> None:
        if event is not WatchEventType.DELETED:
            self._wake.set()

    async def run(self) -> None:
        self._wake.set()
        while True:
            await self._wake.wait()
            self._wake.clear()
            await self.pass_once()

    async def pass_once(self) -> None:
        for claim in self._claims.items():
            if is_bound(claim):
                continue
            name = str((claim.get("spec") or {}).get("storageClassName") or "")
            status = claim_status(claim, bool(name) and self._classes.get(None, name) is not None)
            if status["phase"] == PENDING and self._events is not None:
                self._events.record(
                    claim, type=EventType.WARNING, reason=EventReason.PROVISIONING_FAILED,
                    message=missing_class_message(name), action=EventAction.PROVISIONING, component=PV_CONTROLLER,
                )
            if status != (claim.get("status") or {}):
                with contextlib.suppress(errors.Conflict, errors.NotFound):
                    await self._objects.update_status(self._claims.rt, {**claim, "status": status})
