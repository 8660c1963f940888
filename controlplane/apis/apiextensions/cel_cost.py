"""A CEL rule's cost, bounded before it runs, as kube bounds it (StaticEstimatedCostLimit).

Each comprehension macro (``all``, ``exists``, ``exists_one``, ``existsOne``, ``map``,
``filter``, ``transformList``, ``transformMap``, ``transformMapEntry``, with one variable or two)
costs the most elements its receiver's schema allows (``maxItems``, ``maxProperties``; without
them, what fits in a request) times the cost of its body, so nested comprehensions multiply along
the fields they actually walk: a variable has the schema of what it is bound to (a list's index an
integer and its element the items' schema; a map's key a string and its value the values' schema). :func:`estimated_cost` is that bound for a rule at a schema node.
Pure: no I/O.
"""

from __future__ import annotations

import re

from controlplane.apis.apiextensions.schema import Schema

#: kube's StaticEstimatedCostLimit for one rule.
COST_LIMIT = 10_000_000
#: The most elements a list, map or string could have without a declared bound (what a 3 MiB
#: request can hold: kube estimates unbounded sizes from the request size limit too).
UNBOUNDED_SIZE = 3 * 1024 * 1024 // 2
#: A comprehension macro on a receiver: ``self.spec.items.all(x, ...`` or ``.all(i, x, ...``
#: (receiver, macro, first variable, second variable of a two-variable form; the receiver's fields
#: may be selected with ``.?``). Only the macros that have a two-variable form may bind two.
_MACRO = re.compile(
    r"([A-Za-z_][\w]*(?:\s*\.\??\s*[A-Za-z_]\w*)*|\))\s*\.\s*"
    r"(?:(map|filter)\s*\(\s*([A-Za-z_]\w*)\s*,"
    r"|(all|exists_one|existsOne|exists|transformList|transformMapEntry|transformMap)\s*\(\s*([A-Za-z_]\w*)\s*,"
    r"(?:\s*([A-Za-z_]\w*)\s*,)?)"
)
_INDEX: Schema = {"type": "integer"}
_KEY: Schema = {"type": "string"}


def _closing(text: str, start: int) -> int:
    """The index of the parenthesis closing the one opened just before ``start``."""
    depth = 1
    quote = ""
    for index in range(start, len(text)):
        char = text[index]
        if quote:
            if char == quote and text[index - 1] != "\\":
                quote = ""
        elif char in "'\"":
            quote = char
        elif char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
            if depth == 0:
                return index
    return len(text)


def _size_and_element(schema: Schema | None) -> tuple[int, Schema | None, Schema | None]:
    """How many elements a comprehension over ``schema`` can visit, and the schemas of what its
    variables are bound to: a list's index and item, a map's key and value."""
    if schema is None:
        return UNBOUNDED_SIZE, None, None
    if schema.get("type") == "array":
        return int(schema.get("maxItems", UNBOUNDED_SIZE)), _INDEX, schema.get("items")
    if schema.get("type") == "object":
        return int(schema.get("maxProperties", UNBOUNDED_SIZE)), _KEY, schema.get("additionalProperties")
    return UNBOUNDED_SIZE, None, None


def _receiver(path: str, env: dict[str, Schema | None]) -> Schema | None:
    parts = [p.strip().lstrip("?").strip() for p in path.split(".")]
    if parts[0] not in env:
        return None
    node = env[parts[0]]
    for name in parts[1:]:
        node = ((node or {}).get("properties") or {}).get(name)
        if node is None:
            return None
    return node


def _cost(text: str, env: dict[str, Schema | None]) -> int:
    """The comprehensions' cost in ``text``: each visits its receiver's bound (``maxItems``,
    ``maxProperties``; unbounded: what a request can hold) times its body's cost."""
    total = 0
    index = 0
    while (match := _MACRO.search(text, index)) is not None:
        receiver, _one, single, _macro, first, second = match.groups()
        size, key, element = _size_and_element(None if receiver == ")" else _receiver(receiver, env))
        if second:  # the two-variable form: the index or key, then the element or value
            bound = {first: key, second: element}
        else:  # a list's element; a map's key
            bound = {single or first: element if key is _INDEX else key}
        body_end = _closing(text, match.end())
        body = text[match.end() : body_end]
        total += size * (1 + _cost(body, {**env, **bound}))
        index = body_end + 1
    return total


def estimated_cost(rule: str, schema: Schema) -> int:
    """An upper bound of the rule's cost at ``schema``'s node (``self``)."""
    return max(1, _cost(rule, {"self": schema, "oldSelf": schema}))
