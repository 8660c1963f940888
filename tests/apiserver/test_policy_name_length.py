"""Karmada's limit on a propagation policy's name: its mutating webhook refuses a
PropagationPolicy or ClusterPropagationPolicy named longer than 63 characters (the name goes in
a label), with controller-runtime's ``admission.Errored(http.StatusBadRequest, ...)``
(``pkg/webhook/propagationpolicy/mutating.go``: code 400, no reason), and kube-apiserver answers the
denial as ``400 admission webhook "<webhook>" denied the request: <kind>'s name should be no more
than 63 characters`` (``webhookerrors.ToStatusErr`` keeps the webhook's code and reason).
OverridePolicies have no limit."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from aiohttp.test_utils import TestClient

from controlplane.apiserver.kinds.core import core_resources
from controlplane.apiserver.kinds.gpufed import gpufed_resources
from controlplane.apiserver.kinds.workloads import workload_resources
from controlplane.apiserver.resources import Registry

from .test_real_clients import kubeconfig, kubectl, needs_kubectl, server_url  # noqa: F401 (fixtures)

LONG, LONGEST = "p" * 64, "p" * 63
SPEC = {"resourceSelectors": [{"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"}]}


@pytest.fixture
def api_registry() -> Registry:
    return Registry(core_resources(), workload_resources(), gpufed_resources())


def policy(group: str, kind: str, name: str) -> dict[str, Any]:
    spec = SPEC if kind.endswith("PropagationPolicy") else {**SPEC, "overrideRules": []}
    return {"apiVersion": f"{group}/v1alpha1", "kind": kind, "metadata": {"name": name}, "spec": spec}


def collection(group: str, kind: str) -> str:
    plural = kind.lower().removesuffix("y") + "ies"
    scope = "" if kind.startswith("Cluster") else "namespaces/default/"
    return f"/apis/{group}/v1alpha1/{scope}{plural}"


@pytest.mark.parametrize("group", ["policy.karmada.io", "policy.gpufed.io"])
@pytest.mark.parametrize(
    ("kind", "webhook"),
    [("PropagationPolicy", "propagationpolicy.karmada.io"),
     ("ClusterPropagationPolicy", "clusterpropagationpolicy.karmada.io")],
)
async def test_a_long_name_is_refused_as_karmadas_webhook_refuses_it(
    api: TestClient[Any, Any], group: str, kind: str, webhook: str
) -> None:
    refused = await api.post(collection(group, kind), json=policy(group, kind, LONG))
    assert refused.status == 400
    assert await refused.json() == {
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "code": 400,
        "message": f'admission webhook "{webhook}" denied the request: {kind}\'s name should be no more than 63 characters',
    }
    assert (await api.get(f"{collection(group, kind)}/{LONG}")).status == 404
    assert (await api.post(collection(group, kind), json=policy(group, kind, LONGEST))).status == 201


@pytest.mark.parametrize("kind", ["OverridePolicy", "ClusterOverridePolicy"])
async def test_override_policies_have_no_such_limit(api: TestClient[Any, Any], kind: str) -> None:
    created = await api.post(collection("policy.karmada.io", kind), json=policy("policy.karmada.io", kind, LONG))
    assert created.status == 201, await created.text()


@needs_kubectl
async def test_kubectl_apply_prints_the_webhooks_denial(kubeconfig: Path) -> None:  # noqa: F811
    manifest = yaml.safe_dump(policy("policy.karmada.io", "PropagationPolicy", LONG))
    code, out, err = await kubectl(kubeconfig, "apply", "-f", "-", stdin=manifest)
    assert code != 0, out
    assert (
        'Error from server: error when creating "STDIN": admission webhook "propagationpolicy.karmada.io" '
        "denied the request: PropagationPolicy's name should be no more than 63 characters"
    ) in err, err


async def test_a_long_named_policy_stored_before_the_limit_can_still_change_and_go(
    api: TestClient[Any, Any], objects: Any
) -> None:
    """The limit is a webhook's on what it is shown: a policy stored before it (by an older hub, or
    renamed from a gpufed alias) keeps being updated, its finalizers removed and deleted."""
    rt = objects.registry.require("policy.karmada.io/v1alpha1", "PropagationPolicy")
    denial = rt.webhook_denial
    object.__setattr__(rt, "webhook_denial", None)  # as the hub was before the limit
    try:
        body = policy("policy.karmada.io", "PropagationPolicy", LONG)
        body["metadata"] = {**body["metadata"], "namespace": "default", "finalizers": ["example.com/hold"]}
        await objects.create(rt, body)
    finally:
        object.__setattr__(rt, "webhook_denial", denial)
    path = f"{collection('policy.karmada.io', 'PropagationPolicy')}/{LONG}"
    patched = await api.patch(path, json={"metadata": {"finalizers": None}, "spec": {"priority": 3}},
                              headers={"Content-Type": "application/merge-patch+json"})
    assert patched.status == 200, await patched.text()
    assert (await api.delete(path)).status == 200
    assert (await api.get(path)).status == 404
