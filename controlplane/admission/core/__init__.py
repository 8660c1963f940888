"""The pure admission core: quota arithmetic and Kueue's scheduling cycle. No I/O."""

from controlplane.admission.core.cycle import Mode, decide
from controlplane.admission.core.preemption import Reason, Target
from controlplane.admission.core.quota import (
    DEFAULT_WEIGHT,
    INFINITE_SHARE,
    ClusterQueue,
    Cohort,
    FlavorFungibility,
    FlavorQuotas,
    FlavorResource,
    FungibilityPreference,
    Preemption,
    PreemptionPolicy,
    QueueingStrategy,
    Quota,
    ResourceGroup,
    Usage,
    WhenCanBorrow,
    WhenCanPreempt,
)
from controlplane.admission.core.workloads import (
    Admission,
    Admitted,
    Assignment,
    Decisions,
    Pending,
    PodSetRequest,
    Preempting,
    Waiting,
    queue_order,
)

__all__ = [
    "DEFAULT_WEIGHT", "INFINITE_SHARE",
    "Admission", "Admitted", "Assignment", "ClusterQueue", "Cohort", "Decisions", "FlavorFungibility", "FlavorQuotas", "FlavorResource",
    "FungibilityPreference",     "Mode", "Pending", "PodSetRequest", "Preempting", "Preemption", "PreemptionPolicy", "QueueingStrategy", "Quota", "Reason",
    "ResourceGroup", "Target", "Usage", "Waiting", "WhenCanBorrow", "WhenCanPreempt", "decide", "queue_order",
]
