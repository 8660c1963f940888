"""kube's defaults and canonical quantities, through the HTTP API: a minimal manifest of each
built-in kind comes back with every field kube-apiserver would have set (listed per test), and
objects stored before defaulting existed are served defaulted and canonical."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from aiohttp.test_utils import TestClient

from controlplane.apiserver import codec
from controlplane.apiserver.objects import ObjectStore, writing

Client = TestClient[Any, Any]

#: What kube gives a container that names only itself and its image.
CONTAINER_DEFAULTS = {
    "terminationMessagePath": "/dev/termination-log",
    "terminationMessagePolicy": "File",
    "resources": {},
}
#: What kube gives every pod spec (``SetDefaults_PodSpec``).
POD_SPEC_DEFAULTS = {
    "restartPolicy": "Always",
    "terminationGracePeriodSeconds": 30,
    "dnsPolicy": "ClusterFirst",
    "securityContext": {},
    "schedulerName": "default-scheduler",
}


def template(labels: dict[str, str] | None = None, **container: Any) -> dict[str, Any]:
    return {
        "metadata": {"labels": labels or {"app": "web"}},
        "spec": {"containers": [{"name": "main", "image": "nginx:1.27", **container}]},
    }


def defaulted_template(labels: dict[str, str] | None = None, **container: Any) -> dict[str, Any]:
    return {
        "metadata": {"labels": labels or {"app": "web"}},
        "spec": {
            "containers": [{
                "name": "main", "image": "nginx:1.27", "imagePullPolicy": "IfNotPresent",
                **CONTAINER_DEFAULTS, **container,
            }],
            **POD_SPEC_DEFAULTS,
        },
    }


async def create(api: Client, path: str, body: dict[str, Any]) -> dict[str, Any]:
    response = await api.post(path, json=body)
    assert response.status == 201, await response.text()
    created: dict[str, Any] = await response.json()
    name = body["metadata"]["name"]
    fetched: dict[str, Any] = await (await api.get(f"{path}/{name}")).json()
    assert fetched == created  # what is stored is what was returned
    return fetched


async def test_deployment_defaults(api: Client) -> None:
    body = {
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
        "spec": {"selector": {"matchLabels": {"app": "web"}}, "template": template()},
    }
    got = await create(api, "/apis/apps/v1/namespaces/default/deployments", body)
    assert got["spec"] == {
        "replicas": 1,
        "selector": {"matchLabels": {"app": "web"}},
        "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "25%", "maxSurge": "25%"}},
        "revisionHistoryLimit": 10,
        "progressDeadlineSeconds": 600,
        "template": defaulted_template(),
    }
    assert got["status"] == {}
    assert got["metadata"]["generation"] == 1 and got["metadata"]["uid"]


async def test_deployment_recreate_strategy_gets_no_rolling_update(api: Client) -> None:
    body = {
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
        "spec": {"selector": {"matchLabels": {"app": "web"}}, "strategy": {"type": "Recreate"}, "template": template()},
    }
    got = await create(api, "/apis/apps/v1/namespaces/default/deployments", body)
    assert got["spec"]["strategy"] == {"type": "Recreate"}


async def test_statefulset_defaults(api: Client) -> None:
    body = {
        "apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "db"},
        "spec": {
            "serviceName": "db", "selector": {"matchLabels": {"app": "web"}}, "template": template(),
            "volumeClaimTemplates": [{
                "metadata": {"name": "data"},
                "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1024Mi"}}},
            }],
        },
    }
    got = await create(api, "/apis/apps/v1/namespaces/default/statefulsets", body)
    assert got["spec"] == {
        "serviceName": "db",
        "replicas": 1,
        "selector": {"matchLabels": {"app": "web"}},
        "podManagementPolicy": "OrderedReady",
        "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"partition": 0}},
        "revisionHistoryLimit": 10,
        "persistentVolumeClaimRetentionPolicy": {"whenDeleted": "Retain", "whenScaled": "Retain"},
        "template": defaulted_template(),
        "volumeClaimTemplates": [{
            "metadata": {"name": "data"},
            "spec": {
                "accessModes": ["ReadWriteOnce"], "volumeMode": "Filesystem",
                "resources": {"requests": {"storage": "1Gi"}},
            },
            "status": {"phase": "Pending"},
        }],
    }
    assert got["status"] == {"replicas": 0, "availableReplicas": 0}


async def test_job_defaults_and_generated_selector(api: Client) -> None:
    body = {
        "apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "train"},
        "spec": {"template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "main", "image": "pytorch"}]}}},
    }
    got = await create(api, "/apis/batch/v1/namespaces/default/jobs", body)
    uid = got["metadata"]["uid"]
    generated = {
        "batch.kubernetes.io/controller-uid": uid, "controller-uid": uid,
        "batch.kubernetes.io/job-name": "train", "job-name": "train",
    }
    assert got["spec"] == {
        "completions": 1,
        "parallelism": 1,
        "backoffLimit": 6,
        "completionMode": "NonIndexed",
        "suspend": False,
        "podReplacementPolicy": "TerminatingOrFailed",
        "manualSelector": False,
        "selector": {"matchLabels": {"batch.kubernetes.io/controller-uid": uid}},
        "template": {
            "metadata": {"labels": generated},
            "spec": {
                # no tag: ":latest", pulled every time
                "containers": [{"name": "main", "image": "pytorch", "imagePullPolicy": "Always", **CONTAINER_DEFAULTS}],
                **POD_SPEC_DEFAULTS, "restartPolicy": "Never",
            },
        },
    }
    assert got["metadata"]["labels"] == generated  # SetDefaults_Job: the template's labels
    assert got["status"] == {}


async def test_job_with_manual_selector_and_failure_policy(api: Client) -> None:
    body = {
        "apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "manual", "labels": {"team": "ml"}},
        "spec": {
            "manualSelector": True, "parallelism": 4, "selector": {"matchLabels": {"app": "web"}},
            "podFailurePolicy": {"rules": [{"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget"}]}]},
            "template": {**template(), "spec": {**template()["spec"], "restartPolicy": "Never"}},
        },
    }
    got = await create(api, "/apis/batch/v1/namespaces/default/jobs", body)
    spec = got["spec"]
    assert spec["selector"] == {"matchLabels": {"app": "web"}}
    assert spec["template"]["metadata"]["labels"] == {"app": "web"}
    assert "completions" not in spec and spec["parallelism"] == 4  # completions stay unset
    assert spec["podReplacementPolicy"] == "Failed"
    assert spec["podFailurePolicy"]["rules"][0]["onPodConditions"] == [{"type": "DisruptionTarget", "status": "True"}]
    assert got["metadata"]["labels"] == {"team": "ml"}


async def test_pod_defaults_requests_from_limits_and_status(api: Client) -> None:
    body = {
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
        "spec": {
            "containers": [{
                "name": "main", "image": "registry.example.com:5000/team/app@sha256:" + "a" * 64,
                "ports": [{"containerPort": 80}],
                "resources": {"limits": {"cpu": 1.5, "memory": "1024Mi", "nvidia.com/gpu": 1}},
                "livenessProbe": {"httpGet": {"port": 80}},
                "env": [{"name": "NODE", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}}],
            }],
            "volumes": [{"name": "scratch"}, {"name": "cfg", "configMap": {"name": "cfg"}}],
        },
    }
    got = await create(api, "/api/v1/namespaces/default/pods", body)
    container = got["spec"]["containers"][0]
    assert container["imagePullPolicy"] == "IfNotPresent"  # digest, no tag
    assert container["ports"] == [{"containerPort": 80, "protocol": "TCP"}]
    limits = {"cpu": "1500m", "memory": "1Gi", "nvidia.com/gpu": "1"}
    assert container["resources"] == {"limits": limits, "requests": limits}
    assert container["livenessProbe"] == {
        "httpGet": {"port": 80, "path": "/", "scheme": "HTTP"},
        "timeoutSeconds": 1, "periodSeconds": 10, "successThreshold": 1, "failureThreshold": 3,
    }
    assert container["env"][0]["valueFrom"]["fieldRef"] == {"fieldPath": "spec.nodeName", "apiVersion": "v1"}
    assert got["spec"]["volumes"] == [
        {"name": "scratch", "emptyDir": {}},
        {"name": "cfg", "configMap": {"name": "cfg", "defaultMode": 420}},
    ]
    assert {key: got["spec"][key] for key in POD_SPEC_DEFAULTS} == POD_SPEC_DEFAULTS
    assert got["spec"]["enableServiceLinks"] is True
    assert got["status"] == {"phase": "Pending", "qosClass": "Guaranteed"}


async def test_service_defaults(api: Client) -> None:
    body = {
        "apiVersion": "v1", "kind": "Service", "metadata": {"name": "web"},
        "spec": {"selector": {"app": "web"}, "ports": [{"name": "http", "port": 80}, {"name": "https", "port": 443, "targetPort": "https"}]},
    }
    got = await create(api, "/api/v1/namespaces/default/services", body)
    assert got["spec"] == {
        "selector": {"app": "web"},
        "ports": [
            {"name": "http", "port": 80, "protocol": "TCP", "targetPort": 80},
            {"name": "https", "port": 443, "targetPort": "https", "protocol": "TCP"},
        ],
        "type": "ClusterIP",
        "sessionAffinity": "None",
        "internalTrafficPolicy": "Cluster",
    }
    assert got["status"] == {"loadBalancer": {}}


async def test_load_balancer_service_defaults(api: Client) -> None:
    body = {
        "apiVersion": "v1", "kind": "Service", "metadata": {"name": "lb"},
        "spec": {"type": "LoadBalancer", "sessionAffinity": "ClientIP", "ports": [{"port": 80}]},
    }
    spec = (await create(api, "/api/v1/namespaces/default/services", body))["spec"]
    assert spec["externalTrafficPolicy"] == "Cluster"
    assert spec["allocateLoadBalancerNodePorts"] is True
    assert spec["sessionAffinityConfig"] == {"clientIP": {"timeoutSeconds": 10800}}


async def test_pvc_secret_namespace_and_priority_class_defaults(api: Client) -> None:
    pvc = await create(api, "/api/v1/namespaces/default/persistentvolumeclaims", {
        "apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "data"},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "0.5Gi"}}},
    })
    assert pvc["spec"] == {
        "accessModes": ["ReadWriteOnce"], "volumeMode": "Filesystem", "resources": {"requests": {"storage": "512Mi"}},
    }
    assert pvc["status"] == {"phase": "Pending"}

    secret = await create(api, "/api/v1/namespaces/default/secrets", {
        "apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"}, "stringData": {"k": "v"},
    })
    assert secret["type"] == "Opaque"

    namespace = await create(api, "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-a"}})
    assert namespace["metadata"]["labels"] == {"kubernetes.io/metadata.name": "team-a"}
    assert namespace["status"] == {"phase": "Active"}

    priority = await create(api, "/apis/scheduling.k8s.io/v1/priorityclasses", {
        "apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "high"}, "value": 1000,
    })
    assert priority["preemptionPolicy"] == "PreemptLowerPriority"


async def test_update_keeps_defaults_and_canonicalises(api: Client) -> None:
    path = "/apis/apps/v1/namespaces/default/deployments"
    body = {
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
        "spec": {"selector": {"matchLabels": {"app": "web"}}, "template": template()},
    }
    created = await create(api, path, body)
    # A replace that omits the defaulted fields gets them again, and no new generation.
    replaced = await api.put(f"{path}/web", json={**body, "metadata": created["metadata"]})
    assert replaced.status == 200
    assert (await replaced.json())["metadata"]["generation"] == 1
    patch = {"spec": {"template": {"spec": {"containers": [{"name": "main", "resources": {"requests": {"cpu": 0.25}}}]}}}}
    patched = await api.patch(
        f"{path}/web", json=patch, headers={"Content-Type": "application/strategic-merge-patch+json"}
    )
    assert patched.status == 200
    got = await patched.json()
    assert got["spec"]["template"]["spec"]["containers"][0]["resources"] == {"requests": {"cpu": "250m"}}
    assert got["metadata"]["generation"] == 2


async def test_objects_stored_before_defaulting_are_served_defaulted(api: Client, objects: ObjectStore) -> None:
    """An object written by an older hub (numbers as quantities, no defaults) is served as kube
    would serve it, on GET, LIST and WATCH; the stored bytes are not rewritten by reads."""
    old = {
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "old", "namespace": "default", "uid": "u-1", "generation": 1},
        "spec": {
            "replicas": 2, "selector": {"matchLabels": {"app": "web"}},
            "template": template(resources={"limits": {"nvidia.com/gpu": 1, "memory": "2048Mi"}}),
        },
    }
    key = "/registry/apps/deployments/default/old"
    await objects.store.create(key, codec.encode(old))
    path = "/apis/apps/v1/namespaces/default/deployments"
    got = await (await api.get(f"{path}/old")).json()
    listed = (await (await api.get(path)).json())["items"]
    watched = await api.get(path, params={"watch": "1", "timeoutSeconds": "1"})
    first_event = codec.loads(await watched.content.readline())
    for served in (got, listed[0], first_event["object"]):
        container = served["spec"]["template"]["spec"]["containers"][0]
        assert container["resources"] == {"limits": {"nvidia.com/gpu": "1", "memory": "2Gi"}}
        assert container["imagePullPolicy"] == "IfNotPresent"
        assert served["spec"]["strategy"]["type"] == "RollingUpdate"
        assert served["status"] == {}
    assert codec.loads((await objects.store.get(key)).value) == old


async def test_a_generated_name_retried_after_a_collision_labels_the_job_with_the_final_name(
    objects: ObjectStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    jobs = objects.registry.require("batch/v1", "Job")
    body = {
        "apiVersion": "batch/v1", "kind": "Job", "metadata": {"generateName": "train-", "namespace": "default"},
        "spec": {"template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "i:1"}]}}},
    }
    draws = iter("bbbbb" "bbbbb" "ccccc")  # the second draw collides with the first job
    monkeypatch.setattr(writing.secrets, "choice", lambda _chars: next(draws))
    first = await objects.create(jobs, copy.deepcopy(body))
    second = await objects.create(jobs, copy.deepcopy(body))
    assert (first["metadata"]["name"], second["metadata"]["name"]) == ("train-bbbbb", "train-ccccc")
    labels = second["spec"]["template"]["metadata"]["labels"]
    assert labels["batch.kubernetes.io/job-name"] == "train-ccccc"
    assert labels["batch.kubernetes.io/controller-uid"] == second["metadata"]["uid"]
    assert second["spec"]["selector"]["matchLabels"] == {"batch.kubernetes.io/controller-uid": second["metadata"]["uid"]}


async def test_an_object_put_into_etcd_from_a_json_file_is_defaulted_when_read(
    api: Client, objects: ObjectStore
) -> None:
    """A JSON file ends in a newline: that is not the mark of an object stored defaulted."""
    manual = {
        "apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "by-hand", "namespace": "default"},
        "spec": {"resources": {"requests": {"storage": 1073741824}}},
    }
    await objects.store.create("/registry/core/persistentvolumeclaims/default/by-hand", codec.dumps(manual) + b"\n")
    got = await (await api.get("/api/v1/namespaces/default/persistentvolumeclaims/by-hand")).json()
    assert got["spec"] == {"resources": {"requests": {"storage": "1073741824"}}, "volumeMode": "Filesystem"}
    assert got["status"] == {"phase": "Pending"}
