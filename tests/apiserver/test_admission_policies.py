"""The hub runs the ValidatingAdmissionPolicies an admin bound, as kube-apiserver does: a real hub
(embedded etcd, HTTPS, tokens). A policy denies a Deployment without a team label with kube's
Status; a Warn binding answers with kube's Warning header and stores the object; params come from
a ConfigMap the binding names (and a missing one denies, or not, as ``parameterNotFoundAction``
says); an evaluation error follows the policy's ``failurePolicy``; invalid policies and bindings
are refused with kube's field errors.

Each test has a hub of its own: the policies it binds are the hub's, checked on every write,
and would reach the other tests' writes."""

from __future__ import annotations

import logging
from typing import Any

import pytest
import yaml

from tests import hubmetrics
from tests.apiserver.test_admission_webhooks import GROUP, Api
from tests.apiserver.test_admission_webhooks import api as api
from tests.apiserver.test_admission_webhooks import hub as hub
from tests.apiserver.test_real_clients import kubectl, needs_kubectl
from tests.controllers.fleet import deployment, eventually

DEPLOYMENTS = "/apis/apps/v1/namespaces/default/deployments"
CONFIGMAPS = "/api/v1/namespaces/default/configmaps"
MERGE = {"Content-Type": "application/merge-patch+json"}
MATCH = {"resourceRules": [{"operations": ["CREATE", "UPDATE"], "apiGroups": ["apps"], "apiVersions": ["v1"],
                            "resources": ["deployments"]}]}


def policy(name: str, *validations: dict[str, Any], **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
            "metadata": {"name": name}, "spec": {"matchConstraints": MATCH, "validations": list(validations), **spec}}


def binding(name: str, policy_name: str, *actions: str, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding",
            "metadata": {"name": name}, "spec": {"policyName": policy_name, "validationActions": list(actions), **spec}}


async def bind(api: Api, pol: dict[str, Any], bnd: dict[str, Any]) -> None:
    """Create a policy and its binding, and wait until the hub enforces them (its watch has them)."""
    for plural, body in (("validatingadmissionpolicies", pol), ("validatingadmissionpolicybindings", bnd)):
        code, created, _ = await api.call("POST", f"{GROUP}/{plural}", body)
        assert code == 201, created

    await eventually(lambda: enforced(api, bnd["metadata"]["name"]), what=f"the hub to enforce {bnd['metadata']['name']}")


async def enforced(api: Api, binding_name: str) -> bool:
    """Whether the hub's watch has the binding (and its policy)."""
    admission = api.hub.webhooks
    assert admission is not None
    return binding_name in {b.name for _, b in admission.bound}


TEAM = {"expression": "has(object.metadata.labels) && 'team' in object.metadata.labels",
        "message": "every Deployment must carry a team label"}


async def test_a_deny_binding_refuses_a_deployment_without_a_team_label(api: Api) -> None:
    await bind(api, policy("team-label", TEAM), binding("team-label", "team-label", "Deny"))
    code, status, _ = await api.call("POST", DEPLOYMENTS, deployment("anon", replicas=1))
    message = "ValidatingAdmissionPolicy 'team-label' with binding 'team-label' denied request: every Deployment must carry a team label"
    assert code == 422, status
    assert status["reason"] == "Invalid"
    assert status["message"] == f'deployments.apps "anon" is forbidden: {message}'
    assert status["details"] == {"name": "anon", "group": "apps", "kind": "deployments", "causes": [{"message": message}]}
    code, _, _ = await api.call("GET", f"{DEPLOYMENTS}/anon")
    assert code == 404, "a denied write stores nothing"

    code, created, _ = await api.call("POST", DEPLOYMENTS, deployment("ml", replicas=1, labels={"app": "ml", "team": "ml"}))
    assert code == 201, created
    # An update removing the label is refused too; a write the rules leave out (a ConfigMap) is not checked.
    code, status, _ = await api.call("PATCH", f"{DEPLOYMENTS}/ml", {"metadata": {"labels": {"team": None}}}, **MERGE)
    assert code == 422 and "denied request: every Deployment must carry a team label" in status["message"]
    code, _, _ = await api.call("POST", CONFIGMAPS, {"metadata": {"name": "free"}})
    assert code == 201


async def test_a_warn_binding_warns_and_stores_with_message_expression_and_reason(api: Api) -> None:
    gpus = {"expression": "object.spec.replicas <= 8", "reason": "Forbidden",
            "messageExpression": "'at most 8 replicas, not ' + string(object.spec.replicas)"}
    await bind(api, policy("replicas", gpus), binding("replicas-warn", "replicas", "Warn"))
    code, created, warnings = await api.call("POST", DEPLOYMENTS, deployment("big", replicas=9))
    assert code == 201, created
    assert warnings == [
        "299 - \"Validation failed for ValidatingAdmissionPolicy 'replicas' with binding 'replicas-warn': at most 8 replicas, not 9\""
    ]
    # A second binding of the same policy denies: the validation's reason gives the code.
    await bind(api, {**policy("replicas2", gpus)}, binding("replicas-deny", "replicas2", "Deny", "Audit"))
    code, status, _ = await api.call("POST", DEPLOYMENTS, deployment("bigger", replicas=10))
    assert (code, status["reason"]) == (403, "Forbidden"), status
    assert status["message"].endswith("with binding 'replicas-deny' denied request: at most 8 replicas, not 10")


async def test_params_from_a_config_map_and_parameter_not_found_action(api: Api) -> None:
    limit = policy(
        "max-replicas",
        {"expression": "object.spec.replicas <= int(params.data.max)",
         "messageExpression": "'replicas must be at most ' + params.data.max"},
        paramKind={"apiVersion": "v1", "kind": "ConfigMap"},
        variables=[{"name": "wanted", "expression": "object.spec.replicas"}],
    )
    await bind(api, limit, binding("max-replicas", "max-replicas", "Deny", paramRef={
        "name": "limits", "parameterNotFoundAction": "Deny"}))
    code, status, _ = await api.call("POST", DEPLOYMENTS, deployment("early", replicas=1))
    assert code == 422, status
    assert status["message"].endswith(
        "denied request: failed to configure binding: no params found for policy binding with `Deny` parameterNotFoundAction"
    )
    code, _, _ = await api.call("POST", CONFIGMAPS, {"metadata": {"name": "limits"}, "data": {"max": "4"}})
    assert code == 201
    code, status, _ = await api.call("POST", DEPLOYMENTS, deployment("five", replicas=5))
    assert code == 422 and status["message"].endswith("denied request: replicas must be at most 4"), status
    code, created, _ = await api.call("POST", DEPLOYMENTS, deployment("four", replicas=4))
    assert code == 201, created

    # A selector binding that finds nothing and allows that admits the write.
    await bind(api, {**limit, "metadata": {"name": "max-sel"}}, binding("max-sel", "max-sel", "Deny", paramRef={
        "selector": {"matchLabels": {"kind": "limits"}}, "parameterNotFoundAction": "Allow"}))
    code, created, _ = await api.call("POST", DEPLOYMENTS, deployment("three", replicas=3))
    assert code == 201, created
    # Once a ConfigMap carries the label, the selector finds it and the policy runs with it.
    code, _, _ = await api.call("POST", CONFIGMAPS, {"metadata": {"name": "strict", "labels": {"kind": "limits"}},
                                                     "data": {"max": "1"}})
    assert code == 201
    code, status, _ = await api.call("POST", DEPLOYMENTS, deployment("two", replicas=2))
    assert code == 422 and status["message"].endswith(
        "ValidatingAdmissionPolicy 'max-sel' with binding 'max-sel' denied request: replicas must be at most 1"), status


async def test_failure_policy_decides_an_evaluation_error(api: Api) -> None:
    broken = {"expression": "object.spec.paused == false"}  # paused is unset: no such key
    await bind(api, policy("strict", broken), binding("strict", "strict", "Deny"))
    code, status, _ = await api.call("POST", DEPLOYMENTS, deployment("a", replicas=1))
    assert code == 422, status
    assert status["message"].endswith("denied request: expression 'object.spec.paused == false' resulted in error: no such key: paused")
    code, _, _ = await api.call("DELETE", f"{GROUP}/validatingadmissionpolicybindings/strict")
    assert code == 200

    await bind(api, policy("lenient", broken, failurePolicy="Ignore"), binding("lenient", "lenient", "Deny"))

    async def admitted() -> bool:
        code, _, _ = await api.call("POST", DEPLOYMENTS, deployment("b", replicas=1))
        return code == 201

    await eventually(admitted, what="the deleted strict binding to stop denying")


async def test_invalid_policies_and_bindings_are_refused_with_kube_errors(api: Api) -> None:
    code, status, _ = await api.call("POST", f"{GROUP}/validatingadmissionpolicies", policy("bad", {"expression": "object.("}))
    assert code == 422, status
    assert status["message"].startswith(
        'ValidatingAdmissionPolicy.admissionregistration.k8s.io "bad" is invalid: spec.validations[0].expression: '
        'Invalid value: "object.(": compilation failed: ERROR: <input>:1:8: Syntax error'
    )
    code, status, _ = await api.call("POST", f"{GROUP}/validatingadmissionpolicybindings", binding("bad", "", "Deny", "Warn"))
    assert code == 422, status
    fields = [cause["field"] for cause in status["details"]["causes"]]
    assert fields == ["spec.policyName", "spec.validationActions"]
    code, status, _ = await api.call("POST", f"{GROUP}/validatingadmissionpolicybindings", binding("none", "p"))
    assert code == 422 and status["details"]["causes"][0] == {
        "reason": "FieldValueRequired", "message": "Required value: at least one validation action is required",
        "field": "spec.validationActions"}

    # Defaults are kube's.
    code, created, _ = await api.call("POST", f"{GROUP}/validatingadmissionpolicies", policy("ok", TEAM))
    assert code == 201, created
    assert created["spec"]["failurePolicy"] == "Fail"
    constraints = created["spec"]["matchConstraints"]
    assert (constraints["matchPolicy"], constraints["namespaceSelector"], constraints["objectSelector"]) == ("Equivalent", {}, {})
    assert constraints["resourceRules"][0]["scope"] == "*"


@needs_kubectl
async def test_kubectl_gets_explains_and_meets_a_policy(api: Api) -> None:
    manifest = yaml.safe_dump_all([
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "limits", "namespace": "default"}, "data": {"max": "8"}},
        policy("max-replicas", {"expression": "object.spec.replicas <= int(params.data.max)",
                                "messageExpression": "'no more than ' + params.data.max + ' replicas'"},
               paramKind={"apiVersion": "v1", "kind": "ConfigMap"}),
        binding("max-replicas", "max-replicas", "Deny", paramRef={
            "name": "limits", "namespace": "default", "parameterNotFoundAction": "Allow"}),
    ])
    kubeconfig = api.hub.kubeconfig_path
    code, out, err = await kubectl(kubeconfig, "apply", "-f", "-", stdin=manifest)
    assert code == 0, err
    assert "validatingadmissionpolicy.admissionregistration.k8s.io/max-replicas created" in out
    code, out, err = await kubectl(kubeconfig, "get", "validatingadmissionpolicies")
    assert code == 0, err
    header, row = out.splitlines()
    assert header.split() == ["NAME", "VALIDATIONS", "PARAMKIND", "AGE"] and row.split()[:3] == ["max-replicas", "1", "v1/ConfigMap"]
    code, out, err = await kubectl(kubeconfig, "get", "validatingadmissionpolicybindings")
    assert code == 0, err
    header, row = out.splitlines()
    assert header.split() == ["NAME", "POLICYNAME", "PARAMREF", "AGE"]
    assert row.split()[:3] == ["max-replicas", "max-replicas", "default/limits"]
    code, out, err = await kubectl(kubeconfig, "explain", "validatingadmissionpolicybinding.spec.validationActions")
    assert code == 0, err
    assert "Warn" in out and "Audit" in out

    await eventually(lambda: enforced(api, "max-replicas"), what="the hub to enforce the binding")
    code, _, err = await kubectl(kubeconfig, "create", "deployment", "big", "--image=nginx", "--replicas=9")
    assert code != 0
    assert ('deployments.apps "big" is forbidden: ValidatingAdmissionPolicy \'max-replicas\' with binding '
            "'max-replicas' denied request: no more than 8 replicas") in err, err


async def test_the_authorizer_checks_with_the_hubs_rbac(api: Api) -> None:
    """``authorizer`` asks the hub's RBAC: the admin may create what it writes
    (``requestResource``) and read Secrets; a ServiceAccount without bindings may not delete."""
    checks = [
        {"expression": "authorizer.requestResource.check('create').allowed()", "message": "the writer may not create"},
        {"expression": "authorizer.group('').resource('secrets').namespace('default').check('get').allowed()",
         "message": "the writer may not read secrets"},
        {"expression": "!authorizer.serviceAccount('default', 'nobody').group('apps').resource('deployments')"
                       ".check('delete').allowed()", "message": "nobody may delete"},
        {"expression": "authorizer.serviceAccount('default', 'nobody').path('/metrics').check('get').allowed()",
         "messageExpression": "'nobody may not get /metrics: ' + (authorizer.serviceAccount('default', 'nobody')"
                              ".path('/metrics').check('get').allowed() ? 'allowed' : 'denied') + '; ' + "
                              "authorizer.serviceAccount('default', 'nobody').group('authorization.k8s.io')"
                              ".resource('selfsubjectaccessreviews').check('create').reason()"},
    ]
    await bind(api, policy("authz", *checks), binding("authz", "authz", "Deny"))
    code, status, _ = await api.call("POST", DEPLOYMENTS, deployment("a", replicas=1))
    assert code == 422, status
    # reason() is kube's RBAC authorizer's: what allows the check.
    assert status["message"].endswith(
        'denied request: nobody may not get /metrics: denied; RBAC: allowed by ClusterRoleBinding "system:basic-user" '
        'of ClusterRole "system:basic-user" to Group "system:authenticated"'), status


async def test_policy_checks_are_on_the_hubs_metrics_under_kubes_names(api: Api) -> None:
    """kube's ``apiserver_validating_admission_policy_check_total``, as its dispatcher counts: a failed
    validation once per action taken, an error ignored under ``failurePolicy: Ignore`` as ``allow``, a
    passing validation not at all; ``error_type`` is kube's (a false validation is an ``invalid_error``)."""
    await bind(api, policy("metered-team", TEAM), binding("metered-team", "metered-team", "Deny", "Audit"))
    broken = {"expression": "object.spec.missing == 1", "message": "never shown"}
    await bind(api, policy("metered-broken", broken, failurePolicy="Ignore"),
               binding("metered-broken", "metered-broken", "Deny"))
    code, _, _ = await api.call("POST", DEPLOYMENTS, deployment("metered-anon", replicas=1))
    assert code == 422
    code, _, _ = await api.call("POST", DEPLOYMENTS, deployment("metered-ml", replicas=1, labels={"app": "m", "team": "ml"}))
    assert code == 201
    lines = await hubmetrics.lines(api.hub)
    name = "apiserver_validating_admission_policy_check_total"
    assert sorted(line for line in lines if line.startswith(f"{name}{{") and 'policy="metered-' in line) == [
        f'{name}{{enforcement_action="allow",error_type="invalid_error",policy="metered-broken",'
        'policy_binding="metered-broken"} 2',
        f'{name}{{enforcement_action="audit",error_type="invalid_error",policy="metered-team",policy_binding="metered-team"}} 1',
        f'{name}{{enforcement_action="deny",error_type="invalid_error",policy="metered-team",policy_binding="metered-team"}} 1',
    ]
    assert f"# TYPE {name} counter" in lines
    assert not [line for line in lines if line.startswith("apiserver_validating_admission_policy_check_created")]
    buckets = {labels["le"] for labels, _ in await hubmetrics.samples(
        api.hub, "apiserver_validating_admission_policy_check_duration_seconds_bucket") if labels["policy"] == "metered-team"}
    assert buckets == {"5e-07", "0.001", "0.01", "0.1", "1", "+Inf"}


async def test_match_policy_equivalent_evaluates_the_rules_version(api: Api) -> None:
    """A policy for autoscaling/v2 checks a write through autoscaling/v1 as its v2 object (kube's
    ``matchPolicy: Equivalent``, the default); under ``Exact`` it does not apply."""
    v2 = {"resourceRules": [{"operations": ["CREATE"], "apiGroups": ["autoscaling"], "apiVersions": ["v2"],
                             "resources": ["horizontalpodautoscalers"]}]}
    cpu = {"expression": "request.kind.version == 'v2' && request.requestKind.version == 'v1' && "
                         "object.apiVersion == 'autoscaling/v2' && "
                         "object.spec.metrics.all(m, m.resource.target.averageUtilization <= 80)",
           "message": "at most 80% CPU"}
    await bind(api, policy("hpa-cpu", cpu, matchConstraints=v2), binding("hpa-cpu", "hpa-cpu", "Deny"))
    never = {"expression": "false", "message": "an Exact v2 policy saw a v1 write"}
    await bind(api, policy("hpa-exact", never, matchConstraints={**v2, "matchPolicy": "Exact"}),
               binding("hpa-exact", "hpa-exact", "Deny"))
    hpas = "/apis/autoscaling/v1/namespaces/default/horizontalpodautoscalers"

    def hpa(name: str, cpu: int) -> dict[str, Any]:
        return {"apiVersion": "autoscaling/v1", "kind": "HorizontalPodAutoscaler", "metadata": {"name": name},
                "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
                         "maxReplicas": 4, "targetCPUUtilizationPercentage": cpu}}

    code, status, _ = await api.call("POST", hpas, hpa("hot", 90))
    assert code == 422, status
    assert status["message"] == (
        'horizontalpodautoscalers.autoscaling "hot" is forbidden: ValidatingAdmissionPolicy \'hpa-cpu\' '
        "with binding 'hpa-cpu' denied request: at most 80% CPU"
    )
    code, created, _ = await api.call("POST", hpas, hpa("cool", 50))
    assert code == 201, created


async def test_audit_annotations_are_logged_and_their_errors_deny(api: Api, caplog: pytest.LogCaptureFixture) -> None:
    """A binding's audit annotations are logged at info (and go into the audit log) under kube's
    key ``<policy>/<key>``; one that fails under ``failurePolicy: Fail`` denies the write whatever
    the binding's actions (here only Warn)."""
    annotations = [{"key": "replicas", "valueExpression": "'replicas=' + string(object.spec.replicas)"},
                   {"key": "team", "valueExpression": "has(object.metadata.labels.team) ? object.metadata.labels.team : null"},
                   {"key": "cpu", "valueExpression": "object.metadata.labels.cpu"}]
    body = {**policy("audited"), "spec": {"matchConstraints": MATCH, "auditAnnotations": annotations}}
    await bind(api, body, binding("audited", "audited", "Warn"))
    with caplog.at_level(logging.INFO, logger="controlplane.apiserver.webhooks.enforcing"):
        code, created, _ = await api.call("POST", DEPLOYMENTS, deployment("audited", replicas=2, labels={"app": "a", "cpu": "8"}))
    assert code == 201, created
    logged = [r.getMessage() for r in caplog.records if "audit annotation" in r.getMessage()]
    assert logged == [
        "ValidatingAdmissionPolicy audited with binding audited: audit annotation audited/replicas=replicas=2 "
        "(CREATE deployments.apps default/audited)",
        "ValidatingAdmissionPolicy audited with binding audited: audit annotation audited/cpu=8 "
        "(CREATE deployments.apps default/audited)",
    ]
    code, status, _ = await api.call("POST", DEPLOYMENTS, deployment("unlabelled", replicas=1))
    assert code == 422, status
    assert status["message"] == (
        'deployments.apps "unlabelled" is forbidden: ValidatingAdmissionPolicy \'audited\' with binding \'audited\' '
        "denied request: expression 'object.metadata.labels.cpu' resulted in error: no such key: cpu"
    )


async def test_a_namespace_created_just_before_a_write_is_matched_and_its_label_changes_apply(api: Api) -> None:
    """The namespace selector reads the Namespace from memory, and from the store when memory does not
    have it yet (a namespace created an instant ago); a label change applies once the hub's watch has it."""
    selected = {**MATCH, "namespaceSelector": {"matchLabels": {"enforce": "yes"}}}
    await bind(api, policy("enforced-ns", TEAM, matchConstraints=selected), binding("enforced-ns", "enforced-ns", "Deny"))
    code, created, _ = await api.call("POST", "/api/v1/namespaces", {"metadata": {"name": "fresh", "labels": {"enforce": "yes"}}})
    assert code == 201, created
    fresh = "/apis/apps/v1/namespaces/fresh/deployments"
    code, status, _ = await api.call("POST", fresh, deployment("anon", replicas=1, namespace="fresh"))
    assert code == 422 and "denied request: every Deployment must carry a team label" in status["message"], status

    code, _, _ = await api.call("PATCH", "/api/v1/namespaces/fresh", {"metadata": {"labels": {"enforce": "no"}}}, **MERGE)
    assert code == 200

    async def admitted() -> bool:
        code, _, _ = await api.call("POST", fresh, deployment("anon", replicas=1, namespace="fresh"))
        return code == 201

    await eventually(admitted, what="the namespace's new labels to apply")


async def test_a_params_update_applies_to_the_next_writes(api: Api) -> None:
    limit = policy("max-replicas", {"expression": "object.spec.replicas <= int(params.data.max)",
                                    "messageExpression": "'replicas must be at most ' + params.data.max"},
                   paramKind={"apiVersion": "v1", "kind": "ConfigMap"})
    await bind(api, limit, binding("max-replicas", "max-replicas", "Deny", paramRef={
        "name": "limits", "parameterNotFoundAction": "Deny"}))
    code, _, _ = await api.call("POST", CONFIGMAPS, {"metadata": {"name": "limits"}, "data": {"max": "2"}})
    assert code == 201
    code, status, _ = await api.call("POST", DEPLOYMENTS, deployment("five", replicas=5))
    assert code == 422 and status["message"].endswith("denied request: replicas must be at most 2"), status

    code, _, _ = await api.call("PATCH", f"{CONFIGMAPS}/limits", {"data": {"max": "8"}}, **MERGE)
    assert code == 200

    async def admitted() -> bool:
        code, _, _ = await api.call("POST", DEPLOYMENTS, deployment("five", replicas=5))
        return code == 201

    await eventually(admitted, what="the new params to apply")
    code, status, _ = await api.call("POST", DEPLOYMENTS, deployment("nine", replicas=9))
    assert code == 422 and status["message"].endswith("denied request: replicas must be at most 8"), status


async def test_a_bindings_match_resources_without_resource_rules_selects_by_namespace_alone(api: Api) -> None:
    """As Kueue's ``sample-validating-policy-binding.yaml``: a binding's ``matchResources`` with a
    namespace selector and no ``resourceRules`` takes every write its policy selects (kube's matcher
    matches any resource when there are no rules), here all but the excluded namespace's."""
    outside = {"namespaceSelector": {"matchExpressions": [
        {"key": "kubernetes.io/metadata.name", "operator": "NotIn", "values": ["admin-namespace"]}]}}
    await bind(api, policy("team-outside-admin", TEAM), binding("team-outside-admin", "team-outside-admin", "Deny",
                                                                 matchResources=outside))
    code, status, _ = await api.call("POST", DEPLOYMENTS, deployment("anon", replicas=1))
    assert code == 422 and status["message"].endswith("denied request: every Deployment must carry a team label"), status
    code, created, _ = await api.call("POST", "/api/v1/namespaces", {"metadata": {"name": "admin-namespace"}})
    assert code == 201, created
    admin = "/apis/apps/v1/namespaces/admin-namespace/deployments"
    code, created, _ = await api.call("POST", admin, deployment("anon", replicas=1, namespace="admin-namespace"))
    assert code == 201, created
