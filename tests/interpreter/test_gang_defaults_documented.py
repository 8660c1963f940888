"""The kinds that are gangs by default, as the interpreters decide, are the ones README.md and
docs/policies.md name: the docs cannot drift from the code (they once disagreed on RayCluster)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from controlplane.interpreter import interpreter_for, registered_kinds

ROOT = Path(__file__).resolve().parents[2]

# Where each document lists the default gangs: the sentence, up to the word that ends the list.
SENTENCES = [
    ("README.md", r"\(([^()]*) are gangs by default\)"),
    ("docs/policies.md", r"\(the default for ([^()]*)\) the job lands"),
    ("docs/policies.md", r"Without the field: ([^;(]*) are gangs"),
]


def default_gangs() -> set[str]:
    """Kinds whose interpreter calls a plain object of the kind (no gang annotation) a gang."""
    gangs = set()
    for group, kind in registered_kinds():
        interpreter = interpreter_for(f"{group}/v1" if group else "v1", kind)
        assert interpreter is not None
        if interpreter.is_gang({"apiVersion": "x", "kind": kind, "metadata": {"name": "x"}, "spec": {}}):
            gangs.add(kind)
    return gangs


@pytest.mark.parametrize(("document", "pattern"), SENTENCES)
def test_documented_default_gangs_are_the_interpreters(document: str, pattern: str) -> None:
    text = " ".join((ROOT / document).read_text().split())
    found = re.search(pattern, text)
    assert found, f"{document} no longer lists the default gangs as {pattern!r}"
    named = set(re.findall(r"[A-Z][A-Za-z]+", found.group(1)))
    assert named == default_gangs(), f"{document}: {found.group(0)!r}"
