"""kube's APIService (apiregistration.k8s.io/v1): its validation, strategies, defaults and the
Available condition the aggregator keeps.

As ``kube-aggregator/pkg/apis/apiregistration/validation`` and ``pkg/registry/apiservice``:

- the name must be ``<spec.version>.<spec.group>`` (a URL path segment first), the group a DNS
  subdomain (empty only for ``v1``), the version a DNS-1035 label, ``groupPriorityMinimum`` in
  1..20000 and ``versionPriority`` in 1..1000;
- a local APIService (no ``spec.service``) may have neither ``caBundle`` nor
  ``insecureSkipTLSVerify``; an aggregated one needs the service's namespace and name, a valid
  port (defaulted to 443), and not both ``insecureSkipTLSVerify`` and a ``caBundle``;
- a create clears the status (the status subresource's rules), and marks a local APIService
  Available at once (:func:`prepare`); condition statuses are True, False or Unknown.

In: objects as dicts. Out: field errors, or the object changed in place. Pure: no I/O.
"""

from __future__ import annotations

import base64
import binascii
import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from controlplane.apis.kube import field, names
from controlplane.apis.kube.field import FieldError
from controlplane.apis.timestamps import format_time
from controlplane.apis.untyped import Obj
from controlplane.gojson import go_quote

GROUP: Final = "apiregistration.k8s.io"
VERSION: Final = "v1"
AVAILABLE: Final = "Available"
#: The label kube's autoregister controller puts on the APIServices it keeps: ``onstart`` for the
#: built-in group-versions, ``true`` for those of CustomResourceDefinitions.
AUTOMANAGED_LABEL: Final = "kube-aggregator.kubernetes.io/automanaged"
AUTOMANAGED_ON_START: Final = "onstart"
AUTOMANAGED_SYNC: Final = "true"
LOCAL_REASON: Final = "Local"
LOCAL_MESSAGE: Final = "Local APIServices are always available"
DEFAULT_SERVICE_PORT: Final = 443
_STATUSES: Final = ("True", "False", "Unknown")
#: kube-apiserver's ``apiVersionPriorities`` for its built-in group-versions: (group priority
#: minimum, version priority). Another group served by the hub itself gets the priorities kube's
#: crdregistration controller gives a CustomResourceDefinition's group (:data:`CRD_PRIORITY`),
#: as Karmada's control plane serves those groups through CRDs.
KUBE_PRIORITIES: Final[Mapping[tuple[str, str], tuple[int, int]]] = {
    ("", "v1"): (18000, 1),
    ("apiregistration.k8s.io", "v1"): (18000, 15),
    ("apps", "v1"): (17800, 15),
    ("events.k8s.io", "v1"): (17750, 15),
    ("authentication.k8s.io", "v1"): (17700, 15),
    ("authorization.k8s.io", "v1"): (17600, 15),
    ("autoscaling", "v2"): (17500, 30),
    ("autoscaling", "v1"): (17500, 15),
    ("batch", "v1"): (17400, 15),
    ("certificates.k8s.io", "v1"): (17300, 15),
    ("networking.k8s.io", "v1"): (17200, 15),
    ("policy", "v1"): (17100, 15),
    ("rbac.authorization.k8s.io", "v1"): (17000, 15),
    ("storage.k8s.io", "v1"): (16800, 15),
    ("apiextensions.k8s.io", "v1"): (16700, 15),
    ("admissionregistration.k8s.io", "v1"): (16700, 15),
    ("scheduling.k8s.io", "v1"): (16600, 15),
    ("coordination.k8s.io", "v1"): (16500, 15),
    ("node.k8s.io", "v1"): (16300, 15),
    ("discovery.k8s.io", "v1"): (16200, 15),
    ("resource.k8s.io", "v1"): (16200, 21),
    ("flowcontrol.apiserver.k8s.io", "v1"): (16100, 21),
}
#: kube's crdregistration: "CRDs should have relatively low priority", sorted by version name.
CRD_PRIORITY: Final = (1000, 100)


@dataclass(frozen=True, slots=True)
class ServiceReference:
    namespace: str
    name: str
    port: int


@dataclass(frozen=True, slots=True)
class APIServiceView:
    """What the aggregator reads of one APIService."""

    name: str
    group: str
    version: str
    service: ServiceReference | None
    ca_bundle: str | None
    insecure_skip_tls_verify: bool
    group_priority_minimum: int
    version_priority: int
    available: bool

    @property
    def local(self) -> bool:
        return self.service is None


def _spec(obj: Obj) -> Obj:
    spec = obj.get("spec")
    return spec if isinstance(spec, dict) else {}


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def view(obj: Obj) -> APIServiceView:
    spec = _spec(obj)
    service = spec.get("service")
    reference = None
    if isinstance(service, dict):
        port = service.get("port")
        reference = ServiceReference(
            str(service.get("namespace") or ""), str(service.get("name") or ""),
            port if isinstance(port, int) else DEFAULT_SERVICE_PORT,
        )
    return APIServiceView(
        name=str((obj.get("metadata") or {}).get("name") or ""),
        group=str(spec.get("group") or ""),
        version=str(spec.get("version") or ""),
        service=reference,
        ca_bundle=str(spec["caBundle"]) if spec.get("caBundle") else None,
        insecure_skip_tls_verify=spec.get("insecureSkipTLSVerify") is True,
        group_priority_minimum=_int(spec.get("groupPriorityMinimum")),
        version_priority=_int(spec.get("versionPriority")),
        available=(available_condition(obj) or {}).get("status") == "True",
    )


def defaults(obj: Obj) -> None:
    """``SetDefaults_ServiceReference``: a service's port is 443 unless given."""
    service = _spec(obj).get("service")
    if isinstance(service, dict) and service.get("port") is None:
        service["port"] = DEFAULT_SERVICE_PORT


def _ca_bundle_length(value: Any) -> int:
    """The length of ``caBundle``'s bytes, as kube prints it (``"N bytes"``)."""
    try:
        return len(base64.b64decode(str(value), validate=True))
    except (binascii.Error, ValueError):
        return len(str(value))


def _validate(obj: Obj) -> list[FieldError]:
    """``ValidateAPIService`` (the generic object metadata is checked for every kind elsewhere)."""
    spec = _spec(obj)
    group, version = str(spec.get("group") or ""), str(spec.get("version") or "")
    errors: list[FieldError] = []
    name = str((obj.get("metadata") or {}).get("name") or "")
    required_name = f"{version}.{group}"
    if name and not names.path_segment_errors(name) and name != required_name:
        errors.append(field.invalid(
            "metadata.name", name, f"must be `spec.version+\".\"+spec.group`: {go_quote(required_name)}"
        ))
    if not group and version != "v1":
        errors.append(field.required("spec.group", "only v1 may have an empty group and it better be legacy kube"))
    if group:
        errors += [field.invalid("spec.group", group, message) for message in names.dns_subdomain_errors(group)]
    errors += [field.invalid("spec.version", version, message) for message in names.dns_1035_errors(version)]
    group_priority = _int(spec.get("groupPriorityMinimum"))
    if not 0 < group_priority <= 20000:
        errors.append(field.invalid("spec.groupPriorityMinimum", group_priority, "must be positive and less than 20000"))
    version_priority = _int(spec.get("versionPriority"))
    if not 0 < version_priority <= 1000:
        errors.append(field.invalid("spec.versionPriority", version_priority, "must be positive and less than 1000"))
    insecure = spec.get("insecureSkipTLSVerify") is True
    ca_bundle = spec.get("caBundle")
    service = spec.get("service")
    if not isinstance(service, dict):
        if ca_bundle:
            errors.append(field.invalid(
                "spec.caBundle", f"{_ca_bundle_length(ca_bundle)} bytes", "local APIServices may not have a caBundle"
            ))
        if insecure:
            errors.append(field.invalid(
                "spec.insecureSkipTLSVerify", True, "local APIServices may not have insecureSkipTLSVerify"
            ))
        return errors
    if not service.get("namespace"):
        errors.append(field.required("spec.service.namespace"))
    if not service.get("name"):
        errors.append(field.required("spec.service.name"))
    port = _int(service.get("port", DEFAULT_SERVICE_PORT))
    if problems := names.port_number_errors(port):
        errors.append(field.invalid("spec.service.port", port, "port is not valid: " + ", ".join(problems)))
    if insecure and ca_bundle:
        errors.append(field.invalid("spec.insecureSkipTLSVerify", True, "may not be true if caBundle is present"))
    return errors


def _status_errors(obj: Obj) -> list[FieldError]:
    """``ValidateAPIServiceStatus``."""
    errors = []
    for i, condition in enumerate(conditions(obj)):
        status = condition.get("status")
        if status not in _STATUSES:
            errors.append(field.not_supported(f"status.conditions[{i}].status", status if status is not None else "", _STATUSES))
    return errors


def validate(new: Obj, _old: Obj | None) -> list[FieldError]:
    """A create or an update of the main resource."""
    return _validate(new)


def validate_status(new: Obj, _old: Obj | None) -> list[FieldError]:
    """A write of the ``status`` subresource."""
    return _status_errors(new)


# --- strategies and conditions ------------------------------------------------------------


def conditions(obj: Obj) -> list[Obj]:
    status = obj.get("status")
    found = status.get("conditions") if isinstance(status, dict) else None
    return [c for c in found if isinstance(c, dict)] if isinstance(found, list) else []


def available_condition(obj: Obj) -> Obj | None:
    return next((c for c in conditions(obj) if c.get("type") == AVAILABLE), None)


def set_available(obj: Obj, *, status: str, reason: str, message: str, now: dt.datetime) -> bool:
    """``SetAPIServiceCondition`` of the Available condition: its transition time moves only when its
    status changes. Whether the object changed."""
    condition = {"type": AVAILABLE, "status": status, "reason": reason, "message": message}
    current = available_condition(obj)
    if current is not None and all(current.get(k) == v for k, v in condition.items()):
        return False
    kept = current.get("lastTransitionTime") if current is not None and current.get("status") == status else None
    condition["lastTransitionTime"] = str(kept or format_time(now))
    others = [c for c in conditions(obj) if c.get("type") != AVAILABLE]
    status_part = obj.get("status")
    obj["status"] = {**(status_part if isinstance(status_part, dict) else {}), "conditions": [*others, condition]}
    return True


def prepare(obj: Obj, now: dt.datetime) -> None:
    """``PrepareForCreate``'s second half: a local APIService written without a status (a create:
    the client's status is dropped) is Available at once."""
    if "status" not in obj and not isinstance(_spec(obj).get("service"), dict):
        set_available(obj, status="True", reason=LOCAL_REASON, message=LOCAL_MESSAGE, now=now)


def printed_service(obj: Obj) -> str:
    """The SERVICE column: ``Local``, or ``<namespace>/<name>``."""
    service = _spec(obj).get("service")
    if not isinstance(service, dict):
        return "Local"
    return f"{service.get('namespace') or ''}/{service.get('name') or ''}"


def printed_available(obj: Obj) -> str:
    """The AVAILABLE column: ``True``, ``False (Reason)``, or ``Unknown`` without the condition."""
    condition = available_condition(obj)
    if condition is None:
        return "Unknown"
    status = str(condition.get("status") or "")
    if status == "True" or not condition.get("reason"):
        return status
    return f"{status} ({condition['reason']})"


def local_api_service(group: str, version: str, *, group_priority: int, version_priority: int,
                      automanaged: str) -> Obj:
    """The APIService kube's autoregister controller keeps for a group-version served locally."""
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "APIService",
        "metadata": {"name": f"{version}.{group}", "labels": {AUTOMANAGED_LABEL: automanaged}},
        "spec": {"group": group, "version": version, "groupPriorityMinimum": group_priority,
                 "versionPriority": version_priority},
    }


def same_spec(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    return _spec(dict(a)) == _spec(dict(b))
