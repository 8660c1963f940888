"""What each interpreter's ``dependencies`` finds: every reference site of a pod template, in
every template of every kind (all roles of multi-template kinds)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from controlplane.interpreter import Dependency, DependencyKind, interpreter_for, registered_kinds
from controlplane.interpreter.dependencies import pod_template_dependencies
from controlplane.interpreter.registry import group_of

CM, SECRET, SA, PVC = (
    DependencyKind.CONFIG_MAP,
    DependencyKind.SECRET,
    DependencyKind.SERVICE_ACCOUNT,
    DependencyKind.PERSISTENT_VOLUME_CLAIM,
)


def container(**fields: Any) -> dict[str, Any]:
    return {"name": "main", "image": "img", **fields}


def template(**spec: Any) -> dict[str, Any]:
    spec.setdefault("containers", [container()])
    return {"metadata": {"labels": {"app": "x"}}, "spec": spec}


def env_from_key(ref: str, name: str) -> dict[str, Any]:
    return {"name": "V", "valueFrom": {ref: {"name": name, "key": "k"}}}


SITES: list[tuple[str, dict[str, Any], set[Dependency]]] = [
    ("nothing referenced", template(), set()),
    ("volume configMap", template(volumes=[{"name": "v", "configMap": {"name": "cfg"}}]), {Dependency(CM, "cfg")}),
    ("volume secret", template(volumes=[{"name": "v", "secret": {"secretName": "tls"}}]), {Dependency(SECRET, "tls")}),
    (
        "volume persistentVolumeClaim",
        template(volumes=[{"name": "v", "persistentVolumeClaim": {"claimName": "models"}}]),
        {Dependency(PVC, "models")},
    ),
    (
        "projected configMap and secret sources",
        template(
            volumes=[
                {
                    "name": "v",
                    "projected": {
                        "sources": [
                            {"configMap": {"name": "p-cfg"}},
                            {"secret": {"name": "p-secret"}},
                            {"serviceAccountToken": {"path": "token"}},
                            {"downwardAPI": {"items": []}},
                        ]
                    },
                }
            ]
        ),
        {Dependency(CM, "p-cfg"), Dependency(SECRET, "p-secret")},
    ),
    (
        "credential secrets of volume plugins",
        template(
            volumes=[
                {"name": "a", "azureFile": {"secretName": "az", "shareName": "s"}},
                {"name": "b", "cephfs": {"monitors": ["m"], "secretRef": {"name": "ceph"}}},
                {"name": "c", "csi": {"driver": "d", "nodePublishSecretRef": {"name": "csi"}}},
                {"name": "d", "rbd": {"image": "i", "monitors": ["m"], "secretRef": {"name": "rbd"}}},
            ]
        ),
        {Dependency(SECRET, "az"), Dependency(SECRET, "ceph"), Dependency(SECRET, "csi"), Dependency(SECRET, "rbd")},
    ),
    ("env configMapKeyRef", template(containers=[container(env=[env_from_key("configMapKeyRef", "env-cfg")])]), {Dependency(CM, "env-cfg")}),
    ("env secretKeyRef", template(containers=[container(env=[env_from_key("secretKeyRef", "env-secret")])]), {Dependency(SECRET, "env-secret")}),
    (
        "env fieldRef and plain values reference nothing",
        template(containers=[container(env=[{"name": "A", "value": "1"}, {"name": "B", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}])]),
        set(),
    ),
    (
        "envFrom configMapRef and secretRef",
        template(containers=[container(envFrom=[{"configMapRef": {"name": "all-cfg"}}, {"secretRef": {"name": "all-secret"}, "prefix": "S_"}])]),
        {Dependency(CM, "all-cfg"), Dependency(SECRET, "all-secret")},
    ),
    (
        "init containers count",
        template(initContainers=[container(name="init", envFrom=[{"secretRef": {"name": "init-secret"}}])]),
        {Dependency(SECRET, "init-secret")},
    ),
    ("imagePullSecrets", template(imagePullSecrets=[{"name": "registry"}]), {Dependency(SECRET, "registry")}),
    ("serviceAccountName", template(serviceAccountName="trainer"), {Dependency(SA, "trainer")}),
    ("deprecated serviceAccount", template(serviceAccount="legacy"), {Dependency(SA, "legacy")}),
    ("the default service account exists everywhere", template(serviceAccountName="default"), set()),
    (
        "the root CA ConfigMap exists everywhere (a pod's kube-api-access volume)",
        template(volumes=[{"name": "kube-api-access-x7k2p", "projected": {"sources": [
            {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
            {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
            {"downwardAPI": {"items": [{"path": "namespace", "fieldRef": {"fieldPath": "metadata.namespace"}}]}},
        ]}}]),
        set(),
    ),
    (
        "one object referenced twice counts once",
        template(
            volumes=[{"name": "v", "configMap": {"name": "same"}}],
            containers=[container(envFrom=[{"configMapRef": {"name": "same"}}])],
        ),
        {Dependency(CM, "same")},
    ),
    (
        "malformed entries are skipped",
        template(volumes=["not-a-volume", {"name": "v", "configMap": None}, {"name": "w", "secret": {"secretName": ""}}]),
        set(),
    ),
]


@pytest.mark.parametrize(("template_", "expected"), [(t, e) for _, t, e in SITES], ids=[n for n, _, _ in SITES])
def test_every_reference_site_of_a_pod_template(template_: dict[str, Any], expected: set[Dependency]) -> None:
    before = copy.deepcopy(template_)
    assert pod_template_dependencies(template_) == expected
    assert template_ == before


def all_sites() -> dict[str, Any]:
    """One template that references something at every site (what each kind must find in each role)."""
    return template(
        serviceAccountName="runner",
        imagePullSecrets=[{"name": "pull"}],
        volumes=[{"name": "v", "configMap": {"name": "vol-cfg"}}, {"name": "d", "persistentVolumeClaim": {"claimName": "data"}}],
        initContainers=[container(name="init", env=[env_from_key("secretKeyRef", "init-key")])],
        containers=[container(envFrom=[{"configMapRef": {"name": "env-cfg"}}])],
    )


ALL_SITES = [
    Dependency(CM, "env-cfg"),
    Dependency(CM, "vol-cfg"),
    Dependency(PVC, "data"),
    Dependency(SECRET, "init-key"),
    Dependency(SECRET, "pull"),
    Dependency(SA, "runner"),
]


def only_secret(name: str) -> dict[str, Any]:
    return template(containers=[container(envFrom=[{"secretRef": {"name": name}}])])


def kubeflow(kind: str, field: str, fixed: str) -> dict[str, Any]:
    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": kind,
        "metadata": {"name": "j", "namespace": "ml"},
        "spec": {field: {fixed: {"replicas": 1, "template": all_sites()}, "Worker": {"replicas": 2, "template": only_secret("worker-only")}}},
    }


def ray_cluster_spec() -> dict[str, Any]:
    return {
        "headGroupSpec": {"template": all_sites()},
        "workerGroupSpecs": [{"groupName": "gpu", "replicas": 2, "template": only_secret("worker-only")}],
    }


WORKLOADS: list[tuple[str, dict[str, Any], list[Dependency]]] = [
    ("Deployment", {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"}, "spec": {"replicas": 2, "template": all_sites()}}, ALL_SITES),
    ("StatefulSet", {"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "s"}, "spec": {"replicas": 2, "template": all_sites()}}, ALL_SITES),
    ("Job", {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j"}, "spec": {"template": all_sites()}}, ALL_SITES),
    ("PyTorchJob", kubeflow("PyTorchJob", "pytorchReplicaSpecs", "Master"), sorted([*ALL_SITES, Dependency(SECRET, "worker-only")])),
    ("MPIJob", kubeflow("MPIJob", "mpiReplicaSpecs", "Launcher"), sorted([*ALL_SITES, Dependency(SECRET, "worker-only")])),
    ("TFJob", kubeflow("TFJob", "tfReplicaSpecs", "PS"), sorted([*ALL_SITES, Dependency(SECRET, "worker-only")])),
    ("XGBoostJob", kubeflow("XGBoostJob", "xgbReplicaSpecs", "Master"), sorted([*ALL_SITES, Dependency(SECRET, "worker-only")])),
    ("PaddleJob", kubeflow("PaddleJob", "paddleReplicaSpecs", "Master"), sorted([*ALL_SITES, Dependency(SECRET, "worker-only")])),
    (
        "JAXJob",
        {"apiVersion": "kubeflow.org/v1", "kind": "JAXJob", "metadata": {"name": "j", "namespace": "ml"},
         "spec": {"jaxReplicaSpecs": {"Worker": {"replicas": 2, "template": all_sites()}}}},
        ALL_SITES,
    ),
    ("RayCluster", {"apiVersion": "ray.io/v1", "kind": "RayCluster", "metadata": {"name": "r"}, "spec": ray_cluster_spec()}, sorted([*ALL_SITES, Dependency(SECRET, "worker-only")])),
    (
        "RayJob with a submitter template",
        {
            "apiVersion": "ray.io/v1",
            "kind": "RayJob",
            "metadata": {"name": "r"},
            "spec": {"rayClusterSpec": ray_cluster_spec(), "submitterPodTemplate": only_secret("submitter")},
        },
        sorted([*ALL_SITES, Dependency(SECRET, "submitter"), Dependency(SECRET, "worker-only")]),
    ),
    (
        "RayJob on an existing cluster: only the submitter",
        {"apiVersion": "ray.io/v1", "kind": "RayJob", "metadata": {"name": "r"}, "spec": {"clusterSelector": {"ray.io/cluster": "c"}, "submitterPodTemplate": only_secret("submitter")}},
        [Dependency(SECRET, "submitter")],
    ),
    ("ReplicaSet", {"apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": {"name": "rs"}, "spec": {"replicas": 2, "template": all_sites()}}, ALL_SITES),
    (
        "LeaderWorkerSet: leader and worker templates",
        {
            "apiVersion": "leaderworkerset.x-k8s.io/v1",
            "kind": "LeaderWorkerSet",
            "metadata": {"name": "l"},
            "spec": {"replicas": 2, "leaderWorkerTemplate": {"size": 4, "leaderTemplate": all_sites(), "workerTemplate": only_secret("worker-only")}},
        },
        sorted([*ALL_SITES, Dependency(SECRET, "worker-only")]),
    ),
    (
        "JobSet: every replicated Job's pod template",
        {
            "apiVersion": "jobset.x-k8s.io/v1alpha2",
            "kind": "JobSet",
            "metadata": {"name": "js"},
            "spec": {
                "replicatedJobs": [
                    {"name": "driver", "replicas": 1, "template": {"spec": {"template": all_sites()}}},
                    {"name": "workers", "replicas": 2, "template": {"spec": {"parallelism": 2, "template": only_secret("worker-only")}}},
                ]
            },
        },
        sorted([*ALL_SITES, Dependency(SECRET, "worker-only")]),
    ),
    (
        "TrainJob: its TrainingRuntime and its initializers' Secrets (the pod templates are the runtime's)",
        {
            "apiVersion": "trainer.kubeflow.org/v1alpha1",
            "kind": "TrainJob",
            "metadata": {"name": "tj"},
            "spec": {"runtimeRef": {"name": "torch", "kind": "TrainingRuntime"},
                     "initializer": {"model": {"secretRef": {"name": "hf-token"}}}},
        },
        [Dependency(SECRET, "hf-token"), Dependency("TrainingRuntime", "torch", "trainer.kubeflow.org/v1alpha1")],
    ),
    ("Pod: its own spec", {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": all_sites()["spec"]}, ALL_SITES),
    ("Deployment without a template", {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"}, "spec": {}}, []),
]


@pytest.mark.parametrize(("obj", "expected"), [(o, e) for _, o, e in WORKLOADS], ids=[n for n, _, _ in WORKLOADS])
def test_each_kind_finds_the_dependencies_of_every_template(obj: dict[str, Any], expected: list[Dependency]) -> None:
    interpreter = interpreter_for(obj["apiVersion"], obj["kind"])
    assert interpreter is not None
    before = copy.deepcopy(obj)
    assert interpreter.dependencies(obj) == expected
    assert obj == before


def test_every_registered_kind_is_covered_above() -> None:
    covered = {(group_of(str(o["apiVersion"])), str(o["kind"])) for _, o, _ in WORKLOADS}
    assert sorted(covered) == registered_kinds()
