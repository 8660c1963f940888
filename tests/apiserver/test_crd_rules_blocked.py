"""A CRD's ``x-kubernetes-validations`` rules after its schema's own checks, as kube's CRD strategy
runs them (``hasBlockingErr``): an error that blocks them (a value of the wrong type, a missing,
unsupported, too long or too many one) keeps every rule from running and adds a cause without a
field (``<nil>``) saying so; any other schema error (a maximum, a pattern) lets the rules run and
their errors follow it; a CRD without rules gets no such cause."""

from __future__ import annotations

from typing import Any

import pytest

from tests.apiserver.test_crd_status_writes import STATUS, TRAINERS, Client, _crd, _serve, _trainer, api

__all__ = ["api"]

NOT_CHECKED = ("some validation rules were not checked because the object was invalid; correct the existing "
               "errors to complete validation")
RULE = {"rule": "!has(self.replicas) || self.replicas % 2 == 0", "message": "replicas must be even"}
SPEC = {
    "type": "object",
    "required": ["model"],
    "properties": {
        "model": {"type": "string", "maxLength": 8},
        "replicas": {"type": "integer", "maximum": 6},
        "mode": {"type": "string", "enum": ["Train", "Serve"]},
        "tags": {"type": "array", "maxItems": 1, "items": {"type": "string"}},
    },
    "x-kubernetes-validations": [RULE],
}


async def _causes(api: Client, spec: dict[str, Any]) -> list[tuple[str, str, str]]:
    refused = await api.post(TRAINERS, json=_trainer("bad", spec))
    assert refused.status == 422, await refused.text()
    body = await refused.json()
    assert body["reason"] == "Invalid"
    causes = [(c["reason"], c["field"], c["message"]) for c in body["details"]["causes"]]
    # The Status message lists the same causes, each after its field (kubectl prints them so).
    assert body["message"].endswith("[" + ", ".join(f"{f}: {m}" for _, f, m in causes) + "]") or len(causes) == 1
    return causes


BLOCKED = ("FieldValueInvalid", "<nil>", f"Invalid value: null: {NOT_CHECKED}")


@pytest.mark.parametrize(("spec", "first"), [
    ({"model": "m", "replicas": "three"}, ("FieldValueTypeInvalid", "spec.replicas",
                                           'Invalid value: "string": spec.replicas in body must be of type integer: "string"')),
    ({"model": "m", "replicas": 3, "mode": "Play"}, ("FieldValueNotSupported", "spec.mode",
                                                     'Unsupported value: "Play": supported values: "Train", "Serve"')),
    ({"model": "m", "replicas": 3, "tags": ["a", "b"]}, ("FieldValueTooMany", "spec.tags",
                                                         "Too many: 2: must have at most 1 items")),
    ({"model": "a-long-model", "replicas": 3}, ("FieldValueTooLong", "spec.model",
                                                "Too long: may not be more than 8 bytes")),
    ({"replicas": 3}, ("FieldValueRequired", "spec.model", "Required value")),
])
async def test_a_blocking_error_keeps_the_rules_from_running_and_says_so(
    api: Client, spec: dict[str, Any], first: tuple[str, str, str]
) -> None:
    await _serve(api, _crd(SPEC, STATUS), refused=_trainer("probe", {"model": "m", "replicas": 1}))
    # replicas 3 breaks the rule too: it is not run, so its error is not among the causes.
    assert await _causes(api, spec) == [first, BLOCKED]


async def test_other_schema_errors_let_the_rules_run(api: Client) -> None:
    await _serve(api, _crd(SPEC, STATUS), refused=_trainer("probe", {"model": "m", "replicas": 1}))
    assert await _causes(api, {"model": "m", "replicas": 7}) == [
        ("FieldValueInvalid", "spec.replicas", "Invalid value: 7: spec.replicas in body should be less than or equal to 6"),
        ("FieldValueInvalid", "spec", 'Invalid value: "object": replicas must be even'),
    ]
    assert await _causes(api, {"model": "m", "replicas": 3}) == [
        ("FieldValueInvalid", "spec", 'Invalid value: "object": replicas must be even'),
    ]


async def test_a_crd_without_rules_says_nothing_of_them(api: Client) -> None:
    plain = {key: value for key, value in SPEC.items() if key != "x-kubernetes-validations"}
    await _serve(api, _crd(plain, STATUS), refused=_trainer("probe", {"model": "m", "replicas": 7}))
    assert await _causes(api, {"model": "m", "mode": "Play"}) == [
        ("FieldValueNotSupported", "spec.mode", 'Unsupported value: "Play": supported values: "Train", "Serve"'),
    ]


async def test_a_status_write_with_a_blocking_error_says_the_rules_were_not_checked(api: Client) -> None:
    await _serve(api, _crd(SPEC, STATUS), refused=_trainer("probe", {"model": "m", "replicas": 1}))
    created = await api.post(TRAINERS, json=_trainer("t", {"model": "m", "replicas": 2}))
    assert created.status == 201, await created.text()
    answer = await api.put(f"{TRAINERS}/t/status", json={**await created.json(), "status": {"phase": "Done"}})
    assert answer.status == 422, await answer.text()
    causes = [(c["reason"], c["field"], c["message"]) for c in (await answer.json())["details"]["causes"]]
    assert causes == [
        ("FieldValueNotSupported", "status.phase", 'Unsupported value: "Done": supported values: "Pending", "Running"'),
        BLOCKED,
    ]


async def test_a_blocking_metadata_error_still_has_the_schema_checked_but_no_rule_run(api: Client) -> None:
    """kube's CRD strategy validates the metadata and the schema together, then the rules unless
    one of those errors blocks them: a missing name does (``Required``)."""
    await _serve(api, _crd(SPEC, STATUS), refused=_trainer("probe", {"model": "m", "replicas": 1}))
    nameless = {**_trainer("x", {"model": "m", "replicas": 7}), "metadata": {}}
    refused = await api.post(TRAINERS, json=nameless)
    assert refused.status == 422, await refused.text()
    causes = [(c["reason"], c["field"], c["message"]) for c in (await refused.json())["details"]["causes"]]
    assert causes == [
        ("FieldValueRequired", "metadata.name", "Required value: name or generateName is required"),
        ("FieldValueInvalid", "spec.replicas", "Invalid value: 7: spec.replicas in body should be less than or equal to 6"),
        BLOCKED,
    ]
