"""``propagateDeps`` end to end: a ConfigMap a Deployment mounts, applied to the hub with
kubectl, appears in exactly the member clusters the Deployment runs in, follows it when it
spills to the cloud, and leaves when it comes back; a Deployment whose policy leaves its
ConfigMap (or ServiceAccount) behind cannot start in the member, the hub's Events say why and
what to do, and it starts once the policy takes it along. Real hub on real etcd, two simulated members,
two agents."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from e2e.harness import Kubectl, ProcessGroup, pods_not_starting, wait_for

FLEET = Path(__file__).parent / "fleets" / "placement.yaml"
pytestmark = pytest.mark.e2e

#: On-prem has 6 whole A100s free, so 2 one-GPU replicas stay there and 8 spill 2 to the cloud.
MANIFESTS = """
apiVersion: v1
kind: ConfigMap
metadata:
  name: server-config
  namespace: ml
data:
  model: llama-3.1-8b
---
apiVersion: policy.gpufed.io/v1alpha1
kind: PropagationPolicy
metadata:
  name: serve-with-config
  namespace: ml
spec:
  resourceSelectors:
    - apiVersion: apps/v1
      kind: Deployment
      name: serve
  propagateDeps: true
  placement:
    replicaScheduling:
      replicaSchedulingType: Divided
      replicaDivisionPreference: TieredOverflow
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: serve
  namespace: ml
spec:
  replicas: 2
  selector:
    matchLabels: {app: serve}
  template:
    metadata:
      labels: {app: serve}
    spec:
      containers:
        - name: server
          image: registry.example.com/ml/serve:1.0
          volumeMounts:
            - {name: config, mountPath: /etc/serve}
          resources:
            limits: {nvidia.com/gpu: 1}
      volumes:
        - name: config
          configMap: {name: server-config}
"""


def _config(member: Kubectl) -> str | None:
    """The member's copy of the ConfigMap's ``model`` value, or None when it has none."""
    result = member.run("get", "configmap", "server-config", "-n", "ml", "-o", "jsonpath={.data.model}", check=False)
    return result.stdout if result.returncode == 0 else None


def _replicas(member: Kubectl) -> int | None:
    result = member.run("get", "deployment", "serve", "-n", "ml", "-o", "jsonpath={.spec.replicas}", check=False)
    return int(result.stdout) if result.returncode == 0 and result.stdout else None


def test_a_mounted_config_map_goes_only_where_the_deployment_runs(processes: ProcessGroup) -> None:
    launched = {name: processes.launch_member(FLEET, name, time_scale=20.0) for name in ("onprem-a100", "cloud-h100")}
    _, hub = processes.start_hub()
    members = processes.join_members(hub, FLEET, launched)
    onprem, cloud = members["onprem-a100"], members["cloud-h100"]

    def all_ready() -> bool:
        items = hub.json("get", "clusters")["items"]
        return len(items) == 2 and all(item.get("status", {}).get("nodeShapes") for item in items)

    wait_for(all_ready, timeout=90, what="both clusters reporting capacity")
    hub.run("create", "namespace", "ml")
    hub.run("apply", "-f", "-", input_text=MANIFESTS)

    wait_for(lambda: _replicas(onprem) == 2 and _config(onprem) == "llama-3.1-8b",
             timeout=90, what="the Deployment and its ConfigMap in onprem-a100")
    assert _replicas(cloud) is None
    assert _config(cloud) is None, "the ConfigMap went to a cluster the Deployment does not run in"
    attached = hub.json("get", "resourcebinding", "server-config-configmap", "-n", "ml")
    assert [c["name"] for c in attached["spec"]["clusters"]] == ["onprem-a100"]

    # 8 replicas: 6 fill on-prem, 2 spill to the cloud, and the ConfigMap follows them there.
    hub.run("scale", "deployment", "serve", "-n", "ml", "--replicas", "8")
    wait_for(lambda: _replicas(cloud) == 2 and _config(cloud) == "llama-3.1-8b",
             timeout=90, what="2 replicas and the ConfigMap in cloud-h100")

    # An edit on the hub reaches every member's copy; as on kube, the ConfigMap has no generation.
    hub.run("patch", "configmap", "server-config", "-n", "ml", "--type", "merge", "-p", '{"data":{"model":"mistral-7b"}}')
    wait_for(lambda: _config(onprem) == "mistral-7b" and _config(cloud) == "mistral-7b",
             timeout=90, what="the edited ConfigMap in both members")
    assert "generation" not in hub.json("get", "configmap", "server-config", "-n", "ml")["metadata"]
    # Applied, claimed (the policy's name in its annotations: kube's Deployment strategy moves the
    # generation with them, as on a Karmada control plane), scaled.
    assert hub.json("get", "deployment", "serve", "-n", "ml")["metadata"]["generation"] == 3

    # Back to 2: the cloud replicas go, and the ConfigMap leaves the cloud with them.
    hub.run("scale", "deployment", "serve", "-n", "ml", "--replicas", "2")
    wait_for(lambda: _replicas(cloud) is None and _config(cloud) is None,
             timeout=90, what="the Deployment and the ConfigMap gone from cloud-h100")
    assert _config(onprem) == "mistral-7b"

    # A Deployment whose policy does not take the ConfigMap its pods read: the member places the
    # pods but cannot start them, and the hub's Events say so, with what to do.
    hub.run("create", "configmap", "bare-config", "-n", "ml", "--from-literal=model=llama")
    hub.run("apply", "-f", "-", input_text=BARE)

    (message,) = wait_for(lambda: pods_not_starting(hub, "bare"), timeout=90, what="the hub's PodsNotStarting Event")
    assert message == (
        'cluster onprem-a100: 1 pod(s) cannot start: CreateContainerConfigError: configmap "bare-config" not '
        "found (propagate ConfigMap bare-config to the cluster: select it in a policy, or set propagateDeps: "
        "true in the workload's policy)"
    )
    waiting = onprem.json("get", "pods", "-n", "ml", "-l", "app=bare")["items"][0]["status"]
    assert waiting["containerStatuses"][0]["state"]["waiting"]["reason"] == "CreateContainerConfigError"

    # As the Event says: with propagateDeps the ConfigMap goes along, and the pod starts.
    hub.run("patch", "propagationpolicy", "bare", "-n", "ml", "--type", "merge", "-p", '{"spec":{"propagateDeps":true}}')

    def ready() -> bool:
        status = hub.json("get", "deployment", "bare", "-n", "ml").get("status") or {}
        return status.get("readyReplicas") == 1

    wait_for(ready, timeout=90, what="the hub's Deployment ready once its ConfigMap reached the member")

    # A Deployment whose pods run as a ServiceAccount its policy leaves behind: the member's API
    # refuses the pods, the agent reports it, and the hub's Event says what to do.
    hub.run("create", "serviceaccount", "runner", "-n", "ml")
    hub.run("apply", "-f", "-", input_text=RUNNER)

    (message,) = wait_for(lambda: pods_not_starting(hub, "runner"), timeout=90,
                          what="the hub's PodsNotStarting Event for the ServiceAccount")
    assert re.fullmatch(
        r'cluster onprem-a100: 1 pod\(s\) cannot be created: FailedCreate: pods "runner-[a-z0-9]+-" is forbidden: '
        r'error looking up service account ml/runner: serviceaccount "runner" not found \(propagate ServiceAccount '
        r"runner to the cluster: select it in a policy, or set propagateDeps: true in the workload's policy\)",
        message,
    ), message
    assert onprem.json("get", "pods", "-n", "ml", "-l", "app=runner")["items"] == []

    hub.run("patch", "propagationpolicy", "runner", "-n", "ml", "--type", "merge",
            "-p", '{"spec":{"propagateDeps":true}}')

    def running() -> bool:
        status = hub.json("get", "deployment", "runner", "-n", "ml").get("status") or {}
        return status.get("readyReplicas") == 1

    wait_for(running, timeout=120, what="the hub's Deployment ready once its ServiceAccount reached the member")


BARE = """
apiVersion: policy.gpufed.io/v1alpha1
kind: PropagationPolicy
metadata:
  name: bare
  namespace: ml
spec:
  resourceSelectors:
    - {apiVersion: apps/v1, kind: Deployment, name: bare}
  placement:
    clusterAffinity: {clusterNames: [onprem-a100]}
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: bare
  namespace: ml
spec:
  replicas: 1
  selector:
    matchLabels: {app: bare}
  template:
    metadata:
      labels: {app: bare}
    spec:
      containers:
        - name: server
          image: registry.example.com/ml/serve:1.0
          envFrom:
            - configMapRef: {name: bare-config}
"""


#: BARE with its pods running as ServiceAccount ``runner`` instead of reading a ConfigMap.
RUNNER = (
    BARE.replace("bare", "runner")
    .replace("          envFrom:\n            - configMapRef: {name: runner-config}\n", "")
    .replace("    spec:\n      containers:", "    spec:\n      serviceAccountName: runner\n      containers:")
)
