"""Field descriptions for users: the string right under a field in a model's class body (the
attribute docstrings pydantic's ``use_attribute_docstrings`` would read), read only when a JSON
schema is written.

pydantic reads them while it builds each model class: it finds and parses the class's source
again for every class, a fifth of the start-up CPU of a process that imports the API models (every
hub, agent and member), though only the hub's OpenAPI documents show them. Here each module's
source is parsed once, on the first schema that needs it; :class:`DescribedJsonSchema` puts the
descriptions where pydantic would have, in the properties of :class:`~controlplane.apis.meta.WireModel`
subclasses whose fields have no ``description`` of their own.
"""

from __future__ import annotations

import ast
import functools
import inspect
import sys
from typing import Any

from pydantic import BaseModel
from pydantic.json_schema import GenerateJsonSchema, JsonSchemaValue
from pydantic_core import core_schema

from controlplane.apis.meta import WireModel


def _class_docs(node: ast.ClassDef) -> dict[str, str]:
    """A class body's attribute docstrings: a string statement right after an annotated name."""
    docs: dict[str, str] = {}
    for before, statement in zip(node.body, node.body[1:], strict=False):
        if (isinstance(before, ast.AnnAssign) and isinstance(before.target, ast.Name)
                and isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Constant)
                and isinstance(statement.value.value, str)):
            docs[before.target.id] = inspect.cleandoc(statement.value.value)
    return docs


@functools.cache
def _module_docs(module: str) -> dict[str, dict[str, str]]:
    """Every class's attribute docstrings in ``module``, by the class's qualified name."""
    found: dict[str, dict[str, str]] = {}

    def visit(body: list[ast.stmt], prefix: str) -> None:
        for node in body:
            if isinstance(node, ast.ClassDef):
                found.setdefault(prefix + node.name, _class_docs(node))
                visit(node.body, f"{prefix}{node.name}.")
            elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                visit(node.body, f"{prefix}{node.name}.<locals>.")

    try:
        source = inspect.getsource(sys.modules[module])
    except (KeyError, OSError, TypeError):  # no source to read: no descriptions, as with pydantic
        return found
    visit(ast.parse(source).body, "")
    return found


def field_docs(model: type[BaseModel]) -> dict[str, str]:
    """The attribute docstrings of ``model``'s fields: each from the class that annotates it."""
    docs: dict[str, str] = {}
    for name in model.__pydantic_fields__:
        owner = next((c for c in model.__mro__ if name in inspect.get_annotations(c)), None)
        if owner is not None and (doc := _module_docs(owner.__module__).get(owner.__qualname__, {}).get(name)):
            docs[name] = doc
    return docs


class DescribedJsonSchema(GenerateJsonSchema):
    """pydantic's JSON schema, with the attribute docstrings of wire models' fields as their
    properties' descriptions (an explicit ``Field(description=...)`` still wins)."""

    def model_schema(self, schema: core_schema.ModelSchema) -> JsonSchemaValue:
        json_schema = super().model_schema(schema)
        model = schema["cls"]
        properties: dict[str, Any] = json_schema.get("properties", {})
        if not issubclass(model, WireModel) or not properties:
            return json_schema
        for name, doc in field_docs(model).items():
            field = model.__pydantic_fields__[name]
            alias = field.validation_alias if self.mode == "validation" else field.serialization_alias
            key = alias if isinstance(alias, str) else name
            if field.description is None and isinstance(properties.get(key), dict):
                properties[key]["description"] = doc
        return json_schema
