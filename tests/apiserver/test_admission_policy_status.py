"""A ValidatingAdmissionPolicy's ``status.typeChecking``, written by the hub's leader as kube's
``validatingadmissionpolicy-status`` controller writes it: a real hub, a policy over Deployments
with a typo'd field gets kube's warning, a correct one none, and a fixed spec (a new generation)
is checked again."""

from __future__ import annotations

from typing import Any

import yaml

from tests.apiserver.test_admission_policies import policy
from tests.apiserver.test_admission_webhooks import GROUP, Api
from tests.apiserver.test_admission_webhooks import api as api
from tests.apiserver.test_admission_webhooks import hub as hub
from tests.apiserver.test_real_clients import kubectl, needs_kubectl
from tests.controllers.fleet import eventually

POLICIES = f"{GROUP}/validatingadmissionpolicies"
TYPO = "object.spec.replica <= 5"
TYPO_WARNING = ("apps/v1, Kind=Deployment: ERROR: <input>:1:12: undefined field 'replica'\n"
                " | object.spec.replica <= 5\n | ...........^\n")


async def checked(api: Api, name: str, generation: int) -> dict[str, Any] | None:
    """The policy's status once it is type-checked at ``generation``."""
    code, found, _ = await api.call("GET", f"{POLICIES}/{name}")
    assert code == 200, found
    status = found.get("status") or {}
    return status if status.get("observedGeneration") == generation else None


async def test_a_typo_is_warned_about_and_a_correct_policy_is_not(api: Api) -> None:
    for name, expression in (("typo", TYPO), ("right", "object.spec.replicas <= 5")):
        code, created, _ = await api.call("POST", POLICIES, policy(name, {"expression": expression}))
        assert code == 201, created
    status = await eventually(lambda: checked(api, "typo", 1), what="the typo'd policy to be type-checked")
    assert status["typeChecking"] == {
        "expressionWarnings": [{"fieldRef": "spec.validations[0].expression", "warning": TYPO_WARNING}]
    }
    status = await eventually(lambda: checked(api, "right", 1), what="the correct policy to be type-checked")
    assert status["typeChecking"] == {}

    # Fixing the expression is a new generation, checked again: the warning goes.
    fixed = {"spec": {"validations": [{"expression": "object.spec.replicas <= 5"}]}}
    code, patched, _ = await api.call("PATCH", f"{POLICIES}/typo", fixed, **{"Content-Type": "application/merge-patch+json"})
    assert code == 200 and patched["metadata"]["generation"] == 2, patched
    status = await eventually(lambda: checked(api, "typo", 2), what="the fixed policy to be checked again")
    assert status["typeChecking"] == {}


@needs_kubectl
async def test_kubectl_shows_the_warning(api: Api) -> None:
    code, created, _ = await api.call("POST", POLICIES, policy("typo", {"expression": TYPO}))
    assert code == 201, created
    await eventually(lambda: checked(api, "typo", 1), what="the policy to be type-checked")
    code, out, err = await kubectl(api.hub.kubeconfig_path, "get", "validatingadmissionpolicy", "typo", "-o", "yaml")
    assert code == 0, err
    assert yaml.safe_load(out)["status"] == {
        "observedGeneration": 1,
        "typeChecking": {"expressionWarnings": [{"fieldRef": "spec.validations[0].expression", "warning": TYPO_WARNING}]},
    }


CRONTABS = "/apis/stable.example.com/v1/namespaces/default/crontabs"
CRONTAB_CRD = {
    "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
    "metadata": {"name": "crontabs.stable.example.com"},
    "spec": {"group": "stable.example.com", "scope": "Namespaced",
             "names": {"plural": "crontabs", "singular": "crontab", "kind": "CronTab"},
             "versions": [{"name": "v1", "served": True, "storage": True, "schema": {"openAPIV3Schema": {
                 "type": "object", "properties": {"spec": {"type": "object", "properties": {
                     "cronSpec": {"type": "string"}, "replicas": {"type": "integer"}}}}}}}]},
}


async def test_a_custom_kind_is_checked_against_its_crds_schema(api: Api) -> None:
    code, created, _ = await api.call("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", CRONTAB_CRD)
    assert code == 201, created

    async def served() -> bool:
        code, _, _ = await api.call("GET", CRONTABS)
        return code == 200

    await eventually(served, what="the CronTab kind to be served")
    rules = {"resourceRules": [{"operations": ["CREATE"], "apiGroups": ["stable.example.com"], "apiVersions": ["v1"],
                                "resources": ["crontabs"]}]}
    code, created, _ = await api.call("POST", POLICIES, policy(
        "crontab", {"expression": "object.spec.cronSpec == 5 && object.spec.replicas < 3"}, matchConstraints=rules))
    assert code == 201, created
    status = await eventually(lambda: checked(api, "crontab", 1), what="the CronTab policy to be type-checked")
    assert status["typeChecking"]["expressionWarnings"] == [{
        "fieldRef": "spec.validations[0].expression",
        "warning": ("stable.example.com/v1, Kind=CronTab: ERROR: <input>:1:22: found no matching overload for '_==_' "
                    "applied to '(string, int)'\n | object.spec.cronSpec == 5 && object.spec.replicas < 3\n"
                    " | .....................^\n"),
    }]
