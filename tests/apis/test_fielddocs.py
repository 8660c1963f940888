"""Field descriptions come from the string under each field, read when a schema is written (not
while pydantic builds the class): the same descriptions pydantic's attribute docstrings gave."""

from __future__ import annotations

from pydantic import BaseModel, Field

from controlplane.apis.meta import WireModel
from controlplane.apiserver.openapi.models import model_json_schema


class _Base(WireModel):
    shared_name: str | None = None
    """Described in the base class."""


class _Part(WireModel):
    inner_value: int = 0
    """A part's own field."""


class _Thing(_Base):
    plain: str = ""
    """Says what plain is.

    Over two lines."""
    explicit: str = Field("", description="the explicit description wins")
    """Not this one."""
    undocumented: int = 0
    part: _Part | None = None
    """The part, a model of its own."""


class _NotWire(BaseModel):
    field: int = 0
    """Not a wire model: pydantic's default, no description."""


def test_a_wire_models_schema_has_its_fields_docstrings() -> None:
    schema = model_json_schema(_Thing)
    properties = schema["properties"]
    assert properties["plain"]["description"] == "Says what plain is.\n\nOver two lines."
    assert properties["explicit"]["description"] == "the explicit description wins"
    assert "description" not in properties["undocumented"]
    assert properties["sharedName"]["description"] == "Described in the base class."
    assert properties["part"]["description"] == "The part, a model of its own."
    assert schema["$defs"]["_Part"]["properties"]["innerValue"]["description"] == "A part's own field."


def test_models_are_built_without_their_fields_docstrings() -> None:
    # Read at class creation they would cost every process that imports the models.
    assert _Thing.model_fields["plain"].description is None
    assert "description" not in model_json_schema(_NotWire)["properties"]["field"]
