"""FieldsV1 encoding and the human form of field paths."""

from __future__ import annotations

from typing import Any

import pytest

from controlplane.apiserver.patching.fieldpaths import (
    FieldsError,
    Path,
    decode_fields,
    describe,
    encode_fields,
)

NAME_A = 'k:{"name":"a"}'

ROUND_TRIPS = [
    pytest.param({"f:spec": {"f:replicas": {}}}, {(("f", "spec"), ("f", "replicas"))}, id="a leaf"),
    pytest.param(
        {"f:metadata": {"f:labels": {".": {}, "f:app": {}}}},
        {(("f", "metadata"), ("f", "labels")), (("f", "metadata"), ("f", "labels"), ("f", "app"))},
        id="an owned node with owned children",
    ),
    pytest.param(
        {"f:spec": {"f:containers": {NAME_A: {".": {}, "f:image": {}}}}},
        {
            (("f", "spec"), ("f", "containers"), ("k", '{"name":"a"}')),
            (("f", "spec"), ("f", "containers"), ("k", '{"name":"a"}'), ("f", "image")),
        },
        id="an associative list item",
    ),
    pytest.param(
        {"f:metadata": {"f:finalizers": {'v:"a"': {}, 'v:"b"': {}}}},
        {
            (("f", "metadata"), ("f", "finalizers"), ("v", '"a"')),
            (("f", "metadata"), ("f", "finalizers"), ("v", '"b"')),
        },
        id="set values",
    ),
]


@pytest.mark.parametrize(("tree", "paths"), ROUND_TRIPS)
def test_fieldsv1_round_trip(tree: dict[str, Any], paths: set[Path]) -> None:
    assert decode_fields(tree) == paths
    assert encode_fields(paths) == tree


def test_encoding_orders_fields_before_keys_and_dot_first() -> None:
    paths: set[Path] = {
        (("f", "b"),),
        (("f", "a"),),
        (("f", "a"), ("f", "z")),
        (("f", "list"), ("k", '{"name":"b"}')),
        (("f", "list"), ("k", '{"name":"a"}')),
    }

    tree: dict[str, Any] = encode_fields(paths)

    assert list(tree) == ["f:a", "f:b", "f:list"]
    assert list(tree["f:a"]) == [".", "f:z"]
    assert list(tree["f:list"]) == ['k:{"name":"a"}', 'k:{"name":"b"}']


def test_keys_are_read_in_canonical_form() -> None:
    tree: dict[str, Any] = {"f:ports": {'k:{ "protocol": "TCP", "containerPort": 80 }': {}}}

    assert decode_fields(tree) == {(("f", "ports"), ("k", '{"containerPort":80,"protocol":"TCP"}'))}


@pytest.mark.parametrize(
    ("path", "text"),
    [
        pytest.param((("f", "spec"), ("f", "replicas")), ".spec.replicas", id="fields"),
        pytest.param(
            (("f", "spec"), ("f", "containers"), ("k", '{"name":"a"}'), ("f", "image")),
            '.spec.containers[name="a"].image',
            id="list key",
        ),
        pytest.param(
            (("f", "ports"), ("k", '{"containerPort":80,"protocol":"TCP"}')),
            '.ports[containerPort=80,protocol="TCP"]',
            id="compound key",
        ),
        pytest.param(
            (("f", "metadata"), ("f", "finalizers"), ("v", '"x"')),
            '.metadata.finalizers[="x"]',
            id="set value",
        ),
        pytest.param((("f", "args"), ("i", "2")), ".args[2]", id="index"),
    ],
)
def test_describe(path: Path, text: str) -> None:
    assert describe(path) == text


@pytest.mark.parametrize(
    "tree",
    [
        pytest.param([], id="not an object"),
        pytest.param({"f:spec": "x"}, id="a value that is not an object"),
        pytest.param({"x:spec": {}}, id="unknown prefix"),
        pytest.param({"k:not-json": {}}, id="key that is not JSON"),
        pytest.param({"k:[1]": {}}, id="key that is not an object"),
        pytest.param({"i:one": {}}, id="index that is not a number"),
    ],
)
def test_malformed_fieldsv1_is_refused(tree: Any) -> None:
    with pytest.raises(FieldsError):
        decode_fields(tree)
