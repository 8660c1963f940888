"""DRA ResourceClaims several pods name directly (``resourceClaimName``), as the simulated member's
scheduler holds them: once, on one node.

kube allocates such a claim once, for the first pod that needs it, from the devices of the node
that pod lands on (NVIDIA's driver publishes node-local devices, so the allocation's
``nodeSelector`` names that node); every later pod naming the claim is only reserved in its
``reservedFor``, and its DynamicResources filter accepts only the nodes the allocation's
``nodeSelector`` matches (``resourceclaim not available on the node`` on the others, after
the usage-independent filters and NodeResourcesFit). kube's resourceclaim controller drops a pod
from ``reservedFor`` when it ends and deallocates the claim when nobody is left.

:class:`SharedClaims` keeps that: the claim's devices held on its node apart from any pod's
allocation (:class:`ClaimHold`), its users, and, for a pod to place, what it asks there
(:meth:`SharedClaims.pending`: the devices of its claims not held yet added to its requests, and
``claim_node`` set to the node its held claims are on). Pure bookkeeping; the cluster state takes
and gives back the devices.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from dataclasses import dataclass, field

from simulator.devices import Device
from simulator.scheduling.model import PodRequest

#: ``claim_node`` when a pod's held claims are on different nodes: no node has them all.
NO_NODE = ""


@dataclass(slots=True)
class ClaimHold:
    """One allocated shared claim: its node, the devices (and amounts) it holds, and the pods using it."""

    node: str
    requests: dict[str, int]
    devices: tuple[Device, ...] = ()
    #: The pod whose placement allocated it (its binding names the devices, for DCGM).
    carrier: str = ""
    users: set[str] = field(default_factory=set)


class SharedClaims:
    """The shared claims allocated on the member, by ``namespace/name``."""

    def __init__(self) -> None:
        self.holds: dict[str, ClaimHold] = {}
        #: The claims each placed pod uses.
        self._used_by: dict[str, tuple[str, ...]] = {}

    def pending(self, pod: PodRequest) -> PodRequest:
        """``pod`` as the filters read it: its requests plus the devices of its shared claims not
        held yet, and the node its held claims are available on (None: none is held)."""
        if not pod.shared_claims:
            return pod
        requests = dict(pod.requests)
        nodes = set()
        for claim in pod.shared_claims:
            hold = self.holds.get(claim.key)
            if hold is not None:
                nodes.add(hold.node)
                continue
            for resource, amount in claim.requests:
                requests[resource] = requests.get(resource, 0) + amount
        claim_node = None if not nodes else nodes.pop() if len(nodes) == 1 else NO_NODE
        return dataclasses.replace(pod, requests=requests, claim_node=claim_node)

    def to_hold(self, pod: PodRequest) -> Iterator[tuple[str, dict[str, int]]]:
        """The claims placing ``pod`` allocates: ``(key, requests)`` of each not held yet."""
        for claim in pod.shared_claims:
            if claim.key not in self.holds:
                yield claim.key, dict(claim.requests)

    def hold(self, key: str, node: str, requests: dict[str, int], devices: tuple[Device, ...], carrier: str) -> None:
        self.holds[key] = ClaimHold(node, requests, devices, carrier)

    def use(self, pod: PodRequest) -> None:
        """Record ``pod`` among the users of its claims (each held by now)."""
        if pod.shared_claims:
            self._used_by[pod.key] = tuple(claim.key for claim in pod.shared_claims)
            for key in self._used_by[pod.key]:
                self.holds[key].users.add(pod.key)

    def carried(self, pod_key: str) -> tuple[Device, ...]:
        """The devices of the claims whose allocation ``pod_key``'s placement made."""
        return tuple(d for hold in self.holds.values() if hold.carrier == pod_key for d in hold.devices)

    def leave(self, pod_key: str) -> list[ClaimHold]:
        """Drop ``pod_key`` from its claims' users; the claims nobody uses any more, deallocated."""
        freed = []
        for key in self._used_by.pop(pod_key, ()):
            hold = self.holds.get(key)
            if hold is None:
                continue
            hold.users.discard(pod_key)
            if not hold.users:
                freed.append(self.holds.pop(key))
        return freed
