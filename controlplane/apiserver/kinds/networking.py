"""networking.k8s.io/v1 kinds: Ingress, IngressClass, NetworkPolicy; and discovery.k8s.io/v1's
EndpointSlice (``kubectl describe service`` and ``describe ingress`` list a Service's slices), as
kube serves them (printers.go ``ingressColumnDefinitions``, ``ingressClassColumnDefinitions``,
``networkPolicyColumnDefinitions``, ``endpointSliceColumnDefinitions``). NetworkPolicy has no
status subresource since 1.29."""

from __future__ import annotations

from controlplane.apiserver.kinds import cells
from controlplane.apiserver.resources import AGE, ResourceType, TableColumn

GROUP = "networking.k8s.io"

INGRESS = ResourceType(
    GROUP, "v1", "Ingress", "ingresses", "ingress", namespaced=True,
    short_names=("ing",), has_status=True, strategic_merge=True,
    columns=(
        TableColumn("Class", cells.text_at("spec", "ingressClassName"),
                    description="The name of the IngressClass resource."),
        TableColumn("Hosts", cells.ingress_hosts, description="Hosts that incoming requests are matched against."),
        TableColumn("Address", cells.load_balancer_address, description="Address is a list containing ingress points."),
        TableColumn("Ports", cells.ingress_ports, description="Ports of TLS configurations that open."),
        AGE,
    ),
)

INGRESS_CLASS = ResourceType(
    GROUP, "v1", "IngressClass", "ingressclasses", "ingressclass", namespaced=False, strategic_merge=True,
    columns=(
        TableColumn("Controller", cells.text_at("spec", "controller", none=""),
                    description="Controller that is responsible for handling this class."),
        TableColumn("Parameters", cells.ingress_class_parameters,
                    description="A reference to a resource with additional parameters."),
        AGE,
    ),
)

NETWORK_POLICY = ResourceType(
    GROUP, "v1", "NetworkPolicy", "networkpolicies", "networkpolicy", namespaced=True,
    short_names=("netpol",), strategic_merge=True,
    columns=(
        TableColumn("Pod-Selector", cells.label_selector_at("spec", "podSelector"),
                    description="Selects the pods to which this NetworkPolicy object applies."),
        AGE,
    ),
)

ENDPOINT_SLICE = ResourceType(
    "discovery.k8s.io", "v1", "EndpointSlice", "endpointslices", "endpointslice", namespaced=True,
    strategic_merge=True,
    columns=(
        TableColumn("AddressType", cells.text_at("addressType", none=""),
                    description="Type of address carried by this EndpointSlice."),
        TableColumn("Ports", cells.endpoint_slice_ports, description="Ports in this EndpointSlice."),
        TableColumn("Endpoints", cells.endpoint_slice_endpoints, description="Endpoints in this EndpointSlice."),
        AGE,
    ),
)
