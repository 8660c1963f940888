"""The simulated member's reading of a pod's Dynamic Resource Allocation claims: the minimal
faithful rule its scheduler applies.

kube's scheduler (the DynamicResources plugin) places a pod with claims only on a node where the
DRA driver can allocate every request; NVIDIA's driver publishes one device per GPU of the node, and
one per MIG device. The simulator keeps that rule for NVIDIA's two classes: a pod's claims of
``gpu.nvidia.com`` need that many GPUs free on the one node it lands on (``All``:
:data:`~controlplane.apis.dra.ALL_DEVICES_ESTIMATE`), its claims of ``mig.nvidia.com`` whose
selector pins a profile that many slices of the profile (as ``nvidia.com/mig-<profile>``), of the
model a ``productName`` equality selector names (:mod:`controlplane.apis.dra`), and hold them while
it runs, as a device-plugin request does. A claim pods name directly (``resourceClaimName``) is
one set of devices: the first pod placed allocates it on its node and later pods naming it go to
that node and take nothing more (:mod:`simulator.scheduling.sharedclaims`). A pod naming a template or claim the member does not hold
stays Pending (kube's resourceclaim controller cannot create its claim), and is looked at again
when one arrives. Requests of other classes (NICs), and MIG requests that leave the profile open,
are not simulated: no driver publishes ResourceSlices here, so they place as if satisfied. A
request's DeviceClass is read as the hub reads it (:func:`controlplane.apis.dra.class_selection`:
the member's own class of that name, else NVIDIA's published one); a class whose selectors are not
read counts nothing here either.

In: the member's ``ObjectClient``. Out: pods as the scheduler reads them (:class:`PodRequest`; None: wait). The
informers run with the cluster's others.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any

from controlplane.apis.dra import (
    CLAIM,
    DEVICE_CLASS,
    RESOURCE_API_VERSION,
    TEMPLATE,
    claim_spec_of,
    references_claims,
    shared_claims,
    with_claimed_gpus,
)
from controlplane.apis.drareading import ClaimReader, class_spec
from controlplane.controllers.informing import Informer
from controlplane.objectclient import ObjectClient
from simulator.informers import as_handler
from simulator.scheduling.model import PodRequest, SharedClaim
from simulator.scheduling.reading import pod_request


class DraClaims(ClaimReader):
    """The member's ResourceClaimTemplates, ResourceClaims and DeviceClasses, read to schedule pods that
    name them (as the hub reads its own: :class:`~controlplane.apis.drareading.ClaimReader`)."""

    def __init__(self, objects: ObjectClient, on_change: Callable[[], None]) -> None:
        self.informers: dict[str, Informer] = {}
        for kind in (TEMPLATE, CLAIM, DEVICE_CLASS):
            rt = objects.registry.for_kind(RESOURCE_API_VERSION, kind)
            if rt is not None:
                informer = self.informers[kind] = Informer(objects, rt)
                informer.add_handler(as_handler(lambda _event, _old, _new: on_change()))

    def device_class(self, name: str) -> Mapping[str, Any] | None:
        informer = self.informers.get(DEVICE_CLASS)
        return class_spec(informer.get(None, name) if informer is not None else None)

    def spec(self, kind: str, namespace: str, name: str) -> Mapping[str, Any] | None:
        informer = self.informers.get(kind)
        return claim_spec_of(kind, informer.get(namespace, name) if informer is not None else None)

    def request(self, pod: dict[str, Any]) -> PodRequest | None:
        """The pod as the scheduler reads it: the GPUs of its templates' claims as ``nvidia.com/gpu``
        (and MIG) requests, the claims it names directly as :class:`SharedClaim` (held once, for
        every pod naming them), the model any of them pins as a node selector; None while a
        claim it names is not here. Raises ValueError for a malformed quantity."""
        if not references_claims(pod):
            return pod_request(pod)
        namespace = str((pod.get("metadata") or {}).get("namespace") or "default")
        missing: list[str] = []

        def lookup(kind: str, name: str) -> Mapping[str, Any] | None:
            found = self.spec(kind, namespace, name)
            if found is None:
                missing.append(name)
            return found

        resolved = with_claimed_gpus(pod, lookup, shared=False, classes=self.device_class)
        shared = shared_claims(pod.get("spec"), lookup, self.device_class)
        if missing:
            return None
        return dataclasses.replace(pod_request(resolved), shared_claims=tuple(
            SharedClaim(f"{namespace}/{name}", tuple(sorted(found.resources().items())))
            for name, found in shared.items()
        ))
