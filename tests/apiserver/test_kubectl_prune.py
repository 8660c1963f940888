"""``kubectl apply --prune``: kubectl's default prune list names Endpoints, PersistentVolume and
ReplicationController, and kubectl gives up before pruning anything on a server that does not
serve all of them (``error retrieving RESTMappings to prune: ... no matches for kind
"Endpoints"``). The hub serves them, with kube's table columns and RC's scale subresource."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import yaml

from controlplane.apiserver import columns as col

from .test_kube_validation import hub_kubeconfig  # noqa: F401 (fixtures)
from .test_real_clients import kubectl, needs_kubectl

PART_OF = "app.kubernetes.io/part-of"


def config_map(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "labels": {PART_OF: "demo"}},
            "data": {"k": name}}


def listed(*items: dict[str, Any]) -> str:
    return yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": list(items)})


@needs_kubectl
async def test_apply_prune_deletes_what_the_set_no_longer_has(hub_kubeconfig: Path) -> None:  # noqa: F811
    code, out, err = await kubectl(hub_kubeconfig, "apply", "-f", "-", stdin=listed(config_map("a"), config_map("b")))
    assert code == 0, err
    code, out, err = await kubectl(
        hub_kubeconfig, "apply", "--prune", "-l", f"{PART_OF}=demo", "-f", "-", stdin=listed(config_map("a"))
    )
    assert code == 0, err
    assert "configmap/a unchanged" in out and "configmap/b pruned" in out, out
    code, out, err = await kubectl(hub_kubeconfig, "get", "configmaps", "-l", f"{PART_OF}=demo", "-o", "name")
    assert code == 0, err
    assert out.split() == ["configmap/a"]


@needs_kubectl
async def test_the_prune_list_kinds_print_as_on_kube(hub_kubeconfig: Path) -> None:  # noqa: F811
    endpoints = {"apiVersion": "v1", "kind": "Endpoints", "metadata": {"name": "web"},
                 "subsets": [{"addresses": [{"ip": "10.0.0.7"}, {"ip": "10.0.0.8"}], "ports": [{"port": 8000}]}]}
    volume = {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": "data"},
              "spec": {"capacity": {"storage": "10Gi"}, "accessModes": ["ReadWriteOnce"],
                       "persistentVolumeReclaimPolicy": "Retain", "storageClassName": "fast",
                       "hostPath": {"path": "/data"},
                       "claimRef": {"namespace": "default", "name": "claim"}}}
    controller = {"apiVersion": "v1", "kind": "ReplicationController", "metadata": {"name": "old"},
                  "spec": {"replicas": 1, "selector": {"app": "old"},
                           "template": {"metadata": {"labels": {"app": "old"}},
                                        "spec": {"containers": [{"name": "c", "image": "nginx:1"}]}}}}
    code, out, err = await kubectl(hub_kubeconfig, "apply", "-f", "-", stdin=listed(endpoints, volume, controller))
    assert code == 0, err

    code, out, err = await kubectl(hub_kubeconfig, "get", "endpoints", "web")
    assert code == 0, err
    assert out.split("\n")[0].split() == ["NAME", "ENDPOINTS", "AGE"]
    assert out.split("\n")[1].split()[:2] == ["web", "10.0.0.7:8000,10.0.0.8:8000"]

    code, out, err = await kubectl(hub_kubeconfig, "get", "pv", "data")
    assert code == 0, err
    row = out.split("\n")[1].split()  # STATUS and REASON are empty: no volume controller runs on the hub
    assert row[1:4] == ["10Gi", "RWO", "Retain"] and "default/claim" in row and "fast" in row and "<unset>" in row

    code, out, err = await kubectl(hub_kubeconfig, "scale", "rc", "old", "--replicas=3")
    assert code == 0, err
    code, out, err = await kubectl(hub_kubeconfig, "get", "rc", "old", "-o", "wide")
    assert code == 0, err
    header, row = (line.split() for line in out.strip().split("\n"))
    assert header == ["NAME", "DESIRED", "CURRENT", "READY", "AGE", "CONTAINERS", "IMAGES", "SELECTOR"]
    assert row[:4] == ["old", "3", "0", "0"] and row[-3:] == ["c", "nginx:1", "app=old"]
    code, out, err = await kubectl(hub_kubeconfig, "get", "--raw", "/api/v1/namespaces/default/replicationcontrollers/old/scale")
    assert code == 0, err
    assert yaml.safe_load(out)["status"]["selector"] == "app=old"


def test_endpoints_show_three_addresses_then_how_many_more() -> None:
    now = datetime.now(UTC)
    many = {"subsets": [
        {"addresses": [{"ip": f"10.0.0.{i}"} for i in range(1, 4)], "ports": [{"port": 80}, {"port": 443}]},
        {"addresses": [{"ip": "fd00::1"}]},
    ]}
    assert col.endpoints_addresses(many, now) == "10.0.0.1:80,10.0.0.2:80,10.0.0.3:80 + 4 more..."
    assert col.endpoints_addresses({"subsets": [{"addresses": [{"ip": "fd00::1"}], "ports": [{"port": 80}]}]}, now) == (
        "[fd00::1]:80"
    )
    assert col.endpoints_addresses({"subsets": [{"addresses": [{"ip": "10.1.1.1"}]}]}, now) == "10.1.1.1"
    assert col.endpoints_addresses({}, now) == "<none>"
