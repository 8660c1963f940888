"""A MultiClusterService's EndpointSlices, from its provider clusters to its consumer clusters:
the rules of Karmada's endpointslice-collect and endpointslice-dispatch controllers
(``pkg/controllers/multiclusterservice``).

The hub labels the Work that carries the Service to a provider cluster with
:data:`LABEL_COLLECT_ENDPOINTSLICES`; that cluster's agent reports the Service's EndpointSlices
(those kube's endpointslice controller manages) on the Service's manifest status
(:func:`collected_slice` is what it keeps of each). Each consumer cluster other than the provider
gets every collected slice as Karmada dispatches it (:func:`dispatched_slice`): named
``<provider>-<slice>``, labelled ``kubernetes.io/service-name: <service>`` and
``endpointslice.kubernetes.io/managed-by: endpointslice-dispatch-controller.karmada.io``, with the
annotation ``endpointslice.karmada.io/provision-cluster: <provider>``.

What the agent reports is bounded (:func:`bounded_slices`): a Service with thousands of pods has
tens of slices, and a Work is one object the hub stores whole, refused past etcd's request limit
(``--max-request-bytes``, 1.5 MiB by default). The slices take at most :data:`MAX_COLLECTED_BYTES`
of it, whole slices in name order; those left out are named in the manifest status' condition
``EndpointSlicesCollected=False``, reason ``EndpointSlicesTruncated``.

In: wire objects. Out: plain dicts. Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

import orjson

from controlplane.apis.kube.endpointslices import API_VERSION, KIND, LABEL_MANAGED_BY, LABEL_SERVICE_NAME

#: On the Work carrying a MultiClusterService's Service to a provider cluster: its agent reports
#: the Service's EndpointSlices on the Work's status.
LABEL_COLLECT_ENDPOINTSLICES: Final = "endpointslice.gpufed.io/collect"
#: Karmada's ``util.EndpointSliceProvisionClusterAnnotation``: the provider a dispatched slice came from.
PROVISION_CLUSTER_ANNOTATION: Final = "endpointslice.karmada.io/provision-cluster"
#: Karmada's ``util.EndpointSliceDispatchControllerLabelValue``: the managed-by of a dispatched slice.
MANAGED_BY_DISPATCH: Final = "endpointslice-dispatch-controller.karmada.io"
#: The manifest status field the agent reports the slices in.
COLLECTED_FIELD: Final = "endpointSlices"
#: The most the reported slices take of a Work status (compact JSON): two thirds of etcd's default
#: ``--max-request-bytes`` (1.5 MiB), the rest left to the Work's spec (the Service), its other
#: status and its metadata. About 40 slices of 100 endpoints.
MAX_COLLECTED_BYTES: Final = 1024 * 1024
#: The manifest status' condition saying that slices were left out of the report.
COLLECTED_CONDITION: Final = "EndpointSlicesCollected"
TRUNCATED_REASON: Final = "EndpointSlicesTruncated"


def collected_slice(obj: Mapping[str, Any]) -> dict[str, Any]:
    """What the agent reports of one of the Service's EndpointSlices: its name, address type,
    endpoints and ports (``ports`` only when the slice has them)."""
    out: dict[str, Any] = {
        "name": str((obj.get("metadata") or {}).get("name") or ""),
        "addressType": obj.get("addressType"),
        "endpoints": list(obj.get("endpoints") or []),
    }
    if obj.get("ports") is not None:
        out["ports"] = list(obj["ports"])
    return out


def bounded_slices(
    slices: list[dict[str, Any]], *, service: str, limit: int = MAX_COLLECTED_BYTES
) -> tuple[list[dict[str, Any]], dict[str, Any] | None]:
    """The collected ``slices`` (in name order) that fit in ``limit`` bytes of compact JSON, whole
    slices from the first, and the manifest status' ``EndpointSlicesCollected=False`` condition
    naming how many were left out (None when all fit). ``service``: ``namespace/name``, for the
    message."""
    kept: list[dict[str, Any]] = []
    size = 2  # the list's brackets
    for index, collected in enumerate(slices):
        size += len(orjson.dumps(collected)) + (1 if kept else 0)
        if size > limit:
            left = slices[index:]
            endpoints = sum(len(s.get("endpoints") or ()) for s in left)
            message = (
                f"{len(kept)} of the {len(slices)} EndpointSlices of Service {service} are reported: the other "
                f"{len(left)} ({endpoints} endpoints, from {left[0].get('name')}) would take the Work status past "
                f"the {limit} bytes it carries slices in, and are not dispatched"
            )
            return kept, {
                "type": COLLECTED_CONDITION,
                "status": "False",
                "reason": TRUNCATED_REASON,
                "message": message,
            }
        kept.append(collected)
    return kept, None


def collected_slices(work: Mapping[str, Any], service: str) -> list[dict[str, Any]] | None:
    """The slices a provider's Work status reports for ``service`` (the Service's name); None when
    it reports none yet."""
    for entry in (work.get("status") or {}).get("manifestStatuses") or []:
        ident = entry.get("identifier") or {}
        if ident.get("kind") == "Service" and ident.get("version") == "v1" and ident.get("name") == service:
            slices = entry.get(COLLECTED_FIELD)
            return [s for s in slices if _well_formed(s)] if isinstance(slices, list) else None
    return None


def _well_formed(collected: Any) -> bool:
    """A reported slice the hub can dispatch: a name, and lists (or nothing) as its endpoints and
    ports. The Work status takes any object there; another is left out, not dispatched."""
    return (
        isinstance(collected, dict)
        and isinstance(collected.get("name"), str)
        and bool(collected["name"])
        and all(isinstance(collected.get(field, []), list) for field in ("endpoints", "ports"))
    )


def dispatched_name(provider: str, slice_name: str) -> str:
    """Karmada's name for a provider's slice in a consumer cluster (``providerCluster + "-" + name``)."""
    return f"{provider}-{slice_name}"


def dispatched_slice(
    collected: Mapping[str, Any], *, provider: str, namespace: str, service: str
) -> dict[str, Any]:
    """The EndpointSlice a consumer cluster gets for ``collected``, a slice of the provider
    cluster ``provider``, as Karmada's endpointslice-dispatch controller writes it."""
    out: dict[str, Any] = {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "metadata": {
            "name": dispatched_name(provider, str(collected["name"])),
            "namespace": namespace,
            "labels": {LABEL_SERVICE_NAME: service, LABEL_MANAGED_BY: MANAGED_BY_DISPATCH},
            "annotations": {PROVISION_CLUSTER_ANNOTATION: provider},
        },
        "addressType": collected.get("addressType") or "IPv4",
        "endpoints": list(collected.get("endpoints") or []),
    }
    if collected.get("ports") is not None:
        out["ports"] = list(collected["ports"])
    return out


def dispatch_targets(providers: list[str], consumers: list[str], provider: str) -> list[str]:
    """The consumer clusters a provider's slices go to: every consumer but the provider itself."""
    return [cluster for cluster in consumers if cluster != provider] if provider in providers else []
