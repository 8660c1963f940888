"""kube's defaulters of the built-in kinds the hub does not serve yet, image tags, QoS classes,
and what a member receives of a Job (pure functions)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from controlplane.apis.kube import defaulting
from controlplane.apis.kube.defaults_batch import without_generated_selector
from controlplane.apis.kube.defaults_core import image_tag, qos_class

POD_SPEC_DEFAULTS = {
    "restartPolicy": "Always", "terminationGracePeriodSeconds": 30, "dnsPolicy": "ClusterFirst",
    "securityContext": {}, "schedulerName": "default-scheduler",
}


def defaulted(group: str, kind: str, obj: dict[str, Any]) -> dict[str, Any]:
    defaulter = defaulting.for_kind(group, kind)
    assert defaulter is not None
    defaulter(obj)
    return obj


def template() -> dict[str, Any]:
    return {"metadata": {"labels": {"app": "a"}}, "spec": {"containers": [{"name": "c", "image": "img:1"}]}}


def test_daemonset_defaults() -> None:
    got = defaulted("apps", "DaemonSet", {"spec": {"template": template()}})
    assert got["spec"]["updateStrategy"] == {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1, "maxSurge": 0}}
    assert got["spec"]["revisionHistoryLimit"] == 10
    assert got["spec"]["template"]["spec"] | POD_SPEC_DEFAULTS == got["spec"]["template"]["spec"]
    assert got["status"] == {
        "currentNumberScheduled": 0, "numberMisscheduled": 0, "desiredNumberScheduled": 0, "numberReady": 0,
    }
    on_delete = defaulted("apps", "DaemonSet", {"spec": {"updateStrategy": {"type": "OnDelete"}}})
    assert on_delete["spec"]["updateStrategy"] == {"type": "OnDelete"}


def test_replicaset_defaults() -> None:
    pod = template()
    pod["spec"]["containers"][0]["readinessProbe"] = {"grpc": {"port": 9000}, "periodSeconds": 5}
    got = defaulted("apps", "ReplicaSet", {"spec": {"template": pod}})
    assert got["spec"]["template"]["spec"]["containers"][0]["readinessProbe"] == {
        "grpc": {"port": 9000, "service": ""}, "periodSeconds": 5,
        "timeoutSeconds": 1, "successThreshold": 1, "failureThreshold": 3,
    }
    assert got["spec"]["replicas"] == 1
    assert got["spec"]["template"]["spec"]["containers"][0]["imagePullPolicy"] == "IfNotPresent"
    assert got["status"] == {"replicas": 0}


def test_cronjob_defaults_leave_the_job_template_to_the_job() -> None:
    got = defaulted("batch", "CronJob", {"spec": {"schedule": "* * * * *", "jobTemplate": {"spec": {"template": template()}}}})
    spec = got["spec"]
    assert {k: spec[k] for k in ("concurrencyPolicy", "suspend", "successfulJobsHistoryLimit", "failedJobsHistoryLimit")} == {
        "concurrencyPolicy": "Allow", "suspend": False, "successfulJobsHistoryLimit": 3, "failedJobsHistoryLimit": 1,
    }
    job_spec = spec["jobTemplate"]["spec"]
    assert "backoffLimit" not in job_spec and "completions" not in job_spec  # SetDefaults_Job takes a Job
    assert job_spec["template"]["spec"]["terminationGracePeriodSeconds"] == 30
    assert got["status"] == {}


def test_limit_range_defaults_from_max_and_min() -> None:
    got = defaulted("", "LimitRange", {"spec": {"limits": [
        {"type": "Container", "max": {"cpu": "2000m"}, "min": {"memory": 1073741824}},
        {"type": "Pod", "max": {"memory": "0.5Gi"}},
    ]}})
    container, pod = got["spec"]["limits"]
    assert container == {
        "type": "Container", "max": {"cpu": "2"}, "min": {"memory": "1073741824"},
        "default": {"cpu": "2"}, "defaultRequest": {"cpu": "2", "memory": "1073741824"},
    }
    assert pod == {"type": "Pod", "max": {"memory": "512Mi"}}


def test_quota_node_and_replication_controller() -> None:
    quota = defaulted("", "ResourceQuota", {"spec": {"hard": {"requests.nvidia.com/gpu": 8, "requests.cpu": "0.5"}}})
    assert quota["spec"]["hard"] == {"requests.nvidia.com/gpu": "8", "requests.cpu": "500m"}
    node = defaulted("", "Node", {"status": {"capacity": {"nvidia.com/gpu": 8, "memory": "1024Ki"}}})
    assert node["status"]["capacity"] == node["status"]["allocatable"] == {"nvidia.com/gpu": "8", "memory": "1Mi"}
    rc = defaulted("", "ReplicationController", {"metadata": {}, "spec": {"template": template()}})
    assert rc["spec"]["selector"] == {"app": "a"} and rc["metadata"]["labels"] == {"app": "a"}
    assert rc["spec"]["replicas"] == 1


@pytest.mark.parametrize(
    ("image", "tag"),
    [
        ("nginx", "latest"),
        ("nginx:latest", "latest"),
        ("nginx:1.27", "1.27"),
        ("localhost:5000/nginx", "latest"),
        ("localhost:5000/team/nginx:2", "2"),
        ("nginx@sha256:" + "a" * 64, ""),
        ("nginx:1@sha256:" + "a" * 64, "1"),
        ("Nginx", ""),  # not a valid reference
        ("", ""),
    ],
)
def test_image_tag_as_kube_reads_it(image: str, tag: str) -> None:
    assert image_tag(image) == tag


@pytest.mark.parametrize(
    ("containers", "qos"),
    [
        ([{}], "BestEffort"),
        ([{"resources": {"requests": {"cpu": "1"}}}], "Burstable"),
        ([{"resources": {"requests": {"cpu": "1", "memory": "1Gi"}, "limits": {"cpu": "1", "memory": "1Gi"}}}], "Guaranteed"),
        ([{"resources": {"requests": {"cpu": "500m", "memory": "1Gi"}, "limits": {"cpu": "1", "memory": "1Gi"}}}], "Burstable"),
        ([{"resources": {"limits": {"nvidia.com/gpu": "1"}}}], "BestEffort"),  # only cpu and memory count
    ],
)
def test_qos_class(containers: list[dict[str, Any]], qos: str) -> None:
    assert qos_class({"containers": containers}) == qos


def test_a_member_receives_a_job_without_the_hubs_generated_selector() -> None:
    job = defaulted("batch", "Job", {
        "metadata": {"name": "train", "uid": "hub-uid"},
        "spec": {"template": {"metadata": {"labels": {"app": "train"}}, "spec": {"containers": [{"name": "c", "image": "i"}]}}},
    })
    assert job["spec"]["selector"] == {"matchLabels": {"batch.kubernetes.io/controller-uid": "hub-uid"}}
    without_generated_selector(job)
    assert "selector" not in job["spec"]
    assert job["spec"]["template"]["metadata"]["labels"] == {"app": "train"}
    assert job["metadata"]["labels"] == {"app": "train"}
    manual = {"spec": {"manualSelector": True, "selector": {"matchLabels": {"controller-uid": "mine"}}}}
    without_generated_selector(manual)
    assert manual["spec"]["selector"] == {"matchLabels": {"controller-uid": "mine"}}


def test_defaulting_is_idempotent_on_read() -> None:
    job = defaulted("batch", "Job", {"metadata": {"name": "j", "uid": "u"}, "spec": {"template": template()}})
    reader = defaulting.for_reading("batch", "Job")
    assert reader is not None
    again = copy.deepcopy(job)
    reader(again)
    assert again == job


def _variants(value: Any, path: tuple[Any, ...] = ()) -> Any:
    """``value`` with each node in turn replaced by a value of the wrong type."""
    junk: tuple[Any, ...] = (None, "x", 7, [], {}, [1], True)
    for replacement in junk:
        yield path, replacement
    if isinstance(value, dict):
        for key, child in value.items():
            yield from _variants(child, (*path, key))
    elif isinstance(value, list):
        for index, child in enumerate(value):
            yield from _variants(child, (*path, index))


def _replaced(value: Any, path: tuple[Any, ...], replacement: Any) -> Any:
    if not path:
        return copy.deepcopy(replacement)
    out = copy.deepcopy(value)
    node = out
    for step in path[:-1]:
        node = node[step]
    node[path[-1]] = copy.deepcopy(replacement)
    return out


@pytest.mark.parametrize(("group", "kind"), defaulting.defaulted_kinds())
def test_malformed_objects_are_left_for_validation_not_crashed_on(group: str, kind: str) -> None:
    pod_spec = {
        "containers": [{"name": "c", "image": "i", "ports": [{"containerPort": 1}], "env": [{"name": "e"}],
                        "resources": {"limits": {"cpu": "1"}}, "livenessProbe": {"httpGet": {"port": 1}}}],
        "volumes": [{"name": "v", "projected": {"sources": [{"serviceAccountToken": {}}]}}],
    }
    sample = {
        "metadata": {"name": "n", "uid": "u", "labels": {"a": "b"}},
        "spec": {
            "template": {"metadata": {"labels": {"a": "b"}}, "spec": pod_spec},
            "jobTemplate": {"spec": {"template": {"spec": pod_spec}}},
            "strategy": {"type": "RollingUpdate"}, "updateStrategy": {}, "ports": [{"port": 1}],
            "resources": {"requests": {"storage": "1Gi"}}, "hard": {"cpu": "1"}, "limits": [{"type": "Container"}],
            "volumeClaimTemplates": [{"spec": {}}], **pod_spec,
        },
        "status": {"capacity": {"cpu": "1"}},
    }
    defaulter = defaulting.for_kind(group, kind)
    reader = defaulting.for_reading(group, kind)
    assert defaulter is not None and reader is not None
    for path, replacement in _variants(sample):
        obj = _replaced(sample, path, replacement)
        if isinstance(obj, dict):
            defaulter(obj)
            reader(obj)
