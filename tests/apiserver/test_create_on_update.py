"""A PUT of an object that does not exist, as kube's ``Store.Update`` takes it: the kinds whose
registry strategy says ``AllowCreateOnUpdate() bool { return true }`` create it (201 Created, the
create path: a CREATE for admission, an ADDED for a watch, whatever resourceVersion the request
names dropped), every other kind is kube's 404. The kinds a real cluster serves from a
CustomResourceDefinition follow apiextensions' strategy: neither created on update nor updated
without a resourceVersion."""

from __future__ import annotations

import json
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer

from controlplane.apis.kube.unconditional import CUSTOM_RESOURCE_GROUPS
from controlplane.apiserver import errors
from controlplane.apiserver.admission import Operation, WriteAttributes
from controlplane.apiserver.app import create_app
from controlplane.apiserver.auth import TokenStore
from controlplane.apiserver.identity import Decision, RequestAttributes, Role
from controlplane.apiserver.objects import ObjectStore
from controlplane.hubregistry import hub_registry
from controlplane.storage import MemoryStore

from .protobuf.builders import envelope, msg, object_meta, text

Client = TestClient[Any, Any]
RBAC = "rbac.authorization.k8s.io/v1"
_ROLE_REF = {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "view"}
_SUBJECTS = [{"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": "ada"}]

#: kube's built-in kinds whose strategy creates a missing object on update: (collection, object).
CREATE_ON_UPDATE: dict[str, tuple[str, dict[str, Any]]] = {
    "endpoints": ("/api/v1/namespaces/default/endpoints", {
        "apiVersion": "v1", "kind": "Endpoints", "metadata": {"name": "x"}}),
    "events": ("/api/v1/namespaces/default/events", {
        "apiVersion": "v1", "kind": "Event", "metadata": {"name": "x"}, "reason": "Seen", "message": "m",
        "type": "Normal", "involvedObject": {"kind": "Pod", "name": "p", "namespace": "default"}}),
    "events.k8s.io": ("/apis/events.k8s.io/v1/namespaces/default/events", {
        "apiVersion": "events.k8s.io/v1", "kind": "Event", "metadata": {"name": "x"},
        "eventTime": "2026-01-01T00:00:00.000000Z", "reportingController": "example.com/c",
        "reportingInstance": "c-1", "action": "Seen", "reason": "Seen", "type": "Normal",
        "regarding": {"kind": "Pod", "name": "p", "namespace": "default"}}),
    "limitranges": ("/api/v1/namespaces/default/limitranges", {
        "apiVersion": "v1", "kind": "LimitRange", "metadata": {"name": "x"},
        "spec": {"limits": [{"type": "Container", "max": {"cpu": "2"}}]}}),
    "services": ("/api/v1/namespaces/default/services", {
        "apiVersion": "v1", "kind": "Service", "metadata": {"name": "x"}, "spec": {"ports": [{"port": 80}]}}),
    "leases": ("/apis/coordination.k8s.io/v1/namespaces/default/leases", {
        "apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": "x"},
        "spec": {"holderIdentity": "a"}}),
    "runtimeclasses": ("/apis/node.k8s.io/v1/runtimeclasses", {
        "apiVersion": "node.k8s.io/v1", "kind": "RuntimeClass", "metadata": {"name": "x"}, "handler": "nvidia"}),
    "roles": (f"/apis/{RBAC}/namespaces/default/roles", {
        "apiVersion": RBAC, "kind": "Role", "metadata": {"name": "x"}, "rules": []}),
    "clusterroles": (f"/apis/{RBAC}/clusterroles", {
        "apiVersion": RBAC, "kind": "ClusterRole", "metadata": {"name": "x"}, "rules": []}),
    "rolebindings": (f"/apis/{RBAC}/namespaces/default/rolebindings", {
        "apiVersion": RBAC, "kind": "RoleBinding", "metadata": {"name": "x"}, "roleRef": _ROLE_REF,
        "subjects": _SUBJECTS}),
    "clusterrolebindings": (f"/apis/{RBAC}/clusterrolebindings", {
        "apiVersion": RBAC, "kind": "ClusterRoleBinding", "metadata": {"name": "x"}, "roleRef": _ROLE_REF,
        "subjects": _SUBJECTS}),
}

#: Built-in kinds whose strategy does not (a sample), and kinds that are custom resources on a real cluster.
NOT_CREATED: dict[str, tuple[str, dict[str, Any]]] = {
    "configmaps": ("/api/v1/namespaces/default/configmaps", {
        "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}}),
    "priorityclasses": ("/apis/scheduling.k8s.io/v1/priorityclasses", {
        "apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "x"}, "value": 5}),
    "flowschemas": ("/apis/flowcontrol.apiserver.k8s.io/v1/flowschemas", {
        "apiVersion": "flowcontrol.apiserver.k8s.io/v1", "kind": "FlowSchema", "metadata": {"name": "x"},
        "spec": {"priorityLevelConfiguration": {"name": "global-default"}}}),
    "nodes": ("/api/v1/nodes", {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "x"}}),
    "poddisruptionbudgets": ("/apis/policy/v1/namespaces/default/poddisruptionbudgets", {
        "apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "x"},
        "spec": {"minAvailable": 1}}),
    "resourceflavors": ("/apis/kueue.x-k8s.io/v1beta1/resourceflavors", {
        "apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "ResourceFlavor", "metadata": {"name": "x"}}),
}


def _qualified(collection: str) -> str:
    parts = collection.strip("/").split("/")
    plural = parts[-1]
    return plural if parts[0] == "api" else f"{plural}.{parts[1]}"


@pytest.mark.parametrize("version", [None, "", "12345"])
@pytest.mark.parametrize("plural", sorted(CREATE_ON_UPDATE))
async def test_a_put_of_a_missing_object_creates_it_where_the_strategy_allows(
    hub: Client, plural: str, version: str | None
) -> None:
    collection, body = CREATE_ON_UPDATE[plural]
    sent = json.loads(json.dumps(body))
    sent["metadata"]["labels"] = {"app": "a"}  # a field of the putter's, whatever the kind
    if version is not None:
        sent["metadata"]["resourceVersion"] = version  # kube's store drops it: there is nothing to compare
    answer = await hub.put(f"{collection}/x?fieldManager=putter", json=sent)
    assert answer.status == 201, await answer.text()
    created = await answer.json()
    meta = created["metadata"]
    assert meta["uid"] and meta["creationTimestamp"] and meta["resourceVersion"] not in ("", version)
    assert [(e["manager"], e["operation"]) for e in meta["managedFields"]] == [("putter", "Update")]
    stored = await hub.get(f"{collection}/x")
    assert stored.status == 200
    assert (await stored.json())["metadata"]["uid"] == meta["uid"]
    # Once it exists, a PUT is an update (with the stored resourceVersion every kind takes it).
    created["metadata"]["labels"] = {"changed": "yes"}
    again = await hub.put(f"{collection}/x", json=created)
    assert again.status == 200, await again.text()
    assert (await again.json())["metadata"]["uid"] == meta["uid"]


@pytest.mark.parametrize("plural", sorted(NOT_CREATED))
async def test_every_other_kind_answers_a_put_of_a_missing_object_with_kubes_404(hub: Client, plural: str) -> None:
    collection, body = NOT_CREATED[plural]
    answer = await hub.put(f"{collection}/x", json=body)
    status = await answer.json()
    assert (answer.status, status["reason"]) == (404, "NotFound"), status
    assert status["message"] == f'{_qualified(collection)} "x" not found'
    assert (await hub.get(f"{collection}/x")).status == 404


async def test_a_dry_run_put_of_a_missing_object_creates_nothing(hub: Client) -> None:
    collection, body = CREATE_ON_UPDATE["leases"]
    answer = await hub.put(f"{collection}/x?dryRun=All", json=body)
    assert answer.status == 201, await answer.text()
    assert (await answer.json())["spec"] == {"holderIdentity": "a"}
    assert (await hub.get(f"{collection}/x")).status == 404


async def test_a_protobuf_put_of_a_missing_role_creates_it(hub: Client) -> None:
    collection, _ = CREATE_ON_UPDATE["roles"]
    rule = msg(2, text(1, "get"), text(2, ""), text(3, "pods"))  # a PolicyRule: verbs, apiGroups, resources
    body = envelope(RBAC, "Role", object_meta(1, "x") + rule)
    answer = await hub.put(f"{collection}/x", data=body, headers={"Content-Type": "application/vnd.kubernetes.protobuf"})
    assert answer.status == 201, await answer.text()
    assert (await answer.json())["rules"] == [{"verbs": ["get"], "apiGroups": [""], "resources": ["pods"]}]


async def test_a_watch_sees_the_created_object_added(hub: Client) -> None:
    collection, body = CREATE_ON_UPDATE["endpoints"]
    listed = await (await hub.get(collection)).json()
    assert (await hub.put(f"{collection}/x", json=body)).status == 201
    since = listed["metadata"]["resourceVersion"]
    watch = await hub.get(f"{collection}?watch=true&resourceVersion={since}&timeoutSeconds=5")
    event = json.loads(await watch.content.readline())
    assert (event["type"], event["object"]["metadata"]["name"]) == ("ADDED", "x")
    watch.close()


async def test_a_put_in_a_missing_namespace_is_kubes_namespace_not_found(hub: Client) -> None:
    _, body = CREATE_ON_UPDATE["leases"]
    answer = await hub.put("/apis/coordination.k8s.io/v1/namespaces/nowhere/leases/x", json=body)
    status = await answer.json()
    assert (answer.status, status["reason"], status["message"]) == (404, "NotFound", 'namespaces "nowhere" not found')


async def test_a_put_naming_another_object_stays_kubes_400(hub: Client) -> None:
    collection, body = CREATE_ON_UPDATE["leases"]
    answer = await hub.put(f"{collection}/y", json=body)
    assert answer.status == 400, await answer.text()
    assert (await hub.get(f"{collection}/y")).status == 404


async def test_a_put_naming_a_uid_is_kubes_precondition_conflict(hub: Client) -> None:
    collection, body = CREATE_ON_UPDATE["runtimeclasses"]
    sent = {**body, "metadata": {"name": "x", "uid": "u-1"}}
    answer = await hub.put(f"{collection}/x", json=sent)
    status = await answer.json()
    assert (answer.status, status["reason"]) == (409, "Conflict"), status
    assert status["message"] == ('Operation cannot be fulfilled on runtimeclasses.node.k8s.io "x": '
                                 "Precondition failed: UID in precondition: u-1, UID in object meta: ")


async def test_a_put_of_a_missing_service_status_creates_the_service(hub: Client) -> None:
    """kube's status handler passes ``forceAllowCreate=false``, but its store asks the status
    strategy, which is the Service strategy but for the update (``AllowCreateOnUpdate`` true):
    the Service is created as a create of it stores it, its status dropped."""
    collection, body = CREATE_ON_UPDATE["services"]
    sent = {**body, "status": {"loadBalancer": {"ingress": [{"ip": "10.9.9.9"}]}}}
    answer = await hub.put(f"{collection}/x/status", json=sent)
    assert answer.status == 201, await answer.text()
    created = await answer.json()
    assert created["spec"]["ports"][0]["port"] == 80 and created["status"] == {"loadBalancer": {}}
    stored = await (await hub.get(f"{collection}/x")).json()
    assert stored["metadata"]["uid"] == created["metadata"]["uid"] and stored["status"] == {"loadBalancer": {}}
    again = await hub.put(f"{collection}/x/status", json={**sent, "metadata": {"name": "x"}})
    assert again.status == 200, await again.text()
    assert (await again.json())["status"]["loadBalancer"]["ingress"] == [{"ip": "10.9.9.9"}]


async def test_a_put_with_an_unreadable_resource_version_is_refused_before_creating(hub: Client) -> None:
    collection, body = CREATE_ON_UPDATE["leases"]
    sent = {**body, "metadata": {"name": "x", "resourceVersion": "abc"}}
    answer = await hub.put(f"{collection}/x", json=sent)
    assert answer.status == 400, await answer.text()
    assert (await hub.get(f"{collection}/x")).status == 404


async def test_admission_sees_a_create_and_an_in_process_update_stays_not_found() -> None:
    registry = hub_registry()
    rt = registry.require("coordination.k8s.io/v1", "Lease")
    seen: list[tuple[Operation, bool]] = []

    async def validate(write: WriteAttributes) -> None:
        seen.append((write.operation, write.old is None))

    async with MemoryStore() as memory:
        objects = ObjectStore(memory, registry)
        await objects.bootstrap()
        _, body = CREATE_ON_UPDATE["leases"]
        with pytest.raises(errors.NotFound):  # an in-process caller that cannot tell it created, does not
            await objects.update(rt, body, namespace="default", validate=validate)
        created: list[bool] = []
        await objects.update(rt, body, namespace="default", validate=validate, on_create=lambda: created.append(True))
        assert created == [True]
        assert seen == [(Operation.CREATE, True)]


@pytest.mark.parametrize("collection, body", [
    ("/apis/kueue.x-k8s.io/v1beta1/resourceflavors", {
        "apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "ResourceFlavor", "metadata": {"name": "x"}}),
    ("/apis/policy.karmada.io/v1alpha1/namespaces/default/propagationpolicies", {
        "apiVersion": "policy.karmada.io/v1alpha1", "kind": "PropagationPolicy", "metadata": {"name": "x"},
        "spec": {"resourceSelectors": [{"apiVersion": "v1", "kind": "ConfigMap"}]}}),
    ("/apis/jobset.x-k8s.io/v1alpha2/namespaces/default/jobsets", {
        "apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet", "metadata": {"name": "x"},
        "spec": {"replicatedJobs": []}}),
    ("/apis/ray.io/v1/namespaces/default/rayclusters", {
        "apiVersion": "ray.io/v1", "kind": "RayCluster", "metadata": {"name": "x"},
        "spec": {"headGroupSpec": {"rayStartParams": {}, "template": {}}}}),
])
async def test_a_kind_that_is_a_custom_resource_on_a_real_cluster_refuses_an_update_without_a_resource_version(
    hub: Client, collection: str, body: dict[str, Any]
) -> None:
    created = await hub.post(collection, json=body)
    assert created.status == 201, await created.text()
    stored = await created.json()
    # The labels it has kept (a propagation policy's permanent id may not change), one added.
    labels = {**(stored["metadata"].get("labels") or {}), "changed": "yes"}
    sent = {**stored, "metadata": {**stored["metadata"], "labels": labels}}
    del sent["metadata"]["resourceVersion"]
    answer = await hub.put(f"{collection}/x", json=sent)
    status = await answer.json()
    assert (answer.status, status["reason"]) == (422, "Invalid"), status
    assert status["message"] == (f'{_qualified(collection)} "x" is invalid: metadata.resourceVersion: '
                                 "Invalid value: 0x0: must be specified for an update")
    sent["metadata"]["resourceVersion"] = stored["metadata"]["resourceVersion"]
    assert (await hub.put(f"{collection}/x", json=sent)).status == 200


async def test_an_object_created_meanwhile_is_updated_instead() -> None:
    """kube's store retries its write on the object it then reads: one another writer created
    while this PUT was creating it is updated (here, during the PUT's admission)."""
    registry = hub_registry()
    rt = registry.require("v1", "Endpoints")
    async with MemoryStore() as memory:
        objects = ObjectStore(memory, registry)
        await objects.bootstrap()
        _, body = CREATE_ON_UPDATE["endpoints"]

        async def validate(write: WriteAttributes) -> None:
            if write.operation is Operation.CREATE:
                await objects.create(rt, {**body, "metadata": {"name": "x", "labels": {"by": "other"}}}, namespace="default")

        created: list[bool] = []
        mine = {**body, "metadata": {"name": "x", "labels": {"by": "me"}}}
        updated = await objects.update(rt, mine, namespace="default", validate=validate, on_create=lambda: created.append(True))
        assert created == []
        assert updated["metadata"]["labels"] == {"by": "me"}
        assert (await objects.get(rt, namespace="default", name="x"))["metadata"]["labels"] == {"by": "me"}


def test_every_served_kind_of_a_custom_resource_group_follows_the_custom_resource_rule() -> None:
    """apiextensions' strategy: no update without a resourceVersion, no create on update."""
    kinds = [rt for rt in hub_registry() if rt.group in CUSTOM_RESOURCE_GROUPS]
    assert {rt.group for rt in kinds} >= {"kueue.x-k8s.io", "policy.karmada.io", "jobset.x-k8s.io",
                                          "leaderworkerset.x-k8s.io", "kubeflow.org", "trainer.kubeflow.org", "ray.io"}
    assert [rt.kind for rt in kinds if rt.unconditional_update or rt.create_on_update] == []


class _NoCreate:
    """Allows every request but a create: a user who may update leases and not create them."""

    def authorize(self, attributes: RequestAttributes) -> Decision:
        return Decision(allowed=attributes.verb != "create")


@pytest.mark.parametrize("method, content_type", [
    ("PUT", "application/json"), ("PATCH", "application/apply-patch+yaml"),
])
async def test_a_write_that_creates_needs_the_right_to_create(method: str, content_type: str) -> None:
    """kube's update and apply handlers ask the authorizer about ``create`` before they create."""
    registry = hub_registry()
    async with MemoryStore() as memory:
        objects = ObjectStore(memory, registry)
        await objects.bootstrap()
        tokens = TokenStore(memory)
        token = (await tokens.create(role=Role.ADMIN, name="ada")).token
        app = create_app(objects, registry, authenticator=tokens, authorizer=_NoCreate())
        async with TestClient(TestServer(app, host="127.0.0.1")) as client:
            collection, body = CREATE_ON_UPDATE["leases"]
            headers = {"Authorization": f"Bearer {token}", "Content-Type": content_type}
            answer = await client.request(method, f"{collection}/x?fieldManager=ada", headers=headers, data=json.dumps(body))
            status = await answer.json()
            assert (answer.status, status["reason"]) == (403, "Forbidden"), status
            assert status["message"] == (
                'leases.coordination.k8s.io "x" is forbidden: User "ada" cannot create resource "leases" '
                'in API group "coordination.k8s.io" in the namespace "default"')
            get = await client.get(f"{collection}/x", headers=headers)
            assert get.status == 404
