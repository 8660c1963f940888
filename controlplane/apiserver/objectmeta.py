"""An object's ``metadata`` validated by kube's ObjectMeta rules, before anything is written.

Name (by the kind's :class:`NameRule`), namespace, generation, labels, annotations and
finalizers, as apimachinery's ``ValidateObjectMeta`` and kube's core validation check them; the
finalizers' rules and the warnings a custom resource gets are
:mod:`controlplane.apis.kube.finalizers`. Pure: no I/O. :mod:`.validation` calls it for every write.
"""

from __future__ import annotations

import json
import re
from typing import Any

from controlplane.apis.kube.finalizers import (
    finalizer_warnings,
    metadata_finalizer_errors,
    new_finalizer_errors,
    unqualified_finalizer_errors,
)
from controlplane.apis.kube.names import (
    DNS_1035,
    DNS_1035_REGEX_MESSAGE,
    DNS_LABEL,
    DNS_LABEL_REGEX_MESSAGE,
    DNS_SUBDOMAIN,
    DNS_SUBDOMAIN_REGEX_MESSAGE,
    format_errors,
    label_value_errors,
    path_segment_errors,
    qualified_name_errors,
)
from controlplane.apis.kube.validate_pod import MAX_ANNOTATIONS_BYTES
from controlplane.apiserver.decoding import INT64_MAX
from controlplane.apiserver.errors import Cause, CauseType
from controlplane.apiserver.resources import NameRule, ResourceType

_NAME_RULES: dict[NameRule, tuple[re.Pattern[str], int, str]] = {
    NameRule.SUBDOMAIN: (DNS_SUBDOMAIN, 253, DNS_SUBDOMAIN_REGEX_MESSAGE),
    NameRule.LABEL: (DNS_LABEL, 63, DNS_LABEL_REGEX_MESSAGE),
    NameRule.LABEL_1035: (DNS_1035, 63, DNS_1035_REGEX_MESSAGE),
}


def name_errors(name: str, rule: NameRule) -> list[str]:
    """kube's messages for a name that breaks ``rule`` (empty when it is fine)."""
    if rule is NameRule.PATH_SEGMENT:
        return path_segment_errors(name)
    return format_errors(name, *_NAME_RULES[rule])


def quote(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False) if isinstance(value, str) else json.dumps(value, default=str)


def invalid_value(field_path: str, value: Any, detail: str) -> Cause:
    return Cause(CauseType.FIELD_VALUE_INVALID, f"Invalid value: {quote(value)}: {detail}", field_path)


def metadata_causes(obj: dict[str, Any], rt: ResourceType, old: dict[str, Any] | None = None) -> list[Cause]:
    """Name, namespace, generation, labels, annotations and finalizers by kube's rules (``old``:
    the stored object, on an update)."""
    causes: list[Cause] = []
    meta = obj.get("metadata")
    if not isinstance(meta, dict):
        return [Cause(CauseType.FIELD_VALUE_REQUIRED, "Required value", "metadata")]
    name = meta.get("name")
    if not name:
        causes.append(
            Cause(CauseType.FIELD_VALUE_REQUIRED, "Required value: name or generateName is required", "metadata.name")
        )
    elif not isinstance(name, str):
        causes.append(invalid_value("metadata.name", name, "must be a string"))
    else:
        causes.extend(invalid_value("metadata.name", name, err) for err in name_errors(name, rt.name_rule))
    namespace = meta.get("namespace")
    if rt.namespaced and isinstance(namespace, str) and namespace:
        causes.extend(
            invalid_value("metadata.namespace", namespace, err) for err in name_errors(namespace, NameRule.LABEL)
        )
    generation = meta.get("generation")  # a create's own, where the kind keeps none (see writing)
    if generation is not None:
        if isinstance(generation, bool) or not isinstance(generation, int) or generation > INT64_MAX:
            causes.append(invalid_value("metadata.generation", generation, "must be a 64-bit integer"))
        elif generation < 0:
            causes.append(invalid_value("metadata.generation", generation, "must be greater than or equal to 0"))
    labels = meta.get("labels")
    if labels is not None:
        if not isinstance(labels, dict):
            causes.append(invalid_value("metadata.labels", labels, "must be a map of strings"))
        else:
            for key, value in labels.items():
                causes.extend(invalid_value("metadata.labels", key, err) for err in qualified_name_errors(key))
                if not isinstance(value, str):
                    causes.append(invalid_value(f"metadata.labels[{key}]", value, "must be a string"))
                else:
                    causes.extend(invalid_value("metadata.labels", value, err) for err in label_value_errors(value))
    annotations = meta.get("annotations")
    if annotations is not None:
        if not isinstance(annotations, dict):
            causes.append(invalid_value("metadata.annotations", annotations, "must be a map of strings"))
        else:
            size = 0
            for key, value in annotations.items():
                causes.extend(
                    invalid_value("metadata.annotations", key, err) for err in qualified_name_errors(key.lower())
                )
                if not isinstance(value, str):
                    causes.append(invalid_value(f"metadata.annotations[{key}]", value, "must be a string"))
                else:
                    size += len(key) + len(value)
            if size > MAX_ANNOTATIONS_BYTES:
                causes.append(
                    Cause(
                        CauseType.FIELD_VALUE_INVALID,
                        f"Too long: may not be more than {MAX_ANNOTATIONS_BYTES} bytes",
                        "metadata.annotations",
                    )
                )
    causes.extend(finalizer_causes(meta, rt, old))
    return causes


def finalizer_causes(meta: dict[str, Any], rt: ResourceType, old: dict[str, Any] | None) -> list[Cause]:
    """``metadata.finalizers`` by kube's rules (:mod:`controlplane.apis.kube.finalizers`); on an
    update of ``old`` being deleted, no finalizer may be added."""
    finalizers = meta.get("finalizers")
    if finalizers is None:
        return []
    if not isinstance(finalizers, list) or not all(isinstance(f, str) for f in finalizers):
        return [invalid_value("metadata.finalizers", finalizers, "must be a list of strings")]
    # kube's order: the checks every kind gets (on an update, the no-new one among them), then
    # the built-in kinds' own.
    found = metadata_finalizer_errors(finalizers)
    old_meta = (old or {}).get("metadata") or {}
    if old_meta.get("deletionTimestamp"):
        found.extend(new_finalizer_errors(finalizers, old_meta.get("finalizers") or []))
    if kube_object_meta(rt):
        found.extend(unqualified_finalizer_errors(finalizers))
    return [Cause(str(e.type), e.message, e.field) for e in found]


def kube_object_meta(rt: ResourceType) -> bool:
    """Whether kube validates the kind's metadata with its core ``ValidateObjectMeta`` (its
    built-in kinds but CRDs and APIServices, whose validation is apimachinery's alone), which
    refuses a finalizer without a ``/`` that is not a standard one."""
    return rt.built_in and rt.group not in ("apiextensions.k8s.io", "apiregistration.k8s.io")


def finalizer_write_warnings(rt: ResourceType, new: dict[str, Any], old: dict[str, Any] | None) -> list[str]:
    """kube's CRD strategy's warnings for the unqualified finalizers a write to a custom
    resource adds (none for a built-in kind, which refuses them)."""
    if rt.built_in:
        return []
    finalizers = (new.get("metadata") or {}).get("finalizers")
    if not isinstance(finalizers, list):
        return []
    old_finalizers = ((old or {}).get("metadata") or {}).get("finalizers") or []
    return finalizer_warnings(finalizers, old_finalizers)
