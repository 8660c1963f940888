"""Go's ``strconv.ParseBool``, in one place for kube's boolean flags, query parameters and
annotations: the texts of Go's own table (``atob_test.go``) and the readers that use it."""

from __future__ import annotations

import pytest

from controlplane.apiserver.negotiation import pretty
from controlplane.gojson import parse_bool


@pytest.mark.parametrize(("text", "value"), [
    ("1", True), ("t", True), ("T", True), ("TRUE", True), ("true", True), ("True", True),
    ("0", False), ("f", False), ("F", False), ("FALSE", False), ("false", False), ("False", False),
])
def test_go_reads_these_texts_as_booleans(text: str, value: bool) -> None:
    assert parse_bool(text) is value


@pytest.mark.parametrize("text", ["", "asdf", "tRUE", "fAlSe", "yes", "no", " true", "2", None, True, 1])
def test_go_refuses_anything_else(text: object) -> None:
    assert parse_bool(text) is None


@pytest.mark.parametrize(("asked", "expected"), [("T", True), ("TRUE", True), ("0", False), ("tRUE", False), ("yes", False)])
def test_pretty_printing_asked_by_the_query_reads_it_as_go_does(asked: str, expected: bool) -> None:
    assert pretty(asked, "kubectl/v1.34") is expected
