"""Test kinds and object builders for the API server tests.

``Widget`` (test.gpufed.io/v1, namespaced, status subresource) is validated by a small
pydantic model so the validation tests do not depend on how gpufed's real models
evolve; ``Gadget`` (cluster-scoped) is permissive.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from controlplane.apiserver.kinds.coordination import coordination_resources
from controlplane.apiserver.kinds.core import core_resources
from controlplane.apiserver.kinds.workloads import workload_resources
from controlplane.apiserver.resources import Registry, ResourceType, TableColumn, path


class Part(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str
    count: int = Field(default=1, ge=1)


class WidgetSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")
    size: int = Field(ge=0)
    color: Literal["red", "blue"] = "red"
    parts: list[Part] = Field(default_factory=list)


class Widget(BaseModel):
    model_config = ConfigDict(extra="forbid")
    apiVersion: Literal["test.gpufed.io/v1"]
    kind: Literal["Widget"]
    metadata: dict[str, Any]
    spec: WidgetSpec
    status: dict[str, Any] | None = None


WIDGET = ResourceType(
    "test.gpufed.io", "v1", "Widget", "widgets", "widget", namespaced=True,
    short_names=("wd",), has_status=True, model=Widget,
    columns=(TableColumn("Size", path("spec.size"), type="integer"), TableColumn("Color", path("spec.color"), priority=1)),
)
GADGET = ResourceType("test.gpufed.io", "v1", "Gadget", "gadgets", "gadget", namespaced=False)


def make_registry() -> Registry:
    return Registry(core_resources(), workload_resources(), coordination_resources(), [WIDGET, GADGET])


def widget(name: str, *, namespace: str = "default", size: int = 1, labels: dict[str, str] | None = None,
           **spec: Any) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": namespace}
    if labels:
        meta["labels"] = labels
    return {"apiVersion": "test.gpufed.io/v1", "kind": "Widget", "metadata": meta, "spec": {"size": size, **spec}}


def deployment(name: str, *, namespace: str = "default", replicas: int = 1,
               labels: dict[str, str] | None = None, image: str = "nginx:1") -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": namespace}
    if labels:
        meta["labels"] = labels
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": meta,
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"containers": [{"name": "main", "image": image}]},
            },
        },
    }
