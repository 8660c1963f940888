"""Field labels: which ``fieldSelector`` fields a kind takes, and the value each one selects on.

kube-apiserver converts a list's field selector with the kind's field label conversion before it
lists (``scheme.ConvertFieldLabel``). A kind that registers its own conversion -- Pod, Node, Event
(both groups), Namespace, Secret, Service, ReplicationController, batch Job, and every custom
resource -- refuses another field with ``400 field label not supported: <field>``; Node,
Namespace and cluster-scoped custom resources refuse ``metadata.namespace`` too. A built-in kind
without one (ConfigMap, Deployment, ReplicaSet, ClusterRole...) takes ``metadata.name`` and
``metadata.namespace`` and refuses anything else with ``400 "<field>" is not a known field
selector: only "metadata.name", "metadata.namespace"``.

The value a field selects on is the kind's ``ToSelectableFields``: the field as a string, a count
that is unset ``0``, a Pod's unset ``spec.hostNetwork`` ``false``.

In: objects as dicts. Out: getters per field, what a kind accepts, kube's refusal. Pure: the
hub's registry and the simulated members' APIs both take their field labels from here.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Final

from controlplane.apis.untyped import dig

FieldGetter = Callable[[dict[str, Any]], str]


def field_path(dotted: str, *, default: str = "") -> FieldGetter:
    """The value at a dotted path as kube's selectable fields print it (``default`` when unset)."""
    parts = dotted.split(".")

    def get(obj: dict[str, Any]) -> str:
        value = dig(obj, *parts)
        if value is None:
            return default
        if isinstance(value, bool):
            return "true" if value else "false"
        return str(value)

    return get


BASE_FIELD_SELECTORS: Final[Mapping[str, FieldGetter]] = {
    "metadata.name": field_path("metadata.name"),
    "metadata.namespace": field_path("metadata.namespace"),
}

def _pod_ip(pod: dict[str, Any]) -> str:
    """kube's ``status.podIP`` field: the first of ``status.podIPs`` (the pod's ``status.podIP`` without them)."""
    ips = dig(pod, "status", "podIPs")
    if isinstance(ips, list) and ips and isinstance(ips[0], dict) and ips[0].get("ip") is not None:
        return str(ips[0]["ip"])
    return field_path("status.podIP")(pod)


#: A Pod's own fields (kube's pod ``ToSelectableFields``; ``spec.host`` is an old client's
#: ``spec.nodeName``; ``status.podIPs`` is taken but selects on nothing, as in kube).
POD_FIELDS: Final[Mapping[str, FieldGetter]] = {
    **{name: field_path(name) for name in (
        "spec.nodeName", "spec.restartPolicy", "spec.schedulerName", "spec.serviceAccountName",
        "status.phase", "status.nominatedNodeName",
    )},
    "status.podIP": _pod_ip,
    "status.podIPs": lambda _pod: "",
    "spec.host": field_path("spec.nodeName"),
    "spec.hostNetwork": field_path("spec.hostNetwork", default="false"),
}
NAMESPACE_FIELDS: Final[Mapping[str, FieldGetter]] = {"status.phase": field_path("status.phase")}
NODE_FIELDS: Final[Mapping[str, FieldGetter]] = {"spec.unschedulable": field_path("spec.unschedulable")}
SECRET_FIELDS: Final[Mapping[str, FieldGetter]] = {"type": field_path("type")}
SERVICE_FIELDS: Final[Mapping[str, FieldGetter]] = {
    "spec.clusterIP": field_path("spec.clusterIP"),
    "spec.type": field_path("spec.type"),
}
REPLICATION_CONTROLLER_FIELDS: Final[Mapping[str, FieldGetter]] = {
    "status.replicas": field_path("status.replicas", default="0"),
}
JOB_FIELDS: Final[Mapping[str, FieldGetter]] = {
    "status.successful": field_path("status.succeeded", default="0"),
}


#: The fields of the built-in kinds above by (group, plural), for servers that route by plural
#: (a hollow member); every other built-in kind takes only the metadata fields.
BUILT_IN_FIELDS: Final[Mapping[tuple[str, str], Mapping[str, FieldGetter]]] = {
    ("", "pods"): POD_FIELDS,
    ("", "nodes"): NODE_FIELDS,
    ("", "namespaces"): NAMESPACE_FIELDS,
    ("", "secrets"): SECRET_FIELDS,
    ("", "services"): SERVICE_FIELDS,
    ("", "replicationcontrollers"): REPLICATION_CONTROLLER_FIELDS,
    ("batch", "jobs"): JOB_FIELDS,
}


def selectable(extra: Mapping[str, FieldGetter], *, own_conversion: bool, namespaced: bool) -> dict[str, FieldGetter]:
    """Every field a kind's selector may name: the metadata ones its conversion takes, then its own."""
    base = dict(BASE_FIELD_SELECTORS)
    if own_conversion and not namespaced:
        del base["metadata.namespace"]
    return {**base, **extra}


def refusal(field: str, *, own_conversion: bool) -> str:
    """kube's message for a field the kind's selector does not take."""
    if own_conversion:
        return f"field label not supported: {field}"
    return f'"{field}" is not a known field selector: only "metadata.name", "metadata.namespace"'
