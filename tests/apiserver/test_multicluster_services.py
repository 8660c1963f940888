"""The Multi-Cluster Services kinds Karmada users apply are served: ``multicluster.x-k8s.io/v1alpha1``
ServiceExport and ServiceImport (the CRDs Karmada ships) and Karmada's ``networking.karmada.io/v1alpha1``
MultiClusterService, with their schemas, status subresources and printer columns, and the
MultiClusterService checked and labelled as karmada-webhook does. Karmada's published examples
apply unchanged with the real kubectl, server- then client-side (through the hub's HTTP API on a
real etcd)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from controlplane.controllers.workloads import kind_status
from controlplane.hubregistry import hub_registry
from policies.served import KindStatus

from .test_kube_validation import Client, hub, hub_kubeconfig  # noqa: F401 (fixtures)
from .test_kueue_versions import ok
from .test_real_clients import kubectl, needs_kubectl

Obj = dict[str, Any]
UPSTREAM = Path(__file__).parents[2] / "e2e" / "manifests" / "upstream" / "karmada"
MCS = "/apis/networking.karmada.io/v1alpha1/namespaces/default/multiclusterservices"
IMPORTS = "/apis/multicluster.x-k8s.io/v1alpha1/namespaces/default/serviceimports"
EXPORTS = "/apis/multicluster.x-k8s.io/v1alpha1/namespaces/default/serviceexports"
PERMANENT_ID = "multiclusterservice.karmada.io/permanent-id"


def mcs(name: str = "nginx", **spec: Any) -> Obj:
    return {"apiVersion": "networking.karmada.io/v1alpha1", "kind": "MultiClusterService", "metadata": {"name": name},
            "spec": {"types": ["CrossCluster"], **spec}}


async def test_a_multi_cluster_service_gets_karmadas_permanent_id_and_keeps_it(hub: Client) -> None:  # noqa: F811
    created = await ok(await hub.post(MCS, json=mcs(providerClusters=[{"name": "member1"}])), 201)
    label = created["metadata"]["labels"][PERMANENT_ID]
    assert len(label) == 36
    created["spec"]["consumerClusters"] = [{"name": "member2"}]
    updated = await ok(await hub.put(f"{MCS}/nginx", json=created))
    assert updated["metadata"]["labels"][PERMANENT_ID] == label
    given = mcs("given")
    given["metadata"]["labels"] = {PERMANENT_ID: "mine"}
    assert (await ok(await hub.post(MCS, json=given), 201))["metadata"]["labels"][PERMANENT_ID] == "mine"


@pytest.mark.parametrize(("obj", "message"), [
    (mcs(types=["CrossCluster", "LoadBalancer"]),
     'spec.types: Invalid value: ["CrossCluster","LoadBalancer"]: MultiClusterService types should not contain more than one type'),
    (mcs(types=["NodePort"]), 'spec.types[0]: Invalid value: "NodePort": ExposureType Error'),
    (mcs(ports=[{"name": "http", "port": 80}, {"name": "http", "port": 0}]),
     '[spec.ports[1].name: Duplicate value: "http", spec.ports[1].port: Invalid value: 0: must be between 1 and 65535, inclusive]'),
    (mcs(consumerClusters=[{"name": "Member_2"}]), 'spec.range.consumerClusters[0]: Invalid value: "Member_2": '),
    (mcs("1st"), 'metadata.name: Invalid value: "1st": a DNS-1035 label must consist of lower case alphanumeric'),
])
async def test_karmadas_webhook_refusals(hub: Client, obj: Obj, message: str) -> None:  # noqa: F811
    response = await hub.post(MCS, json=obj)
    body = await response.json()
    assert (response.status, body["reason"]) == (403, "Forbidden"), body
    assert 'admission webhook "multiclusterservice.karmada.io" denied the request: ' + message in body["message"]


async def test_the_types_of_a_multi_cluster_service_are_immutable(hub: Client) -> None:  # noqa: F811
    created = await ok(await hub.post(MCS, json=mcs()), 201)
    created["spec"]["types"] = ["LoadBalancer"]
    response = await hub.put(f"{MCS}/nginx", json=created)
    body = await response.json()
    assert response.status == 403, body
    assert 'spec.types: Invalid value: ["CrossCluster"]: MultiClusterService types are immutable' in body["message"]


@pytest.mark.parametrize(("spec", "field"), [
    ({"type": "NodePort", "ports": [{"port": 80}]}, "spec.type"),
    ({"type": "ClusterSetIP", "ports": [{"port": 80}], "ips": ["10.0.0.1", "10.0.0.2"]}, "spec.ips"),
    ({"type": "ClusterSetIP"}, "spec.ports"),
    ({"type": "ClusterSetIP", "ports": [{"protocol": "TCP"}]}, "spec.ports[0].port"),
])
async def test_a_service_import_is_checked_by_its_crds_schema(hub: Client, spec: Obj, field: str) -> None:  # noqa: F811
    obj = {"apiVersion": "multicluster.x-k8s.io/v1alpha1", "kind": "ServiceImport", "metadata": {"name": "serve"},
           "spec": spec}
    response = await hub.post(IMPORTS, json=obj)
    body = await response.json()
    assert response.status == 422, body
    assert field in body["message"], body


async def test_the_status_of_an_export_is_written_through_its_subresource(hub: Client) -> None:  # noqa: F811
    export = {"apiVersion": "multicluster.x-k8s.io/v1alpha1", "kind": "ServiceExport", "metadata": {"name": "serve"}}
    created = await ok(await hub.post(EXPORTS, json=export), 201)
    condition = {"type": "Valid", "status": "True", "reason": "Exported", "message": "",
                 "lastTransitionTime": "2026-01-01T00:00:00Z"}
    created["status"] = {"conditions": [condition]}
    assert "status" not in await ok(await hub.put(f"{EXPORTS}/serve", json=created))
    written = await ok(await hub.put(f"{EXPORTS}/serve/status", json=created))
    assert written["status"]["conditions"][0]["reason"] == "Exported"


#: A MultiClusterIngress of the shape of Karmada's multi-cluster ingress guide.
MCI_YAML = """\
apiVersion: networking.karmada.io/v1alpha1
kind: MultiClusterIngress
metadata:
  name: demo-localhost
  namespace: default
spec:
  ingressClassName: nginx
  rules:
  - host: demo.localdev.me
    http:
      paths:
      - backend:
          service:
            name: serve
            port:
              number: 80
        path: /web
        pathType: Prefix
"""


async def test_a_multi_cluster_ingress_is_checked_as_karmadas_webhook_checks_its_ingress_spec(hub: Client) -> None:  # noqa: F811
    path = "/apis/networking.karmada.io/v1alpha1/namespaces/default/multiclusteringresses"
    mci = yaml.safe_load(MCI_YAML)
    created = await ok(await hub.post(path, json=mci), 201)
    assert created["spec"]["rules"][0]["host"] == "demo.localdev.me"
    empty = {**mci, "metadata": {"name": "empty"}, "spec": {"ingressClassName": "nginx"}}
    response = await hub.post(path, json=empty)
    body = await response.json()
    assert response.status == 403, body
    assert body["message"].endswith(
        'admission webhook "multiclusteringress.karmada.io" denied the request: spec: Invalid value: '
        "[]v1.IngressRule(nil): either `defaultBackend` or `rules` must be specified"
    ), body


def test_exports_and_imports_propagate_and_a_multi_cluster_service_stays_on_the_hub() -> None:
    registry = hub_registry()
    assert kind_status(registry, "multicluster.x-k8s.io/v1alpha1", "ServiceExport") is KindStatus.PROPAGATABLE
    assert kind_status(registry, "multicluster.x-k8s.io/v1alpha1", "ServiceImport") is KindStatus.PROPAGATABLE
    # As Karmada's detector, which skips networking.karmada.io: its own controller places it.
    assert kind_status(registry, "networking.karmada.io/v1alpha1", "MultiClusterService") is KindStatus.HUB_ONLY
    assert kind_status(registry, "networking.karmada.io/v1alpha1", "MultiClusterIngress") is KindStatus.HUB_ONLY


async def _applied_both_ways(kubeconfig: Path, path: Path) -> list[str]:
    """The file applied server-side, then client-side: the second apply's lines. (The other order
    conflicts on a namespaced policy's ``resourceSelectors``, which karmada-webhook, as the hub,
    writes with their namespace: the same on Karmada.)"""
    code, _, err = await kubectl(kubeconfig, "apply", "--server-side", "-f", str(path))
    assert code == 0, err
    code, out, err = await kubectl(kubeconfig, "apply", "-f", str(path))
    assert code == 0, err
    return out.splitlines()


@needs_kubectl
async def test_kubectl_applies_karmadas_service_discovery_sample(hub_kubeconfig: Path) -> None:  # noqa: F811
    samples = UPSTREAM / "service_discovery"
    assert await _applied_both_ways(hub_kubeconfig, samples / "service.yaml") == [
        "namespace/discovery configured", "deployment.apps/serve configured", "service/serve configured",
        "propagationpolicy.policy.karmada.io/mcs-workload configured",
    ]
    assert await _applied_both_ways(hub_kubeconfig, samples / "export.yaml") == [
        "serviceexport.multicluster.x-k8s.io/serve configured",
        "propagationpolicy.policy.karmada.io/serve-export-policy configured",
    ]
    assert await _applied_both_ways(hub_kubeconfig, samples / "import.yaml") == [
        "serviceimport.multicluster.x-k8s.io/serve configured",
        "propagationpolicy.policy.karmada.io/serve-import-policy configured",
    ]
    code, out, err = await kubectl(hub_kubeconfig, "get", "svcim", "-n", "discovery")
    assert code == 0, err
    header, row = out.splitlines()
    assert header.split() == ["NAME", "TYPE", "IP", "AGE"]
    assert row.split()[:2] == ["serve", "ClusterSetIP"]
    code, out, err = await kubectl(hub_kubeconfig, "get", "svcex", "serve", "-n", "discovery", "-o", "yaml")
    assert code == 0, err
    assert yaml.safe_load(out)["kind"] == "ServiceExport"


@needs_kubectl
async def test_kubectl_applies_karmadas_multi_cluster_service_and_explains_it(hub_kubeconfig: Path) -> None:  # noqa: F811
    tutorial = UPSTREAM / "website" / "access-service-across-clusters.yaml"
    assert await _applied_both_ways(hub_kubeconfig, tutorial) == [
        "service/nginx configured", "multiclusterservice.networking.karmada.io/nginx configured",
    ]
    code, out, err = await kubectl(hub_kubeconfig, "get", "mcs", "nginx", "-o", "yaml")
    assert code == 0, err
    served = yaml.safe_load(out)
    assert served["spec"]["providerClusters"] == [{"name": "member1"}]
    assert PERMANENT_ID in served["metadata"]["labels"]
    code, out, err = await kubectl(hub_kubeconfig, "explain", "multiclusterservice.spec.consumerClusters")
    assert code == 0, err
    assert "The clusters the Service is exposed in, for clients" in out
    code, out, err = await kubectl(hub_kubeconfig, "apply", "--server-side", "-f", "-", stdin=MCI_YAML)
    assert (code, out.strip()) == (0, "multiclusteringress.networking.karmada.io/demo-localhost serverside-applied"), err
    code, out, err = await kubectl(hub_kubeconfig, "explain", "mci.spec.rules.http.paths.pathType")
    assert code == 0, err
    assert "pathType determines the interpretation of the path matching" in out
