"""GPU waste accounting: where every GPU-hour of the fleet went, in hours and dollars.

Data flows through the modules in this order:

* :mod:`~controlplane.reports.fleet` -- the fleet snapshot's types (frozen dataclasses);
* :mod:`~controlplane.reports.snapshot` -- the adapter from the hub's Cluster / ResourceBinding /
  Work objects, with :mod:`~controlplane.reports.unreported` (synthetic nodes for GPUs no
  exporter reported), :mod:`~controlplane.reports.demand` (pending demand and placement
  constraints) and :mod:`~controlplane.reports.owners` (pods reported without an owner put
  under their workload); the agent's utilization wire format is
  :mod:`controlplane.apis.utilization`;
* :mod:`~controlplane.reports.classify` -- one waste state per GPU device at one instant;
* :mod:`~controlplane.reports.recommend` -- per-sample opportunities and the report's
  recommendations;
* :mod:`~controlplane.reports.accounting` -- integration over time into bounded minute/hour
  rollups (:mod:`~controlplane.reports.rollups`, their data and encoding), and queries over a
  window (:mod:`~controlplane.reports.totals`, a window's cells as report values);
* :mod:`~controlplane.reports.summary` / :mod:`~controlplane.reports.report` -- the report values
  and their JSON / table / CSV renderings;
* :mod:`~controlplane.reports.persistence` -- the rollups in the hub's store (the only I/O; import
  it directly, so importing the pure modules never pulls in storage).

The package itself imports none of them: a process that needs one piece (the agent builds its
report with :mod:`~controlplane.reports.agentreport`) does not load the rest.
"""
