"""Field selectors as kube-apiserver takes them: each kind's own fields select as its
``ToSelectableFields`` prints them (a Pod's unset ``spec.hostNetwork`` is ``false``, an unset
count ``0``), and a field the kind does not take is the 400 of kube's conversion -- ``field label
not supported: <field>`` for a kind with a conversion of its own (Pod, Node, Namespace, Service,
Job, custom resources; cluster-scoped ones refuse ``metadata.namespace``), ``"<field>" is not a
known field selector: only "metadata.name", "metadata.namespace"`` for a built-in kind without."""

from __future__ import annotations

from typing import Any

import pytest
from aiohttp.test_utils import TestClient

Client = TestClient[Any, Any]
NS = "/api/v1/namespaces/default"
TEMPLATE = {"metadata": {"labels": {"app": "a"}}, "spec": {"containers": [{"name": "c", "image": "nginx"}]}}


def not_known(field: str) -> str:
    return f'"{field}" is not a known field selector: only "metadata.name", "metadata.namespace"'


async def names(hub: Client, collection: str, selector: str) -> list[str]:
    answer = await hub.get(collection, params={"fieldSelector": selector})
    assert answer.status == 200, await answer.text()
    return [item["metadata"]["name"] for item in (await answer.json())["items"]]


REFUSED = [
    (f"{NS}/configmaps", "spec.foo=x", not_known("spec.foo")),
    ("/apis/apps/v1/namespaces/default/deployments", "status.phase=x", not_known("status.phase")),
    ("/apis/apps/v1/replicasets", "status.replicas=0", not_known("status.replicas")),
    ("/apis/rbac.authorization.k8s.io/v1/clusterroles", "spec.x=1", not_known("spec.x")),
    (f"{NS}/pods", "spec.foo=x", "field label not supported: spec.foo"),
    ("/api/v1/nodes", "metadata.namespace=x", "field label not supported: metadata.namespace"),
    ("/api/v1/namespaces", "metadata.namespace=x", "field label not supported: metadata.namespace"),
    ("/apis/cluster.gpufed.io/v1alpha1/clusters", "metadata.namespace=x", "field label not supported: metadata.namespace"),
    ("/apis/batch/v1/jobs", "status.active=1", "field label not supported: status.active"),
]


@pytest.mark.parametrize(("collection", "selector", "message"), REFUSED)
async def test_a_field_the_kind_does_not_take_is_kubes_400(
    hub: Client, collection: str, selector: str, message: str
) -> None:
    for watch in ({}, {"watch": "true"}):
        answer = await hub.get(collection, params={"fieldSelector": selector, **watch})
        assert answer.status == 400
        status = await answer.json()
        assert (status["reason"], status["message"]) == ("BadRequest", message)


async def test_a_built_in_cluster_scoped_kind_without_a_conversion_takes_metadata_namespace(hub: Client) -> None:
    assert await names(hub, "/apis/rbac.authorization.k8s.io/v1/clusterroles", "metadata.namespace=x") == []


async def test_kinds_select_on_their_own_fields_as_kube_prints_them(hub: Client) -> None:
    writes = [
        (f"{NS}/pods", {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "plain"},
                        "spec": {"nodeName": "n1", **TEMPLATE["spec"]}}),
        (f"{NS}/pods", {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "host"},
                        "spec": {"hostNetwork": True, **TEMPLATE["spec"]}}),
        (f"{NS}/services", {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web"},
                            "spec": {"ports": [{"port": 80}], "selector": {"app": "a"}}}),
        (f"{NS}/services", {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "edge"},
                            "spec": {"type": "NodePort", "ports": [{"port": 80}], "selector": {"app": "a"}}}),
        (f"{NS}/services", {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "headless"},
                            "spec": {"clusterIP": "None", "ports": [{"port": 80}], "selector": {"app": "a"}}}),
        ("/apis/batch/v1/namespaces/default/jobs", {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "once"},
                                                    "spec": {"template": {**TEMPLATE, "spec": {
                                                        **TEMPLATE["spec"], "restartPolicy": "Never"}}}}),
        (f"{NS}/replicationcontrollers", {"apiVersion": "v1", "kind": "ReplicationController", "metadata": {"name": "rc"},
                                          "spec": {"replicas": 2, "selector": {"app": "a"}, "template": TEMPLATE}}),
    ]
    for collection, body in writes:
        created = await hub.post(collection, json=body)
        assert created.status == 201, await created.text()
    assert await names(hub, f"{NS}/pods", "spec.hostNetwork=false") == ["plain"]
    assert await names(hub, f"{NS}/pods", "spec.hostNetwork=true") == ["host"]
    assert await names(hub, f"{NS}/pods", "spec.host=n1") == ["plain"]
    status = {"status": {"podIP": "10.0.0.9", "podIPs": [{"ip": "10.0.0.9"}, {"ip": "fd00::9"}]}}
    assert (await hub.patch(f"{NS}/pods/host/status", json=status,
                            headers={"Content-Type": "application/merge-patch+json"})).status == 200
    assert await names(hub, f"{NS}/pods", "status.podIP=10.0.0.9") == ["host"]
    assert await names(hub, f"{NS}/pods", "status.podIPs=10.0.0.9") == []
    assert await names(hub, f"{NS}/services", "spec.type=ClusterIP") == ["headless", "web"]
    assert await names(hub, f"{NS}/services", "spec.type!=ClusterIP") == ["edge"]
    assert await names(hub, f"{NS}/services", "spec.clusterIP=None") == ["headless"]
    assert await names(hub, "/apis/batch/v1/jobs", "status.successful=0") == ["once"]
    assert await names(hub, f"{NS}/replicationcontrollers", "status.replicas=0") == ["rc"]
