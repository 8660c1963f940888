"""The official ``kubernetes`` client's typed API over every built-in kind the hub serves:
create, read, list, patch, replace, watch and delete through ``CoreV1Api``, ``AppsV1Api``…,
each answer parsed into the typed model (``V1Deployment``…); plus the README's GPU Deployment
read back with its GPU request intact, and what deleting a custom object answers."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import kubernetes
import pytest
from kubernetes.client.exceptions import ApiException

from controlplane.apis.apiextensions import builtin
from e2e.clients.conftest import (
    NAMESPACE,
    Hub,
    ServedKind,
    computed_kinds,
    discovered_kinds,
    registry_kinds,
    unique_name,
)
from e2e.clients.scenario import exercise
from e2e.clients.typed import TYPED, TypedDriver

pytestmark = pytest.mark.e2e


class OfficialDriver(TypedDriver):
    """The official client: calls run in a thread; the body goes as the typed model."""

    def body(self, manifest: dict[str, Any]) -> Any:
        typed = self.model.from_dict(manifest)  # the typed model takes the sample as it is
        assert typed is not None
        return typed

    async def events(self, resource_version: str, name: str) -> AsyncIterator[tuple[str, Any]]:
        watch = kubernetes.watch.Watch(return_type=self.watch_return_type)
        stream = watch.stream(
            self.method("list"), *self.args(), resource_version=resource_version,
            field_selector=f"metadata.name={name}", timeout_seconds=25,
        )
        try:
            while (event := await asyncio.to_thread(next, stream, None)) is not None:
                yield event["type"], event["object"]
        finally:
            watch.stop()

    def status_of(self, exc: Exception) -> int | None:
        return exc.status if isinstance(exc, ApiException) else None


@pytest.fixture(scope="module")
def api_client(hub: Hub) -> Iterator[Any]:
    client = kubernetes.config.new_client_from_config(config_file=str(hub.kubeconfig))
    yield client
    client.close()


async def in_thread(call: Callable[[], Any]) -> Any:
    return await asyncio.to_thread(call)


def _custom_groups(hub: Hub) -> set[str]:
    """The groups of the CustomResourceDefinitions the shared hub holds now (other tests' own; not
    those the hub lists for the kinds it serves built in, which the registry holds)."""
    listed = hub.kubectl.json("get", "customresourcedefinitions", "-l", f"!{builtin.LABEL}")["items"]
    return {crd["spec"]["group"] for crd in listed}


def test_discovery_serves_the_registry(hub: Hub) -> None:
    # Other tests of the shared hub create and delete CRDs meanwhile: their kinds are served while
    # the CRD exists (listed before or after discovery), and are no business of this test.
    custom = _custom_groups(hub)
    discovered = discovered_kinds(hub.kubectl)
    custom |= _custom_groups(hub)
    served = {(k.api_version, k.kind, k.plural, k.namespaced) for k in discovered if k.group not in custom}
    registered = {(k.api_version, k.kind, k.plural, k.namespaced) for k in [*registry_kinds(), *computed_kinds()]}
    assert served == registered


@pytest.mark.parametrize("kind", TYPED, ids=lambda k: k.id)
async def test_typed_api(kind: ServedKind, served_verbs: dict[str, frozenset[str]], api_client: Any) -> None:
    await exercise(OfficialDriver(kubernetes.client, api_client, kind, run=in_thread), kind, served_verbs[kind.id], client="k8s")


def test_gpu_deployment_reads_back_typed(hub: Hub, api_client: Any) -> None:
    """The README's GPU Deployment, its quantities as kube returns them (strings)."""
    hub.kubectl.run("apply", "-f", "-", input_text=README_DEPLOYMENT)
    apps = kubernetes.client.AppsV1Api(api_client)
    deployment = apps.read_namespaced_deployment("llm-serving", NAMESPACE)
    assert isinstance(deployment, kubernetes.client.V1Deployment)
    container = deployment.spec.template.spec.containers[0]
    assert container.resources.limits["nvidia.com/gpu"] == "1"
    assert container.resources.requests == {"cpu": "4", "memory": "24Gi"}
    listed = apps.list_deployment_for_all_namespaces()
    assert "llm-serving" in {d.metadata.name for d in listed.items}


README_DEPLOYMENT = f"""
apiVersion: apps/v1
kind: Deployment
metadata:
  name: llm-serving
  namespace: {NAMESPACE}
  labels: {{app: llm-serving, gpufed.io/burst: "true"}}
spec:
  replicas: 16
  selector:
    matchLabels: {{app: llm-serving}}
  template:
    metadata:
      labels: {{app: llm-serving}}
    spec:
      containers:
        - name: server
          image: registry.acme.internal/ml/llm-server:2.3.0
          args: ["--model", "/models/mistral-7b-instruct", "--port", "8000"]
          ports:
            - containerPort: 8000
          resources:
            requests: {{cpu: "4", memory: 24Gi}}
            limits: {{nvidia.com/gpu: "1", memory: 24Gi}}
"""


GADGETS = "gadgets.clients.example.com"
GADGET_CRD = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": GADGETS},
    "spec": {
        "group": "clients.example.com",
        "scope": "Namespaced",
        "names": {"plural": "gadgets", "singular": "gadget", "kind": "Gadget"},
        "versions": [{
            "name": "v1", "served": True, "storage": True,
            "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}},
        }],
    },
}


def test_deleting_a_custom_object_answers_as_kube(hub: Hub, api_client: Any) -> None:
    """``CustomObjectsApi.delete_namespaced_custom_object``: a custom object deleted at once is
    answered with a success Status naming it (kube's registry returns no object for custom
    resources); one a finalizer keeps, with the object as it now is."""
    hub.kubectl.run("apply", "-f", "-", input_text=json.dumps(GADGET_CRD))
    hub.kubectl.run("wait", "--for=condition=Established", f"crd/{GADGETS}", "--timeout=30s")
    custom = kubernetes.client.CustomObjectsApi(api_client)
    where = ("clients.example.com", "v1", NAMESPACE, "gadgets")
    try:
        gone = custom.create_namespaced_custom_object(*where, {
            "apiVersion": "clients.example.com/v1", "kind": "Gadget", "metadata": {"name": unique_name("gadget")},
        })
        name = gone["metadata"]["name"]
        assert custom.delete_namespaced_custom_object(*where, name) == {
            "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success",
            "details": {"name": name, "group": "clients.example.com", "kind": "gadgets", "uid": gone["metadata"]["uid"]},
        }
        held = custom.create_namespaced_custom_object(*where, {
            "apiVersion": "clients.example.com/v1", "kind": "Gadget",
            "metadata": {"name": unique_name("gadget"), "finalizers": ["clients.example.com/hold"]},
        })
        name = held["metadata"]["name"]
        answer = custom.delete_namespaced_custom_object(*where, name)
        assert (answer["kind"], answer["metadata"]["uid"]) == ("Gadget", held["metadata"]["uid"])
        assert answer["metadata"]["deletionTimestamp"]
        custom.patch_namespaced_custom_object(*where, name, {"metadata": {"finalizers": None}})
    finally:
        hub.kubectl.run("delete", "crd", GADGETS, "--wait=false")
