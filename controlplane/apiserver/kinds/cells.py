"""``kubectl get`` cell getters for the kinds in this package, after kube's printers.go.

Each getter takes an object dict and "now" and returns the printed cell as kube's table
printer does for the kind (``<none>`` where kube prints it, label selectors in kube's
``FormatLabelSelector`` form). Pure.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

from controlplane.apis.untyped import Obj, dig, json_int
from controlplane.apiserver.columns import load_balancer_ingress, since
from controlplane.apiserver.resources import at_json_path

Cell = Callable[[Obj, datetime], Any]

_MAX_HOSTS = 3


def format_labels(labels: Any) -> str:
    """kube's ``labels.FormatLabels``: ``k=v,k2=v2`` sorted, ``<none>`` when empty."""
    if not isinstance(labels, dict) or not labels:
        return "<none>"
    return ",".join(f"{k}={v}" for k, v in sorted(labels.items()))


#: A LabelSelector's operators as kube's ``labels.Requirement`` prints them (None: the key alone).
_SELECTOR_OPERATORS = {"In": " in ", "NotIn": " notin ", "Exists": "", "DoesNotExist": "!"}


def format_label_selector(selector: Any) -> str:
    """kube's ``metav1.FormatLabelSelector``: the selector as ``LabelSelectorAsSelector`` makes it,
    its requirements sorted by key (``app=web,env,tier in (a,b)``, each ``in``'s values sorted),
    ``<none>`` when it selects everything or nothing, ``<error>`` for an unknown operator."""
    if not isinstance(selector, dict):
        return "<none>"
    labels = selector.get("matchLabels")
    requirements = [(str(k), f"{k}={v}") for k, v in labels.items()] if isinstance(labels, dict) else []
    for expr in selector.get("matchExpressions") or ():
        if not isinstance(expr, dict):
            continue
        key, op = str(expr.get("key", "")), str(expr.get("operator", ""))
        shown = _SELECTOR_OPERATORS.get(op)
        if shown is None:
            return "<error>"
        if op in ("In", "NotIn"):
            values = ",".join(sorted(str(v) for v in expr.get("values") or ()))
            requirements.append((key, f"{key}{shown}({values})"))
        else:
            requirements.append((key, f"{shown}{key}"))
    requirements.sort(key=lambda requirement: requirement[0])
    return ",".join(text for _, text in requirements) or "<none>"


def label_selector_at(*keys: str) -> Cell:
    def get(obj: Obj, _now: datetime) -> str:
        return format_label_selector(dig(obj, *keys))

    return get


def labels_at(*keys: str) -> Cell:
    def get(obj: Obj, _now: datetime) -> str:
        return format_labels(dig(obj, *keys))

    return get


def _json_path(keys: tuple[str, ...]) -> str:
    """kube's JSONPath of the field at ``keys`` (``.spec.cohort``)."""
    return "".join(f".{key}" if key.replace("-", "").replace("_", "").isalnum() else f"['{key}']" for key in keys)


def _containers(obj: Obj, keys: tuple[str, ...]) -> list[Obj]:
    containers = dig(obj, *keys)
    return [c for c in containers if isinstance(c, dict)] if isinstance(containers, list) else []


def containers_at(*keys: str, field: str) -> Cell:
    """Container ``field`` (name or image) joined by commas, from the pod spec at ``keys``."""

    def get(obj: Obj, _now: datetime) -> str:
        return ",".join(str(c.get(field, "")) for c in _containers(obj, (*keys, "containers")))

    return get


def controller_of(obj: Obj, _now: datetime) -> str:
    """The owner marked ``controller``, as kube's ``formatResourceName`` writes a kind and name
    (``statefulset.apps/web``), or ``<none>``."""
    for owner in dig(obj, "metadata", "ownerReferences") or ():
        if isinstance(owner, dict) and owner.get("controller") is True:
            group = str(owner.get("apiVersion") or "").rpartition("/")[0]
            kind = str(owner.get("kind") or "")
            qualified = f"{kind}.{group}" if group else kind
            return f"{qualified.lower()}/{owner.get('name')}" if qualified else str(owner.get("name"))
    return "<none>"


def int_at(*keys: str) -> Cell:
    def get(obj: Obj, _now: datetime) -> int:
        return json_int(dig(obj, *keys))

    return at_json_path(get, _json_path(keys))


def count_at(*keys: str) -> Cell:
    """How many entries the list at ``keys`` has (0 when unset)."""

    def get(obj: Obj, _now: datetime) -> int:
        value = dig(obj, *keys)
        return len(value) if isinstance(value, list) else 0

    return get


def text_at(*keys: str, none: str = "<none>") -> Cell:
    """The value at ``keys`` as text; ``none`` when unset or empty."""

    def get(obj: Obj, _now: datetime) -> str:
        value = dig(obj, *keys)
        if value is None or value == "":
            return none
        if isinstance(value, bool):
            return "true" if value else "false"
        return str(value)

    return at_json_path(get, _json_path(keys))


def bool_title_at(*keys: str) -> Cell:
    """A boolean as Go's ``%v`` of a ``*bool`` kube prints (``True``/``False``; unset: False)."""

    def get(obj: Obj, _now: datetime) -> str:
        return "True" if dig(obj, *keys) is True else "False"

    return get


# --- batch -----------------------------------------------------------------------------------


def cronjob_active(obj: Obj, _now: datetime) -> int:
    active = dig(obj, "status", "active")
    return len(active) if isinstance(active, list) else 0


def cronjob_last_schedule(obj: Obj, now: datetime) -> str:
    value = dig(obj, "status", "lastScheduleTime")
    return since(value, now) if value else "<none>"


# --- networking ------------------------------------------------------------------------------


def ingress_hosts(obj: Obj, _now: datetime) -> str:
    """kube's ``formatHosts``: the first three rules' hosts (``*`` for none); when a rule follows
    the third host, ``+ N more...`` counting every rule past three, with a host or not."""
    rules = dig(obj, "spec", "rules")
    rules = rules if isinstance(rules, list) else []
    hosts: list[str] = []
    more = False
    for rule in rules:
        if len(hosts) == _MAX_HOSTS:
            more = True
            break
        if isinstance(rule, dict) and rule.get("host"):
            hosts.append(str(rule["host"]))
    if not hosts:
        return "*"
    text = ",".join(hosts)
    return f"{text} + {len(rules) - _MAX_HOSTS} more..." if more else text


def load_balancer_address(obj: Obj, _now: datetime) -> str:
    """An Ingress's ADDRESS: its load balancer's ingress points, as a Service's show them."""
    return load_balancer_ingress(obj)


def ingress_ports(obj: Obj, _now: datetime) -> str:
    return "80, 443" if dig(obj, "spec", "tls") else "80"


def ingress_class_parameters(obj: Obj, _now: datetime) -> str:
    params = dig(obj, "spec", "parameters")
    if not isinstance(params, dict):
        return "<none>"
    kind, name = params.get("kind", ""), params.get("name", "")
    group = params.get("apiGroup")
    return f"{kind}.{group}/{name}" if group else f"{kind}/{name}"


def endpoint_slice_ports(obj: Obj, _now: datetime) -> str:
    """kube's ``formatDiscoveryPorts``: each port's number (its name without one, ``*`` without
    either), the first three, then ``+ N more...``; ``<unset>`` without ports."""
    ports = [p for p in dig(obj, "ports") or () if isinstance(p, dict)]
    shown = [
        str(p["port"]) if p.get("port") is not None else (str(p["name"]) if p.get("name") is not None else "*")
        for p in ports[:_MAX_HOSTS]
    ]
    return _with_more(shown, len(ports))


def endpoint_slice_endpoints(obj: Obj, _now: datetime) -> str:
    """kube's ``formatDiscoveryEndpoints``: every endpoint's addresses, the first three, then
    ``+ N more...``; ``<unset>`` without any."""
    addresses = [
        str(a) for e in dig(obj, "endpoints") or () if isinstance(e, dict) for a in e.get("addresses") or ()
    ]
    return _with_more(addresses[:_MAX_HOSTS], len(addresses))


def _with_more(shown: list[str], count: int) -> str:
    """kube's ``listWithMoreString``."""
    if count > len(shown):
        return f"{','.join(shown)} + {count - len(shown)} more..."
    return ",".join(shown) or "<unset>"


# --- policy and autoscaling ------------------------------------------------------------------


def int_or_na(*keys: str) -> Cell:
    """An IntOrString (minAvailable, maxUnavailable) as kube prints it; ``N/A`` when unset."""

    def get(obj: Obj, _now: datetime) -> str:
        value = dig(obj, *keys)
        return "N/A" if value is None else str(value)

    return get


def hpa_reference(obj: Obj, _now: datetime) -> str:
    ref = dig(obj, "spec", "scaleTargetRef") or {}
    return f"{ref.get('kind', '')}/{ref.get('name', '')}"


def _hpa_current(obj: Obj, index: int) -> Obj:
    current = dig(obj, "status", "currentMetrics")
    if isinstance(current, list) and index < len(current) and isinstance(current[index], dict):
        return dict(current[index])
    return {}


def _as_obj(value: Any) -> Obj:
    return value if isinstance(value, dict) else {}


#: kube's ``formatHPAMetrics`` shows this many metrics, then ``+ N more...``.
_HPA_METRICS_SHOWN = 2


def _quantity(value: Obj, key: str) -> str:
    """A metric's quantity as kube's ``(*Quantity).String()`` prints it (``<nil>`` when unset)."""
    found = value.get(key)
    return "<nil>" if found is None else str(found)


def _percent(value: Obj, key: str, unset: str) -> str:
    found = value.get(key)
    return unset if found is None else f"{found}%"


def _hpa_metric(kind: str, spec: Obj, status: Obj | None) -> str:
    """One metric of kube's ``formatHPAMetrics``: ``current/target``, ``<unknown>`` before a
    measurement; a resource's named (``cpu: 40%/80%``); an average of an external or object metric
    marked ``(avg)``."""
    target = _as_obj(spec.get("target"))
    current = _as_obj(status.get("current")) if status is not None else None
    if kind in ("External", "Object"):
        if target.get("averageValue") is not None:
            now = "<unknown>" if current is None or current.get("averageValue") is None else str(current["averageValue"])
            return f"{now}/{target['averageValue']} (avg)"
        now = "<unknown>" if current is None else _quantity(current, "value")
        return f"{now}/{_quantity(target, 'value')}"
    if kind == "Pods":
        now = "<unknown>" if current is None else _quantity(current, "averageValue")
        return f"{now}/{_quantity(target, 'averageValue')}"
    if kind in ("Resource", "ContainerResource"):
        name = spec.get("name", "")
        if target.get("averageValue") is not None:
            now = "<unknown>" if current is None else _quantity(current, "averageValue")
            return f"{name}: {now}/{target['averageValue']}"
        now = "<unknown>" if current is None else _percent(current, "averageUtilization", "<unknown>")
        return f"{name}: {now}/{_percent(target, 'averageUtilization', '<auto>')}"
    return "<unknown type>"


def hpa_targets(obj: Obj, _now: datetime) -> str:
    """kube's HPA TARGETS (``formatHPAMetrics``): each metric, the status' metric at the same index
    its current value; two shown, then ``+ N more...``; ``<none>`` without metrics."""
    metrics = [m for m in dig(obj, "spec", "metrics") or () if isinstance(m, dict)]
    if not metrics:
        return "<none>"
    shown = []
    for index, metric in enumerate(metrics[:_HPA_METRICS_SHOWN]):
        kind = str(metric.get("type", ""))
        source = kind[:1].lower() + kind[1:]
        status = _hpa_current(obj, index).get(source)
        shown.append(_hpa_metric(kind, _as_obj(metric.get(source)), status if isinstance(status, dict) else None))
    text = ", ".join(shown)
    return f"{text} + {len(metrics) - _HPA_METRICS_SHOWN} more..." if len(metrics) > _HPA_METRICS_SHOWN else text


def of_converted(convert: Callable[[Obj], Obj], cell: Cell) -> Cell:
    """``cell`` of the object converted by ``convert``: a served version printed as another
    (kube prints its internal type whichever version was asked for)."""

    def get(obj: Obj, now: datetime) -> Any:
        return cell(convert(obj), now)

    return get


def int_or_unset(*keys: str) -> Cell:
    def get(obj: Obj, _now: datetime) -> Any:
        value = dig(obj, *keys)
        return value if isinstance(value, int) and not isinstance(value, bool) else "<unset>"

    return get


# --- quotas and limits -----------------------------------------------------------------------


def quota_usage(*, limits: bool) -> Cell:
    """ResourceQuota REQUEST (``limits=False``) or LIMIT: ``cpu: 1/4, memory: 0/8Gi``, hard
    resources sorted by name, used counted from the status."""

    def get(obj: Obj, _now: datetime) -> str:
        hard = dig(obj, "status", "hard") or dig(obj, "spec", "hard") or {}
        used = dig(obj, "status", "used") or {}
        if not isinstance(hard, dict):
            return ""
        parts = [
            f"{name}: {used.get(name, '0') if isinstance(used, dict) else '0'}/{hard[name]}"
            for name in sorted(hard)
            if str(name).startswith("limits.") == limits
        ]
        return ", ".join(parts)

    return get


def condition_at(condition_type: str) -> Cell:
    """The status of condition ``condition_type`` (a CRD's ``.status.conditions[?(@.type==…)].status``
    column: empty when absent)."""

    def get(obj: Obj, _now: datetime) -> str:
        for cond in dig(obj, "status", "conditions") or ():
            if isinstance(cond, dict) and cond.get("type") == condition_type:
                return str(cond.get("status", ""))
        return ""

    return at_json_path(get, f'.status.conditions[?(@.type=="{condition_type}")].status')


#: The annotations that make a StorageClass the default one (kube's ``IsDefaultAnnotation``).
_DEFAULT_STORAGE_CLASS = ("storageclass.kubernetes.io/is-default-class", "storageclass.beta.kubernetes.io/is-default-class")


def storage_class_name(obj: Obj, _now: datetime) -> str:
    """A StorageClass's NAME: ``fast (default)`` for the default class, as kube's printer names it."""
    name = str(dig(obj, "metadata", "name") or "")
    annotations = dig(obj, "metadata", "annotations")
    if isinstance(annotations, dict) and any(annotations.get(key) == "true" for key in _DEFAULT_STORAGE_CLASS):
        return f"{name} (default)"
    return name
