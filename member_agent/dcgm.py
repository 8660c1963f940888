"""GPU utilization from an NVIDIA dcgm-exporter endpoint.

In: the exporter's Prometheus text (one series per GPU and per MIG instance, with the
exporter's labels: gpu, UUID, device, modelName, Hostname/hostname, GPU_I_PROFILE, GPU_I_ID and,
with Kubernetes mapping on, pod/namespace/container). Out: per-device samples grouped by node,
``{gpu, uuid, profile?, instance?, pod?, namespace?, utilization, fbUsedMiB?}``, which
:func:`member_agent.capacity.summarize` folds into ``Cluster.status.utilization``.

Utilization is ``DCGM_FI_PROF_GR_ENGINE_ACTIVE`` (a 0-1 ratio, also reported for MIG
instances), falling back to ``DCGM_FI_DEV_GPU_UTIL`` / 100 (whole GPUs only). Devices with
neither metric are dropped. Parsing is pure; :func:`scrape` is the only I/O.

Why a parser of our own: a 1,000-node cluster's page is about 15 MiB, and
``prometheus_client``'s text parser needs seconds of CPU for it (it walks every label value
character by character). :func:`parse_metrics` reads the page in one pass and fully parses
only the lines of the three families it uses (:data:`WANTED_FAMILIES`), with regular
expressions that accept the ordinary exposition syntax (label values with ``\\\\``, ``\\"`` and
``\\n`` escapes, a trailing comma, spaces around terms, an optional timestamp). The results
are those of ``prometheus_client``: a line of a wanted family that the fast path does not
recognise (a ``{__name__="..."}`` form, a quoted metric name, anything malformed) is handed to
``prometheus_client`` itself, so it is parsed exactly as before or refused as before; samples
of a family its ``# TYPE`` line declares a counter are ignored, as ``prometheus_client``
renames them. Lines of other families are only checked for a metric name (a page that is
not Prometheus text still fails on its first line); their labels and values are not read.
"""

from __future__ import annotations

import logging
import math
import operator
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import aiohttp
from prometheus_client.parser import text_string_to_metric_families

from controlplane.apis.utilization import device_order

logger = logging.getLogger(__name__)

GR_ENGINE_ACTIVE = "DCGM_FI_PROF_GR_ENGINE_ACTIVE"
GPU_UTIL = "DCGM_FI_DEV_GPU_UTIL"
FB_USED = "DCGM_FI_DEV_FB_USED"
#: The families :func:`parse_metrics` reads; every other line is skipped.
WANTED_FAMILIES = frozenset({GR_ENGINE_ACTIVE, GPU_UTIL, FB_USED})
DEFAULT_SCRAPE_TIMEOUT = 10.0
#: Default limit of an exporter answer (``--dcgm-max-bytes``): a larger page is refused, so a
#: misbehaving endpoint cannot exhaust memory. A 1,000-node cluster's page is about 15 MiB.
MAX_SCRAPE_BYTES = 64 * 2**20

_METRIC_NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")
_NAME_END = re.compile(r"[{ \t]")
#: One label term of the ordinary syntax, with the comma that ends it (the last term's is
#: optional): ``(term, name, quoted value)``. Reserved names (``__...``) are left to the full
#: parser, which refuses them.
_LABEL_TERM = re.compile(r'(\s*((?!__)[a-zA-Z_][a-zA-Z0-9_]*)\s*=\s*"([^"\\]*(?:\\.[^"\\]*)*)"\s*(?:,|\Z))')
_WHOLE_TERM = operator.itemgetter(0)
_PLAIN_NAME = r"(?!__)[a-zA-Z_][a-zA-Z0-9_]*"
#: The label names of a plain body, each with its ``=`` and the ``,`` before the next.
_PLAIN_HEADS = re.compile(rf"{_PLAIN_NAME}=(?:,{_PLAIN_NAME}=)*")
#: The escapes prometheus_client resolves in label values; any other backslash stays as it is.
_ESCAPE = re.compile(r'\\[\\n"]')
_ESCAPES = {"\\\\": "\\", "\\n": "\n", '\\"': '"'}
#: Sample names a ``# TYPE`` declares part of a family, by type (prometheus_client's rule).
_TYPE_SUFFIXES = {
    "summary": ("_count", "_sum", ""),
    "histogram": ("_count", "_sum", "_bucket"),
}


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


@dataclass(frozen=True, slots=True)
class Sample:
    """One sample of a wanted family: its metric name, labels and value."""

    name: str
    labels: Mapping[str, str]
    value: float


def _unescape(match: re.Match[str]) -> str:
    return _ESCAPES[match.group(0)]


def _number(text: str) -> float:
    """A sample value or timestamp as prometheus_client reads it (no ``_``, no padding)."""
    if "_" in text or text != text.strip():
        raise ValueError(f"invalid value {text!r}")
    return float(text)  # prometheus_client tries int() first; the value is the same


def _value(rest: str) -> float:
    """The value of ``rest`` (what follows the name and labels), checking the timestamp too.
    Values separated by tabs are left to the full parser (its splitting rules differ)."""
    if "\t" in rest:
        raise ValueError("tab-separated value")
    tokens = [token for token in rest.split(" ") if token]
    if not tokens:
        raise ValueError("missing value")
    value = _number(tokens[0])
    if len(tokens) > 1:
        _number(tokens[-1])
    return value


def _plain_labels(body: str) -> dict[str, str] | None:
    """The labels of a body written as exporters write it (``a="x",b="y"``, no blanks, no
    backslashes), found with string splits; None for any other body."""
    if "\\" in body:
        return None
    parts = body.split('"')
    if len(parts) == 1:
        return {} if not body else None
    if len(parts) % 2 == 0 or parts[-1] not in ("", ","):
        return None
    heads = "".join(parts[0:-1:2])  # 'a=,b=,c='
    if _PLAIN_HEADS.fullmatch(heads) is None:
        return None
    names = heads[:-1].split("=,")
    labels = dict(zip(names, parts[1::2], strict=True))
    return labels if len(labels) == len(names) else None


def _escaped_labels(body: str) -> dict[str, str] | None:
    """The labels of any body the ordinary syntax allows (blanks, escapes, a trailing comma);
    None when the body needs the full parser."""
    terms = _LABEL_TERM.findall(body)
    # The terms must tile the body; anything else (a stray character, blanks after a
    # trailing comma, a misplaced quote) goes to the full parser.
    if sum(map(len, map(_WHOLE_TERM, terms))) != len(body):
        return None
    labels = {key: (_ESCAPE.sub(_unescape, value) if "\\" in value else value) for _, key, value in terms}
    return labels if len(labels) == len(terms) else None  # duplicates: refused by the full parser


def _fast_sample(line: str, name: str) -> Sample | None:
    """``line`` (stripped, starting with ``name`` then ``{`` or a blank) in the ordinary
    syntax; None when the line needs the full parser."""
    end = len(name)
    labels: dict[str, str] | None
    if line[end] == "{":
        close = line.rfind("}")
        body = line[end + 1 : close]
        labels = _plain_labels(body)
        if labels is None:
            labels = _escaped_labels(body)
            if labels is None:
                return None
        rest = line[close + 1 :]
    else:
        labels = {}
        rest = line[end:]
        if "{" in rest:
            return None  # ``name {labels} value``: blanks before the labels
    try:
        return Sample(name, labels, _value(rest))
    except ValueError:
        return None


def _library_sample(line: str) -> Sample:
    """``line`` parsed by prometheus_client (raises :class:`ScrapeError` if it refuses it)."""
    try:
        families = list(text_string_to_metric_families(line + "\n"))
    except (ValueError, IndexError) as exc:
        raise ScrapeError(f"DCGM endpoint did not return Prometheus text format: {exc}") from exc
    for family in families:
        for sample in family.samples:
            return Sample(sample.name, dict(sample.labels), float(sample.value))
    raise ScrapeError(f"DCGM endpoint did not return Prometheus text format: {line[:200]!r}")


def _comment_family(line: str, family: str, family_type: str) -> tuple[str, str]:
    """The family and type in force after a comment line (prometheus_client's HELP/TYPE rules)."""
    parts = line.split(None, 3)
    if len(parts) < 2 or parts[1] not in ("HELP", "TYPE"):
        return family, family_type
    candidate = ""
    if len(parts) > 2:
        candidate = parts[2]
        if len(candidate) > 1 and candidate[0] == candidate[-1] == '"':
            candidate = candidate[1:-1]
        elif _METRIC_NAME.fullmatch(candidate) is None:
            raise ScrapeError(f"DCGM endpoint did not return Prometheus text format: {line[:200]!r}")
    if parts[1] == "HELP":
        return (family, family_type) if candidate == family else (candidate, "untyped")
    if len(parts) < 4:
        raise ScrapeError(f"DCGM endpoint did not return Prometheus text format: {line[:200]!r}")
    return candidate, parts[3]


def _family_names(family: str, family_type: str) -> frozenset[str]:
    """The sample names prometheus_client counts as part of ``family`` of ``family_type``."""
    if not family:
        return frozenset()
    return frozenset(family + suffix for suffix in _TYPE_SUFFIXES.get(family_type, ("",)))


def parse_samples(text: str) -> list[Sample]:
    """Every sample of the :data:`WANTED_FAMILIES` in ``text``, in page order (NaN values kept).

    Raises :class:`ScrapeError` when ``text`` is not Prometheus text format.
    """
    samples: list[Sample] = []
    family, family_type = "", "untyped"
    members: frozenset[str] = frozenset()
    for raw in text.split("\n"):
        line = raw.strip()
        if not line:
            continue
        if line[0] == "#":
            family, family_type = _comment_family(line, family, family_type)
            members = _family_names(family, family_type)
            continue
        found = _NAME_END.search(line)
        name = line[: found.start()] if found else line
        sample: Sample | None = None
        if name in WANTED_FAMILIES and found is not None:
            sample = _fast_sample(line, name)
        if sample is None and (name in WANTED_FAMILIES or _METRIC_NAME.fullmatch(name) is None):
            sample = _library_sample(line)
        if sample is not None:
            name = sample.name
        if name not in members:
            family, family_type, members = "", "untyped", frozenset()
        if sample is None or name not in WANTED_FAMILIES:
            continue
        if family == name and family_type == "counter":
            continue  # prometheus_client reports it as ``<name>_total``, not a family we read
        samples.append(sample)
    return samples


def parse_metrics(text: str) -> list[DeviceSample]:
    """Every device (GPU, MIG instance, or device x pod) with at least a utilization value.

    Raises :class:`ScrapeError` when ``text`` is not Prometheus text format.
    """
    devices: dict[tuple[str | None, ...], DeviceSample] = {}
    for sample in parse_samples(text):
        if math.isnan(sample.value):
            continue
        get = sample.labels.get
        parts = (
            get("Hostname") or get("hostname") or "",
            get("gpu", ""),
            get("UUID", get("uuid", "")),
            get("GPU_I_ID") or None,
            get("pod") or None,
            get("namespace") or None,
        )
        device = devices.get(parts)
        if device is None:
            node, gpu, uuid, instance, pod, namespace = parts
            key = DeviceKey(str(node), str(gpu), str(uuid), instance, pod, namespace)
            device = devices[parts] = DeviceSample(key=key)
        if not device.profile:
            device.profile = get("GPU_I_PROFILE") or None
        if sample.name == GR_ENGINE_ACTIVE:
            device.gr_engine_active = sample.value
        elif sample.name == GPU_UTIL:
            device.gpu_util_percent = sample.value
        else:
            device.fb_used_mib = sample.value
    return [d for d in devices.values() if d.utilization is not None]


def utilization_by_node(samples: list[DeviceSample]) -> dict[str, list[dict[str, Any]]]:
    """Report entries per node name, ordered by GPU index, then MIG instance, then pod."""
    by_node: dict[str, list[DeviceSample]] = {}
    for sample in samples:
        by_node.setdefault(sample.key.node, []).append(sample)
    out: dict[str, list[dict[str, Any]]] = {}
    for node, node_samples in sorted(by_node.items()):
        node_samples.sort(
            key=lambda s: (
                device_order(s.key.gpu),
                device_order(s.key.instance or ""),
                s.key.namespace or "",
                s.key.pod or "",
            )
        )
        out[node] = [s.as_report() for s in node_samples]
    return out


async def _read_bounded(content: aiohttp.StreamReader, *, limit: int) -> bytes | None:
    """The whole body, or None as soon as it grows past ``limit`` bytes.

    ``StreamReader.read(n)`` returns what is buffered so far (one chunk), not ``n`` bytes, so
    the body is read chunk by chunk until the end of the stream.
    """
    chunks: list[bytes] = []
    size = 0
    async for chunk in content.iter_any():
        size += len(chunk)
        if size > limit:
            return None
        chunks.append(chunk)
    return b"".join(chunks)


async def scrape(
    session: aiohttp.ClientSession,
    url: str,
    *,
    request_timeout: float = DEFAULT_SCRAPE_TIMEOUT,
    max_bytes: int = MAX_SCRAPE_BYTES,
) -> str:
    """The exporter's whole metrics page; raises :class:`ScrapeError` on any failure, and when
    the page is larger than ``max_bytes`` (the agent's ``--dcgm-max-bytes``)."""
    try:
        async with session.get(url, timeout=aiohttp.ClientTimeout(total=request_timeout)) as response:
            if response.status != 200:
                raise ScrapeError(f"DCGM endpoint {url} answered HTTP {response.status}")
            if response.content_length is not None and response.content_length > max_bytes:
                body = None
            else:
                body = await _read_bounded(response.content, limit=max_bytes)
            if body is None:
                raise ScrapeError(
                    f"DCGM endpoint {url} returned more than {max_bytes} bytes (the limit);"
                    " the scrape is dropped: raise --dcgm-max-bytes if the page is that large"
                )
            return body.decode("utf-8", errors="replace")
    except (aiohttp.ClientError, TimeoutError) as exc:
        raise ScrapeError(f"cannot scrape DCGM endpoint {url}: {exc!r}") from exc
