"""A hub workload's ``status.observedGeneration`` moves to its generation only once every chosen
member runs that generation and reports a status of it, as Karmada's Deployment aggregation
asks: a rollout client (``kubectl rollout status``, ``kubectl wait``) otherwise reads the members'
finished rollout of the previous template as the new one's and says "successfully rolled out"
before any member started it. Also: the Work carries the generation it was rendered from, and
a Work that differs from the desired one only in that stamp is written again."""

from __future__ import annotations

from typing import Any

import pytest

from controlplane.apis import constants as c
from controlplane.controllers.status import observed_everywhere
from controlplane.controllers.works import build_work, resource_generation, work_differs
from controlplane.interpreter.deployment import DeploymentInterpreter

RESOURCE = {"apiVersion": "apps/v1", "kind": "Deployment", "namespace": "ml", "name": "web"}
WORKLOAD = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "namespace": "ml", "generation": 4}}
TARGETS: list[dict[str, Any]] = [{"name": "east", "replicas": 2}, {"name": "west", "replicas": 2}]


def work(
    *,
    stamped: int | None = 4,
    work_generation: int = 7,
    applied_generation: int | None = 7,
    applied: str = "True",
    member_generation: int | None = 9,
    status: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """A Work as the agent leaves it; by default: rendered from the workload's generation 4,
    applied at its own generation, its member's object at generation 9 with a status of it."""
    metadata: dict[str, Any] = {"name": "ml-web-deployment", "namespace": "gpufed-es-east", "generation": work_generation}
    if stamped is not None:
        metadata["annotations"] = {c.ANNOTATION_RESOURCE_GENERATION: str(stamped)}
    condition: dict[str, Any] = {"type": "Applied", "status": applied}
    if applied_generation is not None:
        condition["observedGeneration"] = applied_generation
    entry: dict[str, Any] = {
        "identifier": {"group": "apps", "version": "v1", "kind": "Deployment", "namespace": "ml", "name": "web"},
        "status": {"observedGeneration": 9, "replicas": 2, "updatedReplicas": 2} if status is None else status,
    }
    if member_generation is not None:
        entry["generation"] = member_generation
    return {"metadata": metadata, "spec": {}, "status": {"conditions": [condition], "manifestStatuses": [entry]}}


CASES: list[tuple[str, dict[str, Any], bool]] = [
    ("every member runs the generation and reports it", {}, True),
    ("a Work still rendered from the previous generation", {"stamped": 3}, False),
    ("a Work from before the stamp", {"stamped": None}, True),
    ("the agent has not applied the Work's generation yet", {"applied_generation": 6}, False),
    ("the agent could not apply it", {"applied": "False"}, False),
    ("the member has not observed its object's new spec", {"member_generation": 10}, False),
    ("the member's controller has written no status yet", {"status": {}}, False),
    ("an agent that does not report the generation", {"member_generation": None}, True),
    ("a kind whose status has no observedGeneration", {"status": {"active": 1}}, True),
]


@pytest.mark.parametrize(("west", "observed"), [(w, o) for _, w, o in CASES], ids=[name for name, _, _ in CASES])
def test_observed_only_when_every_member_reports_the_current_generation(west: dict[str, Any], observed: bool) -> None:
    works = {"east": work(), "west": work(**west)}
    assert observed_everywhere(WORKLOAD, RESOURCE, TARGETS, works) is observed


def test_a_chosen_cluster_without_its_work_has_not_observed() -> None:
    assert not observed_everywhere(WORKLOAD, RESOURCE, TARGETS, {"east": work()})


def test_the_work_carries_the_generation_it_was_rendered_from() -> None:
    def built(generation: int | None) -> dict[str, Any]:
        return build_work(
            cluster="east",
            name="ml-web-deployment",
            binding_namespace="ml",
            binding="web-deployment",
            manifest={"apiVersion": "apps/v1", "kind": "Deployment"},
            conflict_resolution=None,
            suspend_dispatching=False,
            resource_generation=generation,
        )

    assert resource_generation(built(5)) == 5
    assert resource_generation(built(None)) is None
    # The same manifest from a newer generation (its cluster's share unchanged by a scale) is a
    # change to write: until then, the member never counts as running the new generation.
    assert work_differs(built(5), built(6))
    assert not work_differs(built(5), built(5))
    assert not work_differs(built(5), built(None))


def test_a_member_past_its_progress_deadline_makes_the_hub_deployment_past_it() -> None:
    """kubectl rollout status stops with "exceeded its progress deadline" on the Progressing
    condition's reason alone: one member's stalled rollout must reach the hub's condition."""
    def status(progressing: str, reason: str) -> dict[str, Any]:
        return {
            "replicas": 2,
            "updatedReplicas": 1,
            "availableReplicas": 1,
            "conditions": [{"type": "Progressing", "status": progressing, "reason": reason, "message": "m"}],
        }

    folded = DeploymentInterpreter().aggregate_status(
        {"metadata": {"generation": 2}},
        [("east", status("True", "NewReplicaSetAvailable")), ("west", status("False", "ProgressDeadlineExceeded"))],
    )
    progressing = next(cond for cond in folded["conditions"] if cond["type"] == "Progressing")
    assert (progressing["status"], progressing["reason"]) == ("False", "ProgressDeadlineExceeded")
    assert progressing["message"] == "west: m"
    assert (folded["replicas"], folded["updatedReplicas"], folded["availableReplicas"]) == (4, 2, 2)
