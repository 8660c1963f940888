"""Whether every pod of a gang fits in a cluster at once, and why not.

In: a :class:`~controlplane.scheduler.core.snapshot.ClusterSnapshot`, the gang's
:class:`~controlplane.interpreter.base.Component` roles and optionally the
:class:`~controlplane.scheduler.core.reservations.Reservations` not yet reported. Out:
``fits_gang`` -> (fits, reasons), or ``gang_fit`` with the reasons worked out when read.
Estimates settle most gangs (:mod:`~controlplane.scheduler.core.estimator`); the rest are
packed first-fit decreasing with :func:`~controlplane.scheduler.core.packing.place_pods`.
Verdicts are memoised per reservation-adjusted snapshot. No I/O.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence

from controlplane.apis.gpus import is_gpu_resource
from controlplane.interpreter.base import Component
from controlplane.interpreter.requirements import ReplicaRequirements
from controlplane.scheduler.core.estimating import UNLIMITED, explain_shapes, shape_fit
from controlplane.scheduler.core.estimator import estimate_max_replicas
from controlplane.scheduler.core.packing import place_pods
from controlplane.scheduler.core.replaying import adjusted_snapshot
from controlplane.scheduler.core.reservations import Reservations
from controlplane.scheduler.core.snapshot import ClusterSnapshot, NodeShape

_GANG = "gang"

GangReasons = Callable[[], tuple[str, ...]]
"""Why a gang does not fit, worked out when first called (then remembered)."""


def _no_reasons() -> tuple[str, ...]:
    return ()


@functools.lru_cache(maxsize=1024)
def _envelope(components: tuple[Component, ...]) -> ReplicaRequirements | None:
    """A pod that needs, of every resource, the most any component needs; None when the
    components differ in where they may run (selectors, affinity, tolerations) or in the devices
    they share."""
    first = components[0].requirements if components else None
    if first is None:
        return None
    largest: dict[str, int] = {}
    for component in components:
        req = component.requirements
        if (req.node_selector, req.node_affinity, req.tolerations, req.shared) != (
            first.node_selector,
            first.node_affinity,
            first.tolerations,
            first.shared,
        ):
            return None
        for name, amount in req.resources:
            if amount > largest.get(name, 0):
                largest[name] = amount
    return ReplicaRequirements(
        resources=tuple(sorted(largest.items())),
        node_selector=first.node_selector,
        node_affinity=first.node_affinity,
        tolerations=first.tolerations,
        shared=first.shared,
    ).interned()


def _size_key(component: Component) -> tuple[int, int, int]:
    resources = component.requirements.resource_map
    gpus = sum(v for k, v in resources.items() if is_gpu_resource(k))
    return (gpus, resources.get("cpu", 0), resources.get("memory", 0))


def fits_gang(
    cluster: ClusterSnapshot,
    components: Sequence[Component],
    *,
    reserved: Reservations | None = None,
) -> tuple[bool, tuple[str, ...]]:
    """Whether every pod of the gang fits in ``cluster`` at once, and why not.

    Two cheap checks settle most cases: a role that does not fit even alone rules the
    cluster out; room for as many "envelope" pods (the largest request of every resource)
    as the gang has pods proves it fits. Otherwise first-fit decreasing: components in
    decreasing size (GPUs, then cpu, then memory), each placed with :func:`place_pods` on
    the capacity the larger ones left.
    """
    ok, reasons = gang_fit(cluster, components, reserved=reserved)
    return ok, reasons()


def gang_fit(
    cluster: ClusterSnapshot,
    components: Sequence[Component],
    *,
    reserved: Reservations | None = None,
) -> tuple[bool, GangReasons]:
    """:func:`fits_gang` with the reasons left to work out when they are read (memoised per snapshot)."""
    snapshot = adjusted_snapshot(cluster, reserved)
    gang = tuple(components)
    key = (_GANG, gang)
    cached = snapshot.estimates.get(key)
    if cached is None:
        cached = snapshot.estimates[key] = _gang_fit(snapshot, gang)
    result: tuple[bool, GangReasons] = cached
    return result


def _gang_fit(snapshot: ClusterSnapshot, components: tuple[Component, ...]) -> tuple[bool, GangReasons]:
    envelope = _envelope(components)
    if envelope is not None and estimate_max_replicas(snapshot, envelope).replicas >= sum(
        c.replicas for c in components
    ):
        # Sufficient: every pod fits in a slot sized for the largest request of each resource
        # (so each role alone fits too). Settles most gangs with one estimate.
        return True, _no_reasons
    ordered = _by_size(components)
    for component in ordered:
        # Necessary: each role alone must fit. The largest roles are the likeliest to fail, so
        # they are asked first; the reasons name the first role (in the gang's order) that fails.
        if component.replicas and estimate_max_replicas(snapshot, component.requirements).replicas < component.replicas:
            return False, functools.cache(functools.partial(_alone_reasons, snapshot.shapes, components))
    shapes = snapshot.shapes
    for component in ordered:
        shapes, placed = place_pods(shapes, component.requirements, component.replicas)
        if placed < component.replicas:
            return False, functools.cache(
                functools.partial(_placed_reasons, shapes, component, placed)
            )
    return True, _no_reasons


@functools.lru_cache(maxsize=1024)
def _by_size(components: tuple[Component, ...]) -> tuple[Component, ...]:
    """The gang's roles in decreasing size (GPUs, then cpu, then memory)."""
    return tuple(sorted(components, key=_size_key, reverse=True))


def _alone_reasons(shapes: Sequence[NodeShape], components: tuple[Component, ...]) -> tuple[str, ...]:
    # The shapes, not the snapshot: the snapshot memoises the verdict holding this function.
    for component in components:
        if not component.replicas:
            continue
        by_product: dict[str, int] = {}
        for shape in shapes:
            fit = shape_fit(shape, component.requirements)
            if fit:
                by_product[shape.product] = by_product.get(shape.product, 0) + fit * shape.count
        alone = min(sum(by_product.values()), UNLIMITED)
        if alone < component.replicas:
            return (
                f"gang does not fit: {component.name} needs {component.replicas} pod(s), "
                f"{alone} fit even alone",
                *explain_shapes(shapes, component.requirements),
            )
    return ()


def _placed_reasons(left: tuple[NodeShape, ...], component: Component, placed: int) -> tuple[str, ...]:
    # Why the rest do not fit, on the capacity left after placing what did.
    return (
        f"gang does not fit: {component.name} needs {component.replicas} pod(s), "
        f"{placed} fit after placing the larger roles",
        *explain_shapes(left, component.requirements),
    )
