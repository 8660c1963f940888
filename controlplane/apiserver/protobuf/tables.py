"""The field tables, read from the ``*_v1.yaml`` files next to this module (one per API group).

Each file maps a message's Go name to its fields by number; a field is written
``TYPE jsonName [repeated] [pointer] [inline]``, where ``TYPE`` is a scalar (``string``,
``int32``, ``int64``, ``bool``), one of kube's own types (``Quantity``, ``IntOrString``,
``Time``), a map (``map<string,string>``, ``map<string,bytes>``, ``map<string,Quantity>``,
``map<string,ExtraValue>``), ``bytes``, ``FieldsV1``,
``unsupported`` (see :mod:`~controlplane.apiserver.protobuf.schema`), or the name of another
message of any of the files. The flags are :class:`~controlplane.apiserver.protobuf.schema.Field`'s.
Read once at import; a malformed table fails the import.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from controlplane.apiserver.protobuf.schema import Field, FieldType, Message

TABLE_FILES = (
    "meta_v1.yaml",
    "core_v1.yaml",
    "apps_v1.yaml",
    "batch_v1.yaml",
    "rbac_v1.yaml",
    "networking_v1.yaml",
    "policy_v1.yaml",
    "autoscaling_v1.yaml",
    "scheduling_v1.yaml",
    "authentication_v1.yaml",
    "certificates_v1.yaml",
)

_TYPES: Mapping[str, FieldType] = {
    "string": FieldType.STRING,
    "int32": FieldType.INT32,
    "int64": FieldType.INT64,
    "bool": FieldType.BOOL,
    "Quantity": FieldType.QUANTITY,
    "IntOrString": FieldType.INT_OR_STRING,
    "Time": FieldType.TIME,
    "map<string,string>": FieldType.STRING_MAP,
    "map<string,bytes>": FieldType.BYTES_MAP,
    "map<string,Quantity>": FieldType.QUANTITY_MAP,
    "bytes": FieldType.BYTES,
    "FieldsV1": FieldType.FIELDS_V1,
    "map<string,ExtraValue>": FieldType.EXTRA_MAP,
    "unsupported": FieldType.UNSUPPORTED,
}
_FLAGS = frozenset({"repeated", "pointer", "inline"})


def build_messages(tables: Mapping[str, Mapping[int, str]]) -> dict[str, Message]:
    """Every message of ``tables`` (Go name -> field number -> field line), by Go name."""
    built: dict[str, Message] = {}

    def build(name: str, within: tuple[str, ...]) -> Message:
        if name in built:
            return built[name]
        if name in within:
            raise ValueError(f"message {name} contains itself: {' -> '.join((*within, name))}")
        if name not in tables:
            raise ValueError(f"{within[-1]}: no message or field type {name!r}")
        fields: dict[int, Field] = {}
        for number, line in (tables[name] or {}).items():
            type_name, json_name, *flags = str(line).split()
            if unknown := set(flags) - _FLAGS:
                raise ValueError(f"{name} field {number}: unknown flags {sorted(unknown)}")
            repeated, pointer, inline = ("repeated" in flags), ("pointer" in flags), ("inline" in flags)
            if type_name in _TYPES:
                fields[number] = Field(json_name, _TYPES[type_name], None, repeated, pointer, inline)
            else:
                nested = build(type_name, (*within, name))
                fields[number] = Field(json_name, FieldType.MESSAGE, nested, repeated, pointer, inline)
        built[name] = Message(name, fields)
        return built[name]

    for name in tables:
        build(name, ())
    return built


#: libyaml's safe loader where PyYAML was built with it: the same tables, read in an eighth of the
#: pure-Python loader's CPU (every API server, members' too, reads them when it starts).
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def _read(files: tuple[str, ...]) -> dict[str, Any]:
    tables: dict[str, Any] = {}
    for file in files:
        loaded = yaml.load(Path(__file__).with_name(file).read_text(encoding="utf-8"), Loader=_LOADER)
        if twice := tables.keys() & loaded.keys():
            raise ValueError(f"{file}: messages listed twice: {sorted(twice)}")
        tables.update(loaded)
    return tables


MESSAGES: Mapping[str, Message] = build_messages(_read(TABLE_FILES))
"""Every message of the tables, by Go name."""
