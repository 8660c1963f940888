"""When a Work that found a kind unserved is applied again: a doubling, bounded back-off that
starts over once every kind is served."""

from __future__ import annotations

from typing import Any

from member_agent.unserved import UnservedRetries, carries_crd, waits_for_a_kind

UNSERVED: dict[str, Any] = {"conditions": [{"type": "Applied", "status": "False", "reason": "KindNotServed"}]}
APPLIED: dict[str, Any] = {"conditions": [{"type": "Applied", "status": "True", "reason": "AppliedSuccessful"}]}


def test_back_off_doubles_up_to_the_bound_and_starts_over() -> None:
    retries = UnservedRetries(first=1.0, maximum=5.0)
    assert [retries.after("w", UNSERVED) for _ in range(5)] == [1.0, 2.0, 4.0, 5.0, 5.0]
    assert retries.waiting() == ["w"]
    assert retries.after("w", APPLIED) is None
    assert retries.waiting() == []
    assert retries.after("w", UNSERVED) == 1.0
    retries.forget("w")
    assert retries.waiting() == []


def test_what_the_statuses_and_works_say() -> None:
    assert waits_for_a_kind(UNSERVED) and not waits_for_a_kind(APPLIED) and not waits_for_a_kind({})
    crd = {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition", "metadata": {"name": "a.b"}}
    assert carries_crd({"spec": {"workload": {"manifests": [crd]}}})
    assert not carries_crd({"spec": {"workload": {"manifests": [{**crd, "apiVersion": "example.com/v1"}]}}})
    assert not carries_crd({"spec": {}})
