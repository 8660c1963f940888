"""A custom kind interpreted through its CRD's ``scale`` subresource.

A CustomResourceDefinition version with ``subresources.scale`` says where its objects keep their
replicas (``specReplicasPath``), the replicas running (``statusReplicasPath``) and, optionally,
the pods' label selector (``labelSelectorPath``). That is enough for the hub to divide such an
object across clusters, as it does a Deployment:

- replicas: the integer at ``specReplicasPath`` (absent: 0, as ``/scale`` shows it);
- per-replica requirements: the pod template at the conventional ``spec.template`` (its
  containers' requests, node selector, tolerations…), none when the kind has no such template;
- one cluster's share: the same object with its share at ``specReplicasPath``;
- the hub object's status: its own, with the members' ``statusReplicasPath`` values summed and,
  when the selector lives in the status and every member reports the same one, that selector;
- never a gang, never finished; a member copy's health is that of a kind without a rule of its
  own (:func:`~controlplane.interpreter.health.generic_health`: by its conditions, healthy
  without any), as the agent judges it.

In: the three paths as field steps (``("spec", "replicas")``). Pure: the controllers build one
per served CRD with a scale subresource (:mod:`controlplane.controllers.scaling`) and install
it with :func:`controlplane.interpreter.registry.set_scaled`.
"""

from __future__ import annotations

import copy
from dataclasses import KW_ONLY, dataclass
from typing import Any

from controlplane.apis.untyped import Obj, as_int, dig
from controlplane.interpreter.base import MemberStatuses, PodTemplateKind, TemplateSlot

FieldPath = tuple[str, ...]


def _set(obj: dict[str, Any], path: FieldPath, value: Any) -> None:
    node = obj
    for step in path[:-1]:
        child = node.get(step)
        if not isinstance(child, dict):
            child = node[step] = {}
        node = child
    node[path[-1]] = value


def _is_pod_template(value: Any) -> bool:
    spec = value.get("spec") if isinstance(value, dict) else None
    return isinstance(spec, dict) and isinstance(spec.get("containers"), list)


@dataclass
class ScaleInterpreter(PodTemplateKind):
    """:class:`~controlplane.interpreter.base.KindInterpreter` of one custom kind, from the paths
    of its CRD's scale subresource (see the module docstring)."""

    group: str
    kind: str
    _: KW_ONLY
    spec_replicas: FieldPath
    status_replicas: FieldPath
    label_selector: FieldPath = ()

    def __post_init__(self) -> None:
        if not self.spec_replicas or self.status_replicas[:1] != ("status",) or len(self.status_replicas) < 2:
            raise ValueError("specReplicasPath and a statusReplicasPath under .status are required")

    def template_slots(self, obj: Obj) -> list[TemplateSlot]:
        spec = obj.get("spec")
        return [(spec, "template")] if isinstance(spec, dict) and _is_pod_template(spec.get("template")) else []

    def replicas(self, obj: Obj) -> int:
        return max(0, as_int(dig(obj, *self.spec_replicas)))

    def with_replicas(self, obj: Obj, replicas: int) -> Obj:
        out = copy.deepcopy(obj)
        _set(out, self.spec_replicas, replicas)
        return out

    def aggregate_status(self, obj: Obj, member_statuses: MemberStatuses) -> Obj:
        out: Obj = copy.deepcopy(obj.get("status") or {})
        present = [status for _, status in member_statuses if status is not None]
        in_status = self.status_replicas[1:]
        _set(out, in_status, sum(as_int(dig(status, *in_status)) for status in present))
        if len(self.label_selector) > 1 and self.label_selector[0] == "status":
            found = [dig(status, *self.label_selector[1:]) for status in present]
            selectors = {value for value in found if isinstance(value, str) and value}
            if len(selectors) == 1:
                _set(out, self.label_selector[1:], selectors.pop())
        return out

