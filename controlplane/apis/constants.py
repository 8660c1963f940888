"""Label, annotation, taint and namespace names used across gpufed, in one place."""

from __future__ import annotations

from typing import Final

# API groups served by the hub.
CLUSTER_GROUP: Final = "cluster.gpufed.io"
POLICY_GROUP: Final = "policy.gpufed.io"
KARMADA_POLICY_GROUP: Final = "policy.karmada.io"
WORK_GROUP: Final = "work.gpufed.io"
REPORTS_GROUP: Final = "reports.gpufed.io"
VERSION: Final = "v1alpha1"
#: The resource metrics API (metrics-server's), which members serve and the hub merges.
METRICS_GROUP: Final = "metrics.k8s.io"
METRICS_VERSION: Final = "v1beta1"
#: Karmada's annotation naming the member cluster an object was read from.
CACHED_FROM_CLUSTER_ANNOTATION: Final = "resource.karmada.io/cached-from-cluster"

# Namespaces.
EXECUTION_NAMESPACE_PREFIX: Final = "gpufed-es-"
LEASE_NAMESPACE: Final = "gpufed-cluster-lease"
SYSTEM_NAMESPACE: Final = "gpufed-system"


def execution_namespace(cluster: str) -> str:
    """The hub namespace that holds the Works one member cluster must run."""
    return EXECUTION_NAMESPACE_PREFIX + cluster


# Labels gpufed puts on objects.
LABEL_MANAGED_BY: Final = "app.kubernetes.io/managed-by"
MANAGED_BY_VALUE: Final = "gpufed"
LABEL_WORK_NAME: Final = "work.gpufed.io/name"
LABEL_WORK_NAMESPACE: Final = "work.gpufed.io/namespace"
LABEL_BINDING: Final = "work.gpufed.io/binding"
LABEL_CLUSTER: Final = "cluster.gpufed.io/name"
#: Karmada's label on a workload an HPA scales (set by the hub's hpa-scale-target-marker, or by
#: hand): each member keeps its own copy's ``spec.replicas`` when the Work is applied again.
LABEL_RETAIN_REPLICAS: Final = "resourcetemplate.karmada.io/retain-replicas"
RETAIN_REPLICAS_VALUE: Final = "true"
#: Says the hub set that label (so it removes it when no HPA scales the workload any more).
ANNOTATION_RETAIN_REPLICAS_BY_HPA: Final = "gpufed.io/retain-replicas-by-hpa"

# Annotations gpufed puts on Works.
#: The hub workload's metadata.generation a Work was rendered from (Karmada stamps the same as
#: resourcetemplate.karmada.io/generation): the hub's status says it observed a generation only
#: once every member runs a Work of that generation.
ANNOTATION_RESOURCE_GENERATION: Final = "work.gpufed.io/resource-generation"

# Finalizers.
FINALIZER_WORKLOAD: Final = "gpufed.io/propagation"
FINALIZER_CLUSTER: Final = "gpufed.io/cluster"

# Cluster taints.
TAINT_UNREACHABLE: Final = "cluster.gpufed.io/unreachable"
TAINT_NOT_READY: Final = "cluster.gpufed.io/not-ready"
TAINT_CORDONED: Final = "cluster.gpufed.io/unschedulable"

# NVIDIA resource names and GPU Feature Discovery labels.
RESOURCE_GPU: Final = "nvidia.com/gpu"
RESOURCE_GPU_SHARED: Final = "nvidia.com/gpu.shared"
RESOURCE_MIG_PREFIX: Final = "nvidia.com/mig-"
LABEL_GPU_PRODUCT: Final = "nvidia.com/gpu.product"
#: The node's name, as kubelet labels every node (kube's ``v1.LabelHostname``).
LABEL_HOSTNAME: Final = "kubernetes.io/hostname"
LABEL_GPU_MEMORY: Final = "nvidia.com/gpu.memory"
LABEL_GPU_COUNT: Final = "nvidia.com/gpu.count"
LABEL_GPU_FAMILY: Final = "nvidia.com/gpu.family"
LABEL_GPU_REPLICAS: Final = "nvidia.com/gpu.replicas"
LABEL_SHARING_STRATEGY: Final = "nvidia.com/gpu.sharing-strategy"
LABEL_MIG_CAPABLE: Final = "nvidia.com/mig.capable"
LABEL_MIG_STRATEGY: Final = "nvidia.com/mig.strategy"
LABEL_MIG_CONFIG: Final = "nvidia.com/mig.config"

# Labels other controllers put on the pods they create: the simulated member's controllers write
# them, the agent reads them to find a pod's owning workload (member_agent.capacity.owner_workload).
LABEL_POD_TEMPLATE_HASH: Final = "pod-template-hash"
LABEL_TRAINING_JOB_NAME: Final = "training.kubeflow.org/job-name"
LABEL_TRAINING_OPERATOR_NAME: Final = "training.kubeflow.org/operator-name"

# Simulation annotations on pods.
ANNOTATION_SIM_DURATION: Final = "sim.gpufed.io/duration"
ANNOTATION_SIM_GPU_UTILIZATION: Final = "sim.gpufed.io/gpu-utilization"

# The environment variable `gpufed agent` reads its bootstrap token from (unlike a flag,
# it does not show in process listings).
BOOTSTRAP_TOKEN_ENV: Final = "GPUFED_BOOTSTRAP_TOKEN"

# Field managers.
FIELD_MANAGER_AGENT: Final = "gpufed-agent"
FIELD_MANAGER_HUB: Final = "gpufed-hub"

# Other API groups gpufed serves or checks; AUTH_GROUP serves the credential endpoints (token
# exchange, token management).
AUTH_GROUP: Final = "auth.gpufed.io"
COORDINATION_GROUP: Final = "coordination.k8s.io"
#: The hub's CA, fetched by joining agents (without credentials: they do not trust the hub yet) and
#: checked against a pin.
CA_PATH: Final = "/.well-known/gpufed/ca.crt"
#: The dashboard's page and static files.
UI_PATH: Final = "/ui"
#: The token exchange: a bootstrap token in, an agent token out.
JOIN_PATH: Final = f"/apis/{AUTH_GROUP}/{VERSION}/clusterjoins"
#: Admin-only token management (create, list, revoke).
TOKENS_PATH: Final = f"/apis/{AUTH_GROUP}/{VERSION}/tokens"

# Workload annotations users set.
ANNOTATION_GANG: Final = "gpufed.io/gang"

# Binding annotations the scheduler's rebalancer writes; the waste report and `gpufed explain`
# read them (scheduler/core/returning.py writes them).
ANNOTATION_REBALANCE: Final = "scheduler.gpufed.io/rebalance"
"""On a binding, the move in progress: JSON {source, target, replicas, savingPerHour, targetReady, replicasBefore, started}."""
ANNOTATION_MOVES: Final = "scheduler.gpufed.io/moves"
"""On a binding, its latest finished moves, oldest first (at most ``MOVES_KEPT`` of
scheduler/core/returning.py): a JSON list of {time, message, source, target, replicas,
gpusPerReplica, savingPerHour}. The minimum interval reads the last one, ``gpufed explain``
prints it, and the waste report counts them."""
ANNOTATION_ABANDONED: Final = "scheduler.gpufed.io/move-abandoned"
"""On a binding, when its latest abandoned move was abandoned (RFC 3339): the minimum interval
counts from it as from a finished move, so a surge that never gets ready is not retried at once."""

ANNOTATION_GPU_STEERING: Final = "scheduler.gpufed.io/gpu-steering"
"""On a binding, per cluster whose replicas are steered away from GPU models (scheduler/core/steering.py):
JSON ``{cluster: [model, ...]}``. The binding controller adds the preferred node affinity term to
the Work's pod templates that request a GPU."""
ANNOTATION_PACKING_HINTS: Final = "scheduler.gpufed.io/packing-hints"
"""On a binding, per cluster whose replicas are packed toward nodes already running GPU work
(scheduler/core/packhints.py): JSON ``{cluster: [hostname, ...]}``. The binding controller adds
the preferred node affinity term to the Work's pod templates that request a GPU."""

# The condition the hub adds to a workload's status, beside the ones its members report.
CONDITION_PROPAGATED: Final = "Propagated"
