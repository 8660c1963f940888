"""GPU utilization from an NVIDIA dcgm-exporter endpoint.

In: the exporter's Prometheus text (one series per GPU and per MIG instance, with the
exporter's labels: gpu, UUID, device, modelName, Hostname/hostname, GPU_I_PROFILE, GPU_I_ID and,
with Kubernetes mapping on, pod/namespace/container). Out: per-device samples grouped by node,
in the compact form the agent attaches to ``Cluster.status.utilization``:
``{gpu, uuid, profile?, instance?, pod?, namespace?, utilization, fbUsedMiB?}``.

Utilization is ``DCGM_FI_PROF_GR_ENGINE_ACTIVE`` (a 0-1 ratio, also reported for MIG
instances), falling back to ``DCGM_FI_DEV_GPU_UTIL`` / 100 (whole GPUs only). Devices with
neither metric are dropped. Parsing is pure; :func:`scrape` is the only I/O.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import aiohttp
from prometheus_client.parser import text_string_to_metric_families

logger = logging.getLogger(__name__)

GR_ENGINE_ACTIVE = "DCGM_FI_PROF_GR_ENGINE_ACTIVE"
GPU_UTIL = "DCGM_FI_DEV_GPU_UTIL"
FB_USED = "DCGM_FI_DEV_FB_USED"
_WANTED = frozenset({GR_ENGINE_ACTIVE, GPU_UTIL, FB_USED})
DEFAULT_SCRAPE_TIMEOUT = 10.0
#: An exporter answer larger than this is refused, so a misbehaving endpoint cannot exhaust memory.
MAX_SCRAPE_BYTES = 64 * 2**20


class ScrapeError(Exception):
    """The DCGM endpoint could not be read or parsed."""


@dataclass(frozen=True, slots=True)
class DeviceKey:
    node: str
    gpu: str
    uuid: str
    instance: str | None
    pod: str | None
    namespace: str | None


@dataclass(slots=True)
class DeviceSample:
    key: DeviceKey
    profile: str | None = None
    gr_engine_active: float | None = None
    gpu_util_percent: float | None = None
    fb_used_mib: float | None = None

    @property
    def utilization(self) -> float | None:
        if self.gr_engine_active is not None:
            return self.gr_engine_active
        if self.gpu_util_percent is not None:
            return self.gpu_util_percent / 100.0
        return None

    def as_report(self) -> dict[str, Any]:
        utilization = self.utilization
        entry: dict[str, Any] = {"gpu": _int_or_str(self.key.gpu), "uuid": self.key.uuid}
        if self.profile:
            entry["profile"] = self.profile
        if self.key.instance is not None:
            entry["instance"] = _int_or_str(self.key.instance)
        if self.key.pod:
            entry["pod"] = self.key.pod
        if self.key.namespace:
            entry["namespace"] = self.key.namespace
        entry["utilization"] = round(min(max(utilization or 0.0, 0.0), 1.0), 3)
        if self.fb_used_mib is not None:
            entry["fbUsedMiB"] = int(self.fb_used_mib)
        return entry


def _int_or_str(value: str) -> int | str:
    try:
        return int(value)
    except ValueError:
        return value


def _label(labels: Mapping[str, str], *names: str) -> str | None:
    for name in names:
        value = labels.get(name)
        if value:
            return value
    return None


def parse_metrics(text: str) -> list[DeviceSample]:
    """Every device (GPU, MIG instance, or device x pod) with at least a utilization value.

    Raises :class:`ScrapeError` when ``text`` is not Prometheus text format.
    """
    samples: dict[DeviceKey, DeviceSample] = {}
    try:
        families = list(text_string_to_metric_families(text))
    except ValueError as exc:
        raise ScrapeError(f"DCGM endpoint did not return Prometheus text format: {exc}") from exc
    for family in families:
        if family.name not in _WANTED:
            continue
        for sample in family.samples:
            if sample.name != family.name or math.isnan(sample.value):
                continue
            labels = sample.labels
            key = DeviceKey(
                node=_label(labels, "Hostname", "hostname") or "",
                gpu=labels.get("gpu", ""),
                uuid=labels.get("UUID", labels.get("uuid", "")),
                instance=labels.get("GPU_I_ID") or None,
                pod=labels.get("pod") or None,
                namespace=labels.get("namespace") or None,
            )
            device = samples.get(key)
            if device is None:
                device = samples[key] = DeviceSample(key=key)
            device.profile = device.profile or labels.get("GPU_I_PROFILE") or None
            if family.name == GR_ENGINE_ACTIVE:
                device.gr_engine_active = float(sample.value)
            elif family.name == GPU_UTIL:
                device.gpu_util_percent = float(sample.value)
            else:
                device.fb_used_mib = float(sample.value)
    return [s for s in samples.values() if s.utilization is not None]


def utilization_by_node(samples: list[DeviceSample]) -> dict[str, list[dict[str, Any]]]:
    """Report entries per node name, ordered by GPU index, then MIG instance, then pod."""
    by_node: dict[str, list[DeviceSample]] = {}
    for sample in samples:
        by_node.setdefault(sample.key.node, []).append(sample)
    out: dict[str, list[dict[str, Any]]] = {}
    for node, node_samples in sorted(by_node.items()):
        node_samples.sort(
            key=lambda s: (
                _sortable(s.key.gpu),
                _sortable(s.key.instance or ""),
                s.key.namespace or "",
                s.key.pod or "",
            )
        )
        out[node] = [s.as_report() for s in node_samples]
    return out


def _sortable(value: str) -> tuple[int, str]:
    try:
        return (int(value), "")
    except ValueError:
        return (1 << 30, value)


async def scrape(
    session: aiohttp.ClientSession, url: str, *, request_timeout: float = DEFAULT_SCRAPE_TIMEOUT
) -> str:
    """The exporter's metrics text; raises :class:`ScrapeError` on any failure."""
    try:
        async with session.get(url, timeout=aiohttp.ClientTimeout(total=request_timeout)) as response:
            if response.status != 200:
                raise ScrapeError(f"DCGM endpoint {url} answered HTTP {response.status}")
            body = await response.content.read(MAX_SCRAPE_BYTES + 1)
            if len(body) > MAX_SCRAPE_BYTES:
                raise ScrapeError(f"DCGM endpoint {url} returned more than {MAX_SCRAPE_BYTES} bytes")
            return body.decode("utf-8", errors="replace")
    except (aiohttp.ClientError, TimeoutError) as exc:
        raise ScrapeError(f"cannot scrape DCGM endpoint {url}: {exc!r}") from exc
