"""Karmada's CRD fields (``tests/data/karmada_crd_fields.txt``) against the schemas the hub serves:
the reader of that file and the comparison, path by path.

In: the data file and a served kind's definitions (kube's OpenAPI v2 dialect, as
:class:`~controlplane.apiserver.openapi.catalog.SchemaCatalog` builds them). Out: the upstream
fields as (path, type, required, enum, default, bounds) and, per path, what the served schema says
wrong about it: undeclared, of another type, an enum without an upstream value, a requirement
upstream lacks (:meth:`ServedSchema.problems`); a default or a bound (format, pattern, length,
minimum, maximum, list size) it publishes otherwise than the CRD (:meth:`ServedSchema.value_differences`).
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from controlplane.apiserver.openapi.upstream import DEFINITIONS_PREFIX

DATA = Path(__file__).resolve().parents[1] / "data" / "karmada_crd_fields.txt"
#: Served nodes that take any value: a preserved or untyped subtree.
OPEN = {"x-kubernetes-preserve-unknown-fields": True}
#: The schema keywords of a CRD's value rules a data file line may carry beside ``required`` and ``enum``.
VALUE_RULES = ("default", "minimum", "maximum", "minLength", "maxLength", "minItems", "maxItems", "minProperties",
               "pattern")
_KUBE_SCALARS = {"io.k8s.apimachinery.pkg.api.resource.Quantity": "int-or-string",
                 "io.k8s.apimachinery.pkg.util.intstr.IntOrString": "int-or-string"}


#: The CRD keywords kept as a field's bounds, in the order the data file writes them (after ``default``).
BOUNDS = ("format", "maxItems", "maxLength", "maximum", "minItems", "minLength", "minProperties", "minimum", "pattern")
#: Options of a data line that are lists; bounds that are strings.
_LISTS = ("required", "enum")
_STRINGS = ("format", "pattern")


@dataclass(frozen=True, slots=True)
class Field:
    path: str
    type: str
    required: tuple[str, ...] = ()
    enum: tuple[str, ...] = ()
    #: The CRD's ``default``, as written in the data file (YAML); None when it has none.
    default: str | None = None
    #: The CRD's bounds (:data:`BOUNDS`): a number, or a string (``format``, ``pattern``).
    bounds: tuple[tuple[str, Any], ...] = ()

    @property
    def default_value(self) -> Any:
        return None if self.default is None else yaml.safe_load(self.default)

    def rules(self) -> dict[str, Any]:
        """The CRD's default and bounds as a schema's keywords and values."""
        out: dict[str, Any] = dict(self.bounds)
        if self.default is not None:
            out["default"] = self.default_value
        return out


def _join(base: str, rel: str) -> str:
    if not base:
        return rel
    return base + rel if rel.startswith(("[", "{")) else f"{base}.{rel}"


def _parse_line(line: str) -> tuple[str, str, dict[str, str]]:
    path, kind, *rest = line.split()
    return path, kind, dict(word.split("=", 1) for word in rest)


def _field(path: str, kind: str, options: Mapping[str, str]) -> Field:
    lists = {key: tuple("" if v == '""' else v for v in options[key].split(",")) if key in options else ()
             for key in _LISTS}
    bounds = tuple((key, options[key] if key in _STRINGS else int(options[key])) for key in BOUNDS if key in options)
    return Field(path, kind, lists["required"], lists["enum"], options.get("default"), bounds)


def read_fields(text: str) -> dict[str, list[str]]:
    """The sections of the data file (``shape NAME``, ``kind GV KIND`` and ``rules GV KIND``),
    each its lines."""
    sections: dict[str, list[str]] = {}
    current: list[str] | None = None
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith(("[shape ", "[kind ", "[rules ")):
            current = sections.setdefault(line.strip("[]"), [])
        elif current is None:
            raise ValueError(f"a field outside a section: {line!r}")
        else:
            current.append(line)
    return sections


def _expand(lines: list[str], base: str, shapes: Mapping[str, list[str]],
            kube: Mapping[str, dict[str, Any]]) -> Iterator[Field]:
    for line in lines:
        rel, kind, options = _parse_line(line)
        path = _join(base, rel)
        if kind.startswith("@"):
            shape = shapes[kind[1:]]
            if not shape[0].startswith("["):
                yield _field(path, "object", options)
            yield from _expand(shape, path, shapes, kube)
        elif kind.startswith("kube:"):
            yield from kube_fields(kind.removeprefix("kube:"), path, kube)
        else:
            yield _field(path, kind, options)


def kube_fields(name: str, path: str, kube: Mapping[str, dict[str, Any]], depth: int = 0) -> Iterator[Field]:
    """The fields of kube's definition ``name`` at ``path`` (a kube type a Karmada CRD inlines)."""
    if name in _KUBE_SCALARS:
        yield Field(path, _KUBE_SCALARS[name])
        return
    yield from _schema_fields(kube[name], path, kube, depth)


def _schema_fields(node: dict[str, Any], path: str, kube: Mapping[str, dict[str, Any]], depth: int) -> Iterator[Field]:
    if "$ref" in node:
        yield from kube_fields(node["$ref"].removeprefix(DEFINITIONS_PREFIX), path, kube, depth + 1)
        return
    kind = "int-or-string" if node.get("format") == "int-or-string" else node.get("type", "any")
    default = json.dumps(node["default"]) if "default" in node else None
    yield Field(path, kind, tuple(node.get("required", ())), tuple(map(str, node.get("enum", ()))), default,
                tuple(served_values({k: v for k, v in node.items() if k != "default"}).items()))
    if depth > 8:
        return
    for prop, sub in (node.get("properties") or {}).items():
        yield from _schema_fields(sub, _join(path, prop), kube, depth + 1)
    if isinstance(node.get("items"), dict):
        yield from _schema_fields(node["items"], path + "[]", kube, depth + 1)
    if isinstance(node.get("additionalProperties"), dict):
        yield from _schema_fields(node["additionalProperties"], path + "{}", kube, depth + 1)


def upstream_kinds(kube: Mapping[str, dict[str, Any]], text: str | None = None) -> dict[tuple[str, str], list[Field]]:
    """Each kind of the data file, by (group/version, kind), with every field path (shapes,
    aliases and kube's types expanded); a path listed twice (a shape and its own lines) merged."""
    sections = read_fields(DATA.read_text() if text is None else text)
    shapes = {name.removeprefix("shape "): lines for name, lines in sections.items() if name.startswith("shape ")}
    kinds: dict[tuple[str, str], list[Field]] = {}
    for name, lines in sections.items():
        if not name.startswith("kind "):
            continue
        head, _, alias = name.removeprefix("kind ").partition(" = ")
        group_version, kind = head.split()
        if alias:
            kinds[(group_version, kind)] = kinds[(group_version, alias)]
            continue
        merged: dict[str, Field] = {}
        for f in _expand(lines, "", shapes, kube):
            old = merged.get(f.path)
            merged[f.path] = f if old is None else Field(
                f.path, f.type, old.required or f.required, old.enum or f.enum, old.default or f.default,
                tuple({**dict(old.bounds), **dict(f.bounds)}.items()))
        kinds[(group_version, kind)] = list(merged.values())
    return kinds


class ServedSchema:
    """A served kind's schema, walked by the paths of :class:`Field`."""

    def __init__(self, name: str, definitions: Mapping[str, dict[str, Any]]) -> None:
        self.root = definitions[name]
        self.definitions = definitions

    def _resolve(self, node: dict[str, Any]) -> dict[str, Any]:
        for _ in range(10):
            if "$ref" in node:
                target = node["$ref"].removeprefix(DEFINITIONS_PREFIX)
                if target in _KUBE_SCALARS:
                    own = {k: v for k, v in node.items() if k not in ("$ref", "description")}
                    return {"type": "string", "format": "int-or-string", **own}
                node = {**self.definitions[target], **{k: v for k, v in node.items() if k not in ("$ref", "description")}}
            elif isinstance(node.get("allOf"), list) and len(node["allOf"]) == 1:
                node = {**node["allOf"][0], **{k: v for k, v in node.items() if k != "allOf"}}
            else:
                return node
        raise ValueError("references too deep")

    @staticmethod
    def _is_open(node: dict[str, Any]) -> bool:
        if node.get("x-kubernetes-preserve-unknown-fields"):
            return True
        return "type" not in node and not node.get("properties") and "items" not in node

    def node(self, path: str) -> dict[str, Any] | None:
        """The served node at ``path``, :data:`OPEN` under a subtree that keeps anything, None
        when the schema does not declare it."""
        node = self._resolve(self.root)
        for step in _steps(path):
            if step == "[]":
                child = node.get("items")
            elif step == "{}":
                child = node.get("additionalProperties")
            else:
                child = (node.get("properties") or {}).get(step)
            if child is None:
                return OPEN if self._is_open(node) else None
            node = self._resolve(child)
        return node

    def problems(self, field: Field) -> list[str]:
        """What is wrong with the served schema for ``field`` (nothing when it accepts what the
        CRD accepts)."""
        node = self.node(field.path)
        if node is None:
            return [f"{field.path}: not declared"]
        if node is OPEN or self._is_open(node):
            return []
        out: list[str] = []
        served = "int-or-string" if node.get("format") == "int-or-string" or node.get("x-kubernetes-int-or-string") else node.get("type")
        compatible = {field.type} | ({"number"} if field.type == "integer" else set())
        if served not in compatible:
            out.append(f"{field.path}: {served} where the CRD has {field.type}")
        if "enum" in node:
            missing = [v for v in field.enum or ("<any>",) if v not in map(str, node["enum"])]
            if missing:
                out.append(f"{field.path}: enum {node['enum']} lacks {missing}")
        extra = set(node.get("required", ())) - set(field.required)
        if extra:
            out.append(f"{field.path}: requires {sorted(extra)}, which the CRD does not")
        return out

    def value_differences(self, field: Field) -> list[str]:
        """Where the served schema's ``default`` and bounds at ``field`` differ from the CRD's:
        one it lacks, another value, one the CRD does not have (nothing under an open subtree)."""
        node = self.node(field.path)
        if node is None or node is OPEN or self._is_open(node):
            return []
        crd: dict[str, Any] = dict(field.bounds)
        if field.default is not None:
            crd["default"] = field.default_value
        served = served_values(node)
        out = []
        for key in ("default", *BOUNDS):
            if key in crd and served.get(key, _UNSET) != crd[key]:
                out.append(f"{field.path}: {key} {_shown(served.get(key, _UNSET))} where the CRD has {_shown(crd[key])}")
            elif key not in crd and key in served:
                out.append(f"{field.path}: {key} {_shown(served[key])}, which the CRD does not have")
        return out


_UNSET = object()


def _shown(value: Any) -> str:
    return "unset" if value is _UNSET else repr(value)


def served_values(node: Mapping[str, Any]) -> dict[str, Any]:
    """A served node's default and bounds, in the CRD's terms: an exclusive bound is marked as
    such, and ``int-or-string`` (the hub's spelling of a type) is no format."""
    out = {key: node[key] for key in ("default", *BOUNDS) if key in node}
    for key in ("minimum", "maximum"):
        if key in out and node.get("exclusive" + key.title()):
            out[key] = f"{out[key]} (exclusive)"
    if out.get("format") == "int-or-string":
        del out["format"]
    return out


def served_fields(name: str, definitions: Mapping[str, dict[str, Any]]) -> list[Field]:
    """Every path the served schema declares (kube's types expanded), for the list of extras."""
    return list(_schema_fields(definitions[name], "", definitions, 0))


def crd_lines(schema: Mapping[str, Any], path: str = "") -> Iterator[str]:
    """The data file's lines of one CRD version's ``openAPIV3Schema`` (apiVersion, kind and metadata
    left out), in the CRD's order: how a kind's lines are made from upstream YAML."""
    if path:
        kind = "int-or-string" if schema.get("x-kubernetes-int-or-string") else schema.get("type", "any")
        words = [path, kind]
        if schema.get("required"):
            words.append("required=" + ",".join(schema["required"]))
        if schema.get("enum"):
            words.append("enum=" + ",".join(str(v) if v != "" else '""' for v in schema["enum"]))
        if "default" in schema:
            words.append("default=" + yaml.safe_dump(schema["default"], default_flow_style=True).strip().removesuffix("\n..."))
        words += [f"{key}={schema[key]}" for key in BOUNDS if key in schema]
        yield " ".join(words)
    for prop, sub in (schema.get("properties") or {}).items():
        if path or prop not in ("apiVersion", "kind", "metadata"):
            yield from crd_lines(sub, _join(path, prop))
    if isinstance(schema.get("items"), dict):
        yield from crd_lines(schema["items"], path + "[]")
    if isinstance(schema.get("additionalProperties"), dict):
        yield from crd_lines(schema["additionalProperties"], path + "{}")


def _steps(path: str) -> Iterator[str]:
    for part in path.split("."):
        name = part.split("[", 1)[0].split("{", 1)[0]
        if name:
            yield name
        rest = part[len(name):]
        while rest:
            yield rest[:2]
            rest = rest[2:]


if __name__ == "__main__":  # python tests/apiserver/karmada_crd_fields.py CRD.yaml...
    import sys

    import yaml

    for file in sys.argv[1:]:
        for crd in filter(None, yaml.safe_load_all(Path(file).read_text())):
            for version in crd["spec"]["versions"]:
                print(f"[kind {crd['spec']['group']}/{version['name']} {crd['spec']['names']['kind']}]")
                print("\n".join(crd_lines(version["schema"]["openAPIV3Schema"])))
