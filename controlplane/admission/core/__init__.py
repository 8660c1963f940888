"""The pure admission core: quota arithmetic and Kueue's scheduling cycle. No I/O."""

from controlplane.admission.core.cycle import (
    Admission,
    Admitted,
    Assignment,
    Decisions,
    Pending,
    PodSetRequest,
    Preempting,
    Waiting,
    decide,
)
from controlplane.admission.core.preemption import Reason, Target
from controlplane.admission.core.quota import (
    ClusterQueue,
    FlavorQuotas,
    FlavorResource,
    Preemption,
    PreemptionPolicy,
    QueueingStrategy,
    Quota,
    ResourceGroup,
    Usage,
)

__all__ = [
    "Admission", "Admitted", "Assignment", "ClusterQueue", "Decisions", "FlavorQuotas", "FlavorResource",
    "Pending", "PodSetRequest", "Preempting", "Preemption", "PreemptionPolicy", "QueueingStrategy", "Quota", "Reason",
    "ResourceGroup", "Target", "Usage", "Waiting", "decide",
]
