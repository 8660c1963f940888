"""The agent keeps a member's ``spec.replicas`` for a Deployment or StatefulSet labelled
``resourcetemplate.karmada.io/retain-replicas: "true"`` (Karmada's default interpreter's retain):
the member's HPA scales it, and a Work applied again must not undo that. Without the label the
Work stays the source of truth for the replicas.

The pure rule is table-driven; the applier runs against the simulator's API over HTTP, where the
test plays the member's HPA by scaling the Deployment itself.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from member_agent.applying import WorkApplier
from member_agent.ledger import Ledger
from member_agent.manifests import with_member_replicas
from simulator.resources import member_registry
from tests.member_agent.memberapi import member_client, served_member

pytestmark = pytest.mark.timeout(120)

NOW = "2026-01-01T00:00:00Z"
RETAIN = {"resourcetemplate.karmada.io/retain-replicas": "true"}


def workload(kind: str, labels: dict[str, str], replicas: int | None, *, api_version: str = "apps/v1") -> dict[str, Any]:
    spec: dict[str, Any] = {
        "selector": {"matchLabels": {"app": "web"}},
        "template": {"metadata": {"labels": {"app": "web"}},
                     "spec": {"containers": [{"name": "web", "image": "nginx:1"}]}},
    }
    if replicas is not None:
        spec["replicas"] = replicas
    return {"apiVersion": api_version, "kind": kind,
            "metadata": {"name": "web", "namespace": "shop", "labels": labels}, "spec": spec}


@pytest.mark.parametrize(
    ("body", "live", "replicas"),
    [
        pytest.param(workload("Deployment", RETAIN, 2), workload("Deployment", RETAIN, 7), 7, id="deployment"),
        pytest.param(workload("StatefulSet", RETAIN, 2), workload("StatefulSet", RETAIN, 5), 5, id="statefulset"),
        # Not labelled (or not "true"): the Work's replicas win.
        pytest.param(workload("Deployment", {}, 2), workload("Deployment", {}, 7), 2, id="no-label"),
        pytest.param(
            workload("Deployment", {"resourcetemplate.karmada.io/retain-replicas": "false"}, 2),
            workload("Deployment", {}, 7), 2, id="label-false",
        ),
        # The member shows no replicas: the Work's stand.
        pytest.param(workload("Deployment", RETAIN, 2), workload("Deployment", RETAIN, None), 2, id="no-live-replicas"),
        # Another kind with spec.replicas is not retained (Karmada retains Deployments and StatefulSets).
        pytest.param(workload("ReplicaSet", RETAIN, 2), workload("ReplicaSet", RETAIN, 7), 2, id="replicaset"),
        pytest.param(
            workload("Deployment", RETAIN, 2, api_version="example.com/v1"),
            workload("Deployment", RETAIN, 7, api_version="example.com/v1"), 2, id="other-group",
        ),
    ],
)
def test_the_member_keeps_its_replicas_only_under_the_label(
    body: dict[str, Any], live: dict[str, Any], replicas: int
) -> None:
    out = with_member_replicas(body, live)
    assert out["spec"]["replicas"] == replicas
    assert body["spec"]["replicas"] == 2  # the Work's manifest itself is not changed


def work(manifest: dict[str, Any], generation: int) -> dict[str, Any]:
    return {
        "apiVersion": "work.gpufed.io/v1alpha1", "kind": "Work",
        "metadata": {"name": "shop-web-deployment", "namespace": "gpufed-es-a", "generation": generation},
        "spec": {"workload": {"manifests": [manifest]}},
    }


@pytest.mark.parametrize(("labels", "after_reapply"), [(RETAIN, 6), ({}, 2)], ids=["retained", "not-labelled"])
async def test_a_reapplied_work_leaves_the_members_hpa_in_charge(
    tmp_path: Path, labels: dict[str, str], after_reapply: int
) -> None:
    registry = member_registry()
    deployments = registry.require("apps/v1", "Deployment")
    async with served_member(registry) as member, member_client(member.url) as api:
        applier = WorkApplier(member=api, ledger=Ledger(tmp_path))
        await applier.reconcile(work(workload("Deployment", labels, 2), 1), now=NOW)
        created = await member.objects.get(deployments, namespace="shop", name="web")
        assert created["spec"]["replicas"] == 2  # created as the Work says

        created["spec"]["replicas"] = 6  # the member's HPA scales it up
        await member.objects.update(deployments, created)
        changed = workload("Deployment", {**labels, "tier": "front"}, 2)
        await applier.reconcile(work(changed, 2), now=NOW)
        now = await member.objects.get(deployments, namespace="shop", name="web")
        assert now["metadata"]["labels"]["tier"] == "front"  # the new Work was applied
        assert now["spec"]["replicas"] == after_reapply
