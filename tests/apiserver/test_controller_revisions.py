"""apps/v1 ControllerRevision, the history ``kubectl rollout history|undo`` reads for a
StatefulSet or a DaemonSet, served as kube serves it.

Before, the hub did not serve the kind and ``kubectl rollout history sts/x`` failed with
``unable to find history controlled by StatefulSet x: the server could not find the requested
resource``; kube (and Karmada's control plane, where no controller writes revisions) answer
``No rollout history found.``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from .test_kube_validation import Client, hub, hub_kubeconfig  # noqa: F401 (fixtures)
from .test_real_clients import kubectl, needs_kubectl

REVISIONS = "/apis/apps/v1/namespaces/default/controllerrevisions"
STATEFUL_SET = {
    "apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "db"},
    "spec": {
        "replicas": 1, "selector": {"matchLabels": {"app": "db"}},
        "template": {"metadata": {"labels": {"app": "db"}}, "spec": {"containers": [{"name": "c", "image": "i"}]}},
    },
}


def revision(**fields: Any) -> dict[str, Any]:
    return {"apiVersion": "apps/v1", "kind": "ControllerRevision", "metadata": {"name": "db-7f9c4"}, **fields}


@needs_kubectl
async def test_rollout_history_of_a_stateful_set_without_revisions_is_kubes(hub_kubeconfig: Path) -> None:  # noqa: F811
    code, _, err = await kubectl(hub_kubeconfig, "apply", "-f", "-", stdin=yaml.safe_dump(STATEFUL_SET))
    assert code == 0, err
    code, out, err = await kubectl(hub_kubeconfig, "rollout", "history", "statefulset/db")
    assert code == 0, err
    assert "No rollout history found." in out
    code, _, err = await kubectl(hub_kubeconfig, "rollout", "undo", "statefulset/db")
    assert code != 0
    assert "no last revision to roll back to" in err, err


async def test_a_revision_is_validated_and_listed_with_its_controller(hub: Client) -> None:  # noqa: F811
    response = await hub.post(REVISIONS, json=revision(revision=-1))
    assert response.status == 422
    causes = [(c["field"], c["message"]) for c in (await response.json())["details"]["causes"]]
    assert causes == [
        ("data", "Required value: data is mandatory"),
        ("revision", "Invalid value: -1: must be greater than or equal to 0"),
    ]
    owner = {"apiVersion": "apps/v1", "kind": "StatefulSet", "name": "db", "uid": "u1", "controller": True}
    created = revision(revision=2, data={"spec": {"template": {}}})
    created["metadata"]["ownerReferences"] = [owner]
    assert (await hub.post(REVISIONS, json=created)).status == 201
    table = await (await hub.get(REVISIONS, headers={"Accept": "application/json;as=Table;v=v1;g=meta.k8s.io"})).json()
    assert [c["name"] for c in table["columnDefinitions"]] == ["Name", "Controller", "Revision", "Age"]
    assert table["rows"][0]["cells"][:3] == ["db-7f9c4", "statefulset.apps/db", 2]
    changed = await hub.patch(
        f"{REVISIONS}/db-7f9c4", json={"data": {"other": 1}}, headers={"Content-Type": "application/merge-patch+json"}
    )
    assert changed.status == 422
    assert (await changed.json())["details"]["causes"][0]["field"] == "data"


async def test_a_delete_is_answered_with_a_success_status(hub: Client) -> None:  # noqa: F811
    assert (await hub.post(REVISIONS, json=revision(revision=1, data={}))).status == 201
    answer = await (await hub.delete(f"{REVISIONS}/db-7f9c4")).json()
    assert (answer["kind"], answer["status"], answer["details"]["kind"]) == ("Status", "Success", "controllerrevisions")
