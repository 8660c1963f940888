"""Rebuild ``kubernetes-definitions.json.gz``: kube's own schemas, as kube-apiserver serves them.

The hub serves the upstream schema of every built-in kind it knows. They come from the
``kubernetes-validate`` package (a development dependency), which bundles the definitions
of every Kubernetes release as JSON Schema 2020-12 (``<version>-local/_definitions.json``).
This turns one release's definitions back into the OpenAPI v2 dialect of kube's
``/openapi/v2`` (``#/definitions/`` references, one type per schema, int-or-string and
quantity as kube spells them, no ``apiVersion``/``kind`` enums, which kube does not have)
and writes them, gzip-compressed, beside this module (about 250 kB instead of the
package's 108 MB)::

    .venv/bin/python -m controlplane.apiserver.openapi.regenerate [v1.37.0]

In: the package's files. Out: the data file. Run by hand when moving to a newer release.
"""

from __future__ import annotations

import gzip
import sys
from importlib import resources
from typing import Any

import orjson

from controlplane.apiserver.openapi.upstream import (
    DATA_FILE,
    DEFINITIONS_PREFIX,
    INT_OR_STRING,
    QUANTITY,
    rewrite_schema,
)

DEFAULT_RELEASE = "v1.37.0"


#: The two definitions the JSON Schema form spells as ``oneOf`` and leaves undescribed.
_SCALARS: dict[str, dict[str, Any]] = {
    INT_OR_STRING: {
        "description": (
            "IntOrString is a type that can hold an int32 or a string. When used in JSON or YAML "
            "marshalling and unmarshalling, it produces or consumes the inner type."
        ),
        "type": "string",
        "format": "int-or-string",
    },
    QUANTITY: {
        "description": (
            "Quantity is a fixed-point representation of a number: a decimal number with an optional "
            "suffix, binary (Ki, Mi, Gi, Ti, Pi, Ei), decimal (m, k, M, G, T, P, E) or a decimal "
            "exponent (e3). Examples: 1, 500m, 1.5, 24Gi. Servers return the canonical form."
        ),
        "type": "string",
    },
}


def to_swagger(node: Any) -> Any:
    """One JSON Schema 2020-12 node of the bundled definitions in kube's OpenAPI v2 dialect."""
    return rewrite_schema(node, ref=lambda ref: DEFINITIONS_PREFIX + ref.rsplit("/", 1)[-1], finish=_swagger_node)


def _swagger_node(out: dict[str, Any]) -> dict[str, Any]:
    """One type per schema (``["string", "null"]`` is ``string``), and no ``apiVersion``/``kind`` enums."""
    if isinstance(out.get("type"), list):
        types = [t for t in out["type"] if t != "null"]
        out["type"] = types[0] if len(types) == 1 else types
    properties = out.get("properties")
    if isinstance(properties, dict):
        for name in ("apiVersion", "kind"):
            if isinstance(properties.get(name), dict):
                properties[name].pop("enum", None)
    return out


def convert(bundled: dict[str, Any]) -> dict[str, Any]:
    """The ``$defs`` of a bundled ``_definitions.json`` as kube's ``definitions``."""
    definitions = {name: to_swagger(schema) for name, schema in bundled["$defs"].items()}
    definitions.update(_SCALARS)
    return dict(sorted(definitions.items()))


def main(argv: list[str]) -> int:
    release = argv[0] if argv else DEFAULT_RELEASE
    source = resources.files("kubernetes_validate") / "kubernetes-json-schema" / f"{release}-local" / "_definitions.json"
    definitions = convert(orjson.loads(source.read_bytes()))
    payload = orjson.dumps({"release": release, "definitions": definitions}, option=orjson.OPT_SORT_KEYS)
    DATA_FILE.write_bytes(gzip.compress(payload, compresslevel=9, mtime=0))
    print(f"wrote {len(definitions)} definitions of Kubernetes {release} to {DATA_FILE}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
