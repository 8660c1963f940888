"""Schemas of the kinds validated by pydantic models (gpufed's and Karmada's), as kube serves a CRD's.

A model's JSON schema (JSON Schema 2020-12) is rewritten into kube's OpenAPI v2 dialect, the
form every definition takes here (:mod:`.upstream` holds kube's own): ``#/definitions/``
references named after the kind's group (``io.gpufed.policy.v1alpha1.Placement``), one type
per schema (``Optional[X]`` is ``X``; a union of scalars is kube's int-or-string or an
untyped value), ``const``/``Literal`` as ``enum``, no pydantic titles or defaults (but the
defaults the CRDs declare, :data:`~controlplane.apis.meta.SERVED_DEFAULT` and
:func:`~controlplane.apis.meta.served_default`, published as kube publishes a CRD's).

Descriptions are written for users: a field's description is the attribute docstring under
it in the model (:mod:`controlplane.apis.fielddocs`); class docstrings speak to developers and are
left out, except that a kind's own description comes from :data:`KIND_DESCRIPTIONS`.
Sub-objects that are kube's own types (``ObjectMeta``, ``Condition``, ``LabelSelector``,
``Toleration``, ``Taint``, ``OwnerReference``) refer to kube's definitions, with kube's
descriptions, and so do ``apiVersion`` and ``kind``.
Pure: in a model, out JSON-ready dicts.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from controlplane.apis.fielddocs import DescribedJsonSchema
from controlplane.apis.meta import PUBLISHED_AS, SERVES_DEFAULT
from controlplane.apiserver.openapi.upstream import DEFINITIONS_PREFIX, OBJECT_META, POD_TEMPLATE_SPEC

_META = "io.k8s.apimachinery.pkg.apis.meta.v1."
#: pydantic models that are kube's own types, wire for wire: served with kube's schema.
KUBE_EQUIVALENTS: dict[str, str] = {
    "ObjectMeta": OBJECT_META,
    "OwnerReference": _META + "OwnerReference",
    "Condition": _META + "Condition",
    "LabelSelector": _META + "LabelSelector",
    "LabelSelectorRequirement": _META + "LabelSelectorRequirement",
    "Toleration": "io.k8s.api.core.v1.Toleration",
    "Taint": "io.k8s.api.core.v1.Taint",
    # A Kueue ResourceFlavor's, checked by its CRD's rules rather than by the models' enums.
    "FlavorToleration": "io.k8s.api.core.v1.Toleration",
    "FlavorTaint": "io.k8s.api.core.v1.Taint",
    # Free-form fields published as kube's type (``published_as``), as the upstream CRDs embed it.
    "PodTemplateSpec": POD_TEMPLATE_SPEC,
    "IngressSpec": "io.k8s.api.networking.v1.IngressSpec",
    "IngressLoadBalancerStatus": "io.k8s.api.networking.v1.IngressLoadBalancerStatus",
}

API_VERSION_DESCRIPTION = (
    "APIVersion defines the versioned schema of this representation of an object. Servers should "
    "convert recognized schemas to the latest internal value, and may reject unrecognized values. "
    "More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#resources"
)
KIND_DESCRIPTION = (
    "Kind is a string value representing the REST resource this object represents. Servers may infer "
    "this from the endpoint the client submits requests to. Cannot be updated. In CamelCase. More info: "
    "https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#types-kinds"
)
METADATA_DESCRIPTION = (
    "Standard object's metadata. More info: "
    "https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata"
)

_PROPAGATION = (
    "{scope}PropagationPolicy represents the policy that propagates a group of resources to one or "
    "more clusters{where}: which resource templates it selects, where their replicas may go and how "
    "they are divided among the chosen clusters."
)
_OVERRIDE = (
    "{scope}OverridePolicy represents the policy that overrides a group of resources when they are "
    "propagated to member clusters{where}: the same template can get a different image, command, "
    "labels or any other field per cluster."
)
#: The description of each kind served from a pydantic model, by kind.
KIND_DESCRIPTIONS: dict[str, str] = {
    "Cluster": (
        "Cluster represents one member cluster of the federation: where it runs and what its GPUs "
        "cost (spec, set by the platform team) and what it holds and has free right now (status, "
        "reported by the cluster's agent)."
    ),
    "ResourceBinding": (
        "ResourceBinding binds one resource template (a Deployment, Job, PyTorchJob, ...) to the "
        "placement its PropagationPolicy asks for; the scheduler records in it which clusters get "
        "how many replicas and why."
    ),
    "Work": (
        "Work holds the manifests to apply in one member cluster (its namespace names the cluster); "
        "the cluster's agent applies them and reports their status back."
    ),
    "PropagationPolicy": _PROPAGATION.format(scope="", where=" (namespace-scoped: it selects resources in its own namespace)"),
    "ClusterPropagationPolicy": _PROPAGATION.format(
        scope="Cluster", where=" (cluster-scoped: it selects resources in any namespace and cluster-scoped ones)"
    ),
    "OverridePolicy": _OVERRIDE.format(scope="", where=" (namespace-scoped: it applies to resources in its own namespace)"),
    "ClusterOverridePolicy": _OVERRIDE.format(
        scope="Cluster", where=" (cluster-scoped: it applies to resources in any namespace and cluster-scoped ones)"
    ),
    "ResourceFlavor": (
        "ResourceFlavor is a class of fleet capacity (Kueue's kind): its node labels select GPU products, "
        "MIG profiles or cluster labels; ClusterQueues give quota per flavor."
    ),
    "ClusterQueue": (
        "ClusterQueue is a pool of quota per flavor and resource (Kueue's kind); queues of a cohort lend "
        "each other unused quota, and the hub admits queued workloads when the quota allows."
    ),
    "LocalQueue": (
        "LocalQueue is a namespace's queue (Kueue's kind): workloads labelled kueue.x-k8s.io/queue-name "
        "with its name use the quota of its ClusterQueue."
    ),
    "Cohort": (
        "Cohort is a node of the tree of cohorts (Kueue's kind): ClusterQueues and cohorts under it share "
        "its quota and what they lend each other, and its fair-sharing weight sets its share among its siblings."
    ),
    "WorkloadPriorityClass": (
        "WorkloadPriorityClass gives queued workloads a priority (Kueue's kind), named by the label "
        "kueue.x-k8s.io/priority-class; higher values are admitted first."
    ),
    "Workload": (
        "Workload is one queued workload's claim on quota (Kueue's kind): the hub creates it, admits it "
        "when its ClusterQueue's quota allows, and only then propagates the workload."
    ),
    "AdmissionCheck": (
        "AdmissionCheck is a check a queued workload must pass besides quota (Kueue's kind): a ClusterQueue "
        "names its checks, the check's controller sets each Workload's state of it, and the workload is "
        "admitted once every check is Ready."
    ),
    "ProvisioningRequestConfig": (
        "ProvisioningRequestConfig holds the parameters of Kueue's provisioning admission checks (Kueue's kind): "
        "the provisioning class, its parameters and the retry strategy of the ProvisioningRequests asked "
        "for a workload. The hub stores it; it runs no provisioning controller."
    ),
    "ClusterTaintPolicy": (
        "ClusterTaintPolicy adds taints to clusters and removes them by the clusters' status conditions "
        "(Karmada's kind): the taints are added when every addOnConditions entry matches a targeted "
        "cluster's conditions and removed when every removeOnConditions entry does."
    ),
    "ServiceExport": (
        "ServiceExport declares that the Service with the same name and namespace as this export should be "
        "consumable from other clusters. The hub stores and propagates it; the members run no multi-cluster "
        "service implementation."
    ),
    "ServiceImport": (
        "ServiceImport describes a service imported from clusters in a ClusterSet. The hub stores and "
        "propagates it; the members run no multi-cluster service implementation."
    ),
    "MultiClusterService": (
        "MultiClusterService is a named abstraction of multi-cluster software service (Karmada's kind): it "
        "exposes the Service of its name across clusters (CrossCluster) or through an external load "
        "balancer (LoadBalancer), from its provider clusters to its consumer clusters."
    ),
    "MultiClusterIngress": (
        "MultiClusterIngress is a collection of rules that allow inbound connections to reach the endpoints "
        "defined by a backend, across clusters (Karmada's kind). The hub stores it: no multi-cluster "
        "ingress controller serves the hub."
    ),
    "Topology": (
        "Topology lists the node label levels of topology-aware scheduling (Kueue's kind), from the widest "
        "to the narrowest; a ResourceFlavor names it in topologyName. The hub stores it; members place pods on nodes."
    ),
    "MultiKueueConfig": (
        "MultiKueueConfig lists the MultiKueueClusters that an AdmissionCheck of Kueue's MultiKueue controller "
        "(kueue.x-k8s.io/multikueue) dispatches a ClusterQueue's workloads to (Kueue's kind)."
    ),
    "MultiKueueCluster": (
        "MultiKueueCluster is a cluster that MultiKueue dispatches workloads to, with how to connect to it "
        "(Kueue's kind); its Active condition says whether it is connected."
    ),
    "WorkloadRebalancer": (
        "WorkloadRebalancer asks for a fresh placement of the workloads it lists, as if they ran nowhere "
        "(Karmada's apps.karmada.io kind); its status gives the result per workload, and it is deleted "
        "ttlSecondsAfterFinished after it finished."
    ),
    "FederatedResourceQuota": (
        "FederatedResourceQuota sets aggregate quota restrictions enforced per namespace across all clusters "
        "(Karmada's policy.karmada.io kind): each cluster its staticAssignments list gets a ResourceQuota with its "
        "share, and its status gives what each cluster uses."
    ),
}

#: JSON-schema keywords kube's OpenAPI v2 dialect shares, kept as they are.
_VALIDATION_KEYWORDS = {
    "format", "minimum", "maximum", "minLength", "maxLength", "pattern", "minItems", "maxItems",
    "uniqueItems", "minProperties", "maxProperties", "multipleOf", "enum", "required",
}
_SCALARS = {"string", "integer", "number", "boolean"}


def type_meta_properties() -> dict[str, dict[str, Any]]:
    """``apiVersion``, ``kind`` and ``metadata`` of a kind, with kube's descriptions."""
    return {
        "apiVersion": {"description": API_VERSION_DESCRIPTION, "type": "string"},
        "kind": {"description": KIND_DESCRIPTION, "type": "string"},
        "metadata": {"$ref": _ref(OBJECT_META), "description": METADATA_DESCRIPTION},
    }


def definition_prefix(name: str) -> str:
    """``io.gpufed.policy.v1alpha1.`` for the kind ``io.gpufed.policy.v1alpha1.PropagationPolicy``."""
    return name.rsplit(".", 1)[0] + "."


def _flow(text: str) -> str:
    """A docstring as a description: lines of one paragraph joined, paragraphs kept apart."""
    paragraphs = (" ".join(line.strip() for line in block.splitlines()) for block in text.strip().split("\n\n"))
    return "\n\n".join(p for p in paragraphs if p)


def _ref(target: str) -> str:
    return DEFINITIONS_PREFIX + target


class _Rewriter:
    """Rewrites one model's schema; ``prefix`` names its sub-definitions."""

    def __init__(self, prefix: str) -> None:
        self.prefix = prefix

    def target(self, ref: str) -> str:
        name = ref.rsplit("/", 1)[-1]
        return KUBE_EQUIVALENTS.get(name, self.prefix + name)

    def schema(self, node: dict[str, Any], *, description: str | None) -> dict[str, Any]:
        """A property (or item) schema; ``description`` is the field's own."""
        node = dict(node)
        any_of = node.pop("anyOf", None)
        if isinstance(any_of, list):
            alternatives = [a for a in any_of if a.get("type") != "null"]
            if len(alternatives) == 1:
                node = {**alternatives[0], **node}
            else:
                node = {**node, **self._union(alternatives)}
        if PUBLISHED_AS in node:  # a free-form field holding a kube type: kube's schema
            node = {"$ref": node[PUBLISHED_AS]}
        out: dict[str, Any] = {}
        if "$ref" in node:
            out["$ref"] = _ref(self.target(node["$ref"]))
        if description:
            out["description"] = description
        if node.get(SERVES_DEFAULT) and "default" in node:
            out["default"] = node["default"]
        if "$ref" in node:
            return out
        if "const" in node:
            out["enum"] = [node["const"]]
        for key, value in node.items():
            if key in _VALIDATION_KEYWORDS or key.startswith("x-kubernetes-"):
                out[key] = value
            elif key == "type":
                out["type"] = value
            elif key in ("exclusiveMinimum", "exclusiveMaximum") and not isinstance(value, bool):
                out["minimum" if key == "exclusiveMinimum" else "maximum"] = value
                out[key] = True
            elif key == "items" and isinstance(value, dict):
                out["items"] = self.schema(value, description=None)
            elif key == "additionalProperties" and isinstance(value, dict):
                out["additionalProperties"] = self.schema(value, description=None) if value else {}
            elif key == "properties" and isinstance(value, dict):
                out["properties"] = {
                    name: self.schema(sub, description=_flow(sub.get("description") or "")) for name, sub in value.items()
                }
        if out.get("type") == "object" and not out.get("properties") and "additionalProperties" not in out:
            # dict[str, Any] and free-form fields: any object, as a CRD's preserved fields.
            out["x-kubernetes-preserve-unknown-fields"] = True
        return out

    @staticmethod
    def _union(alternatives: list[dict[str, Any]]) -> dict[str, Any]:
        types = {a.get("type") for a in alternatives}
        if types <= {"integer", "string"} and len(types) == 2:
            return {"type": "string", "format": "int-or-string"}
        if types <= _SCALARS and "string" in types:
            # A quantity (number or string): kube's Quantity is a string on the wire.
            return {"type": "string"}
        # Anything else (objects or values of several shapes): an untyped value.
        return {}

    def definition(self, node: dict[str, Any]) -> dict[str, Any]:
        """A model's definition: its class docstring is not a user's description."""
        out = self.schema({k: v for k, v in node.items() if k != "description"}, description=None)
        out.pop("x-kubernetes-preserve-unknown-fields", None)
        return out


def model_json_schema(model: type[BaseModel]) -> dict[str, Any]:
    """The model's JSON schema as pydantic writes it (the costly step: do it once per model)."""
    return model.model_json_schema(by_alias=True, mode="validation", schema_generator=DescribedJsonSchema)


def model_definitions(raw: dict[str, Any], *, name: str, kind: str) -> dict[str, dict[str, Any]]:
    """The definitions of a kind served from a model whose :func:`model_json_schema` is ``raw``:
    the kind (as ``name``) and its parts."""
    rewriter = _Rewriter(definition_prefix(name))
    parts = raw.get("$defs", {})
    raw = {k: v for k, v in raw.items() if k != "$defs"}
    out = {
        rewriter.prefix + part: rewriter.definition(schema)
        for part, schema in parts.items()
        if part not in KUBE_EQUIVALENTS
    }
    main = rewriter.definition(raw)
    properties = main.setdefault("properties", {})
    properties.update({k: v for k, v in type_meta_properties().items() if k in properties})
    if kind in KIND_DESCRIPTIONS:
        main["description"] = KIND_DESCRIPTIONS[kind]
    out[name] = main
    return out
