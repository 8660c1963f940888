"""GPU waste accounting: where every GPU-hour of the fleet went, in hours and dollars.

Data flows through the modules in this order:

* :mod:`~controlplane.reports.sample` -- the fleet snapshot (frozen dataclasses) and the adapter
  from the hub's Cluster / ResourceBinding / Work objects;
* :mod:`~controlplane.reports.classify` -- one waste state per GPU device at one instant;
* :mod:`~controlplane.reports.recommend` -- per-sample opportunities and the report's
  recommendations;
* :mod:`~controlplane.reports.accounting` -- integration over time into bounded minute/hour
  rollups, and queries over a window;
* :mod:`~controlplane.reports.summary` / :mod:`~controlplane.reports.report` -- the report values
  and their JSON / table / CSV renderings;
* :mod:`~controlplane.reports.persistence` -- the rollups in the hub's store (the only I/O; import
  it directly, so importing the pure modules never pulls in storage).
"""

from controlplane.reports.accounting import Accumulator, Resolution
from controlplane.reports.classify import DeviceState, WasteState, classify, classify_fleet
from controlplane.reports.report import OutputFormat, render, render_csv, render_table, to_json
from controlplane.reports.sample import (
    ClusterSample,
    DeviceSample,
    FleetSample,
    NodeSample,
    PendingDemand,
    PodRef,
    WorkloadConstraints,
    sample_from_cluster_statuses,
)
from controlplane.reports.summary import Dimension, Recommendation, WasteReport

__all__ = [
    "Accumulator",
    "ClusterSample",
    "DeviceSample",
    "DeviceState",
    "Dimension",
    "FleetSample",
    "NodeSample",
    "OutputFormat",
    "PendingDemand",
    "PodRef",
    "Recommendation",
    "Resolution",
    "WasteReport",
    "WasteState",
    "WorkloadConstraints",
    "classify",
    "classify_fleet",
    "render",
    "render_csv",
    "render_table",
    "sample_from_cluster_statuses",
    "to_json",
]
