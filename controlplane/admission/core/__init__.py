"""The pure admission core: quota arithmetic and Kueue's scheduling cycle. No I/O."""

from controlplane.admission.core.cycle import (
    Admission,
    Admitted,
    Assignment,
    Decisions,
    Pending,
    PodSetRequest,
    Waiting,
    decide,
)
from controlplane.admission.core.quota import (
    ClusterQueue,
    FlavorQuotas,
    FlavorResource,
    QueueingStrategy,
    Quota,
    ResourceGroup,
    Usage,
)

__all__ = [
    "Admission", "Admitted", "Assignment", "ClusterQueue", "Decisions", "FlavorQuotas", "FlavorResource",
    "Pending", "PodSetRequest", "QueueingStrategy", "Quota", "ResourceGroup", "Usage", "Waiting", "decide",
]
