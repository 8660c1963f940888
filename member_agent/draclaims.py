"""The member's Dynamic Resource Allocation claims, cached for the capacity report.

A pod that holds GPUs through DRA asks for none in its containers: what it holds is in its
ResourceClaims (``status.allocation.devices.results``), or, before one is allocated, in the
claim's or its template's requests. The capacity report counts them as the pod's
``nvidia.com/gpu`` and MIG requests (:func:`controlplane.apis.pods.pod_held`), so the hub's
free capacity, its waste report and its cost figures see them. :class:`DraClaims` keeps a
list+watch cache of the member's ResourceClaims and ResourceClaimTemplates (every namespace)
and of its DeviceClasses, each trimmed to what that count reads (:func:`trim_claim`,
:func:`trim_class`): a request's class is the member's DeviceClass of that name, its selectors
read as the hub reads them (:func:`controlplane.apis.dra.class_selection`), else NVIDIA's
published class of the name.

A member that does not serve ``resource.k8s.io/v1`` (kube before 1.34, or DRA turned off) is
asked again through the discovery cache's back-off (:mod:`member_agent.discovery`); its caches
start when it does, and until then pods' claims count nothing (such a member has none).

In: the member's :class:`~member_agent.kubeapi.KubeTransport`. Out: :meth:`DraClaims.snapshot`,
a lookup by kind, namespace and name (:data:`controlplane.apis.dra.ObjectLookup`).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping
from typing import Any, Final

import aiohttp

from controlplane.apis.dra import CLAIM, DEVICE_CLASS, RESOURCE_API_VERSION, TEMPLATE, ObjectLookup
from member_agent.apierrors import ApiError, NotFound
from member_agent.informing import Informer
from member_agent.kubeapi import KubeTransport

logger = logging.getLogger(__name__)

#: The collections the caches list and watch, by kind.
PATHS: Final = {
    CLAIM: f"/apis/{RESOURCE_API_VERSION}/resourceclaims",
    TEMPLATE: f"/apis/{RESOURCE_API_VERSION}/resourceclaimtemplates",
    DEVICE_CLASS: f"/apis/{RESOURCE_API_VERSION}/deviceclasses",
}
#: Seconds between two questions to a member whose discovery failed for another reason than NotFound.
RETRY_SECONDS: Final = 30.0


def _metadata(obj: Mapping[str, Any]) -> dict[str, Any]:
    metadata = obj.get("metadata") or {}
    return {k: metadata.get(k) for k in ("name", "namespace", "resourceVersion")}


def trim_claim(claim: Mapping[str, Any]) -> dict[str, Any]:
    """A ResourceClaim as the count reads it: its requests and its allocation's results."""
    allocation = ((claim.get("status") or {}).get("allocation")) or {}
    trimmed: dict[str, Any] = {
        "metadata": _metadata(claim),
        "spec": {"devices": {"requests": ((claim.get("spec") or {}).get("devices") or {}).get("requests") or []}},
    }
    if allocation:
        results = (allocation.get("devices") or {}).get("results") or []
        trimmed["status"] = {"allocation": {"devices": {"results": [
            {k: r.get(k) for k in ("request", "driver", "pool", "device", "adminAccess") if k in r}
            for r in results if isinstance(r, Mapping)
        ]}}}
    return trimmed


def trim_template(template: Mapping[str, Any]) -> dict[str, Any]:
    """A ResourceClaimTemplate as the count reads it: the requests of the claims made from it."""
    claim_spec = ((template.get("spec") or {}).get("spec")) or {}
    return {
        "metadata": _metadata(template),
        "spec": {"spec": {"devices": {"requests": (claim_spec.get("devices") or {}).get("requests") or []}}},
    }


def trim_class(device_class: Mapping[str, Any]) -> dict[str, Any]:
    """A DeviceClass as the count reads it: its selectors."""
    selectors = (device_class.get("spec") or {}).get("selectors")
    return {"metadata": _metadata(device_class), "spec": {"selectors": selectors or []}}


class DraClaims:
    """Caches of the member's ResourceClaims, ResourceClaimTemplates and DeviceClasses; call
    :meth:`run` in a task."""

    def __init__(self, member: KubeTransport, on_change: Callable[[str], None] | None = None) -> None:
        self.member = member
        self.informers: dict[str, Informer] = {
            CLAIM: Informer(member, PATHS[CLAIM], name="resourceclaims", transform=trim_claim, on_change=on_change),
            TEMPLATE: Informer(
                member, PATHS[TEMPLATE], name="resourceclaimtemplates", transform=trim_template, on_change=on_change
            ),
            DEVICE_CLASS: Informer(
                member, PATHS[DEVICE_CLASS], name="deviceclasses", transform=trim_class, on_change=on_change
            ),
        }

    async def _served(self) -> None:
        """Returns once the member serves ResourceClaims (asking again after the discovery's back-off)."""
        while True:
            try:
                await self.member.resource_info(RESOURCE_API_VERSION, CLAIM)
                return
            except NotFound:
                pass  # not served: the discovery cache answers from memory until its back-off ends
            except (ApiError, aiohttp.ClientError, TimeoutError, OSError) as exc:
                logger.debug("member discovery of %s failed: %s", RESOURCE_API_VERSION, exc)
            await asyncio.sleep(RETRY_SECONDS)

    async def run(self) -> None:
        await self._served()
        async with asyncio.TaskGroup() as group:
            for informer in self.informers.values():
                group.create_task(informer.run())

    def snapshot(self) -> ObjectLookup:
        """A lookup over the claims, templates and DeviceClasses (namespace ``""``) cached now
        (copies of the caches' indexes, so a report summed in a worker thread reads one state)."""
        objects = {kind: dict(informer.objects) for kind, informer in self.informers.items()}

        def lookup(kind: str, namespace: str, name: str) -> Mapping[str, Any] | None:
            return objects.get(kind, {}).get(f"{namespace}/{name}" if namespace else name)

        return lookup
