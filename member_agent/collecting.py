"""The agent's EndpointSlice collection for the hub's MultiClusterServices (Karmada's
endpointslice-collect-controller, as the agent runs it in pull mode).

The hub marks the Work that carries a MultiClusterService's Service to a provider cluster with
:data:`~controlplane.apis.mcs_endpointslices.LABEL_COLLECT_ENDPOINTSLICES`. For such a Work the
agent reports the Service's EndpointSlices in the member, those kube's endpointslice controller
manages (the dispatched ones of other clusters are not collected back), in the Work's status:
the Service's manifest status gains ``endpointSlices`` (each slice's name, ``addressType``,
``endpoints`` and ``ports``; :func:`~controlplane.apis.mcs_endpointslices.collected_slice`), as
many as :func:`~controlplane.apis.mcs_endpointslices.bounded_slices` lets a Work status carry
(the rest named in its ``EndpointSlicesCollected=False`` condition).
The agent writes nothing else: the status of its own Works is all it may write at the hub, and
the hub's controller (:mod:`controlplane.controllers.multiclusterservices`) writes the consumer
clusters' Works.

In: the member transport, the Works as the agent's Work informer holds them. Out: an informer of
the member's managed EndpointSlices (started when the first such Work appears), the Works whose
status a slice change makes due (``on_due``), and :meth:`EndpointSliceCollector.annotate`, which
puts the slices into a Work status before it is written.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping
from typing import Any

from controlplane.apis.kube.endpointslices import LABEL_MANAGED_BY, LABEL_SERVICE_NAME, MANAGED_BY_CONTROLLER
from controlplane.apis.mcs_endpointslices import (
    COLLECTED_CONDITION,
    COLLECTED_FIELD,
    LABEL_COLLECT_ENDPOINTSLICES,
    bounded_slices,
    collected_slice,
)
from member_agent.informing import Informer
from member_agent.kubeapi import KubeTransport
from member_agent.manifests import desired_manifests

logger = logging.getLogger(__name__)

PATH = "/apis/discovery.k8s.io/v1/endpointslices"
#: (namespace, Service name)
ServiceKey = tuple[str, str]


def _trimmed(obj: Mapping[str, Any]) -> dict[str, Any]:
    """What the informer keeps of a member slice: its Service and what is reported of it."""
    meta = obj.get("metadata") or {}
    service = (meta.get("labels") or {}).get(LABEL_SERVICE_NAME)
    return {
        "metadata": {
            "name": meta.get("name"),
            "namespace": meta.get("namespace"),
            "labels": {LABEL_SERVICE_NAME: service},
        },
        **{k: obj[k] for k in ("addressType", "endpoints", "ports") if k in obj},
    }


def collected_service(work: Mapping[str, Any]) -> ServiceKey | None:
    """The Service whose EndpointSlices the Work asks for; None for any other Work."""
    labels = (work.get("metadata") or {}).get("labels") or {}
    if labels.get(LABEL_COLLECT_ENDPOINTSLICES) != "true":
        return None
    for ident, _ in desired_manifests(work):
        if ident.api_version == "v1" and ident.kind == "Service":
            return ident.namespace or "default", ident.name
    return None


class EndpointSliceCollector:
    """Which Works collect which Service's slices, and the member's slices to collect."""

    def __init__(self, member: KubeTransport, *, on_due: Callable[[str], None]) -> None:
        self._member = member
        self._on_due = on_due
        self._works: dict[ServiceKey, set[str]] = {}
        self._service_of: dict[str, ServiceKey] = {}
        self.informer: Informer | None = None

    def work_changed(self, key: str, work: Mapping[str, Any] | None, group: asyncio.TaskGroup | None) -> None:
        """Keep the Work's entry; start the slice informer once a Work first asks for slices."""
        before = self._service_of.pop(key, None)
        if before is not None:
            works = self._works.get(before, set())
            works.discard(key)
            if not works:
                self._works.pop(before, None)
        service = collected_service(work) if work is not None else None
        if service is None:
            return
        self._service_of[key] = service
        self._works.setdefault(service, set()).add(key)
        if self.informer is None and group is not None:
            self.informer = Informer(
                self._member,
                PATH,
                name="endpointslices",
                transform=_trimmed,
                on_change=self._slice_changed,
                query={"labelSelector": f"{LABEL_MANAGED_BY}={MANAGED_BY_CONTROLLER}"},
            )
            group.create_task(self.informer.run(), name="watch-endpointslices")
            logger.info("collecting EndpointSlices for MultiClusterServices")

    def _slice_changed(self, key: str) -> None:
        namespace = key.partition("/")[0]
        # The Service a deleted slice belonged to is unknown by now: every Work of the namespace.
        for (ns, _), works in list(self._works.items()):
            if ns == namespace:
                for work in works:
                    self._on_due(work)

    def annotate(self, work: Mapping[str, Any], status: Mapping[str, Any]) -> Mapping[str, Any]:
        """``status`` with the Service's collected slices on its manifest status (as it is when
        the Work collects nothing). Until the member's slices are listed (the agent just started)
        the slices the Work's status last reported stay, so the consumers keep them meanwhile."""
        service = collected_service(work)
        if service is None:
            return status
        namespace, name = service
        if self.informer is None or not self.informer.synced.is_set():
            reported = _service_entry((work.get("status") or {}).get("manifestStatuses"), namespace, name)
            if reported is None or COLLECTED_FIELD not in reported:
                return status
            kept = next((c for c in reported.get("conditions") or () if c.get("type") == COLLECTED_CONDITION), None)
            return _with_slices(status, namespace, name, reported[COLLECTED_FIELD], kept)
        slices = sorted(
            (
                collected_slice(obj)
                for key, obj in self.informer.objects.items()
                if key.startswith(f"{namespace}/")
                and ((obj.get("metadata") or {}).get("labels") or {}).get(LABEL_SERVICE_NAME) == name
            ),
            key=lambda s: str(s["name"]),
        )
        slices, truncated = bounded_slices(slices, service=f"{namespace}/{name}")
        return _with_slices(status, namespace, name, slices, truncated)


def _is_service(entry: Mapping[str, Any], namespace: str, name: str) -> bool:
    ident = entry.get("identifier") or {}
    return (ident.get("kind"), ident.get("version"), ident.get("namespace") or "default", ident.get("name")) == (
        "Service",
        "v1",
        namespace,
        name,
    )


def _service_entry(entries: Any, namespace: str, name: str) -> Mapping[str, Any] | None:
    """The Service's manifest status among ``entries`` (a Work status's ``manifestStatuses``)."""
    for entry in entries if isinstance(entries, list) else ():
        if isinstance(entry, Mapping) and _is_service(entry, namespace, name):
            return entry
    return None


def _with_slices(
    status: Mapping[str, Any], namespace: str, name: str, slices: Any, truncated: Mapping[str, Any] | None
) -> Mapping[str, Any]:
    """``status`` with ``slices`` (and the ``truncated`` condition, if any) on the Service's entry."""
    manifests = []
    for entry in status.get("manifestStatuses") or []:
        if _is_service(entry, namespace, name):
            conditions = [c for c in entry.get("conditions") or () if c.get("type") != COLLECTED_CONDITION]
            if truncated is not None:
                conditions.append(truncated)
            entry = {k: v for k, v in entry.items() if k != "conditions"}
            entry = {**entry, COLLECTED_FIELD: slices, **({"conditions": conditions} if conditions else {})}
        manifests.append(entry)
    return {**status, "manifestStatuses": manifests}
