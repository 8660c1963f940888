"""kube's CEL semver library (from 1.33), with kube's own test cases (``tests/data/cel_semver_cases.yaml``)
and semver.org's precedence of pre-releases."""

from __future__ import annotations

import itertools
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from controlplane.apis.apiextensions import cel

CASES: list[dict[str, Any]] = yaml.safe_load(
    (Path(__file__).parents[2] / "data" / "cel_semver_cases.yaml").read_text()
)


def _run(expression: str) -> object:
    assert cel.compile_error(expression) is None
    return cel.execute(cel.compiled(expression), cel.activation({}))


@pytest.mark.parametrize("case", CASES, ids=[c["expr"] for c in CASES])
def test_kubes_semver_cases(case: dict[str, Any]) -> None:
    if "error" in case:
        with pytest.raises(cel.EvaluationError, match=re.escape(case["error"])):
            _run(case["expr"])
    else:
        assert _run(case["expr"]) == case["value"]


def test_pre_releases_order_as_semver_org_orders_them() -> None:
    ordered = [
        "1.0.0-alpha",
        "1.0.0-alpha.1",
        "1.0.0-alpha.beta",
        "1.0.0-beta",
        "1.0.0-beta.2",
        "1.0.0-beta.11",
    ]
    ordered += ["1.0.0-rc.1", "1.0.0", "1.0.1", "1.1.0", "2.0.0"]
    for older, newer in itertools.pairwise(ordered):
        assert _run(f"semver('{older}').isLessThan(semver('{newer}'))") is True
        assert _run(f"semver('{newer}').compareTo(semver('{older}'))") == 1


def test_versions_equal_as_blangs_eq_ignoring_build_metadata() -> None:
    # kube's Semver.Equal is blang/semver's EQ, a comparison that ignores build metadata.
    assert _run("semver('1.0.0+a') == semver('1.0.0+b')") is True
    assert _run("semver('1.0.0-rc.1+a') == semver('1.0.0-rc.1')") is True
    assert _run("semver('1.0.0-rc.1+a') == semver('1.0.0+a')") is False
    assert _run("semver('1.0.0+a') != semver('1.0.0+b')") is False


def test_a_crd_rule_checks_a_version_on_write() -> None:
    rule = "isSemver(self) && semver(self).isGreaterThan(semver('1.0.0'))"
    rules = cel.compile_schema_rules(
        {
            "type": "object",
            "properties": {"v": {"type": "string", "x-kubernetes-validations": [{"rule": rule}]}},
        }
    )
    assert rules.evaluate({"v": "1.2.0"}, None) == []
    assert [e.message for e in rules.evaluate({"v": "0.9.0"}, None)] == [
        f'Invalid value: "string": failed rule: {rule}'
    ]
