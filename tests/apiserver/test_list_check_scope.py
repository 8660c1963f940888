"""kube's list-type uniqueness check walks only the model kinds that have a ``map`` or ``set``
list: a kind whose only markers are atomic (a ResourceBinding's or a policy's embedded
LabelSelector) is written on the scheduler's path and has nothing the check could find."""

from __future__ import annotations

from typing import Any

import pytest

from controlplane.apis.apiextensions.schema import list_type_errors
from controlplane.apiserver.openapi import structural
from controlplane.hubregistry import hub_registry


def _model_kind(group: str, kind: str) -> Any:
    return next(rt for rt in hub_registry() if rt.group == group and rt.kind == kind and rt.model is not None)


@pytest.mark.parametrize(("group", "kind", "walked"), [
    ("work.gpufed.io", "ResourceBinding", False),
    ("policy.karmada.io", "PropagationPolicy", False),
    ("kueue.x-k8s.io", "Workload", True),
    ("kueue.x-k8s.io", "ClusterQueue", True),
])
def test_only_kinds_with_unique_items_are_walked(
    monkeypatch: pytest.MonkeyPatch, group: str, kind: str, walked: bool
) -> None:
    rt = _model_kind(group, kind)
    calls: list[Any] = []

    def counted(*args: Any, **kwargs: Any) -> Any:
        calls.append(args)
        return list_type_errors(*args, **kwargs)

    monkeypatch.setattr("controlplane.apiserver.openapi.structural.list_type_errors", counted)
    obj = {"apiVersion": rt.api_version, "kind": kind, "metadata": {"name": "x"}, "spec": {}, "status": {}}
    assert structural.served_list_errors(rt.group, rt.version, rt.kind, rt.model, obj) == []
    assert bool(calls) is walked
