"""flowcontrol.apiserver.k8s.io/v1 FlowSchema and PriorityLevelConfiguration: kube's defaulting
(``pkg/apis/flowcontrol/v1/defaults.go``) and validation (``pkg/apis/flowcontrol/validation``), with
its messages. The mandatory objects (``exempt``, ``catch-all``) may not change their spec
(:mod:`.flowcontrol_bootstrap` holds them). In: the object (and the stored one); out: field errors.
"""

from __future__ import annotations

import copy
import math
from typing import Any, Final

from controlplane.apis.kube import field
from controlplane.apis.kube.field import FieldError, GoValue
from controlplane.apis.kube.flowcontrol_bootstrap import MANDATORY_FLOW_SCHEMAS, MANDATORY_PRIORITY_LEVELS
from controlplane.apis.kube.names import dns_label_errors, dns_subdomain_errors
from controlplane.apis.untyped import Obj
from controlplane.apis.views import ObjectView
from controlplane.gojson import go_quote

GROUP: Final = "flowcontrol.apiserver.k8s.io"
#: ``FlowSchemaDefaultMatchingPrecedence`` and ``FlowSchemaMaxMatchingPrecedence``.
DEFAULT_MATCHING_PRECEDENCE: Final = 1000
MAX_MATCHING_PRECEDENCE: Final = 10000
#: ``PriorityLevelConfigurationDefault*`` of v1.
DEFAULT_NOMINAL_CONCURRENCY_SHARES: Final = 30
DEFAULT_HAND_SIZE: Final = 8
DEFAULT_QUEUES: Final = 64
DEFAULT_QUEUE_LENGTH_LIMIT: Final = 50
_MAX_QUEUES: Final = 10 * 1000 * 1000
#: ``shufflesharding.MaxHashBits``.
MAX_HASH_BITS: Final = 60

_DISTINGUISHER_METHODS = ("ByNamespace", "ByUser")
_VERBS = ("create", "delete", "deletecollection", "get", "list", "patch", "proxy", "update", "watch")
_SUBJECT_KINDS = ("Group", "ServiceAccount", "User")
_PRIORITY_LEVEL_TYPES = ("Exempt", "Limited")
_LIMIT_RESPONSE_TYPES = ("Queue", "Reject")
_NS_INTRO = "each member of this list must be '*' or a DNS-1123 label; "


# --- defaulting -------------------------------------------------------------------------


class FlowSchemaView(ObjectView):
    """A stored FlowSchema as the config controller reads it (see :mod:`controlplane.apis.views`)."""

    __slots__ = ()

    @property
    def priority_level(self) -> str:
        """``spec.priorityLevelConfiguration.name``: the level it sends requests to ("" when unnamed)."""
        return str((self.spec.get("priorityLevelConfiguration") or {}).get("name") or "")


def default_flow_schema(obj: Obj) -> None:
    spec = obj.setdefault("spec", {})
    if isinstance(spec, dict) and not spec.get("matchingPrecedence"):
        spec["matchingPrecedence"] = DEFAULT_MATCHING_PRECEDENCE


def default_priority_level(obj: Obj) -> None:
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        return
    exempt = spec.get("exempt")
    if isinstance(exempt, dict):
        exempt.setdefault("nominalConcurrencyShares", 0)
        exempt.setdefault("lendablePercent", 0)
    limited = spec.get("limited")
    if isinstance(limited, dict):
        if limited.get("nominalConcurrencyShares") is None:
            limited["nominalConcurrencyShares"] = DEFAULT_NOMINAL_CONCURRENCY_SHARES
        if limited.get("lendablePercent") is None:
            limited["lendablePercent"] = 0
        queuing = field.mapping(limited.get("limitResponse")).get("queuing")
        if isinstance(queuing, dict):
            for key, value in (("handSize", DEFAULT_HAND_SIZE), ("queues", DEFAULT_QUEUES),
                               ("queueLengthLimit", DEFAULT_QUEUE_LENGTH_LIMIT)):
                if not queuing.get(key):
                    queuing[key] = value


def defaulted(obj: Obj) -> Obj:
    """A defaulted copy of a FlowSchema or PriorityLevelConfiguration (by its ``kind``)."""
    out = copy.deepcopy(obj)
    (default_flow_schema if out.get("kind") == "FlowSchema" else default_priority_level)(out)
    return out


# --- FlowSchema ---------------------------------------------------------------------------


def validate_flow_schema(obj: Obj, _old: Obj | None = None) -> list[FieldError]:
    """``ValidateFlowSchema`` (an update is validated as a create)."""
    name = str(field.mapping(obj.get("metadata")).get("name") or "")
    spec = field.mapping(obj.get("spec"))
    errors = _flow_schema_spec_errors(name, spec)
    mandatory = MANDATORY_FLOW_SCHEMAS.get(name)
    if mandatory is not None and spec != defaulted(mandatory)["spec"]:
        errors.append(field.invalid("spec", GoValue("flowcontrol.FlowSchemaSpec{...}"),
                                    f"spec of '{name}' must equal the fixed value"))
    return errors + validate_flow_schema_status(obj, None)


def _flow_schema_spec_errors(name: str, spec: Obj) -> list[FieldError]:
    errors: list[FieldError] = []
    precedence = spec.get("matchingPrecedence")
    precedence = precedence if isinstance(precedence, int) else 0
    path = "spec.matchingPrecedence"
    if precedence <= 0:
        errors.append(field.invalid(path, precedence, "must be a positive value"))
    if precedence > MAX_MATCHING_PRECEDENCE:
        errors.append(field.invalid(path, precedence, f"must not be greater than {MAX_MATCHING_PRECEDENCE}"))
    if precedence == 1 and name != "exempt":
        errors.append(field.invalid(path, precedence, "only the schema named 'exempt' may have matchingPrecedence 1"))
    method = spec.get("distinguisherMethod")
    if method is not None and field.mapping(method).get("type") not in _DISTINGUISHER_METHODS:
        shown = GoValue(f"&flowcontrol.FlowDistinguisherMethod{{Type:{go_quote(str(field.mapping(method).get('type') or ''))}}}")
        errors.append(field.not_supported("spec.distinguisherMethod.type", shown, _DISTINGUISHER_METHODS))
    level = str(field.mapping(spec.get("priorityLevelConfiguration")).get("name") or "")
    if level:
        errors += [field.invalid("spec.priorityLevelConfiguration.name", level, msg) for msg in dns_subdomain_errors(level)]
    else:
        errors.append(field.required("spec.priorityLevelConfiguration.name", "must reference a priority level"))
    for path, rule in field.indexed(spec.get("rules"), "spec.rules"):
        errors += _rule_errors(rule, path)
    return errors


def _rule_errors(rule: Obj, path: str) -> list[FieldError]:
    errors: list[FieldError] = []
    subjects = field.items(rule.get("subjects"))
    if subjects:
        for sub_path, subject in field.indexed(subjects, f"{path}.subjects"):
            errors += _subject_errors(subject, sub_path)
    else:
        errors.append(field.required(f"{path}.subjects", "subjects must contain at least one value"))
    resource_rules, non_resource_rules = field.items(rule.get("resourceRules")), field.items(rule.get("nonResourceRules"))
    if not resource_rules and not non_resource_rules:
        errors.append(field.required(path, "at least one of resourceRules and nonResourceRules has to be non-empty"))
    for sub_path, resource_rule in field.indexed(resource_rules, f"{path}.resourceRules"):
        errors += _resource_rule_errors(resource_rule, sub_path)
    for sub_path, non_resource_rule in field.indexed(non_resource_rules, f"{path}.nonResourceRules"):
        errors += _non_resource_rule_errors(non_resource_rule, sub_path)
    return errors


_NOT_USER = "user is forbidden when subject kind is not 'User'"
_NOT_GROUP = "group is forbidden when subject kind is not 'Group'"
_NOT_ACCOUNT = "serviceAccount is forbidden when subject kind is not 'ServiceAccount'"


def _subject_errors(subject: Obj, path: str) -> list[FieldError]:
    kind = subject.get("kind")
    others = {"User": ("user", _NOT_USER), "Group": ("group", _NOT_GROUP), "ServiceAccount": ("serviceAccount", _NOT_ACCOUNT)}
    if kind not in others:
        return [field.not_supported(f"{path}.kind", str(kind or ""), _SUBJECT_KINDS)]
    key = others[kind][0]
    errors: list[FieldError] = []
    value = subject.get(key)
    if not isinstance(value, dict):
        errors.append(field.required(f"{path}.{key}", f"{key} is required when subject kind is '{kind}'"))
    elif not value.get("name"):
        errors.append(field.required(f"{path}.{key}.name"))
    elif kind == "ServiceAccount" and value["name"] != "*":
        errors += [field.invalid(f"{path}.{key}.name", value["name"], msg) for msg in dns_subdomain_errors(str(value["name"]))]
    if kind == "ServiceAccount" and isinstance(value, dict):
        namespace = str(value.get("namespace") or "")
        if namespace:
            errors += [field.invalid(f"{path}.{key}.namespace", namespace, msg) for msg in dns_label_errors(namespace)]
        else:
            errors.append(field.required(f"{path}.{key}.namespace", "must specify namespace for service account"))
    forbidden = dict(others.values())
    for other in ("serviceAccount", "user", "group"):  # kube's order
        if other != key and subject.get(other) is not None:
            errors.append(field.forbidden(f"{path}.{other}", forbidden[other]))
    return errors


def _verbs_errors(verbs: list[Any], path: str) -> list[FieldError]:
    if not verbs:
        return [field.required(path, "verbs must contain at least one value")]
    if "*" in verbs:
        return [field.invalid(path, field.go_strings(verbs), "if '*' is present, must not specify other verbs")] if len(verbs) > 1 else []
    if not set(verbs) <= set(_VERBS):
        return [field.not_supported(path, field.go_strings(verbs), _VERBS)]
    return []


def _resource_rule_errors(rule: Obj, path: str) -> list[FieldError]:
    errors = _verbs_errors(field.items(rule.get("verbs")), f"{path}.verbs")
    for key, what in (("apiGroups", "api group"), ("resources", "resource")):
        values = field.items(rule.get(key))
        if not values:
            errors.append(field.required(f"{path}.{key}", f"resource rules must supply at least one {what}"))
        elif len(values) > 1 and "*" in values:
            errors.append(field.invalid(f"{path}.{key}", field.go_strings(values), f"if '*' is present, must not specify other {what}s"))
    namespaces = field.items(rule.get("namespaces"))
    if not namespaces and rule.get("clusterScope") is not True:
        errors.append(field.required(f"{path}.namespaces",
                                     "resource rules that are not cluster scoped must supply at least one namespace"))
    elif "*" in namespaces:
        if len(namespaces) > 1:
            errors.append(field.invalid(f"{path}.namespaces", field.go_strings(namespaces), "if '*' is present, must not specify other namespaces"))
    else:
        for i, namespace in enumerate(namespaces):
            errors += [field.invalid(f"{path}.namespaces[{i}]", namespace, _NS_INTRO + msg)
                       for msg in dns_label_errors(str(namespace))]
    return errors


def _non_resource_rule_errors(rule: Obj, path: str) -> list[FieldError]:
    errors = _verbs_errors(field.items(rule.get("verbs")), f"{path}.verbs")
    urls = field.items(rule.get("nonResourceURLs"))
    if not urls:
        errors.append(field.required(f"{path}.nonResourceURLs", "nonResourceURLs must contain at least one value"))
    elif "*" in urls:
        if len(urls) > 1:
            errors.append(field.invalid(f"{path}.nonResourceURLs", field.go_strings(urls), "if '*' is present, must not specify other non-resource URLs"))
    else:
        for i, url in enumerate(urls):
            problem = non_resource_url_problem(str(url))
            if problem:
                errors.append(field.invalid(f"{path}.nonResourceURLs[{i}]", url, problem))
    return errors


def non_resource_url_problem(url: str) -> str:
    """``ValidateNonResourceURLPath``: what is wrong with ``url`` ('' when nothing)."""
    if not url:
        return "must not be empty"
    if url == "/":
        return ""
    if not url.startswith("/"):
        return "must start with slash"
    if " " in url:
        return "must not contain white-space"
    if "//" in url:
        return "must not contain double slash"
    stars = url.count("*")
    if stars > 1 or (stars == 1 and url[-2:] != "/*"):
        return "wildcard can only do suffix matching"
    return ""


def validate_flow_schema_status(obj: Obj, _old: Obj | None = None) -> list[FieldError]:
    return _conditions_errors(obj)


def _conditions_errors(obj: Obj) -> list[FieldError]:
    errors: list[FieldError] = []
    seen: set[str] = set()
    for path, condition in field.indexed(field.mapping(obj.get("status")).get("conditions"), "status.conditions"):
        kind = str(condition.get("type") or "")
        if kind in seen:
            errors.append(field.duplicate(f"{path}.type", kind))
        seen.add(kind)
        if not kind:
            errors.append(field.required(f"{path}.type", "must not be empty"))
    return errors


# --- PriorityLevelConfiguration -----------------------------------------------------------


def validate_priority_level(obj: Obj, _old: Obj | None = None) -> list[FieldError]:
    """``ValidatePriorityLevelConfiguration`` (an update is validated as a create)."""
    name = str(field.mapping(obj.get("metadata")).get("name") or "")
    spec = field.mapping(obj.get("spec"))
    errors = _priority_level_spec_errors(name, spec)
    mandatory = MANDATORY_PRIORITY_LEVELS.get(name)
    if mandatory is not None:
        fixed = defaulted(mandatory)["spec"]
        if name == "exempt":  # its spec.exempt is the admins' to tune
            if {k: v for k, v in spec.items() if k != "exempt"} != {k: v for k, v in fixed.items() if k != "exempt"}:
                errors.append(field.invalid("spec", GoValue("flowcontrol.PriorityLevelConfigurationSpec{...}"),
                                            "spec of 'exempt' except the 'spec.exempt' field must equal the fixed value"))
        elif spec != fixed:
            errors.append(field.invalid("spec", GoValue("flowcontrol.PriorityLevelConfigurationSpec{...}"),
                                        f"spec of '{name}' must equal the fixed value"))
    return errors + _conditions_errors(obj)


def validate_priority_level_status(obj: Obj, _old: Obj | None = None) -> list[FieldError]:
    return _conditions_errors(obj)


def _priority_level_spec_errors(name: str, spec: Obj) -> list[FieldError]:
    errors: list[FieldError] = []
    kind = spec.get("type")
    if (name == "exempt") != (kind == "Exempt"):
        errors.append(field.invalid("spec.type", str(kind or ""), "type must be 'Exempt' if and only if name is 'exempt'"))
    if kind == "Exempt":
        if spec.get("limited") is not None:
            errors.append(field.forbidden("spec.limited", "must be nil if the type is not Limited"))
        if isinstance(spec.get("exempt"), dict):
            exempt = spec["exempt"]
            errors += _non_negative(exempt, "nominalConcurrencyShares", "spec.exempt", "must be a non-negative integer")
            errors += _percent(exempt, "lendablePercent", "spec.exempt")
    elif kind == "Limited":
        if spec.get("exempt") is not None:
            errors.append(field.forbidden("spec.exempt", "must be nil if the type is Limited"))
        limited = spec.get("limited")
        if not isinstance(limited, dict):
            errors.append(field.required("spec.limited", "must not be empty when type is Limited"))
        else:
            errors += _limited_errors(limited, "spec.limited")
    else:
        errors.append(field.not_supported("spec.type", str(kind or ""), _PRIORITY_LEVEL_TYPES))
    return errors


def _non_negative(obj: Obj, key: str, path: str, detail: str) -> list[FieldError]:
    value = obj.get(key)
    return [field.invalid(f"{path}.{key}", value, detail)] if isinstance(value, int) and value < 0 else []


def _percent(obj: Obj, key: str, path: str) -> list[FieldError]:
    value = obj.get(key)
    if isinstance(value, int) and not 0 <= value <= 100:
        return [field.invalid(f"{path}.{key}", value, "must be between 0 and 100, inclusive")]
    return []


def _limited_errors(limited: Obj, path: str) -> list[FieldError]:
    errors = _non_negative(limited, "nominalConcurrencyShares", path, "must be a non-negative integer")
    response = field.mapping(limited.get("limitResponse"))
    response_path = f"{path}.limitResponse"
    kind = response.get("type")
    if kind == "Reject":
        if response.get("queuing") is not None:
            errors.append(field.forbidden(f"{response_path}.queuing", "must be nil if limited.limitResponse.type is not Limited"))
    elif kind == "Queue":
        queuing = response.get("queuing")
        if not isinstance(queuing, dict):
            errors.append(field.required(f"{response_path}.queuing", "must not be empty if limited.limitResponse.type is Limited"))
        else:
            errors += _queuing_errors(queuing, f"{response_path}.queuing")
    else:
        errors.append(field.not_supported(f"{response_path}.type", str(kind or ""), _LIMIT_RESPONSE_TYPES))
    errors += _percent(limited, "lendablePercent", path)
    errors += _non_negative(limited, "borrowingLimitPercent", path, "if specified, must be a non-negative integer")
    return errors


def required_entropy_bits(deck_size: int, hand_size: int) -> int:
    """``shufflesharding.RequiredEntropyBits``."""
    return math.ceil(math.log2(deck_size) * hand_size)


def _int(value: Any) -> int:
    return value if isinstance(value, int) else 0


def _queuing_errors(queuing: Obj, path: str) -> list[FieldError]:
    errors: list[FieldError] = []
    length, queues, hand = (_int(queuing.get(k)) for k in ("queueLengthLimit", "queues", "handSize"))
    if length <= 0:
        errors.append(field.invalid(f"{path}.queueLengthLimit", length, "must be positive"))
    if queues <= 0:
        errors.append(field.invalid(f"{path}.queues", queues, "must be positive"))
    elif queues > _MAX_QUEUES:
        errors.append(field.invalid(f"{path}.queues", queues, f"must not be greater than {_MAX_QUEUES}"))
    if hand <= 0:
        errors.append(field.invalid(f"{path}.handSize", hand, "must be positive"))
    elif hand > queues:
        errors.append(field.invalid(f"{path}.handSize", hand, f"should not be greater than queues ({queues})"))
    elif required_entropy_bits(queues, hand) > MAX_HASH_BITS:
        errors.append(field.invalid(
            f"{path}.handSize", hand,
            f"required entropy bits of deckSize {queues} and handSize {hand} should not be greater than {MAX_HASH_BITS}",
        ))
    return errors
