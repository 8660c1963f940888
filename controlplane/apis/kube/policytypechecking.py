"""A ValidatingAdmissionPolicy's ``status.typeChecking``: its expressions checked against the
schemas of the kinds it matches, as kube's ``TypeChecker``
(``apiserver/pkg/admission/plugin/policy/validating/typechecking.go``).

In: a policy, how a group-version-resource names kinds (kube's RESTMapper ``KindsFor``) and a
kind's served schema. Out: kube's ``expressionWarnings`` (``fieldRef``, ``warning``).

As kube: the kinds are those of ``matchConstraints.resourceRules`` (a rule with a wildcard group or
version is skipped; wildcard resources and subresources are left out; at most 10 kinds per rule;
sorted by group, version and kind), a kind whose schema is not found is not checked, and only
``spec.validations[i].expression`` and ``.messageExpression`` are checked (variables are typed
from their expressions, in order, for the expressions reading them). ``object`` and ``oldObject``
have the kind's type, ``params`` the ``paramKind``'s when its schema is found, ``request`` and
``namespaceObject`` kube's hand-made types (``BuildRequestType``, ``BuildNamespaceType``);
``authorizer`` is not typed here. A warning lists each kind with issues as
``<group>/<version>, Kind=<kind>: <issues>`` (cel-go's, :mod:`~controlplane.apis.apiextensions.cel_types`),
each ending in a line break, joined by one. Pure.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from controlplane.apis.apiextensions.cel_types import BOOL, DYN, STRING, SchemaTypes, Type, check, display
from controlplane.apis.kube import field
from controlplane.apis.untyped import Obj

GVK = tuple[str, str, str]
#: kube's RESTMapper ``KindsFor``: the kinds a (group, version, resource) names.
KindsFor = Callable[[str, str, str], list[GVK]]
#: A kind's schema and how its ``$ref``s resolve (None: not found).
SchemaFor = Callable[[GVK], tuple[Mapping[str, Any], Callable[[str], Mapping[str, Any] | None]] | None]

#: kube's maxTypesToCheck (per resource rule).
MAX_TYPES_TO_CHECK = 10


def _object(**fields: Type) -> Type:
    return Type("object", fields=fields)


_STRINGS = Type("list", (STRING,))
_GVK = _object(group=STRING, version=STRING, kind=STRING)
_GVR = _object(group=STRING, version=STRING, resource=STRING)
#: kube's ``BuildRequestType``: the admission request as policies see it.
REQUEST = _object(
    kind=_GVK, resource=_GVR, subResource=STRING, requestKind=_GVK, requestResource=_GVR, requestSubResource=STRING,
    name=STRING, namespace=STRING, operation=STRING, dryRun=BOOL, options=DYN,
    userInfo=_object(username=STRING, uid=STRING, groups=_STRINGS, extra=Type("map", (STRING, _STRINGS))),
)
_TIMESTAMP, _INT, _LABELS = Type("timestamp"), Type("int"), Type("map", (STRING, STRING))
#: kube's ``BuildNamespaceType``: the request's namespace, with the fields kube keeps of it.
NAMESPACE = _object(
    metadata=_object(
        name=STRING, generateName=STRING, namespace=STRING, labels=_LABELS, annotations=_LABELS, UID=STRING,
        creationTimestamp=_TIMESTAMP, deletionGracePeriodSeconds=_INT, deletionTimestamp=_TIMESTAMP, generation=_INT,
        resourceVersion=STRING, finalizers=_STRINGS,
    ),
    spec=_object(finalizers=_STRINGS),
    status=_object(
        conditions=Type("list", (_object(status=STRING, type=STRING, lastTransitionTime=_TIMESTAMP, message=STRING,
                                         reason=STRING),)),
        phase=STRING,
    ),
)


def _listed(values: Any, *, skip: str) -> list[str] | None:
    """A rule's groups or versions, None when one is a wildcard (kube gives up on the rule)."""
    out = [str(v) for v in field.items(values)]
    return None if any(set(skip) & set(v) for v in out) else out


def types_to_check(policy: Obj, kinds_for: KindsFor) -> list[GVK]:
    """kube's ``typesToCheck``: the kinds the policy's resource rules name."""
    found: set[GVK] = set()
    rules = field.items(field.mapping(field.mapping(policy.get("spec")).get("matchConstraints")).get("resourceRules"))
    for rule in rules:
        rule = field.mapping(rule)
        groups = _listed(rule.get("apiGroups"), skip="*")
        versions = _listed(rule.get("apiVersions"), skip="*")
        resources = [str(r) for r in field.items(rule.get("resources")) if not set("*/") & set(str(r))]
        if not groups or not versions or not resources:
            continue
        count = 0
        for group in sorted(groups):
            for version in sorted(versions):
                for resource in sorted(resources):
                    for gvk in kinds_for(group, version, resource):
                        found.add(gvk)
                        count += 1
                        if count == MAX_TYPES_TO_CHECK:
                            return sorted(found)
    return sorted(found)


def _show(gvk: GVK) -> str:
    group, version, kind = gvk
    return f"{group}/{version}, Kind={kind}"


def expression_warnings(policy: Obj, kinds_for: KindsFor, schema_for: SchemaFor) -> list[dict[str, str]]:
    """kube's ``TypeChecker.Check``: one warning per expression with issues for some kind."""
    spec = field.mapping(policy.get("spec"))
    checked: list[tuple[GVK, SchemaTypes, Type]] = []
    for gvk in types_to_check(policy, kinds_for):
        found = schema_for(gvk)
        if found is not None:
            types = SchemaTypes(found[1])
            checked.append((gvk, types, types.of(found[0], root=True)))
    if not checked:
        return []
    params = DYN
    param_kind = field.mapping(spec.get("paramKind"))
    if param_kind:
        group, _, version = str(param_kind.get("apiVersion") or "").rpartition("/")
        found = schema_for((group, version, str(param_kind.get("kind") or "")))
        if found is not None:
            params = SchemaTypes(found[1]).of(found[0], root=True)
    scopes = [(gvk, types, _scope(spec, types, obj, params)) for gvk, types, obj in checked]
    warnings: list[dict[str, str]] = []
    for index, validation in enumerate(field.items(spec.get("validations"))):
        validation = field.mapping(validation)
        for key in ("expression", "messageExpression"):
            expression = validation.get(key)
            if not isinstance(expression, str) or not expression:
                continue
            results = []
            for gvk, types, scope in scopes:
                _, issues = check(expression, types, scope)
                if issues:
                    results.append(f"{_show(gvk)}: {display(expression, issues)}\n")
            if results:
                warnings.append({"fieldRef": f"spec.validations[{index}].{key}", "warning": "\n".join(results)})
    return warnings


def _scope(spec: Obj, types: SchemaTypes, obj: Type, params: Type) -> dict[str, Type]:
    """The variables' types for one kind: ``variables`` an object of the policy's variables, each
    typed by its expression (checked in order, each seeing those before it)."""
    scope = {"object": obj, "oldObject": obj, "params": params, "request": REQUEST, "namespaceObject": NAMESPACE}
    variables: dict[str, Type] = {}
    for variable in field.items(spec.get("variables")):
        variable = field.mapping(variable)
        expression = variable.get("expression")
        result, issues = check(expression, types, {**scope, "variables": Type("object", fields=dict(variables))}) if isinstance(
            expression, str) else (DYN, [])
        variables[str(variable.get("name") or "")] = DYN if issues else result
    scope["variables"] = Type("object", fields=variables)
    return scope
