"""The field tables read from YAML: references resolve, and a malformed table is refused."""

from __future__ import annotations

import pytest

from controlplane.apiserver.protobuf.schema import FieldType
from controlplane.apiserver.protobuf.tables import MESSAGES, build_messages


def test_a_field_line_gives_type_name_and_flags() -> None:
    messages = build_messages({"Outer": {1: "Inner items repeated pointer", 2: "Quantity size"}, "Inner": {1: "string name"}})
    items, size = messages["Outer"].fields[1], messages["Outer"].fields[2]
    assert (items.name, items.type, items.repeated, items.pointer, items.inline) == (
        "items", FieldType.MESSAGE, True, True, False,
    )
    assert items.message is messages["Inner"]
    assert (size.name, size.type) == ("size", FieldType.QUANTITY)


def test_the_tables_share_one_message_per_name() -> None:
    deployment_template = MESSAGES["DeploymentSpec"].fields[3].message
    job_template = MESSAGES["JobSpec"].fields[6].message
    assert deployment_template is job_template is MESSAGES["PodTemplateSpec"]


@pytest.mark.parametrize(
    ("tables", "error"),
    [
        ({"A": {1: "Missing x"}}, "no message or field type 'Missing'"),
        ({"A": {1: "string x optional"}}, "unknown flags ['optional']"),
        ({"A": {1: "B b"}, "B": {1: "A a"}}, "contains itself"),
    ],
)
def test_a_malformed_table_is_refused(tables: dict[str, dict[int, str]], error: str) -> None:
    with pytest.raises(ValueError, match=error.replace("[", r"\[").replace("]", r"\]")):
        build_messages(tables)
