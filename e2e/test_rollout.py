"""The day-2 kubectl workflow on the hub, end to end: ``kubectl rollout status`` of a Deployment
divided over two members finishes only when both members' rollouts have (after a ``rollout
restart``, a ``set image``) and waits while a member has not received the change (its
dispatching suspended), ``rollout pause`` holds the members' rollout and ``resume`` lets it
go on, ``kubectl wait`` for a condition, a jsonpath value and a deletion returns, ``rollout
history`` lists a Deployment's and a StatefulSet's revisions and ``undo`` brings the old image
back on the members, a StatefulSet's ``rollout status`` and a
Job's ``wait --for=condition=complete`` finish. Real hub on real etcd, two simulated members,
two agents, the real kubectl; one fleet shared by the tests."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from e2e.harness import Kubectl, ProcessGroup, wait_for

FLEET = Path(__file__).parent / "fleets" / "any-kind.yaml"
pytestmark = pytest.mark.e2e


def halves_policy(name: str, *selectors: str) -> str:
    """A policy that divides the replicas of what ``selectors`` pick evenly over east and west."""
    picked = "".join(f"\n    - {selector}" for selector in selectors)
    return f"""
apiVersion: policy.gpufed.io/v1alpha1
kind: PropagationPolicy
metadata: {{name: {name}, namespace: day2}}
spec:
  resourceSelectors:{picked}
  placement:
    replicaScheduling:
      replicaSchedulingType: Divided
      replicaDivisionPreference: Weighted
      weightPreference:
        staticWeightList:
          - {{targetCluster: {{clusterNames: [east]}}, weight: 1}}
          - {{targetCluster: {{clusterNames: [west]}}, weight: 1}}
"""


def deployment_manifest(name: str) -> str:
    """A Deployment of 4 replicas of image ``registry.example.com/NAME:1.0``."""
    return f"""
apiVersion: apps/v1
kind: Deployment
metadata: {{name: {name}, namespace: day2}}
spec:
  replicas: 4
  selector: {{matchLabels: {{app: {name}}}}}
  template:
    metadata: {{labels: {{app: {name}}}}}
    spec:
      containers: [{{name: {name}, image: registry.example.com/{name}:1.0}}]
"""


OTHERS = """
apiVersion: apps/v1
kind: StatefulSet
metadata: {name: db, namespace: day2}
spec:
  replicas: 2
  serviceName: db
  selector: {matchLabels: {app: db}}
  template:
    metadata: {labels: {app: db}}
    spec:
      containers: [{name: db, image: registry.example.com/db:1.0}]
---
apiVersion: batch/v1
kind: Job
metadata: {name: once, namespace: day2}
spec:
  completions: 2
  parallelism: 2
  template:
    metadata:
      annotations: {sim.gpufed.io/duration: 5s}
    spec:
      restartPolicy: Never
      containers: [{name: once, image: registry.example.com/once:1.0}]
"""

MANIFESTS = "---".join(
    [
        "\napiVersion: v1\nkind: Namespace\nmetadata: {name: day2}\n",
        halves_policy(
            "halves",
            "{apiVersion: apps/v1, kind: Deployment, name: web}",
            "{apiVersion: apps/v1, kind: StatefulSet}",
            "{apiVersion: batch/v1, kind: Job}",
        ),
        deployment_manifest("web"),
        OTHERS,
    ]
)


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Kubectl, dict[str, Kubectl]]]:
    with ProcessGroup.running_fleet(tmp_path_factory.mktemp("rollout"), FLEET, ("east", "west")) as fleet:
        hub, _ = fleet
        hub.run("apply", "-f", "-", input_text=MANIFESTS)
        yield fleet


def rollout_status(hub: Kubectl, target: str) -> str:
    result = hub.run("rollout", "status", target, "-n", "day2", "--timeout=180s", timeout=200)
    return result.stdout


def member_deployments(members: dict[str, Kubectl]) -> dict[str, dict[str, Any]]:
    return {name: m.json("get", "deployment", "web", "-n", "day2") for name, m in members.items()}


def assert_members_rolled_out(members: dict[str, Kubectl], *, image: str, restarted: str | None = None) -> None:
    """Every member runs the template asked for, and its own rollout of it has finished."""
    for name, deployment in member_deployments(members).items():
        template = deployment["spec"]["template"]
        assert template["spec"]["containers"][0]["image"] == image, name
        if restarted is not None:
            assert template["metadata"]["annotations"]["kubectl.kubernetes.io/restartedAt"] == restarted, name
        status = deployment["status"]
        assert status.get("observedGeneration") == deployment["metadata"]["generation"], (name, status)
        share = deployment["spec"]["replicas"]
        assert (status.get("updatedReplicas"), status.get("replicas"), status.get("availableReplicas")) == (
            share,
            share,
            share,
        ), (name, status)


def test_rollout_status_finishes_when_every_member_has_rolled_out(fleet: tuple[Kubectl, dict[str, Kubectl]]) -> None:
    hub, members = fleet
    assert "successfully rolled out" in rollout_status(hub, "deployment/web")
    hub.run("wait", "--for=condition=Available", "deployment/web", "-n", "day2", "--timeout=120s", timeout=140)
    hub.run(
        "wait", "--for=jsonpath={.status.readyReplicas}=4", "deployment/web", "-n", "day2", "--timeout=120s",
        timeout=140,
    )

    # A restart: the hub's status goes through the members' update; when kubectl says it
    # finished, every member has finished.
    hub.run("rollout", "restart", "deployment/web", "-n", "day2")
    restarted = hub.json("get", "deployment", "web", "-n", "day2")["spec"]["template"]["metadata"]["annotations"][
        "kubectl.kubernetes.io/restartedAt"
    ]
    assert 'deployment "web" successfully rolled out' in rollout_status(hub, "deployment/web")
    assert_members_rolled_out(members, image="registry.example.com/web:1.0", restarted=restarted)

    # A new image, likewise.
    hub.run("set", "image", "deployment/web", "web=registry.example.com/web:1.1", "-n", "day2")
    assert 'deployment "web" successfully rolled out' in rollout_status(hub, "deployment/web")
    assert_members_rolled_out(members, image="registry.example.com/web:1.1")
    hub_status = hub.json("get", "deployment", "web", "-n", "day2")
    assert hub_status["status"]["observedGeneration"] == hub_status["metadata"]["generation"]
    assert hub_status["status"]["updatedReplicas"] == 4


def test_pause_holds_the_members_rollout_and_resume_finishes_it(fleet: tuple[Kubectl, dict[str, Kubectl]]) -> None:
    hub, members = fleet
    rollout_status(hub, "deployment/web")
    hub.run("rollout", "pause", "deployment/web", "-n", "day2")
    hub.run("set", "image", "deployment/web", "web=registry.example.com/web:2.0", "-n", "day2")

    def members_paused_with_new_template() -> bool:
        found = member_deployments(members).values()
        return all(
            d["spec"].get("paused") and d["spec"]["template"]["spec"]["containers"][0]["image"].endswith(":2.0")
            for d in found
        )

    wait_for(members_paused_with_new_template, timeout=120, what="both members paused with the new template")
    hub.run("rollout", "resume", "deployment/web", "-n", "day2")
    assert 'deployment "web" successfully rolled out' in rollout_status(hub, "deployment/web")
    assert_members_rolled_out(members, image="registry.example.com/web:2.0")


HISTORY_STATEFULSET = """
apiVersion: apps/v1
kind: StatefulSet
metadata: {name: hsts, namespace: day2}
spec:
  replicas: 2
  serviceName: hsts
  selector: {matchLabels: {app: hsts}}
  template:
    metadata: {labels: {app: hsts}}
    spec:
      containers: [{name: hsts, image: registry.example.com/hsts:1.0}]
"""


def member_images(members: dict[str, Kubectl], kind: str, name: str) -> set[str]:
    return {
        m.json("get", kind, name, "-n", "day2")["spec"]["template"]["spec"]["containers"][0]["image"]
        for m in members.values()
    }


def history_rows(hub: Kubectl, target: str) -> dict[int, str]:
    """``kubectl rollout history``'s table: revision -> change-cause."""
    lines = hub.run("rollout", "history", target, "-n", "day2").stdout.strip().splitlines()
    rows: dict[int, str] = {}
    for line in lines[2:]:  # the title, then the column names
        revision, _, cause = line.strip().partition(" ")
        rows[int(revision)] = cause.strip()
    return rows


def test_history_and_undo_of_a_deployment_bring_the_old_image_back_on_the_members(
    fleet: tuple[Kubectl, dict[str, Kubectl]],
) -> None:
    hub, members = fleet
    selectors = ("{apiVersion: apps/v1, kind: Deployment, name: hist}", "{apiVersion: apps/v1, kind: ReplicaSet}")
    manifests = halves_policy("hist", *selectors) + "---" + deployment_manifest("hist")
    hub.run("apply", "-f", "-", input_text=manifests)
    rollout_status(hub, "deployment/hist")
    old, new = "registry.example.com/hist:1.0", "registry.example.com/hist:2.0"
    hub.run("set", "image", "deployment/hist", f"hist={new}", "-n", "day2")
    hub.run("annotate", "deployment/hist", "-n", "day2", "kubernetes.io/change-cause=image 2.0")
    rollout_status(hub, "deployment/hist")
    assert member_images(members, "deployment", "hist") == {new}

    assert history_rows(hub, "deployment/hist") == {1: "<none>", 2: "image 2.0"}
    first = hub.run("rollout", "history", "deployment/hist", "-n", "day2", "--revision=1").stdout
    assert "with revision #1" in first and old in first and new not in first
    described = hub.run("describe", "deployment", "hist", "-n", "day2").stdout
    replica_sets = hub.json("get", "replicasets", "-n", "day2", "-l", "app=hist")["items"]
    by_revision = {rs["metadata"]["annotations"]["deployment.kubernetes.io/revision"]: rs for rs in replica_sets}
    assert f"NewReplicaSet:   {by_revision['2']['metadata']['name']}" in described
    assert f"OldReplicaSets:  {by_revision['1']['metadata']['name']}" in described
    hub_deployment = hub.json("get", "deployment", "hist", "-n", "day2")
    assert hub_deployment["metadata"]["annotations"]["deployment.kubernetes.io/revision"] == "2"
    # The history stays on the hub, though a policy selects every ReplicaSet: no binding takes one.
    bindings = [b["metadata"]["name"] for b in hub.json("get", "resourcebindings", "-n", "day2")["items"]]
    assert not [b for b in bindings if b.endswith("-replicaset")], bindings

    undo = hub.run("rollout", "undo", "deployment/hist", "-n", "day2")
    assert undo.stdout.strip() == "deployment.apps/hist rolled back"
    rollout_status(hub, "deployment/hist")
    wait_for(lambda: member_images(members, "deployment", "hist") == {old}, timeout=120, what="the old image back on both members")
    assert history_rows(hub, "deployment/hist") == {2: "image 2.0", 3: "<none>"}

    again = hub.run("rollout", "undo", "deployment/hist", "-n", "day2", "--to-revision=2")
    assert again.stdout.strip() == "deployment.apps/hist rolled back"
    rollout_status(hub, "deployment/hist")
    wait_for(lambda: member_images(members, "deployment", "hist") == {new}, timeout=120, what="the new image again")
    assert history_rows(hub, "deployment/hist") == {3: "<none>", 4: "image 2.0"}
    missing = hub.run("rollout", "undo", "deployment/hist", "-n", "day2", "--to-revision=9", check=False)
    assert missing.returncode == 1 and "unable to find specified revision 9 in history" in missing.stderr


def test_history_and_undo_of_a_statefulset(fleet: tuple[Kubectl, dict[str, Kubectl]]) -> None:
    hub, members = fleet
    hub.run("apply", "-f", "-", input_text=HISTORY_STATEFULSET)
    rollout_status(hub, "statefulset/hsts")
    old, new = "registry.example.com/hsts:1.0", "registry.example.com/hsts:2.0"
    hub.run("set", "image", "statefulset/hsts", f"hsts={new}", "-n", "day2")
    rollout_status(hub, "statefulset/hsts")
    assert member_images(members, "statefulset", "hsts") == {new}
    assert set(history_rows(hub, "statefulset/hsts")) == {1, 2}
    first = hub.run("rollout", "history", "statefulset/hsts", "-n", "day2", "--revision=1").stdout
    assert old in first and new not in first
    # The hub's record of the current template is named as the members name their revision.
    revisions = hub.json("get", "controllerrevisions", "-n", "day2", "-l", "app=hsts")["items"]
    latest = max(revisions, key=lambda r: r["revision"])["metadata"]["name"]
    assert hub.json("get", "statefulset", "hsts", "-n", "day2")["status"]["updateRevision"] == latest

    undo = hub.run("rollout", "undo", "statefulset/hsts", "-n", "day2")
    assert undo.stdout.strip() == "statefulset.apps/hsts rolled back"
    rollout_status(hub, "statefulset/hsts")
    wait_for(lambda: member_images(members, "statefulset", "hsts") == {old}, timeout=120, what="the old image back")
    assert set(history_rows(hub, "statefulset/hsts")) == {2, 3}
    hub.run("delete", "statefulset", "hsts", "-n", "day2")

    def history_gone() -> bool:
        return not hub.json("get", "controllerrevisions", "-n", "day2", "-l", "app=hsts")["items"]

    wait_for(history_gone, timeout=60, what="the StatefulSet's ControllerRevisions gone with it")


def test_statefulset_rollout_and_job_completion_and_deletion(fleet: tuple[Kubectl, dict[str, Kubectl]]) -> None:
    hub, members = fleet
    assert "roll out complete: 2 new pods have been updated" in rollout_status(hub, "statefulset/db")
    hub.run("rollout", "restart", "statefulset/db", "-n", "day2")
    assert "roll out complete: 2 new pods have been updated" in rollout_status(hub, "statefulset/db")
    sts = hub.json("get", "statefulset", "db", "-n", "day2")
    assert sts["status"]["observedGeneration"] == sts["metadata"]["generation"]
    # Both members run one template, so they name one revision, and the hub shows it.
    revisions = {m.json("get", "statefulset", "db", "-n", "day2")["status"]["updateRevision"] for m in members.values()}
    assert len(revisions) == 1
    assert sts["status"]["currentRevision"] == sts["status"]["updateRevision"] == revisions.pop()

    hub.run("wait", "--for=condition=complete", "job/once", "-n", "day2", "--timeout=120s", timeout=140)
    assert hub.json("get", "job", "once", "-n", "day2")["status"]["succeeded"] == 2
    hub.run("delete", "job", "once", "-n", "day2", "--wait=false")
    hub.run("wait", "--for=delete", "job/once", "-n", "day2", "--timeout=120s", timeout=140)


LEDGER = """
apiVersion: apps/v1
kind: StatefulSet
metadata: {name: ledger, namespace: day2}
spec:
  replicas: 4
  serviceName: ledger
  selector: {matchLabels: {app: ledger}}
  updateStrategy: {type: RollingUpdate, rollingUpdate: {partition: 2}}
  template:
    metadata: {labels: {app: ledger}}
    spec:
      containers: [{name: ledger, image: registry.example.com/ledger:1.0}]
"""


def member_ledgers(members: dict[str, Kubectl]) -> dict[str, tuple[int, list[str]]]:
    """Per member: the partition its StatefulSet got, and its pods' images by ordinal."""
    out: dict[str, tuple[int, list[str]]] = {}
    for name, member in members.items():
        sts = member.json("get", "statefulset", "ledger", "-n", "day2")
        pods = member.json("get", "pods", "-n", "day2", "-l", "app=ledger")["items"]
        by_name = {p["metadata"]["name"]: p["spec"]["containers"][0]["image"] for p in pods}
        out[name] = (
            sts["spec"]["updateStrategy"]["rollingUpdate"]["partition"],
            [by_name.get(f"ledger-{i}", "") for i in range(sts["spec"]["replicas"])],
        )
    return out


def test_a_partitioned_statefulset_rollout_divided_over_two_members_finishes(
    fleet: tuple[Kubectl, dict[str, Kubectl]],
) -> None:
    """Replicas 4 split 2+2 with partition 2: the hub's ordinals are east's then west's, so east
    keeps its two pods and west updates both; kubectl's ``rollout status`` on the hub counts the
    2 updated pods, and both members stay Healthy while part of the set runs the old template."""
    hub, members = fleet
    hub.run("apply", "-f", "-", input_text=LEDGER)
    assert "partitioned roll out complete: 4 new pods have been updated" in rollout_status(hub, "statefulset/ledger")
    hub.run("set", "image", "statefulset/ledger", "ledger=registry.example.com/ledger:2.0", "-n", "day2")
    assert "partitioned roll out complete: 2 new pods have been updated" in rollout_status(hub, "statefulset/ledger")
    old, new = "registry.example.com/ledger:1.0", "registry.example.com/ledger:2.0"
    assert member_ledgers(members) == {"east": (2, [old, old]), "west": (0, [new, new])}
    status = hub.json("get", "statefulset", "ledger", "-n", "day2")["status"]
    assert (status["updatedReplicas"], status["readyReplicas"]) == (2, 4)
    assert status.get("currentRevision") != status["updateRevision"]  # east still runs the old one

    def members_healthy() -> bool:
        binding = hub.json("get", "resourcebinding", "ledger-statefulset", "-n", "day2")
        health = {i["clusterName"]: i.get("health") for i in binding.get("status", {}).get("aggregatedStatus") or ()}
        return health == {"east": "Healthy", "west": "Healthy"}

    wait_for(members_healthy, timeout=120, what="both members Healthy with a partitioned rollout")

    # The partition lowered to 0: the rest of the set rolls out, in both members.
    unpartitioned = '{"spec":{"updateStrategy":{"rollingUpdate":{"partition":0}}}}'
    hub.run("patch", "statefulset", "ledger", "-n", "day2", "-p", unpartitioned)
    assert "partitioned roll out complete: 4 new pods have been updated" in rollout_status(hub, "statefulset/ledger")
    assert member_ledgers(members) == {"east": (0, [new, new]), "west": (0, [new, new])}
    status = hub.json("get", "statefulset", "ledger", "-n", "day2")["status"]
    assert status["currentRevision"] == status["updateRevision"]
    wait_for(members_healthy, timeout=120, what="both members Healthy after the whole rollout")


def test_rollout_status_waits_for_a_member_that_has_not_received_the_change(
    fleet: tuple[Kubectl, dict[str, Kubectl]],
) -> None:
    hub, members = fleet
    held = halves_policy("held", "{apiVersion: apps/v1, kind: Deployment, name: held}") + "---" + deployment_manifest("held")
    hub.run("apply", "-f", "-", input_text=held)
    assert 'deployment "held" successfully rolled out' in rollout_status(hub, "deployment/held")
    # west's Works are no longer dispatched: a new template reaches east only.
    hub.run(
        "patch", "propagationpolicy", "held", "-n", "day2", "--type=merge",
        "-p", '{"spec":{"suspension":{"dispatchingOnClusters":{"clusterNames":["west"]}}}}',
    )
    hub.run("set", "image", "deployment/held", "held=registry.example.com/held:2.0", "-n", "day2")

    def east_rolled_out_as_the_hub_knows() -> bool:
        binding = hub.json("get", "resourcebinding", "held-deployment", "-n", "day2")
        items = {i["clusterName"]: i for i in binding.get("status", {}).get("aggregatedStatus") or []}
        east = members["east"].json("get", "deployment", "held", "-n", "day2")
        image = east["spec"]["template"]["spec"]["containers"][0]["image"]
        status = (items.get("east") or {}).get("status") or {}
        return image.endswith(":2.0") and status == east["status"] and status.get("updatedReplicas") == 2

    wait_for(east_rolled_out_as_the_hub_knows, timeout=120, what="east's finished rollout in the hub's binding")
    west = members["west"].json("get", "deployment", "held", "-n", "day2")
    assert west["spec"]["template"]["spec"]["containers"][0]["image"] == "registry.example.com/held:1.0"
    # Every member reports a finished rollout, but west's is of the previous template.
    once = hub.run("rollout", "status", "deployment/held", "-n", "day2", "--watch=false")
    assert once.stdout.strip() == "Waiting for deployment spec update to be observed..."

    hub.run("patch", "propagationpolicy", "held", "-n", "day2", "--type=json", "-p", '[{"op":"remove","path":"/spec/suspension"}]')
    assert 'deployment "held" successfully rolled out' in rollout_status(hub, "deployment/held")
    for name, member in members.items():
        deployment = member.json("get", "deployment", "held", "-n", "day2")
        assert deployment["spec"]["template"]["spec"]["containers"][0]["image"] == "registry.example.com/held:2.0", name
