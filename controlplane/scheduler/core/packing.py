"""Where reserved pods land on a cluster's node shapes: best-fit packing, and GPU spilling.

In: node shapes, a :class:`~controlplane.interpreter.requirements.ReplicaRequirements` and a
number of pods. Out: the shapes with those pods' resources taken, split into the nodes that
took some and those that did not. :func:`place_pods` puts whole pods greedily on the
eligible node shape where the fewest such pods fit (best fit), node by node, so large holes
stay free for large pods; the member's own scheduler may spread pods differently, so this
is an approximation of where they will land, exact for the totals. :func:`spill_gpus` takes
the GPUs of pods that fit no node whole from the nodes with the most free first, in
whatever pieces are there, so the cluster's total is never sold twice. Replaying
reservations (:mod:`~controlplane.scheduler.core.replaying`) and gang fitting
(:mod:`~controlplane.scheduler.core.gangs`) both pack with these. No I/O.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TypeVar

from controlplane.apis.gpus import is_gpu_resource
from controlplane.interpreter.requirements import RESOURCE_PODS, ReplicaRequirements
from controlplane.scheduler.core.estimating import NO_FIT, Splice, node_eligible, shape_fit
from controlplane.scheduler.core.snapshot import NodeShape

Spilled = tuple[tuple[str, int], ...]
"""GPU resources a promise that fits no node whole holds on one node: ``((resource, amount), ...)``."""

Taken = TypeVar("Taken")


def _subtract(free: Mapping[str, int], req: ReplicaRequirements, pods: int) -> dict[str, int]:
    """A node's free resources once it holds ``pods`` replicas (and, once, the devices they share)."""
    out = dict(free)
    for name, amount in req.shared:
        out[name] = out.get(name, 0) - amount
    for name, amount in req.resources:
        out[name] = out.get(name, 0) - amount * pods
    if RESOURCE_PODS in out:
        out[RESOURCE_PODS] -= pods
    return out


def _replace_pieces(
    shapes: Sequence[NodeShape],
    pieces: Mapping[int, list[NodeShape]],
    took: Mapping[int, Taken],
    *,
    splices: list[Splice] | None,
    taken: list[Taken] | None,
) -> tuple[NodeShape, ...]:
    """``shapes`` with ``pieces[i]`` in place of ``shapes[i]``; each replacement is appended to
    ``splices`` (highest index first) when given, and with it ``took[i]`` to ``taken``."""
    if splices is not None:
        for i in sorted(pieces, reverse=True):
            splices.append((i, tuple(pieces[i])))
            if taken is not None:
                taken.append(took[i])
    if len(pieces) == 1:
        [(i, split)] = pieces.items()
        return (*shapes[:i], *split, *shapes[i + 1 :])
    out: list[NodeShape] = []
    start = 0
    for i in sorted(pieces):
        out.extend(shapes[start:i])
        out.extend(pieces[i])
        start = i + 1
    out.extend(shapes[start:])
    return tuple(out)


def place_pods(
    shapes: Sequence[NodeShape],
    req: ReplicaRequirements,
    replicas: int,
    *,
    removed: list[NodeShape] | None = None,
    added: list[NodeShape] | None = None,
    fits: Sequence[int] | None = None,
    splices: list[Splice] | None = None,
    taken: list[tuple[int, ...]] | None = None,
) -> tuple[tuple[NodeShape, ...], int]:
    """Place ``replicas`` pods greedily on ``shapes``; return the remaining shapes and pods placed.

    Best fit: eligible shapes where the fewest such pods fit per node are filled first,
    each node as full as it gets, so large holes stay free for large pods. A shape group
    is split into the nodes that took pods and those that did not. The shapes replaced
    and the ones replacing them are appended to ``removed`` and ``added`` when given;
    each replacement is appended to ``splices`` (highest index first) when given, and
    with it to ``taken`` the pods each node of every piece took (0 for the untouched ones).
    ``fits`` is the fit vector of ``req`` over ``shapes`` when the caller has it (see
    :func:`~controlplane.scheduler.core.estimating.fit_vector`): the tightest shape is then found without looking at every shape.
    """
    if replicas <= 0:
        return tuple(shapes), 0
    if fits is not None:
        least = min(fits, default=NO_FIT)
        if least == NO_FIT:
            return tuple(shapes), 0
        tightest = (least, fits.index(least))
        candidates = None
    else:
        candidates = []
        for i, shape in enumerate(shapes):
            fit = shape.fits.get(req)
            if fit is None:
                fit = shape_fit(shape, req)
            if fit:
                candidates.append((fit, i))
        if not candidates:
            return tuple(shapes), 0
        tightest = min(candidates)
    if tightest[0] * shapes[tightest[1]].count >= replicas:
        order = [tightest]  # the usual case: one shape group takes every pod
    else:
        if candidates is None:
            assert fits is not None
            candidates = [(fit, i) for i, fit in enumerate(fits) if fit != NO_FIT]
        candidates.sort()
        order = candidates
    pieces: dict[int, list[NodeShape]] = {}
    pods: dict[int, tuple[int, ...]] = {}
    remaining = replicas
    for fit, i in order:
        shape = shapes[i]
        take = min(remaining, fit * shape.count)
        full, rest = divmod(take, fit)
        split: list[NodeShape] = []
        untouched = shape.count - full - (1 if rest else 0)
        if untouched:
            split.append(shape.with_count(untouched))
        if full:
            split.append(shape.with_free(_subtract(shape.free, req, fit), full))
        if rest:
            split.append(shape.with_free(_subtract(shape.free, req, rest), 1))
        pieces[i] = split
        if taken is not None:
            pods[i] = (*((0,) if untouched else ()), *((fit,) if full else ()), *((rest,) if rest else ()))
        if removed is not None and added is not None:
            removed.append(shape)
            added.extend(split)
        remaining -= take
        if not remaining:
            break
    return _replace_pieces(shapes, pieces, pods, splices=splices, taken=taken), replicas - remaining


def spill_gpus(
    shapes: Sequence[NodeShape],
    req: ReplicaRequirements,
    replicas: int,
    *,
    removed: list[NodeShape] | None = None,
    added: list[NodeShape] | None = None,
    splices: list[Splice] | None = None,
    taken: list[tuple[Spilled, ...]] | None = None,
) -> tuple[NodeShape, ...]:
    """Take the GPUs of ``replicas`` pods of ``req`` that fit no node whole from ``shapes``.

    Each GPU resource of the request (``replicas`` x its amount) is taken from the eligible
    nodes with the most free of the request's GPU resources first, as much as each node has,
    until it is all taken or nothing is left. So a promise the hub cannot place still counts
    against the cluster's total, and against its largest holes first: whatever the member did
    with it, no estimate is larger than the truth because of it. Only GPUs are taken (they are
    what the federation places by); nodes with an unusable MIG layout offer none. Returns the
    remaining shapes; ``removed``, ``added``, ``splices`` (highest index first) and ``taken``
    (per piece, the amounts each of its nodes gave, empty for untouched ones) as in
    :func:`place_pods`.
    """
    remaining = {name: amount * replicas for name, amount in req.resources if is_gpu_resource(name)}
    if replicas <= 0 or not remaining:
        return tuple(shapes)
    order = sorted(
        (-sum(shape.free.get(name, 0) for name in remaining), i)
        for i, shape in enumerate(shapes)
        if not shape.invalid_mig and node_eligible(shape, req)
    )
    pieces: dict[int, list[NodeShape]] = {}
    gave: dict[int, tuple[Spilled, ...]] = {}
    for most, i in order:
        if not most or not any(remaining.values()):
            break
        shape = shapes[i]
        left = shape.count
        split: list[NodeShape] = []
        amounts: list[Spilled] = []
        while left:
            give = {
                name: min(shape.free.get(name, 0), need) for name, need in remaining.items() if need > 0
            }
            give = {name: amount for name, amount in give.items() if amount > 0}
            if not give:
                break
            nodes = min(left, min(remaining[name] // amount for name, amount in give.items()))
            free = dict(shape.free)
            for name, amount in give.items():
                free[name] -= amount
                remaining[name] -= amount * nodes
            split.append(shape.with_free(free, nodes))
            amounts.append(tuple(sorted(give.items())))
            left -= nodes
        if not split:
            continue
        if left:
            split.insert(0, shape.with_count(left))
            amounts.insert(0, ())
        pieces[i] = split
        gave[i] = tuple(amounts)
        if removed is not None and added is not None:
            removed.append(shape)
            added.extend(split)
    return _replace_pieces(shapes, pieces, gave, splices=splices, taken=taken)
