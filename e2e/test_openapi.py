"""OpenAPI as kubectl reads it from a real hub: `kubectl explain` of built-in, gpufed, Karmada,
Kueue, JobSet, LeaderWorkerSet and Kubeflow kinds (into the kube types they embed) and of the create-only reviews (v3, and v2 as protobuf), and kube's own errors for
a typo'd kind."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from e2e.harness import Kubectl, ProcessGroup

pytestmark = pytest.mark.e2e

TYPO = """\
apiVersion: apps/v1
kind: Deploymnt
metadata:
  name: typo
  namespace: default
spec:
  replicas: 1
"""


@pytest.fixture(scope="module")
def kubectl(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Kubectl]:
    """One hub for the module: its tests read what it serves, and the apply they try is refused
    before anything is stored."""
    with ProcessGroup.running_hub(tmp_path_factory.mktemp("openapi-hub")) as running:
        yield running


def test_kubectl_explain_prints_descriptions_and_nested_fields(kubectl: Kubectl) -> None:

    replicas = kubectl.run("explain", "deployment.spec.replicas").stdout
    assert "FIELD: replicas <integer>" in replicas
    assert "Number of desired pods." in replicas

    scheduling = kubectl.run("explain", "pp.spec.placement.replicaScheduling").stdout
    assert "KIND:       PropagationPolicy" in scheduling
    assert "replicaDivisionPreference\t<string>" in scheduling
    assert "TieredOverflow (fill cheap tiers first" in " ".join(scheduling.split())
    recursive = kubectl.run("explain", "pp.spec.placement.replicaScheduling", "--recursive").stdout
    # Nested objects expand down to kube's own LabelSelector inside gpufed's tiers.
    assert "    tiers\t<[]Tier>" in recursive
    assert "        labelSelector\t<LabelSelector>" in recursive
    assert "          matchLabels\t<map[string]string>" in recursive

    pytorch = kubectl.run("explain", "pytorchjob.spec").stdout
    assert "pytorchReplicaSpecs\t<map[string]ReplicaSpec>" in pytorch
    assert "The job is a gang" in " ".join(pytorch.split())
    limits = kubectl.run("explain", "pytorchjob.spec.pytorchReplicaSpecs.template.spec.containers.resources.limits").stdout
    assert "FIELD: limits <map[string]Quantity>" in limits
    # The other Kubeflow kinds share the parts, each under its own replica-spec field and roles.
    tensorflow = kubectl.run("explain", "tfjob.spec").stdout
    assert "tfReplicaSpecs\t<map[string]ReplicaSpec>" in tensorflow
    assert "(Chief, Master, PS, Worker, Evaluator)" in " ".join(tensorflow.split())

    gpus = kubectl.run("explain", "clusters.status.gpuSummary").stdout
    assert "FIELD: gpuSummary <[]GpuSummary>" in gpus
    assert "GPUs and MIG slices of the cluster" in " ".join(gpus.split())
    assert "allocatable\t<integer> -required-" in gpus
    for text in (replicas, scheduling, recursive, pytorch, tensorflow, gpus):
        assert "<no description>" not in text and "``" not in text

    # The v2 document, which kubectl reads as gnostic protobuf, parses and explains too.
    v2 = kubectl.run("explain", "deployment.spec.replicas", "--output=plaintext-openapiv2").stdout
    assert "Number of desired pods." in v2

    # The create-only kinds (reviews) have kube's schemas: `kubectl explain` found no resource.
    review = kubectl.run("explain", "selfsubjectaccessreview.spec.resourceAttributes").stdout
    assert "KIND:       SelfSubjectAccessReview" in review
    assert "GROUP:      authorization.k8s.io" in review
    assert "verb\t<string>" in review and "namespace\t<string>" in review
    tokens = kubectl.run("explain", "tokenreview.status.user").stdout
    assert "KIND:       TokenReview" in tokens and "groups\t<[]string>" in tokens
    for kind in ("selfsubjectreview", "subjectaccessreview", "localsubjectaccessreview", "selfsubjectrulesreview"):
        assert "DESCRIPTION:" in kubectl.run("explain", kind).stdout, kind
    v2_review = kubectl.run("explain", "subjectaccessreview.spec.user", "--output=plaintext-openapiv2").stdout
    assert "user is the user you're testing for." in v2_review


def test_kubectl_explain_walks_into_the_kube_types_other_projects_crds_embed(kubectl: Kubectl) -> None:

    template = kubectl.run("explain", "workload.spec.podSets.template").stdout
    assert "FIELD: template <PodTemplateSpec>" in template
    assert "spec\t<PodSpec>" in template
    resources = kubectl.run("explain", "workload.spec.podSets.template.spec.containers.resources").stdout
    assert "FIELD: resources <ResourceRequirements>" in resources
    assert "limits\t<map[string]Quantity>" in resources and "requests\t<map[string]Quantity>" in resources
    recursive = kubectl.run("explain", "workload.spec.podSets", "--recursive").stdout
    assert "    spec\t<PodSpec>" in recursive
    assert "      containers\t<[]Container> -required-" in recursive

    jobset = kubectl.run("explain", "jobset.spec.replicatedJobs.template.spec.template.spec.containers.image").stdout
    assert "KIND:       JobSet" in jobset and "FIELD: image <string>" in jobset
    lws = kubectl.run("explain", "lws.spec.leaderWorkerTemplate").stdout
    assert "leaderTemplate\t<PodTemplateSpec>" in lws and "workerTemplate\t<PodTemplateSpec>" in lws
    for text in (template, resources, jobset, lws):
        assert "<no description>" not in text


def test_a_typod_kind_gets_kubes_messages(kubectl: Kubectl, tmp_path: Path) -> None:
    manifest = tmp_path / "typo.yaml"
    manifest.write_text(TYPO)

    applied = kubectl.run("apply", "-f", str(manifest), check=False)
    assert applied.returncode != 0
    assert 'no matches for kind "Deploymnt" in version "apps/v1"' in applied.stderr
    assert "openapi" not in applied.stderr

    listed = kubectl.run("get", "deploymnts", check=False)
    assert listed.returncode != 0
    assert 'the server doesn\'t have a resource type "deploymnts"' in listed.stderr
