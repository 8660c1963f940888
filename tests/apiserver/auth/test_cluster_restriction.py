"""ClusterRestriction over real HTTP: an agent's credential can report its Cluster's status
and keep its own registration, but every write verb that would change what an admin set
(cordon, taints, labels, tier, pricing) or field ownership is a 403 Status naming the
fields, and nothing is stored."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer

from controlplane.apis.constants import FIELD_MANAGER_AGENT
from controlplane.apiserver.app import create_app
from controlplane.apiserver.auth import RoleAuthorizer, TokenStore
from controlplane.apiserver.auth.clusterrestriction import ClusterRestriction
from controlplane.apiserver.identity import Role
from controlplane.apiserver.objects import ObjectStore
from controlplane.hub import hub_registry
from controlplane.storage import Store

CLUSTER = "/apis/cluster.gpufed.io/v1alpha1/clusters/c1"
MERGE = "application/merge-patch+json"
JSON_PATCH = "application/json-patch+json"
APPLY = "application/apply-patch+yaml"

REGISTRATION = {
    "apiVersion": "cluster.gpufed.io/v1alpha1",
    "kind": "Cluster",
    "metadata": {"name": "c1", "labels": {"region-group": "eu", "gpu": "a100"}},
    "spec": {"provider": "aws", "region": "eu-west-1", "tier": 1, "pricing": {"A100": 4.0, "H100": 9.0}},
}
ADMIN_CHANGE = {
    "metadata": {"labels": {"team": "ml"}},
    "spec": {
        "unschedulable": True,
        "taints": [{"key": "maintenance", "value": "true", "effect": "NoExecute"}],
        "tier": 2,
        "pricing": {"A100": 5.0},
    },
}


class Hub:
    def __init__(self, client: TestClient[Any, Any], *, admin: str, agent: str) -> None:
        self.client = client
        self.admin = admin
        self.agent = agent

    async def call(
        self,
        method: str,
        path: str,
        *,
        token: str,
        body: Any = None,
        content_type: str = "application/json",
        query: dict[str, str] | None = None,
    ) -> tuple[int, dict[str, Any]]:
        headers = {"Authorization": f"Bearer {token}", "Content-Type": content_type}
        data = json.dumps(body).encode() if body is not None else None
        async with self.client.request(method, path, headers=headers, data=data, params=query or {}) as response:
            return response.status, await response.json()

    async def cluster(self) -> dict[str, Any]:
        status, obj = await self.call("GET", CLUSTER, token=self.admin)
        assert status == 200, obj
        return obj


@pytest.fixture
async def hub(store: Store) -> AsyncIterator[Hub]:
    """The hub's API (authentication, authorization, ClusterRestriction) with an agent of
    cluster c1 registered as the real agent does and an admin's cordon, taint, label,
    tier and price on top."""
    registry = hub_registry()
    objects = ObjectStore(store, registry)
    tokens = TokenStore(store)
    app = create_app(
        objects, registry, authenticator=tokens, authorizer=RoleAuthorizer(), admission=[ClusterRestriction()]
    )
    admin = (await tokens.create(role=Role.ADMIN, name="admin")).token
    agent = (await tokens.create(role=Role.AGENT, name="agent:c1", cluster="c1")).token
    async with TestClient(TestServer(app, host="127.0.0.1")) as client:
        hub = Hub(client, admin=admin, agent=agent)
        status, created = await hub.call(
            "PATCH", CLUSTER, token=agent, body=REGISTRATION, content_type=APPLY,
            query={"fieldManager": FIELD_MANAGER_AGENT, "force": "false"},
        )
        assert status in (200, 201), created
        status, changed = await hub.call(
            "PATCH", CLUSTER, token=admin, body=ADMIN_CHANGE, content_type=MERGE,
            query={"fieldManager": "kubectl-patch"},
        )
        assert status == 200, changed
        yield hub


def _put_body(cluster: dict[str, Any], change: dict[str, Any]) -> dict[str, Any]:
    body = json.loads(json.dumps(cluster))
    for section, values in change.items():
        body.setdefault(section, {}).update(values)
    return body


FORBIDDEN_PATCHES = [
    pytest.param(MERGE, {"spec": {"unschedulable": False}}, "spec.unschedulable", id="merge-uncordon"),
    pytest.param(MERGE, {"spec": {"unschedulable": None}}, "spec.unschedulable", id="merge-drop-cordon"),
    pytest.param(MERGE, {"spec": {"taints": []}}, "spec.taints", id="merge-untaint"),
    pytest.param(MERGE, {"metadata": {"labels": {"tenant": "finance"}}}, "metadata.labels.tenant", id="merge-new-label"),
    pytest.param(MERGE, {"metadata": {"labels": {"team": "finance"}}}, "metadata.labels.team", id="merge-admin-label"),
    pytest.param(MERGE, {"metadata": {"annotations": {"a": "b"}}}, "metadata.annotations.a", id="merge-annotation"),
    pytest.param(MERGE, {"spec": {"tier": 0}}, "spec.tier", id="merge-admin-tier"),
    pytest.param(MERGE, {"spec": {"pricing": {"A100": 0.01}}}, "spec.pricing.A100", id="merge-admin-price"),
    pytest.param(MERGE, {"spec": {"zone": "eu-west-1a"}}, "spec.zone", id="merge-unregistered-field"),
    pytest.param(
        JSON_PATCH, [{"op": "replace", "path": "/spec/unschedulable", "value": False}], "spec.unschedulable",
        id="json-uncordon",
    ),
    pytest.param(JSON_PATCH, [{"op": "remove", "path": "/spec/taints"}], "spec.taints", id="json-untaint"),
    pytest.param(
        APPLY,
        {**REGISTRATION, "spec": {**REGISTRATION["spec"], "unschedulable": False, "taints": []}},
        "spec.unschedulable",
        id="apply-forced-uncordon",
    ),
    pytest.param(
        APPLY, {**REGISTRATION, "spec": {**REGISTRATION["spec"], "tier": 0}}, "spec.tier", id="apply-forced-tier"
    ),
]


@pytest.mark.parametrize(("content_type", "patch", "field"), FORBIDDEN_PATCHES)
@pytest.mark.parametrize("dry_run", [False, True], ids=["write", "dry-run"])
async def test_agent_patch_of_admin_owned_fields_is_forbidden(
    hub: Hub, content_type: str, patch: Any, field: str, dry_run: bool
) -> None:
    before = await hub.cluster()
    query = {"fieldManager": FIELD_MANAGER_AGENT}
    if content_type == APPLY:
        query["force"] = "true"
    if dry_run:
        query["dryRun"] = "All"

    status, document = await hub.call("PATCH", CLUSTER, token=hub.agent, body=patch, content_type=content_type, query=query)

    assert status == 403, document
    assert (document["kind"], document["reason"], document["code"]) == ("Status", "Forbidden", 403)
    assert document["message"].startswith('clusters.cluster.gpufed.io "c1" is forbidden: agent "c1" may change only')
    assert field in [cause["field"] for cause in document["details"]["causes"]]
    assert "." + field in document["message"]
    assert await hub.cluster() == before


@pytest.mark.parametrize(
    "change",
    [
        pytest.param({"spec": {**REGISTRATION["spec"], "unschedulable": False}}, id="uncordon"),
        pytest.param({"metadata": {"name": "c1", "labels": {"tenant": "finance"}}}, id="labels"),
        pytest.param({"spec": {**REGISTRATION["spec"], "pricing": {"A100": 0.01, "H100": 9.0}}}, id="price"),
    ],
)
async def test_agent_put_of_admin_owned_fields_is_forbidden(hub: Hub, change: dict[str, Any]) -> None:
    before = await hub.cluster()

    status, document = await hub.call("PUT", CLUSTER, token=hub.agent, body=_put_body(before, change))

    assert status == 403, document
    assert document["reason"] == "Forbidden"
    assert await hub.cluster() == before


async def test_agent_cannot_forge_field_ownership(hub: Hub) -> None:
    """Claiming an unowned label in managedFields, to change it in a later write, is refused."""
    before = await hub.cluster()
    forged = _put_body(before, {})
    agent_entry = next(e for e in forged["metadata"]["managedFields"] if e["manager"] == FIELD_MANAGER_AGENT)
    agent_entry["fieldsV1"]["f:spec"]["f:unschedulable"] = {}
    agent_entry["fieldsV1"]["f:metadata"]["f:labels"]["f:team"] = {}
    for entry in forged["metadata"]["managedFields"]:
        if entry["manager"] == "kubectl-patch":
            entry["fieldsV1"] = {"f:spec": {"f:taints": {}}}

    status, document = await hub.call("PUT", CLUSTER, token=hub.agent, body=forged)

    assert status == 403, document
    assert "may not change metadata.managedFields" in document["message"]
    assert await hub.cluster() == before


@pytest.mark.parametrize("method", ["PUT", "PATCH"])
async def test_status_subresource_writes_only_the_status(hub: Hub, method: str) -> None:
    """The agent's reports are 200; spec changes sent along through /status are ignored, as in kube."""
    before = await hub.cluster()
    report = {"conditions": [{"type": "Ready", "status": "True", "reason": "MemberHealthy"}]}
    if method == "PUT":
        body: Any = _put_body(before, {"spec": {**before["spec"], "unschedulable": False, "taints": []}})
        body["status"] = report
        content_type = "application/json"
    else:
        body = {"spec": {"unschedulable": False, "taints": []}, "status": report}
        content_type = MERGE

    status, document = await hub.call(method, CLUSTER + "/status", token=hub.agent, body=body, content_type=content_type)

    assert status == 200, document
    after = await hub.cluster()
    assert after["status"]["conditions"][0]["reason"] == "MemberHealthy"
    assert after["spec"] == before["spec"]
    assert after["metadata"]["labels"] == before["metadata"]["labels"]


async def test_agent_keeps_its_own_registration(hub: Hub) -> None:
    """Re-registering is a no-op; fields it registered and still owns alone it may change;
    a field an admin took over is a conflict to the non-forced apply, not a silent win."""
    again = await hub.call(
        "PATCH", CLUSTER, token=hub.agent, body=REGISTRATION, content_type=APPLY,
        query={"fieldManager": FIELD_MANAGER_AGENT, "force": "false"},
    )
    assert again[0] == 409, again
    assert {cause["field"] for cause in again[1]["details"]["causes"]} == {".spec.tier", ".spec.pricing.A100"}

    without_admin_fields = json.loads(json.dumps(REGISTRATION))
    del without_admin_fields["spec"]["tier"]
    del without_admin_fields["spec"]["pricing"]["A100"]
    status, applied = await hub.call(
        "PATCH", CLUSTER, token=hub.agent, body=without_admin_fields, content_type=APPLY,
        query={"fieldManager": FIELD_MANAGER_AGENT, "force": "false"},
    )
    assert status == 200, applied
    assert (applied["spec"]["tier"], applied["spec"]["pricing"]) == (2, {"A100": 5.0, "H100": 9.0})
    assert applied["spec"]["unschedulable"] is True

    status, relabelled = await hub.call(
        "PATCH", CLUSTER, token=hub.agent, content_type=MERGE, query={"fieldManager": FIELD_MANAGER_AGENT},
        body={"metadata": {"labels": {"gpu": "h100"}}, "spec": {"pricing": {"H100": 8.5}, "region": "eu-west-2"}},
    )
    assert status == 200, relabelled
    assert relabelled["metadata"]["labels"]["gpu"] == "h100"
    assert (relabelled["spec"]["pricing"]["H100"], relabelled["spec"]["region"]) == (8.5, "eu-west-2")


async def test_admin_and_other_clusters_are_not_restricted(hub: Hub) -> None:
    status, document = await hub.call(
        "PATCH", CLUSTER, token=hub.admin, body={"spec": {"unschedulable": False, "taints": []}}, content_type=MERGE
    )
    assert status == 200, document
    assert (document["spec"]["unschedulable"], document["spec"]["taints"]) == (False, [])
