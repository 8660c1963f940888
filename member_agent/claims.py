"""Why a PersistentVolumeClaim in the member is not bound, for pods its scheduler leaves waiting.

kube-scheduler says of such a pod only ``pod has unbound immediate PersistentVolumeClaims``; it
names neither the claim nor the cause. When the claim names a StorageClass the member lacks, the
member's PV controller cannot provision it (its ``ProvisioningFailed`` Event says
``storageclass.storage.k8s.io "fast" not found``) and the pods wait until the class is there --
something the hub can send. :class:`ClaimStates` reads the claim and, when it is not bound, its
class, and remembers the answer per claim for :attr:`ClaimStates.ttl` seconds: a status pass asks
only about the claims of pods that wait so (:func:`~member_agent.podstates.claims_to_check`), and
at most once per claim in that time, whatever the number of pods or passes. At most
:attr:`ClaimStates.limit` claims are remembered; a lookup that fails (forbidden, the member
unavailable) is remembered as nothing known, and the pods count as unschedulable meanwhile.

In: the member's API. Out: per (namespace, claim), ``{"name", "storageClassName", "message"}``
when its class is missing, else None (:data:`~member_agent.podstates.ClaimTrouble`).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Final

from member_agent.kubeapi import ApiError, KubeTransport, NotFound

logger = logging.getLogger(__name__)

BOUND: Final = "Bound"


def missing_class_trouble(claim: str, storage_class: str) -> dict[str, Any]:
    """The trouble of a claim whose StorageClass the member lacks, in the words of the PV
    controller's ``ProvisioningFailed`` Event (its lister's NotFound names the resource in the
    singular, where the API's answer says ``storageclasses.storage.k8s.io``)."""
    return {
        "name": claim, "storageClassName": storage_class,
        "message": f'storageclass.storage.k8s.io "{storage_class}" not found',
    }


class ClaimStates:
    """Per claim, what keeps it unbound as last read from the member (see the module's docstring)."""

    def __init__(
        self, member: KubeTransport, *, ttl: float = 30.0, limit: int = 1024,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.member = member
        self.ttl = ttl
        self.limit = limit
        self._clock = clock
        #: (namespace, claim) -> (read at, trouble or None).
        self._known: dict[tuple[str, str], tuple[float, Mapping[str, Any] | None]] = {}
        #: Claims read from the member (for tests and measurements).
        self.reads = 0

    async def refresh(self, wanted: Iterable[tuple[str, str]]) -> None:
        """Read the ``wanted`` claims not read within :attr:`ttl` seconds; forget expired ones."""
        now = self._clock()
        # Filled aside and swapped in whole: a capacity report taken meanwhile still sees what
        # was known before, not a claim forgotten until it is read again.
        known = {key: seen for key, seen in self._known.items() if now - seen[0] < self.ttl}
        for key in sorted(set(wanted) - known.keys()):
            if len(known) >= self.limit:
                break
            known[key] = (now, await self._read(*key))
        self._known = known

    async def _read(self, namespace: str, name: str) -> Mapping[str, Any] | None:
        self.reads += 1
        try:
            claim = await self.member.get(f"/api/v1/namespaces/{namespace}/persistentvolumeclaims/{name}")
        except ApiError as exc:  # gone (the scheduler will say so), forbidden, unavailable
            logger.debug("cannot read claim %s/%s: %s", namespace, name, exc.message)
            return None
        storage_class = str((claim.get("spec") or {}).get("storageClassName") or "")
        if not storage_class or (claim.get("status") or {}).get("phase") == BOUND:
            return None
        try:
            await self.member.get(f"/apis/storage.k8s.io/v1/storageclasses/{storage_class}")
        except NotFound:
            return missing_class_trouble(name, storage_class)
        except ApiError as exc:
            logger.debug("cannot read StorageClass %s of claim %s/%s: %s", storage_class, namespace, name, exc.message)
        return None

    def __call__(self, namespace: str, name: str) -> Mapping[str, Any] | None:
        seen = self._known.get((namespace, name))
        return seen[1] if seen is not None else None

    def snapshot(self) -> Callable[[str, str], Mapping[str, Any] | None]:
        """What is known now, as a lookup that later reads do not change (for a worker thread)."""
        troubles = {key: trouble for key, (_, trouble) in self._known.items() if trouble is not None}
        return lambda namespace, name: troubles.get((namespace, name))
