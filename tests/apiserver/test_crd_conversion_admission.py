"""Admission of writes to a CRD whose versions its conversion webhook converts, as kube admits them:
webhooks and ValidatingAdmissionPolicies see a write in its request's version, and one whose rule
names another version (``matchPolicy: Equivalent``) sees it converted there by the conversion
webhook, with ``requestKind`` the request's. A real hub and a real HTTPS webhook server (admission
and conversion), as in :mod:`tests.apiserver.test_crd_conversion_webhook`."""

from __future__ import annotations

import json
from typing import Any

from tests.apiserver import test_crd_conversion_webhook as conversion
from tests.apiserver.test_admission_policies import bind, binding, policy
from tests.apiserver.test_admission_webhooks import Api, configure
from tests.apiserver.test_crd_conversion_webhook import V1, V2, crontab, served
from tests.webhookserver import WebhookServer

hub, api, server = conversion.hub, conversion.api, conversion.server


def _rule(version: str) -> dict[str, Any]:
    return {"operations": ["CREATE", "UPDATE", "DELETE"], "apiGroups": ["stable.example.com"],
            "apiVersions": [version], "resources": ["crontabs"]}


def _hook(name: str, client: dict[str, Any], version: str, policy: str = "Exact") -> dict[str, Any]:
    return {"name": name, "clientConfig": client, "rules": [_rule(version)], "sideEffects": "None",
            "admissionReviewVersions": ["v1"], "matchPolicy": policy}


def _seen(review: dict[str, Any]) -> tuple[Any, ...]:
    request = review["request"]
    obj = request.get("object") or request["oldObject"]
    return (request["operation"], request["kind"]["version"], request["requestKind"]["version"],
            obj["apiVersion"], obj["spec"])


async def test_webhooks_see_a_write_in_its_version_or_converted_to_theirs(api: Api, server: WebhookServer) -> None:
    await served(api, server.client("/convert"))
    mutating = _hook("cap.acme.io", server.client("/cap"), "v2")
    mutating["rules"][0]["operations"] = ["CREATE"]
    await configure(api, "Mutating", "cap", mutating)
    await configure(
        api, "Validating", "seen",
        _hook("v2.acme.io", server.client("/seen-v2"), "v2"),
        _hook("v1.acme.io", server.client("/seen-v1"), "v1", "Equivalent"),
    )
    # A v2 write: the v2 webhooks see it in v2 (an Exact rule naming v2 matches it), the v1 one
    # converted to v1; the mutating webhook's change (in v2) is stored.
    body = {**crontab("v2", "a"), "spec": {"schedule": "1 * * * *", "replicas": 5}}
    code, created, _ = await api.call("POST", V2, body)
    assert code == 201, json.dumps(created)
    assert created["spec"] == {"schedule": "1 * * * *", "replicas": 2}
    [mutating] = server.received["/cap"]
    assert _seen(mutating) == ("CREATE", "v2", "v2", "stable.example.com/v2", {"schedule": "1 * * * *", "replicas": 5})
    assert _seen(server.received["/seen-v2"][-1]) == (
        "CREATE", "v2", "v2", "stable.example.com/v2", {"schedule": "1 * * * *", "replicas": 2}
    )
    assert _seen(server.received["/seen-v1"][-1]) == (
        "CREATE", "v1", "v2", "stable.example.com/v1", {"cronSpec": "1 * * * *", "replicas": 2}
    )
    code, stored, _ = await api.call("GET", f"{V1}/a")
    assert stored["spec"] == {"cronSpec": "1 * * * *", "replicas": 2}
    # A v1 write: the v2 webhooks (Exact) do not see it; the Equivalent v1 one sees it as it is.
    code, created, _ = await api.call("POST", V1, crontab("v1", "b", cronSpec="2 * * * *"))
    assert code == 201, created
    assert len(server.received["/seen-v2"]) == 1 and len(server.received["/cap"]) == 1
    assert _seen(server.received["/seen-v1"][-1]) == ("CREATE", "v1", "v1", "stable.example.com/v1", {"cronSpec": "2 * * * *"})
    # A v2 delete: its old object in v2.
    code, deleted, _ = await api.call("DELETE", f"{V2}/a")
    assert code == 200, json.dumps(deleted)
    assert _seen(server.received["/seen-v2"][-1]) == (
        "DELETE", "v2", "v2", "stable.example.com/v2", {"schedule": "1 * * * *", "replicas": 2}
    )


async def test_a_policy_sees_a_write_in_its_version(api: Api, server: WebhookServer) -> None:
    await served(api, server.client("/convert"))
    match = {"resourceRules": [_rule("v2")], "matchPolicy": "Exact"}
    rule = {"expression": "object.spec.schedule != 'never'", "message": "a CronTab must run"}
    await bind(api, policy("runs", rule, matchConstraints=match), binding("runs", "runs", "Deny"))
    code, status, _ = await api.call("POST", V2, crontab("v2", "never", schedule="never"))
    assert (code, status.get("reason")) == (422, "Invalid"), status
    assert status["message"].endswith("denied request: a CronTab must run"), status
    code, created, _ = await api.call("POST", V2, crontab("v2", "ok", schedule="1 * * * *"))
    assert code == 201, created
    # A v1 write is not one the policy's Exact rule names.
    code, created, _ = await api.call("POST", V1, crontab("v1", "old", cronSpec="never"))
    assert code == 201, created


async def test_webhooks_see_a_scale_write_through_its_version(api: Api, server: WebhookServer) -> None:
    """A write through v2's ``scale`` is admitted as kube admits it: a Scale of the v2 resource,
    seen by a rule naming v2's ``crontabs/scale``, not by an Exact rule naming v1's."""
    await served(api, server.client("/convert"))
    hooks = [_hook("v2.acme.io", server.client("/seen-v2"), "v2"), _hook("v1.acme.io", server.client("/seen-v1"), "v1")]
    for hook in hooks:
        hook["rules"][0]["resources"] = ["crontabs/scale"]
    await configure(api, "Validating", "seen", *hooks)
    code, created, _ = await api.call("POST", V1, crontab("v1", "s", cronSpec="1 * * * *"))
    assert code == 201, created
    scale = {"apiVersion": "autoscaling/v1", "kind": "Scale", "metadata": {"name": "s", "namespace": "default"},
             "spec": {"replicas": 3}}
    code, scaled, _ = await api.call("PUT", f"{V2}/s/scale", scale)
    assert code == 200, json.dumps(scaled)
    assert (code, scaled["spec"]) == (200, {"replicas": 3}), json.dumps(scaled)
    [review] = server.received["/seen-v2"]
    request = review["request"]
    assert (request["kind"], request["resource"], request["subResource"], request["requestResource"]) == (
        {"group": "autoscaling", "version": "v1", "kind": "Scale"},
        {"group": "stable.example.com", "version": "v2", "resource": "crontabs"}, "scale",
        {"group": "stable.example.com", "version": "v2", "resource": "crontabs"},
    )
    assert request["object"]["spec"] == {"replicas": 3}
    assert server.received["/seen-v1"] == []


async def test_admission_sees_the_scale_of_the_requests_version(api: Api, server: WebhookServer) -> None:
    """kube's ScaleREST admits a write through a version's ``scale`` with the Scale read through that
    version's own scale paths: here v1, the storage version, has no ``labelSelectorPath`` and v2 has
    one, so the webhooks and a ValidatingAdmissionPolicy see v2's selector, and what the mutating
    webhook sets is the object's replicas."""
    crd = conversion.crd(server.client("/convert"))
    for version in crd["spec"]["versions"]:
        version["schema"]["openAPIV3Schema"]["properties"]["status"]["properties"]["selector"] = {"type": "string"}
    crd["spec"]["versions"][1]["subresources"]["scale"]["labelSelectorPath"] = ".status.selector"
    code, created, _ = await api.call("POST", conversion.CRDS, crd)
    assert code == 201, created
    await served(api, server.client("/convert"))
    body = {**crontab("v1", "s"), "spec": {"cronSpec": "1 * * * *", "replicas": 1}}
    code, created, _ = await api.call("POST", V1, body)
    assert code == 201, json.dumps(created)
    code, written, _ = await api.call("PUT", f"{V1}/s/status", {**created, "status": {"replicas": 1, "selector": "app=s"}})
    assert code == 200, json.dumps(written)

    rule = {**_rule("v2"), "operations": ["UPDATE"], "resources": ["crontabs/scale"]}
    await configure(api, "Mutating", "cap", {**_hook("cap.acme.io", server.client("/cap"), "v2"), "rules": [rule]})
    await configure(api, "Validating", "seen", {**_hook("v2.acme.io", server.client("/seen-v2"), "v2"), "rules": [rule]})
    selector = {"expression": "has(object.status.selector) && object.status.selector == 'app=s'",
                "message": "the Scale names its selector"}
    await bind(api, policy("selects", selector, matchConstraints={"resourceRules": [rule]}), binding("selects", "selects", "Deny"))

    scale = {"apiVersion": "autoscaling/v1", "kind": "Scale", "metadata": {"name": "s", "namespace": "default"},
             "spec": {"replicas": 5}}
    code, scaled, _ = await api.call("PUT", f"{V2}/s/scale", scale)
    assert code == 200, json.dumps(scaled)
    assert (code, scaled["spec"], scaled["status"]) == (200, {"replicas": 2}, {"replicas": 1, "selector": "app=s"}), json.dumps(scaled)
    [mutating] = server.received["/cap"]
    [validating] = server.received["/seen-v2"]
    for review in (mutating, validating):
        request = review["request"]
        assert (request["kind"], request["resource"], request["subResource"]) == (
            {"group": "autoscaling", "version": "v1", "kind": "Scale"},
            {"group": "stable.example.com", "version": "v2", "resource": "crontabs"}, "scale",
        )
        assert (request["object"]["kind"], request["object"]["status"]) == ("Scale", {"replicas": 1, "selector": "app=s"})
        assert request["oldObject"]["spec"] == {"replicas": 1} and request["oldObject"]["status"]["selector"] == "app=s"
    assert (mutating["request"]["object"]["spec"], validating["request"]["object"]["spec"]) == ({"replicas": 5}, {"replicas": 2})
    code, stored, _ = await api.call("GET", f"{V1}/s")
    assert stored["spec"] == {"cronSpec": "1 * * * *", "replicas": 2}, json.dumps(stored)
    # A merge patch through v2's scale is admitted the same way.
    code, patched, _ = await api.call("PATCH", f"{V2}/s/scale", {"spec": {"replicas": 7}},
                                      **{"Content-Type": "application/merge-patch+json"})
    assert (code, patched["spec"]) == (200, {"replicas": 2}), json.dumps(patched)
    assert server.received["/seen-v2"][-1]["request"]["object"]["status"]["selector"] == "app=s"
