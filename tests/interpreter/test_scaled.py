"""A custom kind's interpreter made from its CRD's scale subresource: replicas at
specReplicasPath, a cluster's share written there, the status folded at statusReplicasPath, the
pod template's requests per replica; and the registry's precedence (customization, built-in,
scale subresource) as scale interpreters come and go."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from controlplane.apiserver.crd.types import custom_types
from controlplane.controllers.scaling import scale_interpreters
from controlplane.interpreter import Health
from controlplane.interpreter.customized import Customization, CustomizedInterpreter
from controlplane.interpreter.registry import (
    builtin_interpreter_for,
    interpreter_for,
    set_customized,
    set_scaled,
)
from controlplane.interpreter.scaled import ScaleInterpreter

NESTED = ScaleInterpreter(
    "ml.example.com", "Trainer",
    spec_replicas=("spec", "workers", "count"),
    status_replicas=("status", "workers", "running"),
    label_selector=("status", "selector"),
)


def trainer(**spec: Any) -> dict[str, Any]:
    return {"apiVersion": "ml.example.com/v1", "kind": "Trainer", "metadata": {"name": "t", "generation": 3}, "spec": spec}


@pytest.fixture(autouse=True)
def clean_registry() -> Iterator[None]:
    yield
    set_scaled(())
    set_customized("ml.example.com/v1", "Trainer", None)
    set_customized("apps/v1", "Deployment", None)


@pytest.mark.parametrize(
    ("spec", "replicas"),
    [({"workers": {"count": 6}}, 6), ({"workers": {}}, 0), ({}, 0), ({"workers": {"count": "x"}}, 0), ({"workers": {"count": -2}}, 0)],
)
def test_replicas_are_read_at_spec_replicas_path(spec: dict[str, Any], replicas: int) -> None:
    assert NESTED.replicas(trainer(**spec)) == replicas


def test_a_share_is_written_at_spec_replicas_path_and_the_input_is_untouched() -> None:
    obj = trainer(model="llama", workers={"count": 6})
    share = NESTED.with_replicas(obj, 2)
    assert share["spec"] == {"model": "llama", "workers": {"count": 2}}
    assert obj["spec"]["workers"]["count"] == 6
    assert NESTED.with_replicas(trainer(), 3)["spec"] == {"workers": {"count": 3}}


def test_requirements_come_from_a_pod_template_at_spec_template_else_none() -> None:
    template = {"spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "2", "nvidia.com/gpu": "1"}}}]}}
    with_template = NESTED.replica_requirements(trainer(template=template))
    assert dict(with_template.resources) == {"cpu": 2000, "nvidia.com/gpu": 1}
    assert NESTED.replica_requirements(trainer(template={"image": "x"})).resources == ()
    assert NESTED.replica_requirements(trainer()).resources == ()
    assert not NESTED.is_gang(trainer()) and NESTED.components(trainer()) == []


def test_the_hub_status_sums_status_replicas_and_keeps_its_own_fields() -> None:
    hub = {**trainer(), "status": {"phase": "Training", "workers": {"running": 99}}}
    members = [
        ("east", {"workers": {"running": 2}, "selector": "app=t"}),
        ("west", {"workers": {"running": 3}, "selector": "app=t"}),
        ("north", None),  # applied, no status yet
    ]
    assert NESTED.aggregate_status(hub, members) == {"phase": "Training", "workers": {"running": 5}, "selector": "app=t"}
    assert hub["status"]["workers"]["running"] == 99
    disagreeing = [("east", {"selector": "app=a"}), ("west", {"selector": "app=b"})]
    assert NESTED.aggregate_status(trainer(), disagreeing) == {"workers": {"running": 0}}
    assert NESTED.health(None) is Health.UNKNOWN and NESTED.health({}) is Health.HEALTHY


def test_a_status_replicas_path_outside_status_is_refused() -> None:
    with pytest.raises(ValueError, match="statusReplicasPath"):
        ScaleInterpreter("g", "K", spec_replicas=("spec", "replicas"), status_replicas=("spec", "running"))


def _crd(name: str, kind: str, scale: dict[str, Any] | None, *, versions: tuple[str, ...] = ("v1",)) -> dict[str, Any]:
    schema = {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}}
    subresources: dict[str, Any] = {"status": {}}
    if scale is not None:
        subresources["scale"] = scale
    return {
        "metadata": {"name": f"{name}.ml.example.com"},
        "spec": {
            "group": "ml.example.com", "scope": "Namespaced", "names": {"plural": name, "kind": kind},
            "versions": [
                {"name": v, "served": True, "storage": v == versions[0], "schema": schema, "subresources": subresources}
                for v in versions
            ],
        },
    }


def test_served_crds_with_a_scale_subresource_get_an_interpreter_by_their_storage_version() -> None:
    scale = {"specReplicasPath": ".spec.workers.count", "statusReplicasPath": ".status.workers.running"}
    types = [
        *custom_types(_crd("trainers", "Trainer", scale, versions=("v1beta1", "v1"))),  # served v1 first
        *custom_types(_crd("evaluators", "Evaluator", {**scale, "specReplicasPath": ".spec.replicas"}, versions=("v2",))),
        *custom_types(_crd("datasets", "Dataset", None)),
    ]
    found = {interpreter.kind: (api_version, interpreter) for api_version, interpreter in scale_interpreters(types)}
    assert sorted(found) == ["Evaluator", "Trainer"]  # two kinds of one group and version; no scale, no interpreter
    api_version, trainer_interpreter = found["Trainer"]
    assert api_version == "ml.example.com/v1beta1"  # the storage version
    assert trainer_interpreter.spec_replicas == ("spec", "workers", "count")
    assert trainer_interpreter.status_replicas == ("status", "workers", "running")
    assert found["Evaluator"][1].spec_replicas == ("spec", "replicas")


def test_install_and_remove_with_precedence_customization_builtin_scale() -> None:
    plain = ScaleInterpreter("ml.example.com", "Trainer", spec_replicas=("spec", "replicas"), status_replicas=("status", "replicas"))
    assert interpreter_for("ml.example.com/v1", "Trainer") is None
    assert set_scaled([plain]) == [("ml.example.com", "Trainer")]
    assert interpreter_for("ml.example.com/v1", "Trainer") is plain
    assert interpreter_for("ml.example.com/v1beta1", "Trainer") is plain  # the version does not matter
    assert set_scaled([plain]) == []  # unchanged: nothing to requeue

    # A built-in interpreter wins over a CRD's scale subresource for the same kind.
    shadow = ScaleInterpreter("apps", "Deployment", spec_replicas=("spec", "size"), status_replicas=("status", "size"))
    set_scaled([plain, shadow])
    deployment = interpreter_for("apps/v1", "Deployment")
    assert deployment is not None and not isinstance(deployment, ScaleInterpreter)

    # A customization that only folds status keeps the scale subresource's replicas to fall back to,
    # whichever came first; and loses them with the CRD.
    status_only = Customization("fold", "ml.example.com/v1", "Trainer", {"statusAggregation": "function AggregateStatus(d, s) return d end"})
    # (installed as the customizations controller does: on the kind's uncustomized interpreter)
    base = builtin_interpreter_for("ml.example.com/v1", "Trainer")
    set_customized("ml.example.com/v1", "Trainer", CustomizedInterpreter(status_only, base))
    custom = interpreter_for("ml.example.com/v1", "Trainer")
    assert isinstance(custom, CustomizedInterpreter) and custom.base is plain
    assert custom.replicas(trainer(replicas=5)) == 5

    assert set_scaled([]) == [("apps", "Deployment"), ("ml.example.com", "Trainer")]
    assert interpreter_for("ml.example.com/v1", "Trainer") is None  # status only again: not replicated
    set_customized("ml.example.com/v1", "Trainer", None)
    set_customized("ml.example.com/v1", "Trainer", CustomizedInterpreter(status_only, None))  # before the CRD
    set_scaled([plain])
    custom = interpreter_for("ml.example.com/v1", "Trainer")
    assert isinstance(custom, CustomizedInterpreter) and custom.base is plain
