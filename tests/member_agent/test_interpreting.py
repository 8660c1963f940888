"""The member-side hooks of ResourceInterpreterCustomizations at the agent: retention before an
update, statusReflection and healthInterpretation on the whole member object in the Work's
manifest status, and a failing script as the manifest's ``Interpreted=False`` condition."""

from __future__ import annotations

from typing import Any

import pytest

from controlplane.apis.work_v1alpha1 import Health, WorkStatus
from member_agent.applying import Identifier, ManifestResult, work_status
from member_agent.interpreting import MemberInterpreters
from tests.interpreter.test_customized import API, ric

RETAIN = """
function Retain(desiredObj, observedObj)
  if observedObj.spec.suspend ~= nil then desiredObj.spec.suspend = observedObj.spec.suspend end
  desiredObj.metadata.resourceVersion = observedObj.metadata.resourceVersion
  desiredObj.metadata.labels = {}
  return desiredObj
end
"""
REFLECT = """
function ReflectStatus(observedObj)
  if observedObj.status == nil then return nil end
  return {ready = observedObj.status.readyWorkers, wanted = observedObj.spec.workers, phase = observedObj.status.phase}
end
"""
HEALTH = """
function InterpretHealth(observedObj)
  return observedObj.status ~= nil and observedObj.status.readyWorkers == observedObj.spec.workers
end
"""
LOOP = "function ReflectStatus(observedObj)\n  while true do end\nend\n"
BROKEN = "function InterpretHealth(observedObj)\n  return observedObj.status.missing.field\nend\n"


def member_object(*, workers: int = 2, ready: int = 2, suspend: bool | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"workers": workers}
    if suspend is not None:
        spec["suspend"] = suspend
    return {
        "apiVersion": API,
        "kind": "TrainingRun",
        "metadata": {
            "name": "llm", "namespace": "ml", "uid": "u1", "resourceVersion": "42", "generation": 3,
            "labels": {"work.gpufed.io/name": "w", "work.gpufed.io/namespace": "gpufed-es-east"},
        },
        "spec": spec,
        "status": {"readyWorkers": ready, "phase": "Running", "noise": [1, 2, 3]},
    }


def desired(workers: int = 3) -> dict[str, Any]:
    return {
        "apiVersion": API,
        "kind": "TrainingRun",
        "metadata": {
            "name": "llm", "namespace": "ml",
            "labels": {
                "app.kubernetes.io/managed-by": "gpufed",
                "work.gpufed.io/name": "w", "work.gpufed.io/namespace": "gpufed-es-east",
            },
        },
        "spec": {"workers": workers},
    }


def interpreters(*objects: dict[str, Any]) -> MemberInterpreters:
    found = MemberInterpreters()
    found.update([{**obj, "metadata": {**obj["metadata"], "generation": 1}} for obj in objects])
    return found


def test_retention_keeps_the_members_fields_and_gpufeds_identity() -> None:
    body, failure = interpreters(ric("keep", retention=RETAIN)).retain(desired(), member_object(suspend=True))
    assert failure is None
    assert body["spec"] == {"workers": 3, "suspend": True}
    # What the member sets never goes into an apply; the ownership labels stay whatever the script did.
    assert "resourceVersion" not in body["metadata"]
    assert body["metadata"]["labels"]["work.gpufed.io/name"] == "w"
    assert body["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "gpufed"


def test_without_a_retention_script_the_desired_object_is_applied_as_it_is() -> None:
    want = desired()
    body, failure = interpreters(ric("reflect", statusReflection=REFLECT)).retain(want, member_object(suspend=True))
    assert (body, failure) == (want, None)


def test_update_names_the_kinds_whose_retention_came_changed_or_went() -> None:
    found = MemberInterpreters()
    target = ("ml.example.com", "TrainingRun")
    assert found.update([ric("keep", retention=RETAIN)]) == {target}
    assert found.update([ric("keep", retention=RETAIN)]) == set()  # the same script: nothing to re-apply
    # Another hook of the kind changed, not its retention.
    assert found.update([ric("keep", retention=RETAIN), ric("reflect", statusReflection=REFLECT)]) == set()
    edited = RETAIN.replace("desiredObj.metadata.labels = {}", "")
    assert found.update([ric("keep", retention=edited), ric("reflect", statusReflection=REFLECT)]) == {target}
    assert found.update([ric("reflect", statusReflection=REFLECT)]) == {target}


def test_status_reflection_and_health_see_the_whole_member_object() -> None:
    found = interpreters(ric("status", statusReflection=REFLECT, healthInterpretation=HEALTH))
    assert found.interprets_status(API, "TrainingRun")
    assert not found.interprets_status(API, "Other")
    got = found.interpret(member_object(workers=2, ready=2))
    assert got is not None
    # spec.workers is not in the status: the scripts ran on the whole object.
    assert got.status == {"ready": 2, "wanted": 2, "phase": "Running"}
    assert got.health is Health.HEALTHY
    assert got.interpreted_by == {"statusReflection": "status", "healthInterpretation": "status"}
    assert got.failures == []
    unhealthy = found.interpret(member_object(workers=4, ready=2))
    assert unhealthy is not None and unhealthy.health is Health.UNHEALTHY


def test_hooks_of_two_customizations_of_one_kind_are_merged() -> None:
    found = interpreters(ric("a-reflect", statusReflection=REFLECT), ric("b-health", healthInterpretation=HEALTH))
    got = found.interpret(member_object())
    assert got is not None
    assert got.interpreted_by == {"statusReflection": "a-reflect", "healthInterpretation": "b-health"}


def result_for(live: dict[str, Any], *, error: str | None = None) -> ManifestResult:
    ident = Identifier("ml.example.com", "v1", "TrainingRun", "ml", "llm", 0)
    return ManifestResult(identifier=ident, applied=error is None, error=error, live=live)


def manifest_entry(found: MemberInterpreters, live: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
    work = {"metadata": {"name": "w", "namespace": "gpufed-es-east", "generation": 1}}
    status = work_status(work, [result_for(live, **kwargs)], [], now="2026-01-01T00:00:00Z", interpreters=found)
    WorkStatus.model_validate(status)  # the hub's Work model holds what the agent writes
    [entry] = status["manifestStatuses"]
    return dict(entry)


def test_the_manifest_status_carries_the_interpretation() -> None:
    found = interpreters(ric("status", statusReflection=REFLECT, healthInterpretation=HEALTH))
    entry = manifest_entry(found, member_object(workers=4, ready=1))
    assert entry["status"] == {"ready": 1, "wanted": 4, "phase": "Running"}
    assert entry["health"] == "Unhealthy"
    assert entry["interpretedBy"] == {"statusReflection": "status", "healthInterpretation": "status"}
    assert "conditions" not in entry
    # Without a customization: the whole status and the agent's own rules, as before.
    plain = manifest_entry(MemberInterpreters(), member_object())
    assert plain["status"]["noise"] == [1, 2, 3] and "interpretedBy" not in plain


@pytest.mark.parametrize(
    ("scripts", "reason", "words"),
    [
        ({"statusReflection": LOOP}, "StatusReflectionFailed", "instruction limit exceeded"),
        ({"healthInterpretation": BROKEN}, "HealthInterpretationFailed", "attempt to index"),
    ],
)
def test_a_failing_script_is_a_condition_and_falls_back(scripts: dict[str, str], reason: str, words: str) -> None:
    found = interpreters(ric("bad", **scripts))
    entry = manifest_entry(found, member_object())
    [condition] = entry["conditions"]
    assert (condition["type"], condition["status"], condition["reason"]) == ("Interpreted", "False", reason)
    assert "ResourceInterpreterCustomization bad failed" in condition["message"] and words in condition["message"]
    assert condition["observedGeneration"] == 1  # the customization's generation the script came from
    # The hook ran here (and fell back): the hub does not run the failing script again.
    assert set(entry["interpretedBy"]) == set(scripts)
    assert entry["status"]["noise"] == [1, 2, 3]  # the whole status
    # The same failure on the next pass is the same entry: nothing new to write.
    assert manifest_entry(found, member_object()) == entry


def test_a_failed_retention_leaves_the_object_and_is_reported_until_the_next_apply() -> None:
    found = interpreters(ric("keep", retention="function Retain(d, o)\n  error('no way')\nend\n"))
    body, failure = found.retain(desired(), member_object())
    assert failure is not None and "no way" in failure.message and body == desired()
    entry = manifest_entry(found, member_object(), error=f"not updated: {failure.describe()}")
    assert entry["conditions"][0]["reason"] == "RetentionFailed"
    # Fixed: the next apply retains, and the condition is gone.
    found.update([ric("keep", retention=RETAIN)])
    assert found.retain(desired(), member_object())[1] is None
    assert "conditions" not in manifest_entry(found, member_object())
