"""JSON patches applied as kube-apiserver's JSON patch library, evanphx/json-patch v4
(kubernetes/kubernetes ``vendor/gopkg.in/evanphx/json-patch.v4/patch.go``), applies them: its
leniencies beyond RFC 6902 and its words for an operation that does not apply."""

from __future__ import annotations

from typing import Any

import pytest

from controlplane.apis.kube.jsonpatches import JsonPatchFailed, json_patched

DOC: dict[str, Any] = {"spec": {"replicas": 1, "items": [{"n": "a"}, {"n": "b"}], "empty": None}}


@pytest.mark.parametrize(
    ("patch", "spec"),
    [
        # partialDoc.get never fails: a replace of a key the object lacks adds it.
        ([{"op": "replace", "path": "/spec/paused", "value": True}], {**DOC["spec"], "paused": True}),
        # Negative indices count from the end (SupportNegativeIndices); add at -1 goes after the last.
        (
            [{"op": "add", "path": "/spec/items/-1", "value": "z"}],
            {**DOC["spec"], "items": [{"n": "a"}, {"n": "b"}, "z"]},
        ),
        ([{"op": "remove", "path": "/spec/items/-2"}], {**DOC["spec"], "items": [{"n": "b"}]}),
        (
            [{"op": "replace", "path": "/spec/items/-1", "value": 0}],
            {**DOC["spec"], "items": [{"n": "a"}, 0]},
        ),
        (
            [{"op": "add", "path": "/spec/items/+0", "value": 0}],
            {**DOC["spec"], "items": [0, {"n": "a"}, {"n": "b"}]},
        ),
        # A missing key tests as null, and copies as null.
        ([{"op": "test", "path": "/spec/gone", "value": None}], DOC["spec"]),
        ([{"op": "test", "path": "/spec/empty", "value": None}], DOC["spec"]),
        ([{"op": "copy", "from": "/spec/gone", "path": "/spec/copied"}], {**DOC["spec"], "copied": None}),
        ([{"op": "test", "path": "/spec/items", "value": [{"n": "a"}, {"n": "b"}]}], DOC["spec"]),
        ([{"op": "add", "path": "/spec/x~1y", "value": 1}], {**DOC["spec"], "x/y": 1}),
        ([{"op": "replace", "path": "", "value": {"spec": {"a": 1}}}], {"a": 1}),
    ],
)
def test_what_kubes_library_applies(patch: list[Any], spec: dict[str, Any]) -> None:
    assert json_patched(DOC, patch) == {"spec": spec}


@pytest.mark.parametrize(
    ("patch", "message"),
    [
        (
            [{"op": "add", "path": "/spec/items/5", "value": 1}],
            "error in add for path: '/spec/items/5': Unable to access invalid index: 5: invalid index referenced",
        ),
        (
            [{"op": "add", "path": "/spec/items/x", "value": 1}],
            "error in add for path: '/spec/items/x': value was not a proper array index: 'x': "
            'strconv.Atoi: parsing "x": invalid syntax',
        ),
        (
            [{"op": "add", "path": "/spec/empty/x", "value": 1}],
            'add operation does not apply: doc is missing path: "/spec/empty/x": missing value',
        ),
        (
            [{"op": "remove", "path": "/spec/items/2"}],
            "error in remove for path: '/spec/items/2': Unable to access invalid index: 2: invalid index referenced",
        ),
        (
            [{"op": "remove", "path": "/spec/items/-3"}],
            "error in remove for path: '/spec/items/-3': Unable to access invalid index: -3: invalid index referenced",
        ),
        (
            [{"op": "remove", "path": "/spec/gone"}],
            "error in remove for path: '/spec/gone': Unable to remove nonexistent key: gone: missing value",
        ),
        (
            [{"op": "remove", "path": "/spec/gone/x"}],
            'remove operation does not apply: doc is missing path: "/spec/gone/x": missing value',
        ),
        (
            [{"op": "replace", "path": "/spec/items/2", "value": 1}],
            "replace operation does not apply: doc is missing key: /spec/items/2: missing value",
        ),
        (
            [{"op": "replace", "path": "/spec/gone/x", "value": 1}],
            "replace operation does not apply: doc is missing path: /spec/gone/x: missing value",
        ),
        (
            [{"op": "move", "from": "/spec/gone", "path": "/spec/x"}],
            "error in move for path: 'gone': Unable to remove nonexistent key: gone: missing value",
        ),
        (
            [{"op": "move", "from": "/spec/replicas", "path": "/spec/gone/x"}],
            "move operation does not apply: doc is missing destination path: /spec/gone/x: missing value",
        ),
        (
            [{"op": "test", "path": "/spec/replicas", "value": 1.0}],
            "testing value /spec/replicas failed: test failed",
        ),
        (
            [{"op": "test", "path": "/spec/gone/x", "value": 1}],
            "test operation does not apply: is missing path: /spec/gone/x: missing value",
        ),
        (
            [{"op": "test", "path": "/spec/items/7", "value": 1}],
            "error in test for path: '/spec/items/7': Unable to access invalid index: 7: invalid index referenced",
        ),
        (
            [{"op": "copy", "from": "/spec/replicas", "path": "/spec/gone/x"}],
            "copy operation does not apply: doc is missing destination path: /spec/gone/x: missing value",
        ),
        (
            [{"op": "copy", "from": "/spec/items/9", "path": "/spec/x"}],
            "error in copy for from: '/spec/items/9': Unable to access invalid index: 9: invalid index referenced",
        ),
        (
            [{"op": "copy", "from": "/spec/replicas", "path": "/spec/items/9"}],
            "error while adding value during copy: Unable to access invalid index: 9: invalid index referenced",
        ),
        ([{"op": "remove"}], "remove operation failed to decode path: missing value"),
        (
            [{"op": "test", "value": 1}],
            "test operation failed to decode path: operation missing path field: missing value",
        ),
        (
            [{"op": "move", "path": "/spec/x"}],
            "move operation failed to decode from: operation, missing from field: missing value",
        ),
        (
            [{"op": "copy", "path": "/spec/x"}],
            "copy operation failed to decode from: operation, missing from field: missing value",
        ),
        (
            [{"op": "replace", "path": 5}],
            "replace operation failed to decode path: json: cannot unmarshal number into Go value of type string",
        ),
        # The whole document is replaced only by an object or an array; the library wraps a nil error.
        (
            [{"op": "replace", "path": "", "value": 5}],
            "replace operation value must be object or array: %!w(<nil>)",
        ),
        (
            [{"op": "replace", "path": "", "value": None}],
            "replace operation value must be object or array: %!w(<nil>)",
        ),
        ([{"op": "replace", "path": ""}], "replace operation value must be object or array: %!w(<nil>)"),
        ([{"op": "frobnicate", "path": "/spec"}], "Unexpected kind: frobnicate"),
        ([{"path": "/spec"}], "Unexpected kind: unknown"),
    ],
)
def test_kubes_library_words_for_an_operation_that_does_not_apply(patch: list[Any], message: str) -> None:
    with pytest.raises(JsonPatchFailed) as failed:
        json_patched(DOC, patch)
    assert str(failed.value) == message


def test_the_document_given_is_left_as_it_was() -> None:
    before = repr(DOC)
    json_patched(
        DOC,
        [
            {"op": "add", "path": "/spec/items/0/n", "value": "changed"},
            {"op": "remove", "path": "/spec/empty"},
        ],
    )
    assert repr(DOC) == before


@pytest.mark.parametrize(
    ("index", "words"),
    [
        # Go's Atoi stops at the digit that overflows 64 bits: out of range, however long.
        ("1" * 5000, "value out of range"),
        ("1" * 5000 + "x", "value out of range"),
        ("-" + "9" * 30, "value out of range"),
        ("9223372036854775808", "value out of range"),
        # Leading zeros never overflow; a letter before the overflow is a syntax error.
        ("1x" + "1" * 5000, "invalid syntax"),
        ("+", "invalid syntax"),
    ],
)
def test_an_index_is_read_as_gos_atoi_reads_it(index: str, words: str) -> None:
    with pytest.raises(JsonPatchFailed) as failed:
        json_patched(DOC, [{"op": "remove", "path": f"/spec/items/{index}"}])
    assert (
        str(failed.value)
        == f"error in remove for path: '/spec/items/{index}': strconv.Atoi: parsing \"{index}\": {words}"
    )


def test_an_index_of_many_leading_zeros_is_its_value() -> None:
    patched = json_patched(DOC, [{"op": "remove", "path": "/spec/items/" + "0" * 5000 + "1"}])
    assert patched["spec"]["items"] == [{"n": "a"}]


@pytest.mark.parametrize(
    ("patch", "message"),
    [
        # v5's partialDoc.get fails for a missing key, where v4's answers nil.
        (
            [{"op": "replace", "path": "/spec/paused", "value": True}],
            "replace operation does not apply: doc is missing key: /spec/paused: missing value",
        ),
        (
            [{"op": "copy", "from": "/spec/gone", "path": "/spec/copied"}],
            "error in copy for from: '/spec/gone': unable to get nonexistent key: gone: missing value",
        ),
        (
            [{"op": "move", "from": "/spec/gone", "path": "/spec/moved"}],
            "error in move for path: 'gone': unable to get nonexistent key: gone: missing value",
        ),
        (
            [{"op": "remove", "path": "/spec/gone"}],
            "error in remove for path: '/spec/gone': unable to remove nonexistent key: gone: missing value",
        ),
        (
            [{"op": "copy", "from": "/spec/gone/x", "path": "/spec/copied"}],
            'copy operation does not apply: doc is missing from path: "/spec/gone/x": missing value',
        ),
        ([{"op": "test", "path": "/spec/gone", "value": 1}], "testing value /spec/gone failed: test failed"),
    ],
)
def test_v5_words_for_a_missing_key(patch: list[Any], message: str) -> None:
    """evanphx/json-patch v5 (github.com/evanphx/json-patch v5/patch.go), as Karmada applies an
    interpreter webhook's patch."""
    with pytest.raises(JsonPatchFailed) as failed:
        json_patched(DOC, patch, v5=True)
    assert str(failed.value) == message


def test_v5_tests_a_missing_key_as_null_and_replaces_a_present_one() -> None:
    patch = [
        {"op": "test", "path": "/spec/gone", "value": None},
        {"op": "test", "path": "/spec/gone"},
        {"op": "replace", "path": "/spec/replicas", "value": 3},
    ]
    assert json_patched(DOC, patch, v5=True) == {"spec": {**DOC["spec"], "replicas": 3}}
