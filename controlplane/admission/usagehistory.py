"""A LocalQueue's usage history for Kueue's admission fair sharing, on the wire. Pure.

In: ClusterQueues and LocalQueues (wire dicts, ``kueue.x-k8s.io/v1beta1``), what each LocalQueue's
admitted workloads hold now, the entry penalties of the admissions since its last sample, and the
time. Out: the LocalQueue usage the admission cycle orders by
(:class:`controlplane.admission.core.admissionfairsharing.LocalQueueUsage`), and the LocalQueue's
``status.fairSharing`` as Kueue's LocalQueue controller keeps it: ``admissionFairSharingStatus``
with ``consumedResources`` (quantities) and ``lastUpdate``, written first with nothing consumed,
then sampled every ``usageSamplingInterval`` (the decay of the time since ``lastUpdate``, plus the
pending entry penalties), and at once after an admission so that its penalty is kept.

Only LocalQueues of a ClusterQueue whose ``spec.admissionScope.admissionMode`` is
``UsageBasedAdmissionFairSharing`` have one; another LocalQueue's ``admissionFairSharingStatus`` is
left as it is.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, MutableMapping
from datetime import datetime
from typing import Any

from controlplane.admission.core.admissionfairsharing import (
    USAGE_BASED,
    AdmissionFairSharing,
    LocalQueueUsage,
    Resources,
    sampled_consumed,
)
from controlplane.apis.kueue_views import ClusterQueueView, LocalQueueView
from controlplane.apis.quantity import QuantityError, canonical_quantity, parse_quantity
from controlplane.apis.timestamps import format_time, parse_time_or_none


def usage_based(cluster_queue: Mapping[str, Any] | None) -> bool:
    """Whether the ClusterQueue takes its workloads by their LocalQueue's usage."""
    scope = ClusterQueueView(cluster_queue).admission_scope
    return isinstance(scope, Mapping) and scope.get("admissionMode") == USAGE_BASED


def key_of(local_queue: Mapping[str, Any]) -> str:
    """namespace/name, as :attr:`controlplane.admission.core.Pending.local_queue` names it."""
    meta = local_queue.get("metadata") or {}
    return f"{meta.get('namespace')}/{meta.get('name')}"


def _history(local_queue: Mapping[str, Any]) -> Mapping[str, Any] | None:
    return LocalQueueView(local_queue).admission_fair_sharing_status


def consumed_of(local_queue: Mapping[str, Any]) -> dict[str, float]:
    """Its ``consumedResources`` in Kueue's units (a quantity that does not parse counts 0)."""
    out: dict[str, float] = {}
    for name, value in ((_history(local_queue) or {}).get("consumedResources") or {}).items():
        try:
            out[str(name)] = float(parse_quantity(value))
        except (QuantityError, TypeError):
            continue
    return out


def weight_of(local_queue: Mapping[str, Any]) -> float:
    """Its ``spec.fairSharing.weight`` (default 1)."""
    weight = LocalQueueView(local_queue).fair_sharing_weight
    try:
        return float(parse_quantity(weight)) if weight is not None else 1.0
    except (QuantityError, TypeError):
        return 1.0


def local_queue_usage(
    settings: AdmissionFairSharing,
    cluster_queues: Mapping[str, Mapping[str, Any]],
    local_queues: Iterable[Mapping[str, Any]],
    penalties: MutableMapping[str, dict[str, float]],
) -> LocalQueueUsage:
    """The usage the admission cycle orders the usage-based ClusterQueues by."""
    queues = list(local_queues)
    return LocalQueueUsage(
        settings,
        cluster_queues={name for name, obj in cluster_queues.items() if usage_based(obj)},
        consumed={key_of(lq): consumed_of(lq) for lq in queues},
        weights={key_of(lq): weight_of(lq) for lq in queues},
        penalties=penalties,
    )


def _quantity(amount: float) -> str:
    """Kueue's ``NewMilliQuantity`` of an amount already in milli-units (a sum of them), printed
    as kube does (``1171m``, ``8``)."""
    return canonical_quantity(f"{round(amount * 1000)}m")


def next_sample_in(local_queue: Mapping[str, Any], now: datetime, settings: AdmissionFairSharing) -> float:
    """Seconds until the LocalQueue's next sample is due (0: now)."""
    last = parse_time_or_none((_history(local_queue) or {}).get("lastUpdate"))
    if last is None:
        return 0.0
    return max(0.0, settings.usage_sampling_interval_seconds - (now - last).total_seconds())


def sampled(
    local_queue: Mapping[str, Any], held: Resources, penalty: Resources | None, now: datetime, settings: AdmissionFairSharing,
) -> dict[str, Any] | None:
    """The LocalQueue's ``status.fairSharing`` at ``now``, or None while no sample is due (its
    last one less than an interval ago and no entry penalty pending). ``held``: what its admitted
    workloads hold, in Kueue's units."""
    history = _history(local_queue)
    last = parse_time_or_none((history or {}).get("lastUpdate"))
    if history is not None and last is not None and not penalty and next_sample_in(local_queue, now, settings) > 0:
        return None
    first = history is None or last is None
    elapsed = 0.0 if last is None else max(0.0, (now - last).total_seconds())
    consumed = sampled_consumed(None if first else consumed_of(local_queue), held, penalty, elapsed=elapsed, settings=settings)
    block = dict(LocalQueueView(local_queue).fair_sharing_status)
    block.setdefault("weightedShare", 0)
    block["admissionFairSharingStatus"] = {
        "consumedResources": {name: _quantity(amount) for name, amount in sorted(consumed.items())},
        "lastUpdate": format_time(now),
    }
    return block
