"""Which schema each served kind gets, and the definitions a set of kinds needs.

A kind's schema comes, in this order, from its pydantic model (gpufed's and Karmada's kinds,
:mod:`.models`), from :mod:`.extra_kinds` (Kubeflow's and KubeRay's jobs, WasteReport) or
:mod:`.sigs_kinds` (JobSet, LeaderWorkerSet), :mod:`.karmada_config_kinds` (Karmada's interpreter
customizations and webhook configurations), or
from kube's own definitions when kube has the group-version-kind (:mod:`.upstream`: every
built-in kind, with nothing to wire per kind); any other kind gets an open object. A
create-only resource (an access review, a TokenRequest) is always a built-in kind: kube's; Kueue's
visibility API's ``PendingWorkloadsSummary`` comes from :mod:`.visibility_kinds`. Every
kind's definition carries ``x-kubernetes-group-version-kind``, which is how ``kubectl
explain`` and ``kubectl apply`` find it.

All definitions are in kube's OpenAPI v2 dialect; :mod:`.v3` converts them.
Pure: in a registry and kube's definitions, out JSON-ready dicts.
"""

from __future__ import annotations

import copy
import functools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from controlplane.apiserver.computed import ComputedResource
from controlplane.apiserver.openapi.crdv2 import preserves_unknown_fields, v2_schema, v3_schema
from controlplane.apiserver.openapi.extra_kinds import extra_kind_definitions
from controlplane.apiserver.openapi.karmada_config_kinds import karmada_config_kind_definitions
from controlplane.apiserver.openapi.metrics_kinds import metrics_kind_definitions
from controlplane.apiserver.openapi.models import model_definitions, model_json_schema
from controlplane.apiserver.openapi.ray_kinds import ray_kind_definitions
from controlplane.apiserver.openapi.sigs_kinds import sigs_kind_definitions
from controlplane.apiserver.openapi.trainer_kinds import trainer_kind_definitions
from controlplane.apiserver.openapi.upstream import (
    DEFINITIONS_PREFIX,
    DELETE_OPTIONS,
    OBJECT_META,
    PATCH,
    STATUS,
    UpstreamDefinitions,
)
from controlplane.apiserver.openapi.visibility_kinds import visibility_kind_definitions
from controlplane.apiserver.resources import Registry, ResourceType

#: What every document's operations refer to besides the kinds.
COMMON_DEFINITIONS = (STATUS, DELETE_OPTIONS, PATCH)


def reversed_dns_name(rt: ResourceType) -> str:
    """``io.gpufed.policy.v1alpha1.PropagationPolicy``: how kube names a CRD's schema."""
    group = ".".join(reversed(rt.group.split("."))) if rt.group else "io.k8s.api.core"
    return f"{group}.{rt.version}.{rt.kind}"


@dataclass(frozen=True, slots=True)
class KindSchema:
    """A kind's definition name and the definitions that are its own (kube's are shared);
    ``v2`` replaces them in OpenAPI v2 when they differ there (a CRD's, :mod:`.crdv2`)."""

    name: str
    definitions: dict[str, dict[str, Any]]
    v2: dict[str, dict[str, Any]] | None = None

    def definitions_in(self, *, v2: bool) -> dict[str, dict[str, Any]]:
        return self.v2 if v2 and self.v2 is not None else self.definitions


def _open_schema(rt: ResourceType) -> dict[str, Any]:
    return {
        "description": f"{rt.kind} ({rt.api_version}); the server keeps every field as written.",
        "type": "object",
        "x-kubernetes-preserve-unknown-fields": True,
    }


def custom_resource_schema(schema: Mapping[str, Any]) -> dict[str, Any]:
    """A CRD version's schema as kube publishes it: ``metadata`` is ObjectMeta, ``apiVersion``
    and ``kind`` described, the rest as written."""
    out = copy.deepcopy(dict(schema))
    properties = out.setdefault("properties", {})
    properties["metadata"] = {"$ref": DEFINITIONS_PREFIX + OBJECT_META}
    properties.setdefault("apiVersion", {"type": "string", "description": "APIVersion defines the versioned schema of this representation of an object."})
    properties.setdefault("kind", {"type": "string", "description": "Kind is a string value representing the REST resource this object represents."})
    return out


def kind_schema(
    rt: ResourceType, upstream: UpstreamDefinitions, json_schema: Callable[[type[BaseModel]], dict[str, Any]]
) -> KindSchema:
    """Where ``rt``'s schema comes from (see the module docstring); ``json_schema`` renders a model."""
    gvk = {"x-kubernetes-group-version-kind": [{"group": rt.group, "version": rt.version, "kind": rt.kind}]}
    if rt.custom is not None:
        name, schema = reversed_dns_name(rt), rt.custom.schema
        v2 = {"type": "object"} if preserves_unknown_fields(schema) else custom_resource_schema(v2_schema(schema))
        v3 = custom_resource_schema(v3_schema(schema))
        return KindSchema(name, {name: {**v3, **gvk}}, v2={name: {**v2, **gvk}})
    elif rt.model is not None:
        name = reversed_dns_name(rt)
        definitions = model_definitions(json_schema(rt.model), name=name, kind=rt.kind)
    elif (extra := extra_kind_definitions(rt.group, rt.version, rt.kind)) is not None:
        name, definitions = extra
    elif (sigs := sigs_kind_definitions(rt.group, rt.version, rt.kind)) is not None:
        name, definitions = sigs
    elif (trained := trainer_kind_definitions(rt.group, rt.version, rt.kind)) is not None:
        name, definitions = trained
    elif (ray := ray_kind_definitions(rt.group, rt.version, rt.kind)) is not None:
        name, definitions = ray
    elif (config := karmada_config_kind_definitions(rt.group, rt.version, rt.kind)) is not None:
        name, definitions = config
    elif (upstream_name := upstream.for_kind(rt.group, rt.version, rt.kind)) is not None:
        return KindSchema(upstream_name, {})
    else:
        name = reversed_dns_name(rt)
        definitions = {name: _open_schema(rt)}
    definitions[name] = {**definitions[name], **gvk}
    return KindSchema(name, definitions)


class SchemaCatalog:
    """The schemas of one registry's kinds."""

    def __init__(self, registry: Registry, upstream: UpstreamDefinitions) -> None:
        self.upstream = upstream
        # The same model serves under several groups (Karmada's and gpufed's policies): render once.
        json_schema = functools.cache(model_json_schema)
        self._kinds = {(rt.group, rt.version, rt.kind): kind_schema(rt, upstream, json_schema) for rt in registry}

    def kind(self, rt: ResourceType) -> KindSchema:
        return self._kinds[(rt.group, rt.version, rt.kind)]

    def computed_kind(self, resource: ComputedResource) -> KindSchema | None:
        """The schema of a computed resource's kind: kube's, or Kueue's visibility kinds' (None
        when neither has it)."""
        group, version = resource.kind_group_version
        if (upstream_name := self.upstream.for_kind(group, version, resource.kind)) is not None:
            return KindSchema(upstream_name, {})
        if (visibility := visibility_kind_definitions(group, version, resource.kind)) is not None:
            return KindSchema(*visibility)
        if (metrics := metrics_kind_definitions(group, version, resource.kind)) is not None:
            return KindSchema(*metrics)
        return None

    def computed_list(self, resource: ComputedResource) -> str | None:
        """The definition name of a listed computed resource's list kind (``PodMetricsList``), if known."""
        if "list" not in resource.verbs or resource.subresource:
            return None
        group, version = resource.kind_group_version
        if (upstream_name := self.upstream.for_kind(group, version, resource.kind + "List")) is not None:
            return upstream_name
        metrics = metrics_kind_definitions(group, version, resource.kind + "List")
        return metrics[0] if metrics is not None else None

    def computed(self, resource: ComputedResource) -> str | None:
        """The definition name of a computed resource's kind (None when there is none)."""
        kind = self.computed_kind(resource)
        return kind.name if kind is not None else None

    def definitions(
        self, types: list[ResourceType], computed: Sequence[ComputedResource] = (), *, v2: bool = False
    ) -> dict[str, dict[str, Any]]:
        """The definitions ``types`` and the ``computed`` resources need: their own (as OpenAPI
        v2 has them, with ``v2``), and kube's that any of them refers to."""
        own: dict[str, dict[str, Any]] = {}
        for rt in types:
            own.update(self.kind(rt).definitions_in(v2=v2))
        names = [self.kind(rt).name for rt in types]
        for kind in filter(None, map(self.computed_kind, computed)):
            own.update(kind.definitions)
            names.append(kind.name)
        names.extend(filter(None, map(self.computed_list, computed)))
        roots = [*own.values(), *({"$ref": DEFINITIONS_PREFIX + name} for name in names)]
        roots.extend({"$ref": DEFINITIONS_PREFIX + name} for name in COMMON_DEFINITIONS)
        return dict(sorted({**self.upstream.closure(roots), **own}.items()))
