"""A CEL rule's cost, bounded before it runs, as kube bounds it (StaticEstimatedCostLimit).

Each comprehension macro (``all``, ``exists``, ``exists_one``, ``map``, ``filter``) costs the
most elements its receiver's schema allows (``maxItems``, ``maxProperties``; without them, what
fits in a request) times the cost of its body, so nested comprehensions multiply along the
fields they actually walk. :func:`estimated_cost` is that bound for a rule at a schema node.
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
#: A comprehension macro on a receiver: ``self.spec.items.all(x, ...`` (receiver, macro, variable;
#: the receiver's fields may be selected with ``.?``).
_MACRO = re.compile(
    r"([A-Za-z_][\w]*(?:\s*\.\??\s*[A-Za-z_]\w*)*|\))\s*\.\s*(all|exists_one|exists|map|filter)\s*\(\s*([A-Za-z_]\w*)\s*,"
)


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


def _size_and_element(schema: Schema | None) -> tuple[int, Schema | None]:
    """How many elements a comprehension over ``schema`` can visit, and their schema."""
    if schema is None:
        return UNBOUNDED_SIZE, None
    if schema.get("type") == "array":
        return int(schema.get("maxItems", UNBOUNDED_SIZE)), schema.get("items")
    if schema.get("type") == "object":
        return int(schema.get("maxProperties", UNBOUNDED_SIZE)), schema.get("additionalProperties") or {
            "type": "string"
        }
    return UNBOUNDED_SIZE, None


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
        receiver, _macro, variable = match.groups()
        size, element = _size_and_element(None if receiver == ")" else _receiver(receiver, env))
        body_end = _closing(text, match.end())
        body = text[match.end() : body_end]
        total += size * (1 + _cost(body, {**env, variable: element}))
        index = body_end + 1
    return total


def estimated_cost(rule: str, schema: Schema) -> int:
    """An upper bound of the rule's cost at ``schema``'s node (``self``)."""
    return max(1, _cost(rule, {"self": schema, "oldSelf": schema}))
