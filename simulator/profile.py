"""The fleet file: which simulated member clusters exist and what hardware they have.

A fleet YAML lists clusters; each cluster entry is a *profile*: provider/region/zone
(they become the hub's Cluster spec), $ per GPU-hour pricing, node groups (count, CPU,
memory, GPU product and count, MIG strategy and per-GPU layout, time-slicing, labels,
taints), and the simulation defaults (pod startup delay, job duration, GPU
utilization distribution, member scoring). A node group can instead come from the
Alibaba ``openb_node_list_gpu_node.csv`` (``fromCsv: {path, models?, limit?}``).

In: a YAML file (``load_fleet``) or a dict (``Fleet.model_validate``).
Out: validated :class:`Fleet` / :class:`ClusterProfile` models. Validation errors
name the field (``clusters.0.nodeGroups.1.gpu``) and say what is wrong in words, e.g.
a MIG layout over the GPU's 7 compute / 8 memory slice budget or a profile the GPU
does not have. Only :func:`load_fleet` and :func:`read_alibaba_nodes` touch files.
"""

from __future__ import annotations

import csv
import logging
import math
import random
from collections import Counter
from enum import StrEnum
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from controlplane.apis import spot
from controlplane.apis.pods import TaintEffect
from controlplane.yamlfile import yaml_problem
from member_agent.clusterfile import ClusterFacts
from simulator import gpus
from simulator.scheduling.model import Scoring

logger = logging.getLogger(__name__)

DEFAULT_KUBERNETES_VERSION = "v1.30.4"
DEFAULT_DRIVER_VERSION = "550.90.07"
DEFAULT_CUDA_DRIVER = "12.4"

#: The Alibaba trace's GPU model codes as GFD product labels. G2/G3 are undisclosed
#: internal models; their memory is unknown, 32 GiB is assumed.
ALIBABA_MODELS: dict[str, tuple[str, int, str]] = {
    "T4": ("Tesla-T4", 15360, "turing"),
    "P100": ("Tesla-P100-PCIE-16GB", 16384, "pascal"),
    "V100M16": ("Tesla-V100-SXM2-16GB", 16384, "volta"),
    "V100M32": ("Tesla-V100-SXM2-32GB", 32768, "volta"),
    "A10": ("NVIDIA-A10", 23028, "ampere"),
    "G2": ("Alibaba-G2", 32768, "undisclosed"),
    "G3": ("Alibaba-G3", 32768, "undisclosed"),
}


class ProfileError(ValueError):
    """A fleet file that cannot be read or does not validate; the message names the fields."""


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)


class MigStrategy(StrEnum):
    NONE = "none"
    SINGLE = "single"
    MIXED = "mixed"


class SharingStrategy(StrEnum):
    NONE = "none"
    TIME_SLICING = "time-slicing"
    MPS = "mps"


class MigSpec(_Model):
    strategy: MigStrategy = MigStrategy.NONE
    #: Profiles cut from every GPU of the group, e.g. [3g.40gb, 2g.20gb, 1g.10gb, 1g.10gb].
    layout: list[str] = Field(default_factory=list)
    #: The mig-parted configuration name shown as ``nvidia.com/mig.config``; derived when unset.
    config: str | None = None

    def config_name(self, balanced: list[str] | None) -> str:
        if self.config:
            return self.config
        if self.strategy is MigStrategy.NONE or not self.layout:
            return "all-disabled"
        if len(set(self.layout)) == 1:
            return f"all-{self.layout[0]}"
        if balanced is not None and sorted(self.layout) == sorted(balanced):
            return "all-balanced"
        return "custom"


class SharingSpec(_Model):
    """The device plugin's ``sharing.timeSlicing`` (or ``mps``) for ``nvidia.com/gpu``."""

    strategy: Literal[SharingStrategy.TIME_SLICING, SharingStrategy.MPS] = SharingStrategy.TIME_SLICING
    replicas: int = Field(ge=2, le=64)
    #: Advertise the shares as ``nvidia.com/gpu.shared`` instead of ``nvidia.com/gpu``.
    renameByDefault: bool = False


class GpuSpec(_Model):
    product: str = Field(min_length=1)
    count: int = Field(ge=1, le=16)
    #: Defaults to the catalog's value for known products; required for others.
    memoryMiB: int | None = Field(default=None, ge=1)
    family: str | None = None
    mig: MigSpec | None = None
    sharing: SharingSpec | None = None

    @model_validator(mode="after")
    def _check(self) -> GpuSpec:
        model = gpus.lookup(self.product)
        if model is None and self.memoryMiB is None:
            known = ", ".join(sorted(gpus.CATALOG))
            raise ValueError(
                f"memoryMiB is required for GPU product {self.product!r}, which is not one of: {known}"
            )
        mig = self.mig
        if mig is not None and mig.strategy is not MigStrategy.NONE:
            if model is None or not model.mig_capable:
                raise ValueError(
                    f"mig.strategy {mig.strategy}: GPU product {self.product!r} is not MIG-capable"
                )
            if not mig.layout:
                raise ValueError(f"mig.layout must list at least one profile for mig.strategy {mig.strategy}")
            _check_layout(model, mig.layout)
            if self.sharing is not None:
                raise ValueError("sharing (time-slicing/MPS) is only supported on GPUs without MIG")
        elif mig is not None and mig.layout:
            raise ValueError("mig.layout is set but mig.strategy is none")
        return self

    def model(self) -> gpus.GpuModel:
        known = gpus.lookup(self.product)
        if known is not None:
            if self.memoryMiB is None or self.memoryMiB == known.memory_mib:
                return known
            return gpus.GpuModel(
                known.product,
                self.family or known.family,
                self.memoryMiB,
                known.model_name,
                known.multiprocessors,
                known.compute_major,
                known.compute_minor,
                known.mig_profiles,
            )
        assert self.memoryMiB is not None  # checked by the validator
        return gpus.custom_model(
            product=self.product, memory_mib=self.memoryMiB, family=self.family or "undefined"
        )

    @property
    def mig_strategy(self) -> MigStrategy:
        return self.mig.strategy if self.mig else MigStrategy.NONE

    @property
    def mig_invalid(self) -> bool:
        """A mixed layout under the single strategy: GFD reports ``...-MIG-INVALID``, no usable GPUs."""
        return (
            self.mig_strategy is MigStrategy.SINGLE and self.mig is not None and len(set(self.mig.layout)) > 1
        )


def _check_layout(model: gpus.GpuModel, layout: list[str]) -> None:
    unknown = [name for name in layout if name not in model.mig_profiles]
    if unknown:
        known = ", ".join(model.mig_profiles)
        raise ValueError(f"mig.layout: {model.product} has no MIG profile {unknown[0]!r} (profiles: {known})")
    counts = Counter(layout)
    for name, count in counts.items():
        profile = model.mig_profiles[name]
        if count > profile.max_count:
            raise ValueError(
                f"mig.layout: at most {profile.max_count} x {name} fit on one {model.product}, got {count}"
            )
    if sum(count for name, count in counts.items() if name.endswith("+me")) > 1:
        raise ValueError("mig.layout: at most one +me (media extensions) profile per GPU")
    compute = sum(model.mig_profiles[name].compute_slices for name in layout)
    memory = sum(model.mig_profiles[name].memory_slices for name in layout)
    if compute > gpus.COMPUTE_SLICES:
        raise ValueError(
            f"mig.layout needs {compute} compute slices, more than the {gpus.COMPUTE_SLICES} "
            f"of one {model.product}"
        )
    if memory > gpus.MEMORY_SLICES:
        raise ValueError(
            f"mig.layout needs {memory} memory slices, more than the {gpus.MEMORY_SLICES} of one {model.product}"
        )


class TaintSpec(_Model):
    """A taint in a fleet profile (nodes' or the cluster's): ``key``, ``value`` and ``effect``."""

    key: str = Field(min_length=1)
    value: str = ""
    effect: TaintEffect


class CsvSource(_Model):
    """Nodes from the Alibaba trace's node list (columns ``sn,cpu_milli,memory_mib,gpu,model``)."""

    path: str
    #: Keep only these model codes (T4, P100, V100M16, V100M32, A10, G2, G3); all when unset.
    models: list[str] | None = None
    limit: int | None = Field(default=None, ge=1)


class CsvNode(_Model):
    name: str
    cpuMilli: int = Field(ge=1)
    memoryMiB: int = Field(ge=1)
    gpuCount: int = Field(ge=0)
    model: str


class NodeGroup(_Model):
    name: str = Field(min_length=1, pattern=r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
    count: int = Field(default=1, ge=0)
    #: Cores (fractions allowed).
    cpu: float | None = Field(default=None, gt=0)
    memoryGiB: float | None = Field(default=None, gt=0)
    maxPods: int = Field(default=110, ge=1)
    gpu: GpuSpec | None = None
    labels: dict[str, str] = Field(default_factory=dict)
    taints: list[TaintSpec] = Field(default_factory=list)
    instanceType: str | None = None
    zone: str | None = None
    unschedulable: bool = False
    #: Spot (preemptible) nodes: labelled as the provider labels them (``cloud.google.com/gke-spot``,
    #: ``eks.amazonaws.com/capacityType``, ``karpenter.sh/capacity-type``), and open to reclaims.
    spot: bool = False
    fromCsv: CsvSource | None = None
    #: Filled by :func:`load_fleet` from ``fromCsv``; one entry per node.
    csvNodes: list[CsvNode] = Field(default_factory=list)

    @model_validator(mode="after")
    def _check(self) -> NodeGroup:
        if self.fromCsv is None and (self.cpu is None or self.memoryGiB is None):
            raise ValueError("cpu and memoryGiB are required unless the group comes fromCsv")
        if self.fromCsv is not None and self.gpu is not None:
            raise ValueError("gpu cannot be set on a fromCsv group: the CSV gives each node's GPUs")
        return self


class UtilizationBucket(_Model):
    min: float = Field(ge=0, le=1)
    max: float = Field(ge=0, le=1)
    weight: float = Field(gt=0)

    @model_validator(mode="after")
    def _check(self) -> UtilizationBucket:
        if self.max < self.min:
            raise ValueError("max must be >= min")
        return self


class UtilizationDistribution(_Model):
    """``{mean, stddev}`` (a normal clipped to [0, 1]) or ``{buckets: [{min, max, weight}]}``."""

    mean: float | None = Field(default=None, ge=0, le=1)
    stddev: float = Field(default=0.0, ge=0)
    buckets: list[UtilizationBucket] | None = None

    @model_validator(mode="after")
    def _check(self) -> UtilizationDistribution:
        if (self.mean is None) == (self.buckets is None):
            raise ValueError("give either mean (and stddev) or buckets")
        if self.buckets is not None and not self.buckets:
            raise ValueError("buckets must not be empty")
        return self

    def draw(self, rng: random.Random) -> float:
        if self.buckets is not None:
            bucket = rng.choices(self.buckets, weights=[b.weight for b in self.buckets])[0]
            return round(rng.uniform(bucket.min, bucket.max), 6)
        assert self.mean is not None
        return round(min(1.0, max(0.0, rng.gauss(self.mean, self.stddev))), 6)


class SimulationDefaults(_Model):
    #: Seconds from binding until a pod is Running and Ready.
    startupDelaySeconds: float = Field(default=2.0, ge=0)
    #: How long a Job-like pod runs without a ``sim.gpufed.io/duration`` annotation.
    jobDurationSeconds: float = Field(default=300.0, gt=0)
    gpuUtilization: UtilizationDistribution = Field(
        default_factory=lambda: UtilizationDistribution(mean=0.6, stddev=0.2)
    )
    scoring: Scoring = Scoring.LEAST_ALLOCATED
    kubernetesVersion: str = Field(default=DEFAULT_KUBERNETES_VERSION, pattern=r"^v\d+\.\d+\.\d+")
    driverVersion: str = DEFAULT_DRIVER_VERSION
    cudaDriverVersion: str = DEFAULT_CUDA_DRIVER


class AccessRule(_Model):
    """What impersonated hub users may do at a simulated member (:mod:`simulator.memberaccess`)."""

    #: User names or groups (``gpufed:admins``, ``gpufed:viewers``, ``gpufed:users``).
    subjects: list[str] = Field(min_length=1)
    verbs: list[str] = Field(default_factory=lambda: ["*"])
    #: ``pods``, ``pods/exec``, ``pods/log`` ... or ``*``.
    resources: list[str] = Field(default_factory=lambda: ["*"])
    #: Namespaces, or ``*`` (which alone also allows cluster-wide requests).
    namespaces: list[str] = Field(default_factory=lambda: ["*"])


class ReclaimSchedule(_Model):
    """A periodic spot reclaim for demos: every ``everySeconds``, ``nodes`` spot nodes (of ``pool``,
    a node group, when set) get a reclaim notice and vanish ``noticeSeconds`` later with their pods."""

    everySeconds: float = Field(gt=0)
    nodes: int = Field(default=1, ge=1)
    noticeSeconds: float = Field(default=0.0, ge=0, le=3600)
    pool: str | None = None


class ClusterProfile(_Model, ClusterFacts):
    """One cluster of a fleet: its name, the facts its agent declares (:class:`ClusterFacts`), and
    what the simulated member runs."""

    name: str = Field(min_length=1, pattern=r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
    taints: list[TaintSpec] = Field(default_factory=list)
    nodeGroups: list[NodeGroup] = Field(default_factory=list)
    simulation: SimulationDefaults = Field(default_factory=SimulationDefaults)
    #: Resources (plurals, e.g. ``jobsets``) this member's API does not serve, as a cluster
    #: without an operator's CustomResourceDefinitions installed.
    unservedResources: list[str] = Field(default_factory=list)
    #: When set, requests impersonating a hub user pass only if one of these rules allows them
    #: (this member's RBAC for hub users coming through the cluster proxy).
    impersonatedAccess: list[AccessRule] | None = None
    #: Every node group of the cluster is spot (see ``NodeGroup.spot``).
    spot: bool = False
    #: Reclaim spot nodes periodically (a demo of capacity that comes and goes).
    reclaim: ReclaimSchedule | None = None

    @model_validator(mode="after")
    def _check(self) -> ClusterProfile:
        names = [group.name for group in self.nodeGroups]
        duplicates = sorted(name for name, n in Counter(names).items() if n > 1)
        if duplicates:
            raise ValueError(f"nodeGroups: duplicate name {duplicates[0]!r}")
        if self.reclaim is not None:
            spot = [group.name for group in self.nodeGroups if self.group_is_spot(group)]
            if not spot:
                raise ValueError("reclaim: the cluster has no spot node group (set spot: true)")
            if self.reclaim.pool is not None and self.reclaim.pool not in spot:
                raise ValueError(f"reclaim.pool: no spot node group {self.reclaim.pool!r} (spot groups: {', '.join(spot)})")
        for product, price in self.pricing.items():
            if not math.isfinite(price) or price < 0:
                raise ValueError(f"pricing.{product}: must be a non-negative number")
        return self

    def group_is_spot(self, group: NodeGroup) -> bool:
        return self.spot or group.spot or spot.is_spot(group.labels)

    def warnings(self) -> list[str]:
        """Configurations a real cluster accepts but that leave GPUs unusable."""
        out: list[str] = []
        for group in self.nodeGroups:
            if group.gpu is not None and group.gpu.mig_invalid:
                out.append(
                    f"cluster {self.name} nodeGroup {group.name}: mig.strategy single with a mixed layout "
                    f"{group.gpu.mig.layout if group.gpu.mig else []}: GPU Feature Discovery labels the "
                    f"product {group.gpu.product}-MIG-INVALID and the node advertises no usable GPUs"
                )
            if group.fromCsv is not None and not group.csvNodes:
                out.append(f"cluster {self.name} nodeGroup {group.name}: fromCsv selected no nodes")
        return out


class Fleet(_Model):
    clusters: list[ClusterProfile] = Field(min_length=1)

    @model_validator(mode="after")
    def _check(self) -> Fleet:
        duplicates = sorted(n for n, c in Counter(c.name for c in self.clusters).items() if c > 1)
        if duplicates:
            raise ValueError(f"clusters: duplicate name {duplicates[0]!r}")
        return self

    def cluster(self, name: str) -> ClusterProfile:
        for cluster in self.clusters:
            if cluster.name == name:
                return cluster
        raise KeyError(name)


def format_validation_error(error: ValidationError) -> str:
    """One line per problem, ``path: message``, for people."""
    lines = []
    for item in error.errors():
        path = ".".join(str(part) for part in item["loc"])
        message = str(item["msg"]).removeprefix("Value error, ")
        lines.append(f"{path}: {message}" if path else message)
    return "\n".join(lines)


def parse_fleet(data: Any, *, base_dir: Path | None = None) -> Fleet:
    """Validate a fleet document; ``fromCsv`` paths resolve against ``base_dir``."""
    try:
        fleet = Fleet.model_validate(data)
    except ValidationError as exc:
        raise ProfileError(format_validation_error(exc)) from exc
    clusters = []
    for cluster in fleet.clusters:
        groups = []
        for index, group in enumerate(cluster.nodeGroups):
            if group.fromCsv is not None and not group.csvNodes:
                path = Path(group.fromCsv.path)
                if not path.is_absolute() and base_dir is not None:
                    path = base_dir / path
                try:
                    rows = read_alibaba_nodes(path, models=group.fromCsv.models, limit=group.fromCsv.limit)
                except (OSError, ValueError) as exc:
                    raise ProfileError(
                        f"clusters.{cluster.name}.nodeGroups.{index}.fromCsv.path: cannot read {path}: {exc}"
                    ) from exc
                group = group.model_copy(update={"csvNodes": rows})
            groups.append(group)
        clusters.append(cluster.model_copy(update={"nodeGroups": groups}))
    fleet = fleet.model_copy(update={"clusters": clusters})
    for cluster in fleet.clusters:
        for warning in cluster.warnings():
            logger.warning("%s", warning)
    return fleet


def load_fleet(path: str | Path) -> Fleet:
    """Read and validate a fleet YAML file (a single cluster entry without ``clusters:`` works too)."""
    path = Path(path)
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ProfileError(f"cannot read fleet file {path}: {exc.strerror or exc}") from exc
    except yaml.YAMLError as exc:
        raise ProfileError(f"{path} is not valid YAML: {yaml_problem(exc)}") from exc
    if isinstance(data, dict) and "clusters" not in data and "name" in data:
        data = {"clusters": [data]}
    if not isinstance(data, dict):
        found = "is empty" if data is None else f"holds a {type(data).__name__}, not a mapping"
        raise ProfileError(
            f"{path} {found}: a fleet file is a mapping with clusters: (a list of clusters,"
            " each with a name), or one cluster's mapping"
        )
    return parse_fleet(data, base_dir=path.parent)


#: The columns :func:`read_alibaba_nodes` reads (an openb node list has these and more).
ALIBABA_NODE_COLUMNS = ("sn", "cpu_milli", "memory_mib", "gpu", "model")


def read_alibaba_nodes(
    path: Path, *, models: list[str] | None = None, limit: int | None = None
) -> list[CsvNode]:
    """Rows of ``openb_node_list_gpu_node.csv`` or ``openb_node_list_all_node.csv`` (Alibaba
    cluster-trace-gpu-v2023, CC BY 4.0). A CPU-only node (``gpu`` 0, no model) keeps an empty
    model; ``models`` selects GPU nodes only."""
    wanted = set(models) if models else None
    if wanted is not None:
        unknown = sorted(wanted - set(ALIBABA_MODELS))
        if unknown:
            raise ValueError(f"unknown model {unknown[0]!r} (known: {', '.join(ALIBABA_MODELS)})")
    nodes: list[CsvNode] = []
    with path.open(newline="", encoding="utf-8") as handle:
        reader = csv.DictReader(handle)
        columns = {c.strip() for c in reader.fieldnames or ()}
        missing = [c for c in ALIBABA_NODE_COLUMNS if c not in columns]
        if missing:
            raise ValueError(
                f"line 1: the header lacks column(s) {','.join(missing)} of an openb node list"
                f" (needs {','.join(ALIBABA_NODE_COLUMNS)})"
            )
        for row in reader:
            model = row["model"].strip()
            if wanted is not None and model not in wanted:
                continue
            if model not in ALIBABA_MODELS and not (model == "" and row["gpu"].strip() == "0"):
                raise ValueError(f"row {row['sn']}: unknown model {model!r}")
            nodes.append(
                CsvNode(
                    name=row["sn"].strip(),
                    cpuMilli=int(row["cpu_milli"]),
                    memoryMiB=int(row["memory_mib"]),
                    gpuCount=int(row["gpu"]),
                    model=model,
                )
            )
            if limit is not None and len(nodes) >= limit:
                break
    return nodes
