"""API Priority and Fairness for the hub's API (a simplified kube APF): requests are
classified into priority levels (:mod:`.levels`), each level's share of the server's
concurrency is served fairly across flows (:mod:`.queueing`), and the middleware
(:mod:`.dispatching`) answers 429 with ``Retry-After`` beyond the queues."""

from controlplane.apiserver.flowcontrol.dispatching import (
    CLASSIFICATION,
    FLOW_SCHEMA_HEADER,
    PRIORITY_LEVEL_HEADER,
    FlowController,
    add_flow_headers,
)
from controlplane.apiserver.flowcontrol.levels import (
    DEFAULT_QUEUE_LENGTH,
    DEFAULT_QUEUE_WAIT_SECONDS,
    DEFAULT_QUEUES,
    DEFAULT_SHARES,
    Classification,
    FlowControlConfig,
    Level,
    classify,
)
from controlplane.apiserver.flowcontrol.metrics import FlowControlMetrics

__all__ = [
    "CLASSIFICATION",
    "DEFAULT_QUEUES",
    "DEFAULT_QUEUE_LENGTH",
    "DEFAULT_QUEUE_WAIT_SECONDS",
    "DEFAULT_SHARES",
    "FLOW_SCHEMA_HEADER",
    "PRIORITY_LEVEL_HEADER",
    "Classification",
    "FlowControlConfig",
    "FlowControlMetrics",
    "FlowController",
    "Level",
    "add_flow_headers",
    "classify",
]
