"""cel-go's two-variable comprehensions, which kube's CEL environment has from 1.32
(``ext.TwoVarComprehensions``): ``all``, ``exists``, ``existsOne`` over a list's index and value
or a map's key and value, and ``transformList``, ``transformMap``, ``transformMapEntry``."""

from __future__ import annotations

import pytest

from controlplane.apis.apiextensions import cel

SELF = {"l": [3, 1, 2], "m": {"x": 1, "y": 2}}


def _run(expression: str) -> object:
    assert cel.compile_error(expression) is None
    return cel.execute(cel.compiled(expression), cel.activation({"self": SELF}))


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        ("self.l.all(i, v, v > i - 1)", True),
        ("self.m.all(k, v, v >= 1 && k != '')", True),
        ("self.l.exists(i, v, i == 2 && v == 2)", True),
        ("self.l.existsOne(i, v, v > 2)", True),
        ("self.l.exists_one(i, v, i > 0)", False),
        ("self.l.transformList(i, v, v * 2)", [6, 2, 4]),
        ("self.l.transformList(i, v, i > 0, v * 2)", [2, 4]),
        ("self.m.transformMap(k, v, v + 1)", {"x": 2, "y": 3}),
        ("self.m.transformMap(k, v, k == 'x', v + 1)", {"x": 2}),
        ("self.l.transformMap(i, v, v)", {0: 3, 1: 1, 2: 2}),
        ("self.l.transformMapEntry(i, v, {string(i): v})", {"0": 3, "1": 1, "2": 2}),
        # Nested, and a one-variable macro inside that binds the same name anew.
        ("self.l.all(i, v, self.l.all(j, w, i == j || v != w))", True),
        ("self.l.all(i, v, [v, 0].exists(v, v == 0))", True),
        ("self.l.all(i, v, [1].all(x, x + v > 1))", True),
    ],
)
def test_two_variable_comprehensions_run_as_cel_go_runs_them(expression: str, expected: object) -> None:
    assert _run(expression) == expected


def test_a_transform_map_entry_key_given_twice_fails() -> None:
    with pytest.raises(cel.EvaluationError, match="insert failed: key k already exists"):
        _run("self.l.transformMapEntry(i, v, {'k': v})")


def test_a_crd_rule_with_them_runs_on_each_write() -> None:
    rule = "self.all(k, v, v.startsWith(k))"
    rules = cel.compile_schema_rules(
        {
            "type": "object",
            "properties": {
                "spec": {
                    "type": "object",
                    "additionalProperties": {"type": "string"},
                    "x-kubernetes-validations": [{"rule": rule}],
                }
            },
        }
    )
    assert rules.evaluate({"spec": {"a": "ab"}}, None) == []
    assert [e.message for e in rules.evaluate({"spec": {"a": "b"}}, None)] == [
        f'Invalid value: "object": failed rule: {rule}'
    ]


def test_all_and_exists_are_decided_by_any_element_as_cel_go_decides_them() -> None:
    """cel-go's ``all`` is false when one element's predicate is false, ``exists`` true when one's is
    true, whatever another element's does (``no such key``); only when none decides is an
    element's error the rule's. ``exists_one`` and ``filter`` fail on the error, as cel-go's."""
    item = {"type": "object", "properties": {"name": {"type": "string"}, "v": {"type": "integer"}}}
    rules = [
        {"rule": "self.items.exists(i, i.name == 'main')", "message": "needs main"},
        {"rule": "self.items.all(i, i.name.startsWith('m'))", "message": "m"},
        {"rule": "self.items.all(i, self.items.exists(j, j.v == i.v))", "message": "nested"},
        {"rule": "self.items.exists_one(i, i.name == 'main')", "message": "one"},
    ]
    schema = {
        "type": "object",
        "properties": {"items": {"type": "array", "items": item}},
        "x-kubernetes-validations": rules,
    }
    compiled = cel.compile_schema_rules(schema)

    def failed(items: list[dict[str, object]]) -> list[str]:
        return [
            e.message.removeprefix('Invalid value: "object": ')
            for e in compiled.evaluate({"items": items}, None)
        ]

    assert failed([{"v": 1}, {"name": "main", "v": 2}]) == [
        "no such key: name evaluating rule: m",
        "no such key: name evaluating rule: one",
    ]
    assert failed([{"v": 1}, {"name": "x", "v": 2}]) == [
        "no such key: name evaluating rule: needs main",
        "m",
        "no such key: name evaluating rule: one",
    ]


@pytest.mark.parametrize(
    "rule",
    [
        "self.items.filter(i, i.tags.exists(t, t.k == i.name)).size() > 0",
        "self.items.map(i, i.tags.exists(t, t.k == i.name)).all(b, b)",
        "self.items.exists_one(i, i.tags.exists(t, t.k == i.name))",
        "self.items.all(n, i, i.tags.exists(t, t.k == i.name))",
        "self.items.transformList(n, i, i.tags.exists(t, t.k == i.name)).all(b, b)",
        "self.items.all(i, i.tags.exists(t, t.k == i.name))",
    ],
)
def test_exists_below_any_macro_reads_the_enclosing_variables_as_cel_go_does(rule: str) -> None:
    """An element whose predicate fails (a tag without ``k``) does not decide when another's is
    true, whichever macro binds the variables the predicate reads."""
    tag = {"type": "object", "properties": {"k": {"type": "string"}}}
    item = {
        "type": "object",
        "properties": {"name": {"type": "string"}, "tags": {"type": "array", "maxItems": 8, "items": tag}},
    }
    schema = {
        "type": "object",
        "properties": {"items": {"type": "array", "maxItems": 8, "items": item}},
        "x-kubernetes-validations": [{"rule": rule}],
    }
    assert cel.compile_error(rule, schema) is None
    rules = cel.compile_schema_rules(schema, root=False)
    assert rules.evaluate({"items": [{"name": "a", "tags": [{}, {"k": "a"}]}]}, None) == []
    assert [
        e.message for e in rules.evaluate({"items": [{"name": "a", "tags": [{}, {"k": "b"}]}]}, None)
    ] == [f'Invalid value: "object": no such key: k evaluating rule: {rule}']


def test_all_retried_element_by_element_converts_the_object_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """The retry after a failure binds each element to a context built once: a context per element
    converted the whole object again each time (quadratic: 30 s for 3000 items)."""
    import cel as package

    made: list[object] = []
    context = package.Context

    def counted(*args: object) -> object:
        made.append(args)
        return context(*args)

    monkeypatch.setattr(package, "Context", counted)
    item = {"type": "object", "properties": {"a": {"type": "integer"}}}
    schema = {
        "type": "object",
        "properties": {"limit": {"type": "integer"}, "l": {"type": "array", "maxItems": 100, "items": item}},
        "x-kubernetes-validations": [{"rule": "self.l.all(x, x.a < self.limit)"}],
    }
    rules = cel.compile_schema_rules(schema, root=False)
    bad = {"limit": 5, "l": [{}] + [{"a": 1}] * 49 + [{"a": 9}]}
    assert [e.message for e in rules.evaluate(bad, None)] == [
        'Invalid value: "object": failed rule: self.l.all(x, x.a < self.limit)'
    ]
    assert len(made) == 2  # the rule's context, and the one its elements share
    assert rules.evaluate({"limit": 5, "l": [{"a": 1}, {"a": 2}]}, None) == []


UNBOUNDED = {"type": "object", "properties": {"l": {"type": "array", "items": {"type": "integer"}}}}


@pytest.mark.parametrize(
    "rule",
    [
        "self.l.transformList(i, x, self.l.transformList(j, y, x + y)).size() >= 0",
        "self.l.existsOne(x, self.l.existsOne(y, x == y))",
        "self.l.all(i, x, self.l.all(j, y, x != y || true))",
        "self.l.exists(i, x, self.l.exists(j, y, x == y))",
        "self.l.transformMap(i, x, self.l.filter(y, y > x)).size() >= 0",
        "self.l.transformMapEntry(i, x, {string(i): self.l.exists_one(y, y == x)}).size() >= 0",
    ],
)
def test_nested_comprehensions_over_an_unbounded_list_are_over_budget(rule: str) -> None:
    # As kube's estimator: each comprehension costs its range's size times its body.
    assert (cel.compile_error(rule, UNBOUNDED) or "").startswith(cel.OVER_BUDGET)


def test_two_variable_comprehensions_bind_the_index_or_key_and_the_element_for_cost() -> None:
    bounded = {
        "type": "object",
        "properties": {
            "m": {
                "type": "object",
                "maxProperties": 4,
                "additionalProperties": {"type": "array", "maxItems": 5, "items": {"type": "integer"}},
            },
            "l": {
                "type": "array",
                "maxItems": 3,
                "items": {"type": "array", "maxItems": 7, "items": {"type": "integer"}},
            },
        },
    }
    assert cel.estimated_cost("self.m.all(k, v, v.all(x, x > 0))", bounded) == 4 * (1 + 5 * 1)
    assert cel.estimated_cost("self.l.transformList(i, v, v.filter(x, x > i)).size() > 0", bounded) == 3 * (
        1 + 7 * 1
    )
    assert cel.estimated_cost("self.l.existsOne(v, v.exists(x, x > 0))", bounded) == 3 * (1 + 7 * 1)
