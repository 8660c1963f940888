"""Any kind propagates, end to end: a DaemonSet, a CronJob and a LoadBalancer Service applied to
the hub with one ClusterPropagationPolicy land in every member, and their member statuses fold
back into the hub objects (DaemonSet node counts summed, the CronJob's active Jobs and
lastScheduleTime, every member's load balancer address); a GPU chart's cluster-scoped
RuntimeClass lands in every member and leaves with the hub's; a Deployment whose pods name a
PriorityClass the member lacks gets no pods there, the hub's Event names the class, and a
ClusterPropagationPolicy that sends it (with a StorageClass, an IngressClass, a ClusterRole and
its binding) lets the pods run; a JobSet sent to a member that
does not serve JobSet is a clear Work condition and an Event; objects exported from another
cluster (``kubectl get -o yaml``) land without what that cluster gave them: a Job with
``ttlSecondsAfterFinished`` runs once and then leaves the hub and the member, a Service comes
without its old clusterIP; the hub gives Services an address and node ports as kube does (kubectl
shows them, a taken one is kube's 422) and members get none of its addresses. Real hub on real etcd, two simulated members (time scale 20), two
agents (applying every Work again every 2 s), the real kubectl; one fleet shared by the tests.
The hub times queued workloads with Kueue's waitForPodsReady (a 4 s timeout): a queued JobSet sent
to the member that does not serve JobSet is evicted and requeued with reason ``PodsReadyTimeout``."""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from e2e.harness import Kubectl, ProcessGroup, pods_not_starting, wait_for

FLEET = Path(__file__).parent / "fleets" / "any-kind.yaml"
pytestmark = pytest.mark.e2e

EVERYWHERE = """
apiVersion: policy.karmada.io/v1alpha1
kind: ClusterPropagationPolicy
metadata:
  name: node-agents-everywhere
spec:
  resourceSelectors:
    - {apiVersion: apps/v1, kind: DaemonSet}
    - {apiVersion: batch/v1, kind: CronJob}
    - {apiVersion: v1, kind: Service, name: gateway}
---
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: node-exporter, namespace: ml}
spec:
  selector:
    matchLabels: {app: node-exporter}
  template:
    metadata:
      labels: {app: node-exporter}
    spec:
      containers:
        - {name: exporter, image: quay.io/prometheus/node-exporter:v1.8.2}
---
apiVersion: batch/v1
kind: CronJob
metadata: {name: checkpoint-sweeper, namespace: ml}
spec:
  schedule: "* * * * *"
  concurrencyPolicy: Forbid
  jobTemplate:
    spec:
      template:
        metadata:
          annotations: {sim.gpufed.io/duration: 1h}
        spec:
          restartPolicy: OnFailure
          containers:
            - {name: sweep, image: registry.example.com/ml/sweeper:1.0}
---
apiVersion: v1
kind: Service
metadata: {name: gateway, namespace: ml}
spec:
  type: LoadBalancer
  selector: {app: gateway}
  ports:
    - {port: 443, targetPort: 8443}
"""

RUNTIME_CLASS_EVERYWHERE = """
apiVersion: policy.karmada.io/v1alpha1
kind: ClusterPropagationPolicy
metadata:
  name: gpu-runtime-everywhere
spec:
  resourceSelectors:
    - {apiVersion: node.k8s.io/v1, kind: RuntimeClass, name: nvidia}
---
apiVersion: node.k8s.io/v1
kind: RuntimeClass
metadata: {name: nvidia}
handler: nvidia
scheduling:
  nodeSelector: {nvidia.com/gpu.present: "true"}
"""

#: One replica on east whose pods name PriorityClass ``high``, which only the hub has.
HIGH_PRIORITY_ON_EAST = """
apiVersion: v1
kind: Namespace
metadata: {name: ml}
---
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {name: high}
value: 1000
---
apiVersion: policy.gpufed.io/v1alpha1
kind: PropagationPolicy
metadata: {name: urgent-on-east, namespace: ml}
spec:
  resourceSelectors:
    - {apiVersion: apps/v1, kind: Deployment, name: urgent}
  placement:
    clusterAffinity:
      clusterNames: [east]
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: urgent, namespace: ml}
spec:
  replicas: 1
  selector:
    matchLabels: {app: urgent}
  template:
    metadata:
      labels: {app: urgent}
    spec:
      priorityClassName: high
      containers:
        - name: server
          image: registry.example.com/ml/serve:1.0
"""

#: A Karmada user's policy for the cluster-scoped objects their workloads and operators need.
CLUSTER_KINDS_EVERYWHERE = """
apiVersion: policy.karmada.io/v1alpha1
kind: ClusterPropagationPolicy
metadata: {name: cluster-kinds-everywhere}
spec:
  resourceSelectors:
    - {apiVersion: scheduling.k8s.io/v1, kind: PriorityClass, name: high}
    - {apiVersion: storage.k8s.io/v1, kind: StorageClass, name: fast}
    - {apiVersion: networking.k8s.io/v1, kind: IngressClass, name: edge}
    - {apiVersion: rbac.authorization.k8s.io/v1, kind: ClusterRole, name: trainer-operator}
    - {apiVersion: rbac.authorization.k8s.io/v1, kind: ClusterRoleBinding, name: trainer-operator}
---
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata: {name: fast}
provisioner: pd.csi.storage.gke.io
volumeBindingMode: WaitForFirstConsumer
---
apiVersion: networking.k8s.io/v1
kind: IngressClass
metadata: {name: edge}
spec: {controller: example.com/edge}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: trainer-operator}
rules:
  - {apiGroups: [kubeflow.org], resources: [pytorchjobs], verbs: [get, list, watch]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: trainer-operator}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: trainer-operator}
subjects:
  - {kind: ServiceAccount, name: trainer-operator, namespace: ml}
"""

JOBSET_ON_WEST = """
apiVersion: policy.gpufed.io/v1alpha1
kind: PropagationPolicy
metadata: {name: train-on-west, namespace: ml}
spec:
  resourceSelectors:
    - {apiVersion: jobset.x-k8s.io/v1alpha2, kind: JobSet, name: train}
  placement:
    clusterAffinity:
      clusterNames: [west]
---
apiVersion: jobset.x-k8s.io/v1alpha2
kind: JobSet
metadata: {name: train, namespace: ml}
spec:
  replicatedJobs:
    - name: workers
      replicas: 2
      template:
        spec:
          parallelism: 1
          completions: 1
          template:
            spec:
              restartPolicy: Never
              containers:
                - name: trainer
                  image: registry.example.com/ml/trainer:1.0
                  resources:
                    limits: {nvidia.com/gpu: 1}
"""

#: As exported from a running cluster: the Job's TTL, the Service's address there.
EXPORTED = """
apiVersion: policy.gpufed.io/v1alpha1
kind: PropagationPolicy
metadata: {name: exported-to-east, namespace: ml}
spec:
  resourceSelectors:
    - {apiVersion: batch/v1, kind: Job, name: run-once}
    - {apiVersion: v1, kind: Service, name: exported}
  placement:
    clusterAffinity:
      clusterNames: [east]
---
apiVersion: batch/v1
kind: Job
metadata: {name: run-once, namespace: ml}
spec:
  ttlSecondsAfterFinished: 2
  template:
    metadata:
      annotations: {sim.gpufed.io/duration: 20s}
    spec:
      restartPolicy: Never
      containers:
        - {name: step, image: registry.example.com/ml/step:1.0}
---
apiVersion: v1
kind: Service
metadata: {name: exported, namespace: ml}
spec:
  clusterIP: 10.96.4.7
  clusterIPs: [10.96.4.7]
  selector: {app: exported}
  ports:
    - {port: 80, targetPort: 8080}
"""
#: How often the agents apply every Work again (a member copy deleted in the member comes back).
RESYNC_SECONDS = 2
#: The hub's Kueue waitForPodsReady timeout (Kueue's default is 300 s); only queued workloads are timed.
PODS_READY_SECONDS = 4

#: A queued JobSet sent to west, which does not serve JobSet: its Jobs never get ready.
QUEUED_JOBSET_ON_WEST = """
apiVersion: kueue.x-k8s.io/v1beta1
kind: ResourceFlavor
metadata: {name: l4}
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: ClusterQueue
metadata: {name: ml}
spec:
  namespaceSelector: {}
  resourceGroups:
  - coveredResources: [nvidia.com/gpu]
    flavors:
    - name: l4
      resources: [{name: nvidia.com/gpu, nominalQuota: 4}]
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: LocalQueue
metadata: {name: ml, namespace: ml}
spec: {clusterQueue: ml}
---
""" + JOBSET_ON_WEST.replace("name: train-on-west", "name: stuck-on-west").replace(
    "kind: JobSet, name: train}", "kind: JobSet, name: stuck}").replace(
    "metadata: {name: train, namespace: ml}", "metadata: {name: stuck, namespace: ml, labels: {kueue.x-k8s.io/queue-name: ml}}")


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Kubectl, dict[str, Kubectl]]]:
    with ProcessGroup.running_fleet(
        tmp_path_factory.mktemp("any-kind"), FLEET, ("east", "west"), "--kueue-wait-for-pods-ready-timeout", str(PODS_READY_SECONDS),
        agent_flags=("--resync-interval", str(RESYNC_SECONDS)),
    ) as fleet:
        yield fleet


def test_daemonset_cronjob_and_service_land_everywhere_and_fold_back(
    fleet: tuple[Kubectl, dict[str, Kubectl]],
) -> None:
    hub, members = fleet
    hub.run("apply", "-f", "-", input_text=EVERYWHERE)

    # Every member runs its copy; the member's own controllers give it a status.
    def member_daemonsets() -> dict[str, Any] | None:
        found = {name: m.json_or_none("get", "daemonset", "node-exporter", "-n", "ml") for name, m in members.items()}
        if any(ds is None or not (ds.get("status") or {}).get("desiredNumberScheduled") for ds in found.values()):
            return None
        return found

    daemonsets = wait_for(member_daemonsets, timeout=120, what="the DaemonSet running in both members")
    nodes = {name: len(m.json("get", "nodes")["items"]) for name, m in members.items()}
    assert {name: ds["status"]["desiredNumberScheduled"] for name, ds in daemonsets.items()} == nodes

    # The hub's DaemonSet sums the members' node counts.
    def hub_daemonset_counts() -> dict[str, Any] | None:
        status = (hub.json_or_none("get", "daemonset", "node-exporter", "-n", "ml") or {}).get("status") or {}
        return status if status.get("numberReady") == sum(nodes.values()) else None

    status = wait_for(hub_daemonset_counts, timeout=120, what="the hub DaemonSet counting every member's nodes")
    assert status["desiredNumberScheduled"] == status["updatedNumberScheduled"] == sum(nodes.values())
    table = hub.run("get", "daemonset", "node-exporter", "-n", "ml").stdout
    assert table.split("\n")[0].split() == ["NAME", "DESIRED", "CURRENT", "READY", "UP-TO-DATE", "AVAILABLE", "NODE", "SELECTOR", "AGE"]
    assert table.split("\n")[1].split()[1:6] == [str(sum(nodes.values()))] * 5

    # The LoadBalancer Service: every member's address on the hub.
    def member_addresses() -> set[str] | None:
        out: set[str] = set()
        for m in members.values():
            points = ((m.json_or_none("get", "service", "gateway", "-n", "ml") or {}).get("status") or {}).get("loadBalancer", {}).get("ingress")
            if not points:
                return None
            out.update(p["ip"] for p in points)
        return out

    addresses = wait_for(member_addresses, timeout=120, what="both members giving the Service an address")

    def hub_addresses() -> bool:
        points = ((hub.json_or_none("get", "service", "gateway", "-n", "ml") or {}).get("status") or {}).get("loadBalancer", {}).get("ingress") or []
        return {p["ip"] for p in points} == addresses

    wait_for(hub_addresses, timeout=120, what="the hub Service showing every member's load balancer address")

    # The CronJob: each member runs Jobs on schedule; the hub lists them and the last schedule.
    def hub_cronjob() -> dict[str, Any] | None:
        status = (hub.json_or_none("get", "cronjob", "checkpoint-sweeper", "-n", "ml") or {}).get("status") or {}
        clusters = {str(ref.get("name")).split("/", 1)[0] for ref in status.get("active") or ()}
        return status if clusters == set(members) and status.get("lastScheduleTime") else None

    cron_status = wait_for(hub_cronjob, timeout=180, what="the hub CronJob listing both members' active Jobs")
    for member in members.values():
        member_status = (member.json_or_none("get", "cronjob", "checkpoint-sweeper", "-n", "ml") or {}).get("status") or {}
        for ref in member_status.get("active") or ():
            assert member.json_or_none("get", "job", str(ref["name"]), "-n", "ml") is not None
        assert member_status["lastScheduleTime"] <= cron_status["lastScheduleTime"]
    cron_table = hub.run("get", "cronjob", "checkpoint-sweeper", "-n", "ml").stdout.split("\n")
    assert cron_table[0].split() == ["NAME", "SCHEDULE", "TIMEZONE", "SUSPEND", "ACTIVE", "LAST", "SCHEDULE", "AGE"]
    assert cron_table[1].split()[1:7] == ["*", "*", "*", "*", "*", "<none>"]

    # The binding collects each member's status as Karmada's aggregatedStatus.
    binding = hub.json("get", "resourcebinding", "node-exporter-daemonset", "-n", "ml")
    aggregated = {item["clusterName"]: item for item in binding["status"]["aggregatedStatus"]}
    assert set(aggregated) == set(members)
    assert all(item["applied"] and item["health"] == "Healthy" for item in aggregated.values())


def test_a_runtime_class_lands_in_every_member_and_leaves_with_the_hubs(
    fleet: tuple[Kubectl, dict[str, Kubectl]],
) -> None:
    hub, members = fleet
    applied = hub.run("apply", "-f", "-", input_text=RUNTIME_CLASS_EVERYWHERE)
    assert "runtimeclass.node.k8s.io/nvidia created" in applied.stdout
    assert "Warning" not in applied.stderr, applied.stderr

    def member_runtime_classes() -> dict[str, Any] | None:
        found = {name: m.json_or_none("get", "runtimeclass", "nvidia") for name, m in members.items()}
        return found if all(found.values()) else None

    found = wait_for(member_runtime_classes, timeout=120, what="the RuntimeClass in both members")
    for name, runtime_class in found.items():
        assert runtime_class["handler"] == "nvidia", name
        assert runtime_class["scheduling"] == {"nodeSelector": {"nvidia.com/gpu.present": "true"}}, name

    # A cluster-scoped kind's binding lives in gpufed-system, as a CRD's does.
    def healthy_everywhere() -> bool:
        binding = hub.json_or_none("get", "resourcebinding", "nvidia-runtimeclass", "-n", "gpufed-system") or {}
        aggregated = (binding.get("status") or {}).get("aggregatedStatus") or ()
        return {item["clusterName"] for item in aggregated if item.get("applied") and item.get("health") == "Healthy"} == set(members)

    wait_for(healthy_everywhere, timeout=120, what="the RuntimeClass's binding applied and Healthy in both members")

    hub.run("delete", "runtimeclass", "nvidia")

    def gone_everywhere() -> bool:
        return all(m.json_or_none("get", "runtimeclass", "nvidia") is None for m in members.values())

    wait_for(gone_everywhere, timeout=120, what="the RuntimeClass deleted from both members")


def test_a_priority_class_the_member_lacks_is_named_on_the_hub_and_propagates_with_the_other_cluster_kinds(
    fleet: tuple[Kubectl, dict[str, Kubectl]],
) -> None:
    hub, members = fleet
    east = members["east"]
    hub.run("apply", "-f", "-", input_text=HIGH_PRIORITY_ON_EAST)

    (message,) = wait_for(lambda: pods_not_starting(hub, "urgent"), timeout=120,
                          what="the hub's PodsNotStarting Event naming the PriorityClass")
    assert re.fullmatch(
        r'cluster east: 1 pod\(s\) cannot be created: FailedCreate: pods "urgent-[a-z0-9]+-" is forbidden: '
        r"no PriorityClass with name high was found \(propagate PriorityClass high to the cluster: select it in a "
        r"ClusterPropagationPolicy\)",
        message,
    ), message
    assert east.json("get", "pods", "-n", "ml", "-l", "app=urgent")["items"] == []

    applied = hub.run("apply", "-f", "-", input_text=CLUSTER_KINDS_EVERYWHERE)
    assert "Warning" not in applied.stderr, applied.stderr

    def running() -> bool:
        status = hub.json("get", "deployment", "urgent", "-n", "ml").get("status") or {}
        return status.get("readyReplicas") == 1

    wait_for(running, timeout=120, what="the hub's Deployment ready once its PriorityClass reached east")
    (pod,) = east.json("get", "pods", "-n", "ml", "-l", "app=urgent")["items"]
    assert pod["spec"]["priority"] == 1000

    kinds = ("priorityclass/high", "storageclass/fast", "ingressclass/edge", "clusterrole/trainer-operator",
             "clusterrolebinding/trainer-operator")

    def everywhere() -> bool:
        return all(m.run("get", kind, check=False).returncode == 0 for m in members.values() for kind in kinds)

    wait_for(everywhere, timeout=120, what="the cluster-scoped objects in both members")
    for member in members.values():
        assert member.json("get", "clusterrole", "trainer-operator")["rules"][0]["resources"] == ["pytorchjobs"]
        assert member.json("get", "clusterrolebinding", "trainer-operator")["roleRef"]["name"] == "trainer-operator"


#: A Deployment on east whose pods mount a claim its policy leaves behind; the claim names a
#: StorageClass only the hub has.
SCRATCH_ON_EAST = """
apiVersion: v1
kind: Namespace
metadata: {name: ml}
---
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata: {name: ssd}
provisioner: pd.csi.storage.gke.io
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: scratch, namespace: ml}
spec:
  storageClassName: ssd
  accessModes: [ReadWriteOnce]
  resources: {requests: {storage: 10Gi}}
---
apiVersion: policy.gpufed.io/v1alpha1
kind: PropagationPolicy
metadata: {name: trainer-on-east, namespace: ml}
spec:
  resourceSelectors:
    - {apiVersion: apps/v1, kind: Deployment, name: trainer}
  placement:
    clusterAffinity:
      clusterNames: [east]
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: trainer, namespace: ml}
spec:
  replicas: 1
  selector:
    matchLabels: {app: trainer}
  template:
    metadata:
      labels: {app: trainer}
    spec:
      containers:
        - name: trainer
          image: registry.example.com/ml/train:1.0
          volumeMounts:
            - {name: scratch, mountPath: /scratch}
      volumes:
        - name: scratch
          persistentVolumeClaim: {claimName: scratch}
"""

SSD_EVERYWHERE = """
apiVersion: policy.karmada.io/v1alpha1
kind: ClusterPropagationPolicy
metadata: {name: ssd-everywhere}
spec:
  resourceSelectors:
    - {apiVersion: storage.k8s.io/v1, kind: StorageClass, name: ssd}
"""

#: kube-scheduler's words after VolumeBinding's PreFilter status: DefaultPreemption's.
_PREEMPTION = r"preemption: 0/\d+ nodes are available: \d+ Preemption is not helpful for scheduling\."


def _trainer_work_entry(east_works: dict[str, Any]) -> dict[str, Any] | None:
    for work in east_works["items"]:
        for entry in (work.get("status") or {}).get("manifestStatuses") or ():
            if entry["identifier"]["kind"] == "Deployment" and entry["identifier"]["name"] == "trainer":
                return dict(entry)
    return None


def _unschedulable_in_next_report(hub: Kubectl, cluster: str) -> list[str]:
    """The names of the workloads in namespace ml that the cluster's next capacity report (one
    taken after now) lists in ``status.unschedulableWorkloads``."""
    before = (hub.json("get", "cluster", cluster).get("status") or {}).get("lastReportTime")

    def next_status() -> dict[str, Any] | None:
        status: dict[str, Any] = hub.json("get", "cluster", cluster).get("status") or {}
        return status if status.get("lastReportTime") != before else None

    status = wait_for(next_status, timeout=120, what=f"a new capacity report from {cluster}")
    return [str(e.get("name")) for e in status.get("unschedulableWorkloads") or () if e.get("namespace") == "ml"]


def test_storage_the_member_lacks_is_named_on_the_hub_and_not_taken_for_want_of_room(
    fleet: tuple[Kubectl, dict[str, Kubectl]],
) -> None:
    hub, members = fleet
    east = members["east"]
    hub.run("apply", "-f", "-", input_text=SCRATCH_ON_EAST)

    # The claim stays on the hub: the member's scheduler cannot find it.
    (message,) = wait_for(lambda: pods_not_starting(hub, "trainer"), timeout=120,
                          what="the hub's PodsNotStarting Event naming the claim")
    assert re.fullmatch(
        r'cluster east: 1 pod\(s\) cannot be scheduled: Unschedulable: 0/\d+ nodes are available: '
        r'persistentvolumeclaim "scratch" not found\. ' + _PREEMPTION + r" \(propagate "
        r"PersistentVolumeClaim scratch to the cluster: select it in a policy, or set propagateDeps: true in the "
        r"workload's policy\)",
        message,
    ), message
    # Reported as waiting for an object, not as replicas the member has no room for.
    entry = _trainer_work_entry(hub.json("get", "works", "-n", "gpufed-es-east"))
    assert entry is not None and "unschedulable" not in entry, entry

    # As the Event says: the claim goes along, and now waits for its StorageClass.
    hub.run("patch", "propagationpolicy", "trainer-on-east", "-n", "ml", "--type", "merge",
            "-p", '{"spec":{"propagateDeps":true}}')

    def class_named() -> list[str]:
        return [m for m in pods_not_starting(hub, "trainer") if "StorageClass" in m]

    (message,) = wait_for(class_named, timeout=120, what="the hub's PodsNotStarting Event naming the StorageClass")
    # Nor does east's next capacity report count them among the pods it has no room for.
    assert "trainer" not in _unschedulable_in_next_report(hub, "east")
    assert re.fullmatch(
        r"cluster east: 1 pod\(s\) cannot be scheduled: Unschedulable: 0/\d+ nodes are available: pod has "
        r"unbound immediate PersistentVolumeClaims\. " + _PREEMPTION + r"; "
        r'PersistentVolumeClaim scratch: storageclass.storage.k8s.io "ssd" not found \(propagate StorageClass ssd '
        r"to the cluster: select it in a ClusterPropagationPolicy\)",
        message,
    ), message
    assert east.json("get", "pvc", "scratch", "-n", "ml")["status"]["phase"] == "Pending"

    hub.run("apply", "-f", "-", input_text=SSD_EVERYWHERE)

    def running() -> bool:
        status = hub.json("get", "deployment", "trainer", "-n", "ml").get("status") or {}
        return status.get("readyReplicas") == 1

    wait_for(running, timeout=120, what="the hub's Deployment ready once its StorageClass reached east")
    assert east.json("get", "pvc", "scratch", "-n", "ml")["status"]["phase"] == "Bound"


def test_a_kind_the_member_does_not_serve_is_not_placed_there(
    fleet: tuple[Kubectl, dict[str, Kubectl]],
) -> None:
    """west's member does not serve JobSet: its agent's ``status.apiEnablements`` do not list it,
    so Karmada's APIEnablement filter keeps the JobSet off west, the binding says why, and no Work
    reaches west. (A Cluster whose agent lists no APIs is not judged: its member refuses the kind
    at apply time, the Work's ``KindNotServed``, tests/member_agent/test_unserved_retries.py.)"""
    hub, members = fleet
    hub.run("apply", "-f", "-", input_text=JOBSET_ON_WEST)

    def explained() -> dict[str, Any] | None:
        binding = hub.json_or_none("get", "resourcebinding", "train-jobset", "-n", "ml")
        for entry in ((binding or {}).get("status") or {}).get("explanation") or ():
            if entry.get("cluster") == "west" and entry.get("reasons"):
                return dict(entry)
        return None

    west = wait_for(explained, timeout=120, what="the binding saying west does not serve JobSet")
    assert west["reasons"] == ["APIEnablement: cluster(s) did not have the API resource"]
    listed = {
        (group["groupVersion"], resource["kind"])
        for group in hub.json("get", "cluster", "west")["status"]["apiEnablements"]
        for resource in group.get("resources") or ()
    }
    assert ("apps/v1", "Deployment") in listed and ("jobset.x-k8s.io/v1alpha2", "JobSet") not in listed
    assert hub.json_or_none("get", "work", "ml-train-jobset", "-n", "gpufed-es-west") is None
    assert members["west"].run("get", "jobsets", "-n", "ml", check=False).returncode != 0
    hub.run("delete", "jobset", "train", "-n", "ml")


def test_a_queued_jobset_whose_jobs_never_get_ready_is_evicted_and_requeued(
    fleet: tuple[Kubectl, dict[str, Kubectl]],
) -> None:
    """Kueue's waitForPodsReady for a JobSet: admitted and sent to west, which cannot run it, its
    replicated Jobs are never ready; after the hub's timeout its Workload is evicted and requeued
    with backoff as Kueue writes it, and the JobSet is suspended again at the hub."""
    hub, _ = fleet
    hub.run("apply", "-f", "-", input_text=QUEUED_JOBSET_ON_WEST)
    name = wait_for(lambda: hub.json_or_none("get", "jobset", "stuck", "-n", "ml") and hub.workload_name("jobset", "stuck", "-n", "ml"),
                    timeout=30, what="the queued JobSet")

    def evicted() -> dict[str, Any] | None:
        status = (hub.json_or_none("get", "workload", name, "-n", "ml") or {}).get("status") or {}
        conds = {c["type"]: c for c in status.get("conditions") or ()}
        evicted = conds.get("Evicted") or {}
        return status | {"conditions": conds} if (evicted.get("status"), evicted.get("reason")) == ("True", "PodsReadyTimeout") else None

    status = wait_for(evicted, timeout=90, what="the JobSet's Workload evicted by the PodsReady timeout")
    conds = status["conditions"]
    assert conds["Evicted"]["message"] == f"Exceeded the PodsReady timeout ml/{name}"
    assert (conds["Requeued"]["status"], conds["Requeued"]["reason"]) == ("False", "PodsReadyTimeout")
    assert (conds["PodsReady"]["status"], conds["PodsReady"]["reason"]) == ("False", "WaitForStart")
    assert status["requeueState"]["count"] == 1 and "admission" not in status
    wait_for(lambda: hub.json("get", "jobset", "stuck", "-n", "ml")["spec"].get("suspend") is True, timeout=30,
             what="the JobSet suspended again at the hub")
    events = hub.json("get", "events", "-n", "ml", "--field-selector", "reason=EvictedDueToPodsReadyTimeout")["items"]
    assert [e["involvedObject"]["name"] for e in events] == [name]
    hub.run("delete", "jobset", "stuck", "-n", "ml")  # not admitted again after its backoff, in the shared fleet


def test_exported_objects_run_once_and_land_without_their_old_clusters_fields(
    fleet: tuple[Kubectl, dict[str, Kubectl]],
) -> None:
    hub, members = fleet
    east = members["east"]
    hub.run("apply", "-f", "-", input_text=EXPORTED)

    # The Service: the member's copy, and the Work behind it, carry no address of the old cluster.
    service = wait_for(lambda: east.json_or_none("get", "service", "exported", "-n", "ml"), timeout=120,
                       what="the exported Service in east")
    assert "10.96.4.7" not in (service["spec"].get("clusterIP"), *(service["spec"].get("clusterIPs") or ()))
    work = hub.json("get", "work", "ml-exported-service", "-n", "gpufed-es-east")
    manifest = work["spec"]["workload"]["manifests"][0]
    assert "clusterIP" not in manifest["spec"] and "clusterIPs" not in manifest["spec"]
    assert [p["port"] for p in manifest["spec"]["ports"]] == [80]

    # The Job runs, finishes, and 2 s later leaves the hub, then the member.
    def pods_scheduled() -> list[str]:
        events = east.json("get", "events", "-n", "ml", "--field-selector", "reason=Scheduled")["items"]
        return sorted({e["involvedObject"]["name"] for e in events if e["involvedObject"]["name"].startswith("run-once-")})

    wait_for(pods_scheduled, timeout=120, what="the Job's pod scheduled in east")
    wait_for(lambda: hub.run("get", "job", "run-once", "-n", "ml", check=False).returncode != 0, timeout=120,
             what="the finished Job deleted from the hub")
    wait_for(lambda: east.run("get", "job", "run-once", "-n", "ml", check=False).returncode != 0, timeout=60,
             what="the Job deleted from east")
    # Long enough for two resyncs of every Work: nothing brings the Job back.
    time.sleep(RESYNC_SECONDS * 2 + 1)
    assert east.run("get", "job", "run-once", "-n", "ml", check=False).returncode != 0
    assert len(pods_scheduled()) == 1  # it ran once


SERVED_CLUSTER_IP = """
apiVersion: policy.gpufed.io/v1alpha1
kind: PropagationPolicy
metadata: {name: addressed, namespace: ml}
spec:
  resourceSelectors:
    - {apiVersion: v1, kind: Service, name: addressed}
    - {apiVersion: v1, kind: Service, name: exposed}
  placement:
    clusterAffinity: {clusterNames: [east]}
"""


def test_the_hub_allocates_service_addresses_and_node_ports_and_members_get_none_of_its_addresses(
    fleet: tuple[Kubectl, dict[str, Kubectl]],
) -> None:
    hub, members = fleet
    east = members["east"]
    hub.run("apply", "-f", "-", input_text=SERVED_CLUSTER_IP)
    hub.run("create", "service", "clusterip", "addressed", "--tcp=80:8080", "-n", "ml")
    hub.run("create", "service", "nodeport", "exposed", "--tcp=80:8080", "-n", "ml")

    # kubectl get svc shows the address and the node port the hub gave them.
    rows = {line.split()[0]: line.split() for line in hub.run("get", "svc", "-n", "ml").stdout.splitlines()[1:]}
    address = rows["addressed"][2]
    octets = [int(part) for part in address.split(".")]
    assert octets[0] == 10 and 96 <= octets[1] <= 111, rows  # in 10.96.0.0/12
    exposed = hub.json("get", "svc", "exposed", "-n", "ml")["spec"]
    node_port = exposed["ports"][0]["nodePort"]
    assert 30000 <= node_port <= 32767
    assert rows["exposed"][1] == "NodePort" and rows["exposed"][4] == f"80:{node_port}/TCP"
    assert exposed["ipFamilies"] == ["IPv4"] and exposed["ipFamilyPolicy"] == "SingleStack"

    # A taken address or node port is kube's 422, word for word.
    taken = hub.run("create", "service", "clusterip", "again", "--tcp=80", f"--clusterip={address}", "-n", "ml",
                    check=False)
    assert taken.returncode != 0
    assert (f'Service "again" is invalid: spec.clusterIPs: Invalid value: []string{{"{address}"}}: '
            f"failed to allocate IP {address}: provided IP is already allocated") in taken.stderr
    clash = hub.run("create", "service", "nodeport", "again", "--tcp=81", f"--node-port={node_port}", "-n", "ml",
                    check=False)
    assert (f'Service "again" is invalid: spec.ports[0].nodePort: Invalid value: {node_port}: '
            "provided port is already allocated") in clash.stderr

    # The member gets the Service without the hub's address (its own API allocates its own).
    work = wait_for(lambda: hub.json_or_none("get", "work", "ml-addressed-service", "-n", "gpufed-es-east"),
                    timeout=120, what="the Work of the addressed Service")
    manifest = work["spec"]["workload"]["manifests"][0]["spec"]
    assert "clusterIP" not in manifest and "clusterIPs" not in manifest
    copy = wait_for(lambda: east.json_or_none("get", "service", "addressed", "-n", "ml"), timeout=120,
                    what="the addressed Service in east")
    assert address not in (copy["spec"].get("clusterIP"), *(copy["spec"].get("clusterIPs") or ()))

    # Deleted, its address and node port are free again.
    hub.run("delete", "svc", "addressed", "exposed", "-n", "ml")
    hub.run("create", "service", "clusterip", "again", "--tcp=80", f"--clusterip={address}", "-n", "ml")
    hub.run("create", "service", "nodeport", "again-np", "--tcp=81", f"--node-port={node_port}", "-n", "ml")
    hub.run("delete", "svc", "again", "again-np", "-n", "ml")
