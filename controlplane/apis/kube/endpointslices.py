"""kube's EndpointSlice well-known names (``k8s.io/api/discovery/v1`` ``well_known_labels.go``)
and the endpointslice controller's, which the hub, the agent and the simulated members share."""

from __future__ import annotations

from typing import Final

API_VERSION: Final = "discovery.k8s.io/v1"
KIND: Final = "EndpointSlice"
#: ``discoveryv1.LabelServiceName``: the Service a slice belongs to.
LABEL_SERVICE_NAME: Final = "kubernetes.io/service-name"
#: ``discoveryv1.LabelManagedBy``: the controller or entity that manages a slice.
LABEL_MANAGED_BY: Final = "endpointslice.kubernetes.io/managed-by"
#: kube-controller-manager's endpointslice controller's value of :data:`LABEL_MANAGED_BY`.
MANAGED_BY_CONTROLLER: Final = "endpointslice-controller.k8s.io"
#: kube-controller-manager's default ``--max-endpoints-per-slice``.
MAX_ENDPOINTS_PER_SLICE: Final = 100
