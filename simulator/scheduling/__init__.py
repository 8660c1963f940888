"""The simulated member cluster's scheduler core: kube-scheduler plus the NVIDIA device plugin.

The hub only estimates; a member's own scheduler makes the final per-node placement.
This package decides those placements the way kube-scheduler would, so that the hub
sees realistic outcomes (fragmentation included) and realistic refusals:

* filters, in kube's plugin order, stopping at the first that fails on a node:
  NodeUnschedulable, TaintToleration (NoSchedule/NoExecute taints), NodeAffinity
  (``nodeSelector`` and required node affinity), NodeResourcesFit (cpu, memory, pods,
  ``nvidia.com/gpu``, every ``nvidia.com/mig-*`` and shared-GPU resource);
* like kube, it stops looking once it has found ``percentageOfNodesToScore`` feasible
  nodes (adaptive by default: 50% minus 1% per 125 nodes, at least 5%, at least 100
  nodes), starting where the previous pod left off;
* scoring (:class:`Scoring`): ``least-allocated`` (kube's default), ``most-allocated``,
  ``best-fit`` (the FGD paper's: CPU and GPU left after the pod, normalised to a
  128-core, 8-GPU node), ``fgd`` (the paper's Fragmentation Gradient Descent, :mod:`.fgd`)
  or ``random``, plus kube's NodeAffinity (preferred terms, weight 2) and TaintToleration
  (PreferNoSchedule taints, weight 3) scores when the pod or the nodes state preferences
  (:mod:`.preferences`); ties are broken with the seeded random generator (under ``fgd``: the
  first node in name order), so runs are reproducible;
* gangs bind all-or-nothing. A pod belongs to a gang when it has the label
  ``scheduling.x-k8s.io/pod-group: <name>`` (the coscheduling plugin's key; the
  gang needs ``scheduling.x-k8s.io/min-member: "<n>"`` pods, an annotation, else all
  pods of the group that exist), or else when its controller owner is a Kubeflow
  training job (PyTorchJob, TFJob, MPIJob...: the gang is then every pod of that owner);
* DynamicResources for the DRA claims pods name directly (``resourceClaimName``): the first pod
  placed allocates the claim's devices on its node, the later ones go only to that node
  (``resourceclaim not available on the node`` elsewhere) and take nothing more for it;
* a pod that fits nowhere gets kube's message, reasons counted per node and sorted as
  kube sorts them (as strings): ``0/12 nodes are available: 4 node(s) didn't match
  Pod's node affinity/selector, 8 Insufficient nvidia.com/mig-3g.40gb.``

Each binding names the concrete devices (GPU index / MIG instance / share) the pod
gets, for DCGM. Pure: no I/O; :class:`ClusterState` is plain mutable memory.

The modules, by concern: :mod:`.model` (the pod, node and placement types and the gang
and GPU constants), :mod:`.reading` (v1 Pod and Node objects into those types),
:mod:`.filtering` (the usage-independent filters, kube's search limit and FitError text)
:mod:`.fgd` (FGD's per-node GPU slots and fragmentation deltas), :mod:`.preferences` (kube's
preference scores), :mod:`.sharedclaims` (the shared DRA claims held, their node and users) and :mod:`.cluster_state`
(:class:`ClusterState`: the arrays, allocations, resource fit,
scoring and the scheduling cycle, gangs included). Import a name from its module; this
package re-exports only the scheduler and how it scores.

Speed: a what-if replay asks this core for tens of thousands of placements over a
thousand nodes, so filtering and scoring run over NumPy arrays (one row per node: free
and allocatable amounts per resource, GPU thousandths) kept in step with the
``NodeState`` objects, instead of Python loops over nodes. The arrays are derived
state; the ``NodeState`` dictionaries stay the record, and results are identical to
scoring node by node (``tests/simulator/test_sim_scoring_equivalence.py``).
"""

from simulator.scheduling.cluster_state import ClusterState
from simulator.scheduling.model import Scoring

__all__ = ["ClusterState", "Scoring"]
