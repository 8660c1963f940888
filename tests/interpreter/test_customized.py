"""Each hook of a ResourceInterpreterCustomization on a sample object, the fallbacks when a
script fails, the object's validation and the one-customization-per-target-and-hook rule."""

from __future__ import annotations

from typing import Any

from controlplane.apis.work_v1alpha1 import Health
from controlplane.interpreter.customization_validation import (
    customization_denial,
    merge,
    validate_customization,
)
from controlplane.interpreter.customized import Customization, CustomizedInterpreter, ScriptFailure
from controlplane.interpreter.dependencies import Dependency
from controlplane.interpreter.registry import builtin_interpreter_for
from tests.interpreter.trainingrun_scripts import AGGREGATE, API, GET_REPLICAS, REVISE, customization

HEALTH = """
function InterpretHealth(observedObj)
  return observedObj.status ~= nil and observedObj.status.phase ~= "Failed"
end
"""
REFLECT = """
function ReflectStatus(observedObj)
  if observedObj.status == nil then return nil end
  return {readyWorkers = observedObj.status.readyWorkers, phase = observedObj.status.phase}
end
"""
DEPS = """
function GetDependencies(desiredObj)
  local kube = require("kube")
  local deps = kube.getPodDependencies(desiredObj.spec.template, desiredObj.metadata.namespace)
  deps[#deps + 1] = {apiVersion = "v1", kind = "ConfigMap", name = "dataset", namespace = desiredObj.metadata.namespace}
  return deps
end
"""
RETAIN = """
function Retain(desiredObj, observedObj)
  desiredObj.spec.suspend = observedObj.spec.suspend
  return desiredObj
end
"""


def training(workers: int = 3, gpus: int = 2) -> dict[str, Any]:
    return {
        "apiVersion": API,
        "kind": "TrainingRun",
        "metadata": {"name": "llm", "namespace": "team"},
        "spec": {
            "workers": workers,
            "template": {
                "spec": {
                    "nodeSelector": {"gpu": "a100"},
                    "containers": [
                        {
                            "name": "trainer",
                            "image": "trainer:1",
                            "resources": {"requests": {"cpu": "4", "nvidia.com/gpu": str(gpus)}},
                            "envFrom": [{"secretRef": {"name": "hf-token"}}],
                        }
                    ],
                }
            },
        },
    }


def interpreter(failures: list[ScriptFailure] | None = None, **scripts: str) -> CustomizedInterpreter:
    custom = Customization(name="trainingrun", api_version=API, kind="TrainingRun", scripts=scripts)
    sink = failures if failures is not None else []
    return CustomizedInterpreter(custom, builtin_interpreter_for(API, "TrainingRun"), sink.append)


def test_replica_resource_gives_replicas_and_gpu_requirements() -> None:
    interp = interpreter(replicaResource=GET_REPLICAS)
    assert interp.replicated
    assert interp.replicas(training(workers=4)) == 4
    req = interp.replica_requirements(training(gpus=8))
    assert req.gpu_resources == {"nvidia.com/gpu": 8}
    assert req.node_selector_map == {"gpu": "a100"}


def test_replica_revision_renders_a_clusters_share() -> None:
    interp = interpreter(replicaResource=GET_REPLICAS, replicaRevision=REVISE)
    share = interp.with_replicas(training(workers=4), 1)
    assert share["spec"]["workers"] == 1
    assert share["spec"]["template"]["spec"]["containers"][0]["name"] == "trainer"


def test_status_aggregation_folds_member_statuses() -> None:
    interp = interpreter(statusAggregation=AGGREGATE)
    status = interp.aggregate_status(training(), [("east", {"readyWorkers": 2}), ("west", {"readyWorkers": 1}), ("north", None)])
    assert status == {"readyWorkers": 3, "clusters": ["east", "west", "north"]}


def test_status_reflection_decides_what_is_taken_from_members() -> None:
    interp = interpreter(statusReflection=REFLECT, statusAggregation=AGGREGATE)
    assert interp.reflect({"readyWorkers": 2, "phase": "Running", "noise": [1, 2]}) == {"readyWorkers": 2, "phase": "Running"}
    assert interp.aggregate_status(training(), [("east", {"readyWorkers": 2, "noise": 1})])["readyWorkers"] == 2


def test_health_interpretation() -> None:
    interp = interpreter(healthInterpretation=HEALTH)
    assert interp.health({"phase": "Running"}) is Health.HEALTHY
    assert interp.health({"phase": "Failed"}) is Health.UNHEALTHY


def test_dependency_interpretation() -> None:
    interp = interpreter(dependencyInterpretation=DEPS)
    assert interp.dependencies(training()) == [Dependency("ConfigMap", "dataset"), Dependency("Secret", "hf-token")]


def test_retention_keeps_member_fields() -> None:
    interp = interpreter(retention=RETAIN)
    observed = training()
    observed["spec"]["suspend"] = True
    assert interp.retain(training(), observed)["spec"]["suspend"] is True


def test_a_kind_without_replica_hooks_or_built_in_is_not_replicated() -> None:
    interp = interpreter(statusAggregation=AGGREGATE)
    assert not interp.replicated
    assert interp.replicas(training()) == 0
    assert interp.health({"x": 1}) is Health.UNKNOWN


def test_a_failing_script_falls_back_and_is_reported() -> None:
    failures: list[ScriptFailure] = []
    interp = interpreter(
        failures,
        replicaResource="function GetReplicas(obj) while true do end end",
        statusAggregation="function AggregateStatus(obj, items) return obj.spec.missing.field end",
        healthInterpretation="function InterpretHealth(obj) return 'yes' end",
    )
    assert interp.replicas(training()) == 0
    assert interp.aggregate_status(training(), [("east", {"a": 1})]) == {}
    assert interp.health({"phase": "Running"}) is Health.UNKNOWN
    by_hook = {f.hook: f for f in failures}
    assert set(by_hook) == {"replicaResource", "statusAggregation", "healthInterpretation"}
    assert "instruction limit exceeded" in by_hook["replicaResource"].message
    assert "attempt to index a nil value" in by_hook["statusAggregation"].message
    assert "must return a boolean" in by_hook["healthInterpretation"].message
    assert by_hook["replicaResource"].customization == "trainingrun"
    assert by_hook["replicaResource"].obj["metadata"]["name"] == "llm"


def test_a_script_list_answer_that_is_no_list_is_reported_and_nil_is_none() -> None:
    failures: list[ScriptFailure] = []
    interp = interpreter(
        failures,
        componentResource="function GetComponents(obj) return 3 end",
        dependencyInterpretation="function GetDependencies(obj) return 'cm' end",
    )
    assert interp.components(training()) == []
    assert interp.dependencies(training()) == []
    assert {f.hook: f.message for f in failures} == {
        "componentResource": "GetComponents must return a list of components, not 3",
        "dependencyInterpretation": "GetDependencies must return a list, not 'cm'",
    }
    failures.clear()
    nil = interpreter(
        failures,
        componentResource="function GetComponents(obj) return nil end",
        dependencyInterpretation="function GetDependencies(obj) return nil end",
    )
    assert (nil.components(training()), nil.dependencies(training()), failures) == ([], [], [])


def test_built_in_interpreter_is_the_fallback_for_a_native_kind() -> None:
    custom = Customization(
        name="deploy", api_version="apps/v1", kind="Deployment",
        scripts={"healthInterpretation": "function InterpretHealth(obj) return false end"},
    )
    interp = CustomizedInterpreter(custom, builtin_interpreter_for("apps/v1", "Deployment"))
    deployment = {"apiVersion": "apps/v1", "kind": "Deployment", "spec": {"replicas": 5, "template": {"spec": {"containers": []}}}}
    assert interp.replicas(deployment) == 5  # built-in
    assert interp.health({"readyReplicas": 5}) is Health.UNHEALTHY  # customized


def ric(name: str, created: str = "2026-01-01T00:00:00Z", **hooks: str) -> dict[str, Any]:
    return customization(name, created=created, **hooks)


def test_the_webhook_loads_every_script_in_karmadas_order() -> None:
    assert customization_denial(ric("ok", replicaResource=GET_REPLICAS, statusAggregation=AGGREGATE), []) is None
    # Field checks leave the scripts to the webhook; an unknown hook is the schema's.
    bad = ric("bad", healthInterpretation="function Other() end", replicaResource="function GetReplicas(", unknownHook="x")
    assert [(e.field, "Unsupported value" in e.message) for e in validate_customization(bad)] == [
        ("spec.customizations.unknownHook", True)
    ]
    # InterpretReplica comes before InterpretHealth in Karmada's rules, whatever the object's order.
    _, message = customization_denial(bad, []) or ("", "")
    assert message.startswith("InterpreterOperation(InterpretReplica) Lua script error: the script does not compile")
    del bad["spec"]["customizations"]["replicaResource"]
    _, message = customization_denial(bad, []) or ("", "")
    assert message == (
        "InterpreterOperation(InterpretHealth) Lua script error: the script does not define function InterpretHealth"
    )


def test_validation_requires_the_target() -> None:
    obj = ric("t", replicaResource=GET_REPLICAS)
    obj["spec"]["target"] = {"kind": "TrainingRun"}
    assert [e.field for e in validate_customization(obj)] == ["spec.target.apiVersion"]


def test_one_customization_per_target_and_hook() -> None:
    merged, refused = merge(
        [
            ric("newer", "2026-02-01T00:00:00Z", replicaResource=GET_REPLICAS, healthInterpretation=HEALTH),
            ric("older", "2026-01-01T00:00:00Z", replicaResource=GET_REPLICAS),
            ric("status", "2026-03-01T00:00:00Z", statusAggregation=AGGREGATE),
        ]
    )
    assert refused == {"newer": {"replicaResource": "older"}}
    [custom] = merged
    assert custom.owners == {"replicaResource": "older", "healthInterpretation": "newer", "statusAggregation": "status"}


def test_a_second_customization_of_a_target_and_hook_is_refused_as_karmadas_webhook_refuses_it() -> None:
    older = ric("older", replicaResource=GET_REPLICAS)
    newer = ric("newer", healthInterpretation=HEALTH, replicaResource=GET_REPLICAS)
    assert customization_denial(newer, [older]) == (
        "resourceinterpretercustomization.karmada.io",
        "conflicting with InterpreterOperation(InterpretReplica) of existing ResourceInterpreterCustomization(older)",
    )
    assert customization_denial(ric("status", statusAggregation=AGGREGATE), [older]) is None
    other_target = ric("other", replicaResource=GET_REPLICAS)
    other_target["spec"]["target"]["kind"] = "Other"
    assert customization_denial(other_target, [older]) is None


def test_a_script_that_does_not_load_is_refused_in_karmadas_words() -> None:
    broken = ric("broken", statusAggregation=AGGREGATE, replicaResource="function GetReplicas(obj")
    webhook, message = customization_denial(broken, []) or ("", "")
    assert webhook == "resourceinterpretercustomization.karmada.io"
    assert message.startswith("InterpreterOperation(InterpretReplica) Lua script error: the script does not compile: ")
