"""Regenerate ``kueue_crd_fields.txt``: every field path of Kueue's CRDs with its type.

Usage: ``python tests/data/kueue_crd_fields.py CRD.yaml... > tests/data/kueue_crd_fields.txt``
with the CRD YAML of kubernetes-sigs/kueue (``config/components/crd/bases/*.yaml``, Apache-2.0),
then put the commit of each file into the header by hand.

One line a field: ``Kind version path type``. A path is the field's JSON path, ``[]`` for a list's
items and ``{}`` for a map's values; the type is the schema's ``type``, or ``int-or-string`` where
the schema has ``x-kubernetes-int-or-string`` (quantities and IntOrString). ``metadata`` is
ObjectMeta and a pod set's ``template`` a PodTemplateSpec (kube's own types): listed, not walked.
"""

from __future__ import annotations

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


def fields(schema: dict[str, Any], path: str = "") -> Iterator[tuple[str, str]]:
    for name, sub in sorted((schema.get("properties") or {}).items()):
        here = f"{path}.{name}"
        yield here, field_type(sub)
        if name not in NOT_WALKED:
            yield from fields(sub, here)
    items = schema.get("items")
    if isinstance(items, dict):
        yield f"{path}[]", field_type(items)
        yield from fields(items, f"{path}[]")
    values = schema.get("additionalProperties")
    if isinstance(values, dict):
        yield f"{path}{{}}", field_type(values)
        yield from fields(values, f"{path}{{}}")


def lines(crd: dict[str, Any]) -> Iterator[str]:
    kind = crd["spec"]["names"]["kind"]
    for version in crd["spec"]["versions"]:
        for path, type_ in fields(version["schema"]["openAPIV3Schema"]):
            if path not in (".apiVersion", ".kind"):
                yield f"{kind} {version['name']} {path} {type_}"


def main(paths: list[str]) -> None:
    out: set[str] = set()
    for path in paths:
        with open(path, encoding="utf-8") as f:
            out.update(lines(yaml.safe_load(f)))
    print("\n".join(sorted(out)))


if __name__ == "__main__":
    main(sys.argv[1:])
