"""The hub calls the admission webhooks an admin configured, as kube-apiserver does: a real hub
(embedded etcd, HTTPS, tokens) and a real HTTPS webhook started by the test, its CA in the
configuration's ``caBundle``. Users' writes are sent (creates, updates, deletes, dry runs); a
denial is kube's Status and the webhook's warnings reach the client; a mutating webhook's JSON
patch is stored, one that breaks the object is refused by the validation that follows, and one
whose copies would add more than 3 MiB is kube's internal error before it grows the object; a
webhook that does not answer in time refuses the write (``failurePolicy: Fail``) or not
(``Ignore``); a ``service`` client config is resolved to the Service's Endpoints.

Each test has a hub of its own: its webhook configurations are the hub's, called for every write,
and would reach the other tests' writes (after their webhook server stopped)."""

from __future__ import annotations

import copy
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from controlplane.apis.kube.jsonpatches import MAX_JSON_PATCH_COPY_BYTES
from controlplane.apiserver.kubeconfig import load_kubeconfig
from controlplane.apiserver.tls import client_ssl_context
from controlplane.hub import Hub
from controlplane.hubconfig import HubConfig
from tests import hubmetrics
from tests.controllers.fleet import deployment, eventually
from tests.webhookserver import WebhookServer, webhook_server

GROUP = "/apis/admissionregistration.k8s.io/v1"
DEPLOYMENTS = "/apis/apps/v1/namespaces/default/deployments"
RULE = {"operations": ["CREATE", "UPDATE", "DELETE"], "apiGroups": ["apps"], "apiVersions": ["v1"],
        "resources": ["deployments", "deployments/scale"]}


class Api:
    """The hub's API over HTTPS as its admin."""

    def __init__(self, hub: Hub, session: aiohttp.ClientSession, token: str) -> None:
        self.hub, self._session, self._headers = hub, session, {"Authorization": f"Bearer {token}"}

    async def call(self, method: str, path: str, body: Any = None, **headers: str) -> tuple[int, Any, list[str]]:
        async with self._session.request(
            method, f"{self.hub.url}{path}", json=body, headers={**self._headers, **headers}
        ) as response:
            return response.status, await response.json(), response.headers.getall("Warning", [])


@pytest.fixture
async def hub(tmp_path: Path) -> AsyncIterator[Hub]:
    async with Hub(HubConfig(state_dir=tmp_path / "hub", port=0)) as running:
        yield running


@pytest.fixture
async def api(hub: Hub) -> AsyncIterator[Api]:
    credentials = load_kubeconfig(hub.kubeconfig_path)
    connector = aiohttp.TCPConnector(ssl=client_ssl_context(credentials.ca_pem))
    async with aiohttp.ClientSession(connector=connector, timeout=aiohttp.ClientTimeout(total=30)) as session:
        yield Api(hub, session, credentials.token)


@pytest.fixture
async def server(tmp_path: Path) -> AsyncIterator[WebhookServer]:
    async with webhook_server(tmp_path / "webhook", hosts=("127.0.0.1", "hooks.acme.svc")) as running:
        yield running


def webhook(name: str, client: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"name": name, "clientConfig": client, "rules": [RULE], "sideEffects": "None",
            "admissionReviewVersions": ["v1"], **extra}


async def configure(api: Api, kind: str, name: str, *hooks: dict[str, Any]) -> None:
    """Create a configuration and wait until the hub calls its webhooks (its watch has it)."""
    plural = "validatingwebhookconfigurations" if kind == "Validating" else "mutatingwebhookconfigurations"
    body = {"apiVersion": "admissionregistration.k8s.io/v1", "kind": f"{kind}WebhookConfiguration",
            "metadata": {"name": name}, "webhooks": list(hooks)}
    code, created, _ = await api.call("POST", f"{GROUP}/{plural}", body)
    assert code == 201, created
    assert api.hub.objects is not None

    async def seen() -> bool:
        admission = api.hub.webhooks
        assert admission is not None
        return name in {h.configuration for h in (*admission.validating, *admission.mutating)}

    await eventually(seen, what=f"the hub to watch {name}")


async def test_a_validating_webhook_denies_warns_and_sees_the_request(api: Api, server: WebhookServer) -> None:
    await configure(api, "Validating", "acme", webhook(
        "deny.acme.io", server.client("/deny"), objectSelector={"matchExpressions": [{"key": "skip", "operator": "DoesNotExist"}]},
    ))
    refused = deployment("refused", replicas=1, labels={"app": "refused", "deny": "yes"})
    code, status, warnings = await api.call("POST", DEPLOYMENTS, refused)
    assert code == 403, status
    assert status["message"] == 'admission webhook "deny.acme.io" denied the request: no GPUs for you'
    assert warnings == ['299 - "denied by the acme policy"']
    code, _, _ = await api.call("GET", f"{DEPLOYMENTS}/refused")
    assert code == 404, "a denied write stores nothing"

    code, created, warnings = await api.call("POST", DEPLOYMENTS, deployment("allowed", replicas=1))
    assert code == 201, created
    assert warnings == ['299 - "checked by the acme policy"']
    review = server.received["/deny"][-1]
    request = review["request"]
    assert review["apiVersion"] == "admission.k8s.io/v1" and review["kind"] == "AdmissionReview"
    assert request["operation"] == "CREATE" and request["dryRun"] is False
    assert request["kind"] == {"group": "apps", "version": "v1", "kind": "Deployment"}
    assert request["resource"] == {"group": "apps", "version": "v1", "resource": "deployments"}
    assert (request["name"], request["namespace"]) == ("allowed", "default")
    assert request["object"]["spec"]["replicas"] == 1 and request["oldObject"] is None
    assert request["userInfo"]["username"] and "system:masters" in request["userInfo"]["groups"]

    # An object the objectSelector leaves out is not sent; the hub's own writes are not either.
    sent = len(server.received["/deny"])
    code, _, _ = await api.call("POST", DEPLOYMENTS, deployment("skipped", replicas=1, labels={"app": "s", "skip": "1"}))
    assert code == 201
    assert api.hub.objects is not None
    await api.hub.objects.create(api.hub.objects.registry.require("apps/v1", "Deployment"), deployment("inproc", replicas=1))
    assert len(server.received["/deny"]) == sent

    # Updates and scales carry the old object; a dry run is sent as one and stores nothing.
    code, _, _ = await api.call("PATCH", f"{DEPLOYMENTS}/allowed/scale", {"spec": {"replicas": 3}},
                                **{"Content-Type": "application/merge-patch+json"})
    assert code == 200
    request = server.received["/deny"][-1]["request"]
    assert (request["operation"], request["subResource"], request["kind"]["kind"]) == ("UPDATE", "scale", "Scale")
    assert (request["oldObject"]["spec"]["replicas"], request["object"]["spec"]["replicas"]) == (1, 3)
    code, status, _ = await api.call("PATCH", f"{DEPLOYMENTS}/allowed?dryRun=All", {"metadata": {"labels": {"deny": "yes"}}},
                                     **{"Content-Type": "application/merge-patch+json"})
    assert code == 403 and server.received["/deny"][-1]["request"]["dryRun"] is True

    # A delete is sent with the stored object as oldObject.
    code, status, _ = await api.call("PATCH", f"{DEPLOYMENTS}/skipped", {"metadata": {"labels": {"deny": "yes", "skip": None}}},
                                     **{"Content-Type": "application/merge-patch+json"})
    assert code == 403, status
    code, _, _ = await api.call("DELETE", f"{DEPLOYMENTS}/allowed")
    assert code == 200
    request = server.received["/deny"][-1]["request"]
    assert request["operation"] == "DELETE" and request["object"] is None and request["oldObject"]["metadata"]["name"] == "allowed"
    assert request["options"]["kind"] == "DeleteOptions"


async def test_a_mutating_webhooks_patch_is_stored_and_validated(api: Api, server: WebhookServer) -> None:
    await configure(api, "Mutating", "acme", webhook("label.acme.io", server.client("/label")))
    code, created, _ = await api.call("POST", DEPLOYMENTS, deployment("mutated", replicas=1))
    assert code == 201, created
    assert created["metadata"]["labels"] == {"app": "mutated", "mutated": "yes"}
    code, stored, _ = await api.call("GET", f"{DEPLOYMENTS}/mutated")
    assert stored["metadata"]["labels"]["mutated"] == "yes"

    await configure(api, "Mutating", "breaks", webhook("break.acme.io", server.client("/break")))
    code, status, _ = await api.call("POST", DEPLOYMENTS, deployment("broken", replicas=1))
    assert code == 422, status
    assert "spec.replicas: Invalid value: -1: must be greater than or equal to 0" in status["message"]
    # Configurations are called in name order: "acme" saw the object before "breaks".
    assert server.received["/label"][-1]["request"]["name"] == "broken"
    code, _, _ = await api.call("DELETE", f"{GROUP}/mutatingwebhookconfigurations/breaks")
    assert code == 200

    # A webhook cannot move the object to another namespace than the request's.
    await configure(api, "Mutating", "moves", webhook("move.acme.io", server.client("/move")))
    code, status, _ = await api.call("POST", DEPLOYMENTS, deployment("moved", replicas=1))
    assert code == 400, status
    assert status["message"] == "the namespace of the provided object does not match the namespace sent on the request"
    # Nor patch a delete, which has no object: kube's internal error, and nothing is deleted.
    code, status, _ = await api.call("DELETE", f"{DEPLOYMENTS}/mutated")
    assert code == 500, status
    assert status["message"] == (
        'Internal error occurred: admission webhook "label.acme.io" attempted to modify the object, '
        "which is not supported for this operation"
    )
    assert server.received["/label"][-1]["request"]["operation"] == "DELETE"
    code, _, _ = await api.call("GET", f"{DEPLOYMENTS}/mutated")
    assert code == 200


def _copied_past_the_limit() -> int:
    """What ``/double``'s copies have added when one takes them past kube's 3 MiB, counted as kube's
    JSON patch library counts them: each copy's value in bytes of JSON."""
    value: list[Any] = ["y" * 1024]
    copied = 0
    while copied <= MAX_JSON_PATCH_COPY_BYTES:
        copied += len(json.dumps(value, separators=(",", ":")))
        value = [*value, value]
    return copied


async def test_a_mutating_webhooks_patch_copies_at_most_kubes_3_mib(api: Api, server: WebhookServer) -> None:
    """A webhook answering with copies that double the object each time gets kube's internal error
    once they have added 3 MiB, as kube-apiserver applies a webhook's patch with its JSON patch
    bound: the write is refused, nothing is stored, and the hub never builds the object."""
    await configure(api, "Mutating", "doubles", webhook("double.acme.io", server.client("/double")))
    code, status, _ = await api.call("POST", DEPLOYMENTS, deployment("doubled", replicas=1))
    reason = (f"Unable to complete the copy, the accumulated size increase of copy is {_copied_past_the_limit()}, "
              f"exceeding the limit {MAX_JSON_PATCH_COPY_BYTES}")
    assert (code, status["reason"], status["message"]) == (500, "InternalError", f"Internal error occurred: {reason}")
    assert status["details"]["causes"] == [{"message": reason}]
    code, _, _ = await api.call("GET", f"{DEPLOYMENTS}/doubled")
    assert code == 404


async def test_a_mutating_webhook_patches_a_scale(api: Api, server: WebhookServer) -> None:
    """A rule naming ``deployments/scale`` sees a scale write as its Scale; the replicas it patches
    in are the Deployment's."""
    scale_rule = {"operations": ["UPDATE"], "apiGroups": ["apps"], "apiVersions": ["v1"], "resources": ["deployments/scale"]}
    await configure(api, "Mutating", "cap", webhook("cap.acme.io", server.client("/cap"), rules=[scale_rule]))
    code, created, _ = await api.call("POST", DEPLOYMENTS, deployment("capped", replicas=1))
    assert code == 201 and created["spec"]["replicas"] == 1, "a write of the main resource is not sent"
    assert not server.received["/cap"]
    code, scale, _ = await api.call("PATCH", f"{DEPLOYMENTS}/capped/scale", {"spec": {"replicas": 5}},
                                    **{"Content-Type": "application/merge-patch+json"})
    assert code == 200, scale
    assert scale["spec"]["replicas"] == 2
    request = server.received["/cap"][-1]["request"]
    assert (request["kind"]["kind"], request["subResource"], request["object"]["spec"]["replicas"]) == ("Scale", "scale", 5)
    code, stored, _ = await api.call("GET", f"{DEPLOYMENTS}/capped")
    assert stored["spec"]["replicas"] == 2


async def test_mutating_webhooks_see_an_update_before_its_resource_version_is_compared(
    api: Api, server: WebhookServer
) -> None:
    """kube runs mutating admission in the update's transformers, before its store compares the
    resourceVersion: an update naming a stale one is sent to the mutating webhooks and then a
    Conflict, one that a webhook denies is the denial, and the resourceVersion compared is the one
    the webhooks leave (the request's as they see it)."""
    await configure(api, "Mutating", "acme", webhook("deny.acme.io", server.client("/deny")))
    code, created, _ = await api.call("POST", DEPLOYMENTS, deployment("ordered", replicas=1))
    assert code == 201, created
    stale = created["metadata"]["resourceVersion"]
    code, current, _ = await api.call("PATCH", f"{DEPLOYMENTS}/ordered", {"spec": {"replicas": 2}},
                                      **{"Content-Type": "application/merge-patch+json"})
    assert code == 200, current
    merge = {"Content-Type": "application/merge-patch+json"}

    sent = len(server.received["/deny"])
    code, status, _ = await api.call("PUT", f"{DEPLOYMENTS}/ordered", {**created, "spec": {**created["spec"], "replicas": 3}})
    assert (code, status["reason"]) == (409, "Conflict"), status
    assert len(server.received["/deny"]) == sent + 1
    request = server.received["/deny"][-1]["request"]
    assert (request["operation"], request["object"]["metadata"]["resourceVersion"]) == ("UPDATE", stale)
    code, status, _ = await api.call("PATCH", f"{DEPLOYMENTS}/ordered",
                                     {"metadata": {"resourceVersion": stale}, "spec": {"replicas": 3}}, **merge)
    assert (code, status["reason"]) == (409, "Conflict"), status
    assert len(server.received["/deny"]) == sent + 2

    # Denied and stale: the webhook's denial, as kube answers (a 409 before).
    denied = {**created, "metadata": {**created["metadata"], "labels": {"app": "ordered", "deny": "yes"}}}
    code, status, _ = await api.call("PUT", f"{DEPLOYMENTS}/ordered", denied)
    assert (code, status["message"]) == (403, 'admission webhook "deny.acme.io" denied the request: no GPUs for you')
    code, status, _ = await api.call("PATCH", f"{DEPLOYMENTS}/ordered", {
        "metadata": {"resourceVersion": stale, "labels": {"deny": "yes"}}}, **merge)
    assert code == 403, status

    # A webhook that drops the stale resourceVersion makes the update unconditional.
    await configure(api, "Mutating", "unversion", webhook("unversion.acme.io", server.client("/unversion")))
    code, updated, _ = await api.call("PUT", f"{DEPLOYMENTS}/ordered", {**created, "spec": {**created["spec"], "replicas": 4}})
    assert code == 200, updated
    assert updated["spec"]["replicas"] == 4
    assert int(updated["metadata"]["resourceVersion"]) > int(current["metadata"]["resourceVersion"])


async def test_a_mutating_webhook_sees_the_update_as_its_request_carries_it(api: Api, server: WebhookServer) -> None:
    """kube hands its mutating admission the object decoded from the update's request (the
    transformers ``rest.DefaultUpdatedObjectInfo`` runs in ``Store.Update``), before the strategy's
    ``PrepareForUpdate`` (in ``rest.BeforeUpdate``) puts the stored status back: a webhook sees the
    status the update sends, stale or current, not the stored one, and that status is not stored;
    a status write's webhooks see the spec it sends, which is not stored either."""
    rule = {**RULE, "resources": ["deployments", "deployments/status"]}
    await configure(api, "Mutating", "acme", webhook("seen.acme.io", server.client("/seen"), rules=[rule]))
    code, stale, _ = await api.call("POST", DEPLOYMENTS, deployment("seen", replicas=1))
    assert code == 201, stale
    code, current, _ = await api.call("PATCH", f"{DEPLOYMENTS}/seen", {"metadata": {"labels": {"moved": "on"}}},
                                      **{"Content-Type": "application/merge-patch+json"})
    assert code == 200, current
    sent_status = {"replicas": 7, "readyReplicas": 7, "observedGeneration": 7}

    code, status, _ = await api.call("PUT", f"{DEPLOYMENTS}/seen", {**stale, "status": sent_status})
    assert (code, status["reason"]) == (409, "Conflict"), status
    request = server.received["/seen"][-1]["request"]
    assert request["operation"] == "UPDATE"
    assert request["object"]["status"] == sent_status
    assert request["object"]["metadata"]["resourceVersion"] == stale["metadata"]["resourceVersion"]
    assert request["oldObject"]["metadata"]["labels"]["moved"] == "on"

    # Unconditional (no resourceVersion): the hub's controllers write the Deployment's status meanwhile.
    unversioned = {k: v for k, v in current["metadata"].items() if k != "resourceVersion"}
    sent = {**current, "metadata": unversioned, "spec": {**current["spec"], "replicas": 2}, "status": sent_status}
    code, updated, _ = await api.call("PUT", f"{DEPLOYMENTS}/seen", sent)
    assert code == 200, updated
    assert server.received["/seen"][-1]["request"]["object"]["status"] == sent_status
    assert updated["spec"]["replicas"] == 2 and updated.get("status") != sent_status

    code, written, _ = await api.call("PUT", f"{DEPLOYMENTS}/seen/status",
                                      {**updated, "metadata": unversioned, "spec": {**updated["spec"], "replicas": 5}})
    assert code == 200, written
    request = server.received["/seen"][-1]["request"]
    assert (request["subResource"], request["object"]["spec"]["replicas"]) == ("status", 5)
    assert written["spec"]["replicas"] == 2


async def test_an_unknown_field_under_strict_is_refused_before_the_mutating_webhooks(
    api: Api, server: WebhookServer
) -> None:
    """kube decodes a write's body before its admission: under ``fieldValidation=Strict`` an unknown
    field is the decoder's 400 and no webhook is called, wherever the body has it (the spec of a
    status write, a stale update's status)."""
    rule = {**RULE, "resources": ["deployments", "deployments/status"]}
    await configure(api, "Mutating", "acme", webhook("seen.acme.io", server.client("/seen"), rules=[rule]))
    code, created, _ = await api.call("POST", DEPLOYMENTS, deployment("strict", replicas=1))
    assert code == 201, created
    sent = len(server.received["/seen"])
    bogus = deployment("bogus", replicas=1)
    bogus["spec"]["bogus"] = 1
    code, status, _ = await api.call("POST", f"{DEPLOYMENTS}?fieldValidation=Strict", bogus)
    unknown = 'strict decoding error: unknown field "spec.bogus"'
    assert (code, status["message"]) == (400, f'Deployment in version "v1" cannot be handled as a Deployment: {unknown}')
    assert len(server.received["/seen"]) == sent
    code, status, _ = await api.call("PUT", f"{DEPLOYMENTS}/strict?fieldValidation=Strict",
                                     {**created, "spec": {**created["spec"], "bogus": 1}})
    assert (code, status["reason"]) == (400, "BadRequest") and status["message"].endswith(unknown), status
    code, status, _ = await api.call("PUT", f"{DEPLOYMENTS}/strict/status?fieldValidation=Strict",
                                     {**created, "spec": {**created["spec"], "bogus": 1}})
    assert (code, status["reason"]) == (400, "BadRequest") and status["message"].endswith(unknown), status
    assert len(server.received["/seen"]) == sent
    code, _, _ = await api.call("PATCH", f"{DEPLOYMENTS}/strict", {"spec": {"replicas": 2}},
                                **{"Content-Type": "application/merge-patch+json"})
    assert code == 200
    sent = len(server.received["/seen"])
    code, status, _ = await api.call("PUT", f"{DEPLOYMENTS}/strict?fieldValidation=Strict",
                                     {**created, "status": {"bogus": 1}})
    assert (code, status["message"]) == (400, 'Deployment in version "v1" cannot be handled as a Deployment: '
                                              'strict decoding error: unknown field "status.bogus"'), status
    assert len(server.received["/seen"]) == sent


async def test_a_status_apply_keeps_its_managed_fields_entry_whatever_webhooks_exist(
    api: Api, server: WebhookServer
) -> None:
    """A server-side apply of a status records its manager's entry for the status subresource,
    whether or not a webhook configuration (here one matching nothing of the write) exists."""

    async def applied(name: str) -> list[tuple[str, str, str]]:
        code, created, _ = await api.call("POST", DEPLOYMENTS, deployment(name, replicas=1))
        assert code == 201, created
        status = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name}, "status": {"replicas": 3}}
        code, written, _ = await api.call("PATCH", f"{DEPLOYMENTS}/{name}/status?fieldManager=probe&force=true",
                                          status, **{"Content-Type": "application/apply-patch+yaml"})
        assert code == 200, written
        code, stored, _ = await api.call("GET", f"{DEPLOYMENTS}/{name}")
        assert stored["status"]["replicas"] == 3
        return [(m["manager"], m["operation"], m.get("subresource")) for m in stored["metadata"]["managedFields"]]

    assert ("probe", "Apply", "status") in await applied("plain")
    other = {**RULE, "apiGroups": ["nothing.example"], "resources": ["things"]}
    await configure(api, "Validating", "acme", webhook("v.acme.io", server.client("/v"), rules=[other]))
    assert ("probe", "Apply", "status") in await applied("hooked")


async def test_a_create_is_mutated_before_the_kinds_own_webhook_denies_it(api: Api, server: WebhookServer) -> None:
    """kube runs the mutating admission before the validating one: the admins' mutating webhook
    sees a create that the kind's own validating webhook (Karmada's) then denies."""
    rule = {**RULE, "apiGroups": ["policy.karmada.io"], "apiVersions": ["v1alpha1"], "resources": ["propagationpolicies"]}
    await configure(api, "Mutating", "acme", webhook("seen.acme.io", server.client("/seen"), rules=[rule]))
    selectors = [{"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"}]
    policy = {"apiVersion": "policy.karmada.io/v1alpha1", "kind": "PropagationPolicy",
              "metadata": {"name": "p" * 64}, "spec": {"resourceSelectors": selectors}}
    code, status, _ = await api.call("POST", "/apis/policy.karmada.io/v1alpha1/namespaces/default/propagationpolicies",
                                     policy)
    assert (code, status["message"]) == (400, 'admission webhook "propagationpolicy.karmada.io" denied the request: '
                                              "PropagationPolicy's name should be no more than 63 characters")
    assert [r["request"]["name"] for r in server.received["/seen"]] == ["p" * 64]


async def test_a_kinds_own_validating_webhook_comes_after_the_resource_version_check(
    api: Api, server: WebhookServer
) -> None:
    """Karmada's validating webhook of a FederatedResourceQuota runs in kube's validating admission,
    after the store compared the resourceVersion: with mutating webhooks configured (none of them
    for this kind), a stale update it would deny is the 409."""
    await configure(api, "Mutating", "acme", webhook("label.acme.io", server.client("/label")))
    quotas = "/apis/policy.karmada.io/v1alpha1/namespaces/default/federatedresourcequotas"
    sample = {"apiVersion": "policy.karmada.io/v1alpha1", "kind": "FederatedResourceQuota",
              "metadata": {"name": "q"}, "spec": {"overall": {"cpu": "100"},
                                                 "staticAssignments": [{"clusterName": "m1", "hard": {"cpu": "20"}}]}}
    code, created, _ = await api.call("POST", quotas, sample)
    assert code == 201, created
    code, _, _ = await api.call("PATCH", f"{quotas}/q", {"metadata": {"labels": {"moved": "on"}}},
                                **{"Content-Type": "application/merge-patch+json"})
    assert code == 200
    denied = {**created, "spec": {**created["spec"], "overall": {"cpu": "10"}}}
    code, status, _ = await api.call("PUT", f"{quotas}/q", denied)
    assert (code, status["reason"]) == (409, "Conflict"), status
    # The same spec, created: the webhook's denial.
    code, status, _ = await api.call("POST", quotas, {**denied, "metadata": {"name": "r"}})
    assert (code, status["reason"]) == (403, "Forbidden"), status


async def test_a_put_that_creates_a_service_through_its_status_is_admitted_as_a_create_of_the_status(
    api: Api, server: WebhookServer
) -> None:
    """kube's status handler admits the create its store makes of a missing Service in its own
    scope: a CREATE of ``services/status``, which a rule naming ``services`` alone does not match."""
    rule = {"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["services/status"]}
    await configure(api, "Validating", "status", webhook("status.acme.io", server.client("/deny"), rules=[rule]))
    main = {**rule, "resources": ["services"]}
    await configure(api, "Validating", "main", webhook("main.acme.io", server.client("/label"), rules=[main]))
    service = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web"}, "spec": {"ports": [{"port": 80}]}}
    code, created, _ = await api.call("PUT", "/api/v1/namespaces/default/services/web/status", service)
    assert code == 201, created
    [review] = server.received["/deny"]
    request = review["request"]
    assert (request["operation"], request["subResource"], request["name"]) == ("CREATE", "status", "web")
    assert not server.received["/label"]


@pytest.mark.parametrize("policy", ["IfNeeded", "Never"])
async def test_a_mutating_webhook_is_reinvoked_if_needed(api: Api, server: WebhookServer, policy: str) -> None:
    """"a-copy" runs before "b-label" (name order) and sees no label; with ``IfNeeded`` it is called
    again after "b-label" added it, and notes it."""
    await configure(api, "Mutating", "a-copy", webhook("copy.acme.io", server.client("/copy"), reinvocationPolicy=policy))
    await configure(api, "Mutating", "b-label", webhook("label.acme.io", server.client("/label")))
    code, created, _ = await api.call("POST", DEPLOYMENTS, deployment("noted", replicas=1))
    assert code == 201, created
    assert created["metadata"]["labels"]["mutated"] == "yes"
    noted = (created["metadata"].get("annotations") or {}).get("acme.io/saw-label")
    assert noted == ("yes" if policy == "IfNeeded" else None)
    assert len(server.received["/copy"]) == (2 if policy == "IfNeeded" else 1)


async def test_the_namespace_selector_reads_the_namespaces_labels(api: Api, server: WebhookServer) -> None:
    await configure(api, "Validating", "ml-only", webhook(
        "ml.acme.io", server.client("/deny"), namespaceSelector={"matchLabels": {"team": "ml"}},
    ))
    denied = deployment("d", replicas=1, labels={"app": "d", "deny": "yes"})
    code, status, _ = await api.call("POST", DEPLOYMENTS, denied)
    assert code == 201, status  # default has no team label: not sent
    assert not server.received["/deny"]
    code, created, _ = await api.call("POST", "/api/v1/namespaces", {
        "apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ml", "labels": {"team": "ml"}},
    })
    assert code == 201, created
    code, status, _ = await api.call("POST", "/apis/apps/v1/namespaces/ml/deployments", {**denied, "metadata": {
        **denied["metadata"], "namespace": "ml"}})
    assert code == 403, status
    assert server.received["/deny"][-1]["request"]["namespace"] == "ml"


@pytest.mark.parametrize("policy", ["Fail", "Ignore"])
async def test_match_conditions_decide_whether_a_webhook_is_called(api: Api, server: WebhookServer, policy: str) -> None:
    """kube's matchConditions: all true -> called; any false -> not called; an error -> failurePolicy."""
    await configure(api, "Validating", "conditions", webhook(
        "cond.acme.io", server.client("/deny"), failurePolicy=policy, matchConditions=[
            {"name": "not-skipped", "expression": "object.metadata.name != 'skipped'"},
            {"name": "by-admin", "expression": "'system:masters' in request.userInfo.groups"},
            {"name": "annotated", "expression": "object.metadata.annotations.checked == 'yes'"},
        ],
    ))
    denied = deployment("d", replicas=1, labels={"app": "d", "deny": "yes"})
    denied["metadata"]["annotations"] = {"checked": "yes"}
    code, status, _ = await api.call("POST", DEPLOYMENTS, denied)
    assert code == 403 and status["message"] == 'admission webhook "cond.acme.io" denied the request: no GPUs for you'
    skipped = copy.deepcopy(denied)
    skipped["metadata"]["name"] = "skipped"
    code, created, _ = await api.call("POST", DEPLOYMENTS, skipped)
    assert code == 201, created
    assert [r["request"]["name"] for r in server.received["/deny"]] == ["d"]
    # No annotations: the third condition fails to evaluate.
    broken = deployment("e", replicas=1, labels={"app": "e", "deny": "yes"})
    code, status, _ = await api.call("POST", DEPLOYMENTS, broken)
    if policy == "Fail":
        assert code == 403, status
        assert status["message"] == (
            'deployments.apps "e" is forbidden: expression '
            "'object.metadata.annotations.checked == 'yes'' resulted in error: no such key: annotations"
        )
    else:
        assert code == 201, status
    assert len(server.received["/deny"]) == 1, "the webhook is not called when a condition fails to evaluate"


async def test_the_validating_webhooks_are_called_at_once(api: Api, server: WebhookServer) -> None:
    """Each of the two webhooks admits only while the other's call is in flight: the write is
    admitted only if the hub called them together, as kube does."""
    await configure(api, "Validating", "pair", webhook("one.acme.io", server.client("/together")),
                    webhook("two.acme.io", server.client("/together")))
    code, status, _ = await api.call("POST", DEPLOYMENTS, deployment("together", replicas=1))
    assert code == 201, status
    assert len(server.received["/together"]) == 2


@pytest.mark.parametrize("policy", ["Fail", "Ignore"])
async def test_a_webhook_that_does_not_answer_in_time(api: Api, server: WebhookServer, policy: str) -> None:
    await configure(api, "Validating", "slow", webhook(
        "slow.acme.io", server.client("/slow"), timeoutSeconds=1, failurePolicy=policy,
    ))
    code, status, _ = await api.call("POST", DEPLOYMENTS, deployment("late", replicas=1))
    if policy == "Ignore":
        assert code == 201, status
        return
    assert code == 500, status
    assert status["reason"] == "InternalError"
    assert status["message"] == (
        'Internal error occurred: failed calling webhook "slow.acme.io": failed to call webhook: '
        f'Post "{server.url}/slow?timeout=1s": context deadline exceeded'
    )


async def test_a_webhook_with_an_unknown_ca_or_no_endpoints_fails_closed(api: Api, server: WebhookServer) -> None:
    untrusted = copy.deepcopy(server.client("/deny"))
    del untrusted["caBundle"]
    await configure(api, "Validating", "untrusted", webhook("tls.acme.io", untrusted))
    code, status, _ = await api.call("POST", DEPLOYMENTS, deployment("tls", replicas=1))
    assert code == 500, status
    assert "x509: certificate signed by unknown authority" in status["message"], status
    code, _, _ = await api.call("DELETE", f"{GROUP}/validatingwebhookconfigurations/untrusted")
    assert code == 200, "the configurations themselves are never sent to a webhook"

    service = {"service": {"name": "hooks", "namespace": "acme", "path": "/deny"}, "caBundle": server.ca_bundle}
    await configure(api, "Validating", "by-service", webhook("svc.acme.io", service))
    code, status, _ = await api.call("POST", DEPLOYMENTS, deployment("nowhere", replicas=1))
    assert code == 500, status
    assert status["message"].endswith('Post "https://hooks.acme.svc:443/deny?timeout=10s": service "hooks" not found')
    for path, body in (
        ("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "acme"}}),
        ("/api/v1/namespaces/acme/services", {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "hooks"},
                                              "spec": {"ports": [{"name": "https", "port": 443}]}}),
    ):
        code, created, _ = await api.call("POST", path, body)
        assert code == 201, created
    code, status, _ = await api.call("POST", DEPLOYMENTS, deployment("nowhere", replicas=1))
    assert code == 500, status
    assert status["message"] == (
        'Internal error occurred: failed calling webhook "svc.acme.io": failed to call webhook: '
        'Post "https://hooks.acme.svc:443/deny?timeout=10s": no endpoints available for service "hooks"'
    )
    endpoints = {"apiVersion": "v1", "kind": "Endpoints", "metadata": {"name": "hooks"},
                 "subsets": [{"addresses": [{"ip": "127.0.0.1"}], "ports": [{"name": "https", "port": server.port}]}]}
    code, created, _ = await api.call("POST", "/api/v1/namespaces/acme/endpoints", endpoints)
    assert code == 201, created
    code, status, warnings = await api.call("POST", DEPLOYMENTS, deployment("reached", replicas=1, labels={"app": "r", "deny": "yes"}))
    assert code == 403, status
    assert status["message"] == 'admission webhook "svc.acme.io" denied the request: no GPUs for you'
    assert warnings == ['299 - "denied by the acme policy"']


async def test_webhook_calls_are_on_the_hubs_metrics_under_kubes_names(api: Api, server: WebhookServer) -> None:
    """kube's ``apiserver_admission_webhook_*`` series count each call by code, refusal and error type."""
    untrusted = copy.deepcopy(server.client("/deny"))
    del untrusted["caBundle"]
    await configure(api, "Validating", "metered", webhook("metered.acme.io", server.client("/deny")),
                    webhook("metered-tls.acme.io", untrusted, failurePolicy="Ignore"))
    code, _, _ = await api.call("POST", DEPLOYMENTS, deployment("metered", replicas=1, labels={"app": "m", "deny": "yes"}))
    assert code == 403
    code, _, _ = await api.call("POST", DEPLOYMENTS, deployment("metered", replicas=1))
    assert code == 201

    def by(samples: list[tuple[dict[str, str], float]], name: str) -> dict[tuple[str, ...], float]:
        return {tuple(v for k, v in sorted(labels.items()) if k not in ("name", "type", "operation")): value
                for labels, value in samples
                if labels.get("name") == name and labels["type"] == "validating" and labels.get("operation", "CREATE") == "CREATE"}

    requests = await hubmetrics.samples(api.hub, "apiserver_admission_webhook_request_total")
    assert by(requests, "metered.acme.io") == {("403", "true"): 1.0, ("200", "false"): 1.0}
    # A failed call ignored under failurePolicy: Ignore is not a refusal; kube's client reports it as a 503.
    assert by(requests, "metered-tls.acme.io") == {("503", "false"): 2.0}
    # kube's two counters declared as ``..._count``: HELP, TYPE and samples under that name, no ``_total``.
    lines = await hubmetrics.lines(api.hub)
    rejection = "apiserver_admission_webhook_rejection_count"
    assert f"# TYPE {rejection} counter" in lines
    assert [line for line in lines if line.startswith(f"{rejection}{{") and 'name="metered' in line] == [
        f'{rejection}{{error_type="no_error",name="metered.acme.io",operation="CREATE",rejection_code="403",'
        'type="validating"} 1',
    ]
    fail_open = "apiserver_admission_webhook_fail_open_count"
    assert f"# TYPE {fail_open} counter" in lines
    assert [line for line in lines if line.startswith(f"{fail_open}{{") and 'name="metered' in line] == [
        f'{fail_open}{{name="metered-tls.acme.io",type="validating"}} 2',
    ]
    assert f"# HELP {fail_open} [ALPHA] Admission webhook fail open count, identified by name and broken out for " \
        "each admission type (validating or mutating)." in lines
    latencies = await hubmetrics.samples(api.hub, "apiserver_admission_webhook_admission_duration_seconds_count")
    assert by(latencies, "metered.acme.io") == {("true",): 1.0, ("false",): 1.0}
    buckets = {labels["le"] for labels, _ in await hubmetrics.samples(
        api.hub, "apiserver_admission_webhook_admission_duration_seconds_bucket") if labels["name"] == "metered.acme.io"}
    assert buckets == {"0.005", "0.025", "0.1", "0.5", "1", "2.5", "10", "25", "+Inf"}

    # Failing closed, the failed call is a refusal with kube's calling_webhook_error.
    closed = {**webhook("closed.acme.io", untrusted), "failurePolicy": "Fail"}
    await configure(api, "Validating", "metered-closed", closed)
    code, _, _ = await api.call("POST", DEPLOYMENTS, deployment("closed", replicas=1))
    assert code == 500
    assert 'apiserver_admission_webhook_rejection_count{error_type="calling_webhook_error",name="closed.acme.io",' \
        'operation="CREATE",rejection_code="503",type="validating"} 1' in await hubmetrics.lines(api.hub)


async def test_match_policy_equivalent_sends_a_write_as_the_rules_version(api: Api, server: WebhookServer) -> None:
    """A rule for autoscaling/v2 matches a write through autoscaling/v1 under ``matchPolicy: Equivalent``
    (the default): the webhook sees a v2 object, ``requestKind`` v1, and a mutating webhook's patch
    reaches the v1 object; under ``Exact`` it is not called."""
    v2 = {"operations": ["CREATE"], "apiGroups": ["autoscaling"], "apiVersions": ["v2"],
          "resources": ["horizontalpodautoscalers"]}
    await configure(api, "Mutating", "equivalent", webhook("label.acme.io", server.client("/label"), rules=[v2]),
                    webhook("exact.acme.io", server.client("/copy"), rules=[v2], matchPolicy="Exact"))
    await configure(api, "Validating", "equivalent-check", webhook("hpa.acme.io", server.client("/deny"), rules=[v2]))
    hpas = "/apis/autoscaling/v1/namespaces/default/horizontalpodautoscalers"

    def hpa(name: str, **labels: str) -> dict[str, Any]:
        return {"apiVersion": "autoscaling/v1", "kind": "HorizontalPodAutoscaler",
                "metadata": {"name": name, "labels": labels},
                "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
                         "minReplicas": 1, "maxReplicas": 4, "targetCPUUtilizationPercentage": 50}}

    # A label to add to: an empty map is not sent (kube's ObjectMeta omits it), so the patch's path would be missing.
    code, created, _ = await api.call("POST", hpas, hpa("web", app="web"))
    assert code == 201, created
    assert created["apiVersion"] == "autoscaling/v1"
    assert created["metadata"]["labels"] == {"app": "web", "mutated": "yes"}
    assert created["spec"]["targetCPUUtilizationPercentage"] == 50
    assert not server.received["/copy"], "an Exact rule for v2 does not match a v1 write"
    for path in ("/label", "/deny"):
        request = server.received[path][-1]["request"]
        assert request["kind"] == {"group": "autoscaling", "version": "v2", "kind": "HorizontalPodAutoscaler"}
        assert request["resource"] == {"group": "autoscaling", "version": "v2", "resource": "horizontalpodautoscalers"}
        assert request["requestKind"] == {"group": "autoscaling", "version": "v1", "kind": "HorizontalPodAutoscaler"}
        assert request["requestResource"] == {"group": "autoscaling", "version": "v1", "resource": "horizontalpodautoscalers"}
        obj = request["object"]
        assert obj["apiVersion"] == "autoscaling/v2"
        assert obj["spec"]["metrics"][0]["resource"]["target"]["averageUtilization"] == 50
    assert server.received["/deny"][-1]["request"]["object"]["metadata"]["labels"] == {"app": "web", "mutated": "yes"}

    code, status, _ = await api.call("POST", hpas, hpa("refused", deny="yes"))
    assert code == 403, status
    assert status["message"] == 'admission webhook "hpa.acme.io" denied the request: no GPUs for you'


async def test_a_validating_webhook_sees_what_the_hubs_own_admission_set(api: Api, server: WebhookServer) -> None:
    """kube's order: in-tree admission first, then the validating webhooks. A Job created with a
    Kueue queue name is stored suspended (Kueue's Job default), and the webhook sees it so."""
    jobs_rule = {"operations": ["CREATE"], "apiGroups": ["batch"], "apiVersions": ["v1"], "resources": ["jobs"]}
    await configure(api, "Validating", "jobs", webhook("jobs.acme.io", server.client("/deny"), rules=[jobs_rule]))
    job = {"apiVersion": "batch/v1", "kind": "Job",
           "metadata": {"name": "train", "namespace": "default", "labels": {"kueue.x-k8s.io/queue-name": "team-a"}},
           "spec": {"template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "train:1"}]}}}}
    code, created, _ = await api.call("POST", "/apis/batch/v1/namespaces/default/jobs", job)
    assert code == 201, created
    assert created["spec"]["suspend"] is True
    assert server.received["/deny"][-1]["request"]["object"]["spec"]["suspend"] is True
