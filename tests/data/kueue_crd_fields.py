"""Regenerate ``kueue_crd_fields.txt``: every field path of Kueue's CRDs with its type.

Usage: ``python tests/data/kueue_crd_fields.py CRD.yaml... > tests/data/kueue_crd_fields.txt``
with the CRD YAML of kubernetes-sigs/kueue (``config/components/crd/bases/*.yaml``, Apache-2.0),
then put the commit of each file into the header by hand.

One line a field: ``Kind version path type rule=value...``. A path is the field's JSON path,
``[]`` for a list's items and ``{}`` for a map's values, ``.`` the object itself; the type is the
schema's ``type``, or ``int-or-string`` where the schema has ``x-kubernetes-int-or-string``
(quantities and IntOrString). ``metadata`` is ObjectMeta and a pod set's ``template`` a
PodTemplateSpec (kube's own types): listed, not walked.

The rules follow the type, each ``key=value`` with no spaces: ``required=a,b`` (an object's
required fields), ``enum=A,B``, ``default=`` (compact JSON), the bounds ``minimum``,
``maximum``, ``minLength``, ``maxLength``, ``minItems``, ``maxItems``, ``maxProperties``, and
``pattern`` (not for int-or-string: a quantity's pattern is kube's Quantity's). Each
``x-kubernetes-validations`` rule is a line of its own: ``Kind version path
x-kubernetes-validations message`` (the message is what the API server says when the rule fails).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from typing import Any

import yaml

#: Fields whose schema is a kube type the hub serves as kube's definition.
NOT_WALKED = ("metadata", "template")


def field_type(schema: dict[str, Any]) -> str:
    if schema.get("x-kubernetes-int-or-string"):
        return "int-or-string"
    return str(schema.get("type", "object"))


#: The bounds a line carries, in this order.
BOUNDS = ("minimum", "maximum", "minLength", "maxLength", "minItems", "maxItems", "maxProperties")


def rules(schema: dict[str, Any]) -> str:
    """The line's rules: `` required=a,b enum=A,B default=... minLength=1 ...``."""
    out = []
    if schema.get("required"):
        out.append("required=" + ",".join(sorted(schema["required"])))
    if schema.get("enum"):
        out.append("enum=" + ",".join(str(value) for value in schema["enum"]))
    if "default" in schema:
        out.append("default=" + json.dumps(schema["default"], separators=(",", ":"), sort_keys=True))
    out.extend(f"{key}={schema[key]}" for key in BOUNDS if key in schema)
    if "pattern" in schema and not schema.get("x-kubernetes-int-or-string"):
        out.append(f"pattern={schema['pattern']}")
    return "".join(f" {rule}" for rule in out)


def fields(schema: dict[str, Any], path: str = "") -> Iterator[tuple[str, str]]:
    """``(path, "type rules")`` of ``schema`` and every field under it, and ``(path,
    "x-kubernetes-validations message")`` for each CEL rule."""
    yield path or ".", field_type(schema) + rules(schema)
    for rule in schema.get("x-kubernetes-validations") or ():
        yield path or ".", "x-kubernetes-validations " + " ".join(str(rule["message"]).split())
    for name, sub in sorted((schema.get("properties") or {}).items()):
        here = f"{path}.{name}"
        if name in NOT_WALKED:
            yield here, field_type(sub) + rules(sub)
        else:
            yield from fields(sub, here)
    items = schema.get("items")
    if isinstance(items, dict):
        yield from fields(items, f"{path}[]")
    values = schema.get("additionalProperties")
    if isinstance(values, dict):
        yield from fields(values, f"{path}{{}}")


def lines(crd: dict[str, Any]) -> Iterator[str]:
    kind = crd["spec"]["names"]["kind"]
    for version in crd["spec"]["versions"]:
        for path, rest in fields(version["schema"]["openAPIV3Schema"]):
            if path not in (".apiVersion", ".kind"):
                yield f"{kind} {version['name']} {path} {rest}"


def main(paths: list[str]) -> None:
    out: set[str] = set()
    for path in paths:
        with open(path, encoding="utf-8") as f:
            out.update(lines(yaml.safe_load(f)))
    print("\n".join(sorted(out)))


if __name__ == "__main__":
    main(sys.argv[1:])
