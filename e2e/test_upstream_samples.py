"""Karmada's and Kueue's published examples, applied unchanged to the hub (``e2e/manifests/upstream``,
each with the upstream path it comes from), do what their documentation says: Karmada's nginx
sample splits its Deployment over member1 and member2 and its OverridePolicy changes each
member's copy; Karmada's guestbook sample propagates a CRD and an object of it with its size
overridden; Kueue's quick-start Job waits suspended (``kubectl get jobs`` says so) until its
queue exists, then is admitted and runs to completion; Kueue's plain Pod is queued (a Workload of
one pod), runs in one member once admitted, and the hub's Pod shows it (``kubectl get pods``). Kueue's examples are written for one cluster: the hub
also needs a policy that says where their objects go, which this test applies. Real hub on real
etcd, two simulated members named as in Karmada's samples, their agents, the real kubectl."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from e2e.harness import Kubectl, ProcessGroup, wait_for

FLEET = Path(__file__).parent / "fleets" / "karmada-members.yaml"
UPSTREAM = Path(__file__).parent / "manifests" / "upstream"
pytestmark = pytest.mark.e2e

#: Where the Kueue examples' Job and Pod go: the hub's own addition to a single-cluster example.
KUEUE_PLACEMENT = Path(__file__).parent / "manifests" / "quotas" / "kueue-examples-placement.yaml"


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Kubectl, dict[str, Kubectl]]]:
    with ProcessGroup.running_fleet(tmp_path_factory.mktemp("upstream"), FLEET, ("member1", "member2")) as fleet:
        yield fleet


def _row(kubectl: Kubectl, *args: str) -> list[str]:
    """The one row ``kubectl get`` prints for ``args``, split into cells."""
    lines = kubectl.run("get", *args).stdout.splitlines()
    assert len(lines) == 2, lines
    return lines[1].split()


def test_karmadas_nginx_sample_splits_the_deployment_and_overrides_each_member(
    fleet: tuple[Kubectl, dict[str, Kubectl]],
) -> None:
    hub, members = fleet
    nginx = UPSTREAM / "karmada" / "nginx"
    hub.run("create", "-f", str(nginx / "deployment.yaml"))
    hub.run("create", "-f", str(nginx / "propagationpolicy.yaml"))
    # The README's expected output: "nginx   2/2     2            2           10s".
    wait_for(lambda: _row(hub, "deployment", "nginx")[1:4] == ["2/2", "2", "2"], timeout=90, what="nginx 2/2 on the hub")
    binding = hub.json("get", "resourcebinding", "nginx-deployment")
    assert {c["name"]: c["replicas"] for c in binding["spec"]["clusters"]} == {"member1": 1, "member2": 1}

    hub.run("create", "-f", str(nginx / "overridepolicy.yaml"))

    def overridden() -> bool:
        one = members["member1"].json("get", "deployment", "nginx")["metadata"]
        two = members["member2"].json("get", "deployment", "nginx")["metadata"]
        return bool(
            (one.get("annotations") or {}).get("env") == "skoala-stage"
            and {"env": "skoala-dev", "env-stat": "skoala-stage"}.items() <= (two.get("labels") or {}).items()
        )

    wait_for(overridden, timeout=60, what="member1's annotation and member2's labels from the OverridePolicy")
    # Its remove and replace operators name keys the Deployment does not have: nothing changes.
    assert "bar" not in (members["member2"].json("get", "deployment", "nginx")["metadata"].get("labels") or {})


def test_karmadas_guestbook_sample_propagates_a_crd_and_overrides_its_object(
    fleet: tuple[Kubectl, dict[str, Kubectl]],
) -> None:
    hub, members = fleet
    guestbook = UPSTREAM / "karmada" / "guestbook"
    for name in ("guestbooks-crd", "guestbooks-clusterpropagationpolicy", "guestbook", "guestbooks-propagationpolicy"):
        hub.run("apply", "-f", str(guestbook / f"{name}.yaml"))
    hub.run("apply", "-f", str(guestbook / "guestbooks-overridepolicy.yaml"))
    member1 = members["member1"]

    def sized() -> dict[str, Any] | None:
        found = member1.json_or_none("get", "guestbooks.webapp.my.domain", "guestbook-sample")
        return found if found and found["spec"].get("size") == 4 else None

    found = wait_for(sized, timeout=90, what="member1's guestbook-sample with spec.size overridden to 4")
    assert (found["metadata"].get("annotations") or {}).get("OverridePolicy") == "test"
    assert hub.json("get", "guestbook", "guestbook-sample")["spec"]["size"] == 2
    assert members["member2"].run("get", "guestbooks.webapp.my.domain", check=False).returncode != 0  # no CRD there


def test_kueues_quick_start_job_waits_suspended_then_runs_to_completion(
    fleet: tuple[Kubectl, dict[str, Kubectl]],
) -> None:
    hub, members = fleet
    kueue = UPSTREAM / "kueue"
    hub.run("apply", "-f", str(KUEUE_PLACEMENT))
    hub.run("create", "-f", str(kueue / "quick-start-job.yaml"))  # before its queue exists: it waits

    def waiting() -> dict[str, Any] | None:
        wl = hub.json_or_none("get", "workload", hub.workload_name("job", "sample-job"))
        cond = next((c for c in ((wl or {}).get("status") or {}).get("conditions") or () if c["type"] == "QuotaReserved"), {})
        return wl if cond.get("message") == "LocalQueue user-queue doesn't exist" else None

    wait_for(waiting, timeout=60, what="the Job's Workload waiting for its LocalQueue")
    # kube's Job controller's Suspended condition, which kubectl shows as the Job's STATUS.
    wait_for(lambda: _row(hub, "job", "sample-job")[1] == "Suspended", timeout=30, what="the held Job shown Suspended")
    assert members["member1"].json_or_none("get", "job", "sample-job") is None

    hub.run("apply", "-f", str(kueue / "quick-start-setup.yaml"))
    # Kueue's docs: the Workload is admitted by cluster-queue, and the Job runs to completion.
    wait_for(lambda: _row(hub, "workload", hub.workload_name("job", "sample-job"))[1:4] == ["user-queue", "cluster-queue", "True"],
             timeout=60, what="the Workload admitted")
    wait_for(lambda: _row(hub, "job", "sample-job")[1:3] == ["Complete", "3/3"], timeout=120, what="sample-job Complete 3/3")
    assert members["member1"].json("get", "job", "sample-job")["status"]["succeeded"] == 3
    wait_for(lambda: _row(hub, "workload", hub.workload_name("job", "sample-job"))[4] == "True", timeout=60, what="the Workload finished")


def test_kueues_plain_pod_runs_in_a_member_and_the_hubs_pod_says_so(
    fleet: tuple[Kubectl, dict[str, Kubectl]],
) -> None:
    hub, members = fleet
    hub.run("apply", "-f", str(KUEUE_PLACEMENT))
    hub.run("apply", "-f", str(UPSTREAM / "kueue" / "quick-start-setup.yaml"))
    out = hub.run("create", "-f", str(UPSTREAM / "kueue" / "kueue-pod.yaml")).stdout
    name = out.split()[0].removeprefix("pod/")
    assert name.startswith("kueue-sleep-"), out
    # Queued as by Kueue's pod integration: a Workload of one pod, admitted by cluster-queue.
    wait_for(lambda: _row(hub, "workload", hub.workload_name("pod", name))[1:4] == ["user-queue", "cluster-queue", "True"],
             timeout=60, what="the Pod's Workload admitted")

    def phase() -> str | None:
        return (hub.json("get", "pod", name).get("status") or {}).get("phase")

    # The member's pod runs (its simulated kubelet's job-like pods run 300 simulated seconds) and
    # ends Succeeded; the hub's Pod follows it, where it used to stay Pending.
    wait_for(lambda: phase() in ("Running", "Succeeded"), timeout=60, what="the hub's Pod Running")
    wait_for(lambda: phase() == "Succeeded", timeout=90, what="the hub's Pod Succeeded")
    assert _row(hub, "pod", name)[1:3] == ["0/1", "Completed"]
    assert members["member1"].json("get", "pod", name)["status"]["phase"] == "Succeeded"
    assert members["member2"].json_or_none("get", "pod", name) is None
    wait_for(lambda: _row(hub, "workload", hub.workload_name("pod", name))[4] == "True", timeout=60, what="the Pod's Workload finished")


def test_karmadas_service_export_reaches_the_exporting_member_and_a_multi_cluster_service_places_its_service(
    fleet: tuple[Kubectl, dict[str, Kubectl]],
) -> None:
    hub, members = fleet
    karmada = UPSTREAM / "karmada"
    # Karmada's guide has the mcs-api CRDs in the members: installed in member1 here, from Karmada's chart.
    members["member1"].run("apply", "-f", str(karmada / "crds" / "multicluster.x-k8s.io_serviceexports.yaml"))
    hub.run("apply", "-f", str(karmada / "website" / "multi-cluster-service-export.yaml"))
    wait_for(lambda: members["member1"].json_or_none("get", "serviceexports.multicluster.x-k8s.io", "serve"),
             timeout=90, what="member1's ServiceExport serve")
    assert members["member2"].run("get", "serviceexports.multicluster.x-k8s.io", check=False).returncode != 0  # no CRD there

    hub.run("apply", "-f", str(karmada / "website" / "access-service-across-clusters.yaml"))

    def reported() -> dict[str, Any] | None:
        conditions = (hub.json("get", "mcs", "nginx").get("status") or {}).get("conditions") or []
        found = {c["type"]: c for c in conditions}
        return found if found.get("ServiceApplied", {}).get("status") == "True" else None

    conditions = wait_for(reported, timeout=60, what="the MultiClusterService's ServiceApplied condition")
    assert conditions["ServiceApplied"]["reason"] == "ServiceAppliedSucceed"
    # member1's EndpointSlices of nginx go to member2: e2e/test_mcs_endpointslices.py follows them.
    assert "EndpointSliceDispatched" in conditions
    # It stays on the hub, as on Karmada; its Service goes to its provider (member1) and consumer (member2).
    for member in ("member1", "member2"):
        wait_for(lambda m=member: members[m].json_or_none("get", "service", "nginx"), timeout=60, what=f"{member}'s Service nginx")
    assert members["member1"].json("get", "service", "nginx")["spec"]["ports"][0]["targetPort"] == 8080
