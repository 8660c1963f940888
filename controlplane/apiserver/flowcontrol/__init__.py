"""API Priority and Fairness for the hub's API, configured as kube's is, by FlowSchema and
PriorityLevelConfiguration objects: requests are matched to a FlowSchema (:mod:`.matching`), which
names their priority level and flow (:mod:`.levels`), each level's share of the server's concurrency
is served fairly across flows (:mod:`.queueing`), the middleware (:mod:`.dispatching`) answers 429
with ``Retry-After`` beyond the queues, and :mod:`.configuring` keeps it following the objects."""

from controlplane.apiserver.flowcontrol.configuring import ConfigurationWatch
from controlplane.apiserver.flowcontrol.dispatching import (
    CLASSIFICATION,
    FLOW_SCHEMA_HEADER,
    PRIORITY_LEVEL_HEADER,
    FlowController,
    add_flow_headers,
)
from controlplane.apiserver.flowcontrol.levels import (
    DEFAULT_MAX_MUTATING_REQUESTS_INFLIGHT,
    DEFAULT_MAX_REQUESTS_INFLIGHT,
    DEFAULT_QUEUE_WAIT_SECONDS,
    Classification,
    Configuration,
    FlowControlConfig,
    configuration,
)
from controlplane.apiserver.flowcontrol.matching import RequestDigest
from controlplane.apiserver.flowcontrol.metrics import FlowControlMetrics

__all__ = [
    "CLASSIFICATION",
    "DEFAULT_MAX_MUTATING_REQUESTS_INFLIGHT",
    "DEFAULT_MAX_REQUESTS_INFLIGHT",
    "DEFAULT_QUEUE_WAIT_SECONDS",
    "FLOW_SCHEMA_HEADER",
    "PRIORITY_LEVEL_HEADER",
    "Classification",
    "Configuration",
    "ConfigurationWatch",
    "FlowControlConfig",
    "FlowControlMetrics",
    "FlowController",
    "RequestDigest",
    "add_flow_headers",
    "configuration",
]
