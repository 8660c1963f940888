"""A ValidatingAdmissionPolicy's type checking, as kube's TypeChecker reports it: the kinds its
resource rules name, each expression checked against each kind's schema, and cel-go's messages
(``undefined field``, ``found no matching overload``) with kube's ``<gvk>: `` prefix, place and
caret. The cases follow kube's typechecking_test.go."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from controlplane.apis.apiextensions.cel_types import SchemaTypes, check, display
from controlplane.apis.kube.policytypechecking import expression_warnings, types_to_check

DEPLOYMENT = ("apps", "v1", "Deployment")
RULES = [{"apiGroups": ["apps"], "apiVersions": ["v1"], "resources": ["deployments"]}]


def kinds_for(group: str, version: str, resource: str) -> list[tuple[str, str, str]]:
    known = {("apps", "v1", "deployments"): DEPLOYMENT, ("", "v1", "pods"): ("", "v1", "Pod")}
    return [known[(group, version, resource)]] if (group, version, resource) in known else []


def schemas(**by_kind: Mapping[str, Any]) -> Any:
    def schema_for(gvk: tuple[str, str, str]) -> Any:
        found = by_kind.get(gvk[2])
        return None if found is None else (found, lambda ref: None)
    return schema_for


def policy(*validations: dict[str, Any], rules: list[dict[str, Any]] = RULES, **spec: Any) -> dict[str, Any]:
    return {"spec": {"matchConstraints": {"resourceRules": rules}, "validations": list(validations), **spec}}


def obj(**properties: Any) -> dict[str, Any]:
    return {"type": "object", "properties": properties}


STRING, INT = {"type": "string"}, {"type": "integer"}


def test_the_kinds_checked_are_the_named_ones_wildcards_and_subresources_left_out() -> None:
    pods = {"apiGroups": [""], "apiVersions": ["v1"], "resources": ["pods"]}
    assert types_to_check(policy(rules=[*RULES, pods]), kinds_for) == [("", "v1", "Pod"), DEPLOYMENT]
    assert types_to_check(policy(rules=[{**RULES[0], "resources": ["*"]}]), kinds_for) == []
    assert types_to_check(policy(rules=[{**RULES[0], "resources": ["deployments/status"]}]), kinds_for) == []
    assert types_to_check(policy(rules=[RULES[0], {**RULES[0], "apiVersions": ["*"]}]), kinds_for) == [DEPLOYMENT]
    assert types_to_check({"spec": {}}, kinds_for) == []


def test_an_undefined_field_is_reported_with_kubes_message() -> None:
    warnings = expression_warnings(policy({"expression": "object.foo == 'bar'"}), kinds_for, schemas(Deployment=obj(bar=STRING)))
    assert warnings == [{
        "fieldRef": "spec.validations[0].expression",
        "warning": "apps/v1, Kind=Deployment: ERROR: <input>:1:7: undefined field 'foo'\n | object.foo == 'bar'\n | ......^\n",
    }]


def test_a_correct_policy_and_an_unresolved_schema_have_no_warnings() -> None:
    assert expression_warnings(policy({"expression": "object.foo == 'bar'"}), kinds_for, schemas(Deployment=obj(foo=STRING))) == []
    assert expression_warnings(policy({"expression": "object.foo == 'bar'"}), kinds_for, schemas()) == []
    assert expression_warnings(policy({"expression": "object.foo == 'bar'"}), kinds_for, schemas(Deployment={})) == []


def test_a_type_mismatch_is_no_matching_overload() -> None:
    warnings = expression_warnings(policy({"expression": "object.foo == 'bar'"}), kinds_for, schemas(Deployment=obj(foo=INT)))
    assert [w["warning"] for w in warnings] == [
        "apps/v1, Kind=Deployment: ERROR: <input>:1:12: found no matching overload for '_==_' applied to '(int, string)'\n"
        " | object.foo == 'bar'\n | ...........^\n"
    ]
    bad_message = policy({"expression": "object.foo == 'bar'", "messageExpression": "object.foo + 114514"})
    warnings = expression_warnings(bad_message, kinds_for, schemas(Deployment=obj(foo=STRING)))
    assert [w["fieldRef"] for w in warnings] == ["spec.validations[0].messageExpression"]
    assert "found no matching overload for '_+_' applied to '(string, int)'" in warnings[0]["warning"]


def test_only_the_wrong_expression_of_several_is_reported() -> None:
    two = policy({"expression": "object.foo == 'bar'"}, {"expression": "object.bar == 'foo'"})
    warnings = expression_warnings(two, kinds_for, schemas(Deployment=obj(foo=STRING)))
    assert [w["fieldRef"] for w in warnings] == ["spec.validations[1].expression"]


def test_params_are_typed_by_the_param_kind() -> None:
    typed = policy({"expression": "object.foo == params.bar"}, paramKind={"apiVersion": "v1", "kind": "Config"})
    warnings = expression_warnings(typed, kinds_for, schemas(Deployment=obj(foo=STRING), Config=obj(foo=STRING)))
    assert "undefined field 'bar'" in warnings[0]["warning"]
    # An untyped param kind, or none found, is not checked.
    assert expression_warnings(typed, kinds_for, schemas(Deployment=obj(foo=STRING), Config={})) == []
    assert expression_warnings(typed, kinds_for, schemas(Deployment=obj(foo=STRING))) == []


def test_variables_are_typed_by_their_expressions() -> None:
    schema = schemas(Deployment=obj(foo=INT))
    assert expression_warnings(policy({"expression": "variables.works"}, variables=[{"name": "works", "expression": "true"}]),
                               kinds_for, schema) == []
    missing = expression_warnings(policy({"expression": "variables.nonExisting"}, variables=[{"name": "works", "expression": "true"}]),
                                  kinds_for, schema)
    assert "undefined field 'nonExisting'" in missing[0]["warning"]
    wrong = expression_warnings(policy({"expression": "variables.name == object.foo"},
                                       variables=[{"name": "name", "expression": "'something'"}]), kinds_for, schema)
    assert "found no matching overload for '_==_' applied to '(string, int)'" in wrong[0]["warning"]


def test_each_kind_with_issues_is_listed() -> None:
    pods = {"apiGroups": [""], "apiVersions": ["v1"], "resources": ["pods"]}
    warnings = expression_warnings(policy({"expression": "object.spec.replicas > 1"}, rules=[*RULES, pods]), kinds_for,
                                   schemas(Deployment=obj(spec=obj(replicas=INT)), Pod=obj(spec=obj(containers=STRING))))
    assert warnings[0]["warning"] == (
        "/v1, Kind=Pod: ERROR: <input>:1:12: undefined field 'replicas'\n | object.spec.replicas > 1\n | ...........^\n"
    )


types = SchemaTypes(lambda ref: {"type": "object", "properties": {"image": STRING}} if ref.endswith("Container") else None)
ROOT = types.of(obj(spec=obj(containers={"type": "array", "items": {"$ref": "#/definitions/Container"}},
                            labels={"type": "object", "additionalProperties": STRING}, open={"type": "object"},
                            port={"x-kubernetes-int-or-string": True}, at={"type": "string", "format": "date-time"})), root=True)


def reported(expression: str) -> str:
    return display(expression, check(expression, types, {"object": ROOT})[1])


def test_fields_are_followed_through_lists_maps_refs_and_comprehensions() -> None:
    assert reported("object.spec.containers.all(c, c.image.startsWith('r/'))") == ""
    assert reported("object.spec.containers.exists(c, c.imag == 'x')") == (
        "ERROR: <input>:1:35: undefined field 'imag'\n | object.spec.containers.exists(c, c.imag == 'x')\n | ..................................^"
    )
    assert reported("object.spec.containers[0].image == 'x' && object.spec.labels.anything == 'y'") == ""
    assert reported("has(object.spec.image)") == "ERROR: <input>:1:4: undefined field 'image'\n | has(object.spec.image)\n | ...^"
    # The resource's root always has apiVersion, kind and metadata's names.
    assert reported("object.kind == 'D' && object.metadata.name != '' && object.apiVersion != ''") == ""


def test_what_the_schema_leaves_open_is_not_reported() -> None:
    assert reported("object.spec.open.whatever.deeper == 1") == ""
    assert reported("object.spec.port == 'http' || object.spec.port == 80") == ""
    assert reported("object.spec.at == 1") == ""  # timestamps are not compared here
    assert reported("object.spec.containers.size() == 1.0") == ""  # numbers compare across types
    assert reported("unknownFunction(object.spec).x == 1") == ""


def test_a_property_is_named_as_kube_escapes_it() -> None:
    """kube's Escape: a property that is a CEL reserved word, or holds ``-``, ``.``, ``/`` or ``__``,
    is a field of another name; the name as written is not one."""
    spec = {"type": "object", "properties": {"namespace": STRING, "x-y": INT, "a.b/c": STRING}}
    scope = {"self": SchemaTypes(lambda ref: None).of(spec)}
    fine = "self.__namespace__ == 'a' && self.x__dash__y == 1 && self.a__dot__b__slash__c == 'c'"
    assert check(fine, types, scope)[1] == []
    unknown = "self.x__dash__z == 1"
    assert display(unknown, check(unknown, types, scope)[1]).splitlines()[0] == (
        "ERROR: <input>:1:5: undefined field 'x__dash__z'"
    )
    mismatch = "self.x__dash__y == 'a'"
    assert "'_==_' applied to '(int, string)'" in display(mismatch, check(mismatch, types, scope)[1])


def test_scalar_mismatches_under_logical_operators() -> None:
    assert reported("object.spec.containers[0].image && true") == (
        "ERROR: <input>:1:33: found no matching overload for '_&&_' applied to '(string, bool)'\n"
        " | object.spec.containers[0].image && true\n | ................................^"
    )
    assert "'!_' applied to '(int)'" in reported("!object.spec.containers.size()")


def test_several_issues_are_sorted_by_place_and_the_caret_is_on_the_right_line() -> None:
    expression = "object.b == 1 &&\n  object.a == 2"
    assert reported(expression) == (
        "ERROR: <input>:1:7: undefined field 'b'\n | object.b == 1 &&\n | ......^\n"
        "ERROR: <input>:2:9: undefined field 'a'\n |   object.a == 2\n | ........^"
    )


def test_request_and_namespace_object_have_kubes_types() -> None:
    schema = schemas(Deployment=obj(foo=STRING))
    fine = ("request.operation == 'CREATE' && request.userInfo.groups.exists(g, g == 'dev') && !request.dryRun"
            " && request.kind.group == 'apps' && namespaceObject.metadata.labels.env == 'prod'"
            " && request.options.anything == 1")
    assert expression_warnings(policy({"expression": fine}), kinds_for, schema) == []
    warnings = expression_warnings(policy({"expression": "request.operaton == 'CREATE' || request.dryRun == 'true'"}),
                                   kinds_for, schema)
    assert warnings[0]["warning"] == (
        "apps/v1, Kind=Deployment: ERROR: <input>:1:8: undefined field 'operaton'\n"
        " | request.operaton == 'CREATE' || request.dryRun == 'true'\n | .......^\n"
        "ERROR: <input>:1:48: found no matching overload for '_==_' applied to '(bool, string)'\n"
        " | request.operaton == 'CREATE' || request.dryRun == 'true'\n | ...............................................^\n"
    )
    # kube's namespace type names the uid UID.
    uid = expression_warnings(policy({"expression": "namespaceObject.metadata.uid != ''"}), kinds_for, schema)
    assert "undefined field 'uid'" in uid[0]["warning"]


def test_the_two_variable_comprehensions_are_not_typed() -> None:
    assert reported("object.spec.containers.all(i, c, c.whatever == 1 && i.other == 2)") == ""
    assert "undefined field 'nope'" in reported("object.spec.containers.all(i, c, object.spec.nope == 1)")
