"""A Service's cluster IP and node ports, allocated by the hub as kube-apiserver does.

:mod:`.ranges` (the two ranges, pure), :mod:`.records` (who holds each value, one key per
value in the hub's store), :mod:`.allocator` (the object layer's
:class:`~controlplane.apiserver.allocating.Allocations` for Services) and :mod:`.repair`
(records and Services compared, leaks freed).
"""

from controlplane.apiserver.serviceallocation.allocator import ServiceAllocator
from controlplane.apiserver.serviceallocation.ranges import (
    DEFAULT_SERVICE_CLUSTER_IP_RANGE,
    DEFAULT_SERVICE_NODE_PORT_RANGE,
    IPRange,
    PortRange,
)
from controlplane.apiserver.serviceallocation.repair import AllocationRepair

__all__ = [
    "DEFAULT_SERVICE_CLUSTER_IP_RANGE",
    "DEFAULT_SERVICE_NODE_PORT_RANGE",
    "AllocationRepair",
    "IPRange",
    "PortRange",
    "ServiceAllocator",
]
