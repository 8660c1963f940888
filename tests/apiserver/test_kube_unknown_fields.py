"""Fields a built-in kind does not have, as kube's decoder treats them: refused under
``fieldValidation=Strict`` (kubectl's default) with kube's message, dropped with a warning
under ``Warn`` (the server's default) and silently under ``Ignore``; never stored.

Before, a Deployment with ``replica: 3`` (for ``replicas``) or a container's ``resource`` (for
``resources``) was stored as written and sent to every member.
"""

from __future__ import annotations

import copy
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from controlplane.apiserver.crd.types import custom_types
from controlplane.apiserver.errors import BadRequest
from controlplane.apiserver.openapi import known_fields
from controlplane.apiserver.openapi.known_fields import unknown_fields_of
from controlplane.apiserver.validation import FieldValidation, check_object, decoded_applied
from controlplane.hub import hub_registry

from .test_kube_validation import Client, deployment, hub, hub_kubeconfig  # noqa: F401 (fixtures)
from .test_real_clients import kubectl, needs_kubectl

DEPLOYMENTS = "/apis/apps/v1/namespaces/default/deployments"
KUBE_MESSAGE = (
    'Deployment in version "v1" cannot be handled as a Deployment: strict decoding error: '
    'unknown field "spec.replica", unknown field "spec.template.spec.containers[0].resource"'
)


def misspelt(name: str = "x") -> dict[str, Any]:
    obj = deployment()
    obj["metadata"]["name"] = name
    obj["spec"] = {"replica": 3, **obj["spec"]}
    obj["spec"]["template"]["spec"]["containers"][0]["resource"] = {"limits": {"cpu": "1"}}
    return obj


# --- the decoder, pure --------------------------------------------------------------------


def test_unknown_fields_are_found_in_document_order_at_kubes_paths() -> None:
    unknown = unknown_fields_of("apps", "v1", "Deployment")
    obj = misspelt()
    obj["metadata"]["bogus"] = 1
    obj["spec"]["template"]["spec"]["containers"][0]["ports"] = [{"containerPort": 80, "protocl": "TCP"}]
    obj["status"] = {"replicas": 1, "ready": 1}
    before = copy.deepcopy(obj)
    assert unknown(obj, False) == [
        ("metadata", "bogus"),
        ("spec", "replica"),
        ("spec", "template", "spec", "containers", 0, "resource"),
        ("spec", "template", "spec", "containers", 0, "ports", 0, "protocl"),
        ("status", "ready"),
    ]
    assert obj == before  # finding is not dropping
    assert unknown(obj, True) == [("status", "ready")]  # a status write: its status alone


def test_maps_and_open_objects_hold_anything() -> None:
    obj = deployment()
    container = obj["spec"]["template"]["spec"]["containers"][0]
    container["resources"] = {"limits": {"nvidia.com/gpu": 1, "cpu": "2"}}  # a map: any key
    obj["metadata"]["labels"] = {"app.kubernetes.io/name": "x"}
    obj["metadata"]["managedFields"] = [  # FieldsV1 is an open object
        {"manager": "kubectl", "operation": "Apply", "fieldsV1": {"f:spec": {"f:replicas": {}}}}
    ]
    assert unknown_fields_of("apps", "v1", "Deployment")(obj, False) == []


def test_a_recursive_schema_is_walked_and_its_open_parts_left_alone() -> None:
    """A CustomResourceDefinition's schema refers to itself (JSONSchemaProps) and holds any JSON
    in ``default``; a field the schema type lacks deep inside is still found."""
    crd = {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.com"},
        "spec": {
            "group": "example.com",
            "names": {"kind": "Widget", "plural": "widgets"},
            "scope": "Namespaced",
            "versions": [{
                "name": "v1", "served": True, "storage": True,
                "schema": {"openAPIV3Schema": {
                    "type": "object",
                    "properties": {"spec": {
                        "type": "object",
                        "default": {"anything": {"goes": [1, 2]}},
                        "properties": {"size": {"type": "integer", "minimun": 1}},
                    }},
                }},
            }],
        },
    }
    found = unknown_fields_of("apiextensions.k8s.io", "v1", "CustomResourceDefinition")(crd, False)
    assert found == [
        ("spec", "versions", 0, "schema", "openAPIV3Schema", "properties", "spec", "properties", "size", "minimun")
    ]


def test_a_kind_kube_does_not_have_finds_nothing() -> None:
    obj = {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "metadata": {"name": "x"}, "spec": {"a": 1}}
    assert unknown_fields_of("kubeflow.org", "v1", "PyTorchJob")(obj, False) == []


def test_every_built_in_kind_of_the_hub_is_decoded_as_kube_does() -> None:
    """Each kind the hub serves without a schema of its own gets kube's decoder, and kube has a
    definition for every one of them but the kinds of other projects; the operators' kinds and
    Karmada's interpreter and autoscaling kinds are decoded by the schema of their CRDs, whose root
    keeps nothing it does not declare. Only the hub's own WasteReport (no CRD on a real cluster)
    keeps what it is sent."""
    others = {"reports.gpufed.io"}
    for rt in hub_registry():
        if rt.model is not None or rt.custom is not None:
            assert rt.unknown_fields is None, rt.kind
            continue
        probe = {"apiVersion": rt.api_version, "kind": rt.kind, "metadata": {"name": "x"}, "zzz": 1}
        if rt.group in others:
            assert rt.unknown_fields is None or rt.unknown_fields(probe, False) == [], rt.kind
        else:
            assert rt.unknown_fields is not None, rt.kind
            assert rt.unknown_fields(probe, False) == [("zzz",)], rt.kind


# --- over HTTP, on etcd --------------------------------------------------------------------


async def test_strict_refuses_with_kubes_message_and_writes_nothing(hub: Client) -> None:  # noqa: F811
    response = await hub.post(f"{DEPLOYMENTS}?fieldValidation=Strict", json=misspelt())
    assert response.status == 400
    status = await response.json()
    assert status["reason"] == "BadRequest"
    assert status["message"] == KUBE_MESSAGE
    assert (await hub.get(f"{DEPLOYMENTS}/x")).status == 404


@pytest.mark.parametrize(("mode", "warned"), [(None, True), ("Warn", True), ("Ignore", False)])
async def test_warn_and_ignore_drop_the_fields(hub: Client, mode: str | None, warned: bool) -> None:  # noqa: F811
    query = f"?fieldValidation={mode}" if mode else ""
    response = await hub.post(f"{DEPLOYMENTS}{query}", json=misspelt())
    assert response.status == 201, await response.text()
    warnings = response.headers.getall("Warning", [])
    expected = ['299 - "unknown field \\"spec.replica\\""',
                '299 - "unknown field \\"spec.template.spec.containers[0].resource\\""']
    assert warnings == (expected if warned else [])
    stored = await (await hub.get(f"{DEPLOYMENTS}/x")).json()
    assert "replica" not in stored["spec"]
    assert stored["spec"]["replicas"] == 1  # defaulted: the misspelt field asked for nothing
    assert "resource" not in stored["spec"]["template"]["spec"]["containers"][0]


async def test_patches_and_status_writes_drop_them_too(hub: Client) -> None:  # noqa: F811
    assert (await hub.post(DEPLOYMENTS, json=deployment())).status == 201
    patched = await hub.patch(
        f"{DEPLOYMENTS}/x", json={"spec": {"paused": True, "bogus": 1}},
        headers={"Content-Type": "application/merge-patch+json"},
    )
    assert patched.status == 200, await patched.text()
    assert patched.headers.getall("Warning") == ['299 - "unknown field \\"spec.bogus\\""']
    body = await patched.json()
    assert body["spec"]["paused"] is True and "bogus" not in body["spec"]

    status = {**body, "status": {"replicas": 0, "readyReplica": 1}}
    refused = await hub.put(f"{DEPLOYMENTS}/x/status?fieldValidation=Strict", json=status)
    assert refused.status == 400
    assert 'strict decoding error: unknown field "status.readyReplica"' in (await refused.json())["message"]
    written = await hub.put(f"{DEPLOYMENTS}/x/status", json=status)
    assert written.status == 200, await written.text()
    assert "readyReplica" not in (await (await hub.get(f"{DEPLOYMENTS}/x")).json()).get("status", {})


def unknown_and_invalid(name: str = "x") -> dict[str, Any]:
    """A Deployment with an unknown container field and a pull policy kube refuses."""
    obj = deployment()
    obj["metadata"]["name"] = name
    obj["spec"]["template"]["spec"]["containers"][0].update(foo=1, imagePullPolicy="Sometimes")
    return obj


UNKNOWN_FOO = '299 - "unknown field \\"spec.template.spec.containers[0].foo\\""'
JOBSETS = "/apis/jobset.x-k8s.io/v1alpha2/namespaces/default/jobsets"


async def test_a_write_refused_under_warn_still_carries_the_unknown_field_warnings(hub: Client) -> None:  # noqa: F811
    """kube adds the decoder's warnings right after decoding (``addStrictDecodingWarnings`` in the
    create, update and patch handlers): the 422 of the validation that follows carries them."""
    refused = await hub.post(DEPLOYMENTS, json=unknown_and_invalid())
    assert (refused.status, (await refused.json())["reason"]) == (422, "Invalid")
    assert refused.headers.getall("Warning") == [UNKNOWN_FOO]
    assert (await hub.post(DEPLOYMENTS, json=deployment())).status == 201
    stored = await (await hub.get(f"{DEPLOYMENTS}/x")).json()
    replaced = await hub.put(f"{DEPLOYMENTS}/x", json={**unknown_and_invalid(), "metadata": stored["metadata"]})
    assert (replaced.status, replaced.headers.getall("Warning")) == (422, [UNKNOWN_FOO])
    patch = {"spec": {"template": {"spec": {"containers": [{"name": "main", "foo": 1, "imagePullPolicy": "Sometimes"}]}}}}
    patched = await hub.patch(
        f"{DEPLOYMENTS}/x", json=patch, headers={"Content-Type": "application/strategic-merge-patch+json"}
    )
    assert (patched.status, patched.headers.getall("Warning")) == (422, [UNKNOWN_FOO])
    # A kind with a CRD's schema (JobSet): an unknown field, and a value its enum does not allow.
    jobset = {
        "apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet", "metadata": {"name": "js"},
        "spec": {"bogus": 1, "successPolicy": {"operator": "Some"}, "replicatedJobs": []},
    }
    refused = await hub.post(JOBSETS, json=jobset)
    assert refused.status == 422, await refused.text()
    assert refused.headers.getall("Warning") == ['299 - "unknown field \\"spec.bogus\\""']


CRON_FHPAS = "/apis/autoscaling.karmada.io/v1alpha1/namespaces/default/cronfederatedhpas"
FHPAS = "/apis/autoscaling.karmada.io/v1alpha1/namespaces/default/federatedhpas"


def cron_federated_hpa() -> dict[str, Any]:
    """A CronFederatedHPA whose rule also has a misspelt ``targetMaxReplica``."""
    return {
        "apiVersion": "autoscaling.karmada.io/v1alpha1", "kind": "CronFederatedHPA",
        "metadata": {"name": "cron"},
        "spec": {"scaleTargetRef": {"apiVersion": "autoscaling.karmada.io/v1alpha1", "kind": "FederatedHPA",
                                    "name": "web"},
                 "rules": [{"name": "up", "schedule": "*/1 * * * *", "targetMinReplicas": 2, "targetMaxReplica": 5}]},
    }


async def test_karmadas_autoscalers_are_decoded_as_their_crds(hub: Client) -> None:  # noqa: F811
    """Karmada's CronFederatedHPA and FederatedHPA are CRDs on a real cluster: a field their
    schemas do not declare is refused under Strict, dropped with a warning under Warn."""
    refused = await hub.post(f"{CRON_FHPAS}?fieldValidation=Strict", json=cron_federated_hpa())
    assert refused.status == 400
    assert (await refused.json())["message"] == (
        'CronFederatedHPA in version "v1alpha1" cannot be handled as a CronFederatedHPA: strict decoding error: '
        'unknown field "spec.rules[0].targetMaxReplica"'
    )
    created = await hub.post(CRON_FHPAS, json=cron_federated_hpa())
    assert created.status == 201, await created.text()
    assert created.headers.getall("Warning") == ['299 - "unknown field \\"spec.rules[0].targetMaxReplica\\""']
    stored = await (await hub.get(f"{CRON_FHPAS}/cron")).json()
    assert "targetMaxReplica" not in stored["spec"]["rules"][0]

    fhpa = {"apiVersion": "autoscaling.karmada.io/v1alpha1", "kind": "FederatedHPA", "metadata": {"name": "web"},
            "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
                     "maxReplicas": 3, "minReplica": 1}}
    refused = await hub.post(f"{FHPAS}?fieldValidation=Strict", json=fhpa)
    assert refused.status == 400
    assert 'strict decoding error: unknown field "spec.minReplica"' in (await refused.json())["message"]


# --- the real kubectl ------------------------------------------------------------------------


@needs_kubectl
async def test_kubectl_create_with_validate_warn_prints_the_warning_and_the_refusal(hub_kubeconfig: Path) -> None:  # noqa: F811
    manifest = yaml.safe_dump(unknown_and_invalid("bad"))
    code, out, err = await kubectl(hub_kubeconfig, "create", "--validate=warn", "-f", "-", stdin=manifest)
    assert code != 0, out
    assert 'Warning: unknown field "spec.template.spec.containers[0].foo"' in err, err
    assert err == (
        'Warning: unknown field "spec.template.spec.containers[0].foo"\n'
        'The Deployment "bad" is invalid: spec.template.spec.containers[0].imagePullPolicy: '
        'Unsupported value: "Sometimes": supported values: "Always", "IfNotPresent", "Never"\n'
    )


@needs_kubectl
async def test_kubectl_apply_of_a_misspelt_deployment_prints_kubes_error(hub_kubeconfig: Path) -> None:  # noqa: F811
    manifest = yaml.safe_dump(misspelt("typo"))
    code, out, err = await kubectl(hub_kubeconfig, "apply", "-f", "-", stdin=manifest)
    assert code != 0, out
    assert f'Error from server (BadRequest): error when creating "STDIN": {KUBE_MESSAGE}' in err, err

    code, out, err = await kubectl(hub_kubeconfig, "apply", "--validate=warn", "-f", "-", stdin=manifest)
    assert code == 0, err
    assert 'Warning: unknown field "spec.replica"' in err
    code, out, err = await kubectl(hub_kubeconfig, "get", "deployment", "typo", "-o", "yaml")
    assert code == 0, err
    assert "replica:" not in out and "resource:" not in out


@needs_kubectl
async def test_kubectl_replace_of_a_status_with_a_misspelt_spec_prints_kubes_error(hub_kubeconfig: Path) -> None:  # noqa: F811
    """kube decodes a status write's whole body: a field of the spec it does not store is refused
    under kubectl's Strict too, and only warned about under ``--validate=warn``."""
    web = deployment()
    web["metadata"]["name"] = "web"
    code, out, err = await kubectl(hub_kubeconfig, "create", "-f", "-", stdin=yaml.safe_dump(web))
    assert code == 0, err
    code, out, err = await kubectl(hub_kubeconfig, "get", "deployment", "web", "-o", "json")
    assert code == 0, err
    stored = yaml.safe_load(out)
    stored["spec"]["replica"] = 3
    manifest = yaml.safe_dump(stored)
    code, out, err = await kubectl(hub_kubeconfig, "replace", "--subresource=status", "-f", "-", stdin=manifest)
    assert code != 0, out
    message = 'Deployment in version "v1" cannot be handled as a Deployment: strict decoding error: unknown field "spec.replica"'
    assert f'Error from server (BadRequest): error when replacing "STDIN": {message}' in err, err
    code, out, err = await kubectl(
        hub_kubeconfig, "replace", "--subresource=status", "--validate=warn", "-f", "-", stdin=manifest
    )
    assert code == 0, err
    assert 'Warning: unknown field "spec.replica"' in err, err


def test_an_update_of_an_object_stored_with_unknown_fields_is_not_refused_for_them() -> None:
    """An object stored before the hub knew its kind's fields keeps being writable (a
    controller's update of it carries them back): the fields it already had are dropped
    without a word; a new one is still refused under Strict."""
    rt = hub_registry().require("apps/v1", "Deployment")
    stored = misspelt()
    update = copy.deepcopy(stored)
    update["spec"]["paused"] = True
    checked = check_object(update, rt, field_validation=FieldValidation.STRICT, old=stored)
    assert checked.warnings == []
    assert "replica" not in checked.obj["spec"] and checked.obj["spec"]["paused"] is True
    assert "resource" not in checked.obj["spec"]["template"]["spec"]["containers"][0]
    assert "replica" in update["spec"]  # the caller's object is not changed

    update["spec"]["bogus"] = 1
    with pytest.raises(BadRequest, match=r'strict decoding error: unknown field "spec\.bogus"$'):
        check_object(update, rt, field_validation=FieldValidation.STRICT, old=stored)


POLICIES = "/apis/policy.karmada.io/v1alpha1/namespaces/default/propagationpolicies"


async def test_a_kind_with_a_schema_of_its_own_has_kubes_object_meta(hub: Client) -> None:  # noqa: F811
    """gpufed's, Karmada's and Kueue's kinds (pydantic models) and CRDs' kinds validate their
    own fields; their metadata is kube's ObjectMeta, decoded as kube decodes it."""
    policy = {
        "apiVersion": "policy.karmada.io/v1alpha1", "kind": "PropagationPolicy",
        "metadata": {"name": "pp", "labelz": {"a": "b"}},
        "spec": {"resourceSelectors": [{"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"}],
                 "placement": {"clusterAffinity": {"clusterNames": ["a"]}}, "bogus": 1},
    }
    refused = await hub.post(f"{POLICIES}?fieldValidation=Strict", json=policy)
    assert refused.status == 400
    assert (await refused.json())["message"] == (
        'PropagationPolicy in version "v1alpha1" cannot be handled as a PropagationPolicy: strict decoding error: '
        'unknown field "metadata.labelz", unknown field "spec.bogus"'
    )
    created = await hub.post(POLICIES, json=policy)
    assert created.status == 201, await created.text()
    assert created.headers.getall("Warning") == [
        '299 - "unknown field \\"metadata.labelz\\""', '299 - "unknown field \\"spec.bogus\\""'
    ]
    stored = await (await hub.get(f"{POLICIES}/pp")).json()
    assert "labelz" not in stored["metadata"] and "bogus" not in stored["spec"]


# --- values of the wrong JSON type ---------------------------------------------------------

ENV_MESSAGE = (
    'Deployment in version "v1" cannot be handled as a Deployment: json: cannot unmarshal number into Go struct '
    "field EnvVar.spec.template.spec.containers.env.value of type string"
)


def with_env_value(value: Any) -> dict[str, Any]:
    obj = deployment()
    obj["spec"]["template"]["spec"]["containers"][0]["env"] = [{"name": "PORT", "value": value}]
    return obj


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda o: o["spec"].update(replicas="3"),
         "json: cannot unmarshal string into Go struct field DeploymentSpec.spec.replicas of type int32"),
        (lambda o: o["spec"].update(replicas=1.5),
         "json: cannot unmarshal number 1.5 into Go struct field DeploymentSpec.spec.replicas of type int32"),
        (lambda o: o["spec"].update(template="oops"),
         "json: cannot unmarshal string into Go struct field DeploymentSpec.spec.template of type v1.PodTemplateSpec"),
        (lambda o: o["spec"]["template"]["spec"].update(containers={"name": "c"}),
         "json: cannot unmarshal object into Go struct field PodSpec.spec.template.spec.containers "
         "of type []v1.Container"),
        (lambda o: o["metadata"].update(labels={"app": 1}),
         "json: cannot unmarshal number into Go struct field ObjectMeta.metadata.labels of type string"),
        (lambda o: o["spec"].update(paused="yes"),
         "json: cannot unmarshal string into Go struct field DeploymentSpec.spec.paused of type bool"),
        (lambda o: o["spec"].update(replicas=3_000_000_000),  # an int32 holds no more than 2147483647
         "json: cannot unmarshal number 3000000000 into Go struct field DeploymentSpec.spec.replicas of type int32"),
        # An IntOrString reads a non-string into an int32 in its own UnmarshalJSON, in Go's other words.
        (lambda o: o["spec"].update(strategy={"rollingUpdate": {"maxSurge": True}}),
         "json: cannot unmarshal bool into Go value of type int32"),
        (lambda o: o["spec"].update(strategy={"rollingUpdate": {"maxSurge": 1.5}}),
         "json: cannot unmarshal number 1.5 into Go value of type int32"),
    ],
)
def test_a_value_of_the_wrong_type_is_named_in_gos_words(change: Any, message: str) -> None:
    obj = deployment()
    change(obj)
    with pytest.raises(known_fields.CannotUnmarshal, match=f"^{re.escape(message)}$"):
        unknown_fields_of("apps", "v1", "Deployment")(obj, False)


def test_numbers_where_kube_takes_them_and_null_anywhere() -> None:
    """A Quantity and an IntOrString take a number; null is every field's zero value."""
    obj = deployment()
    obj["spec"]["strategy"] = {"rollingUpdate": {"maxSurge": 1, "maxUnavailable": "25%"}}
    obj["spec"]["template"]["spec"]["containers"][0]["resources"] = {"limits": {"cpu": 1, "nvidia.com/gpu": 2.0}}
    obj["spec"]["replicas"] = None
    obj["metadata"]["labels"] = None
    assert unknown_fields_of("apps", "v1", "Deployment")(obj, False) == []


async def test_a_value_of_the_wrong_type_is_refused_in_every_mode(hub: Client) -> None:  # noqa: F811
    for mode in ("Strict", "Warn", "Ignore"):
        response = await hub.post(f"{DEPLOYMENTS}?fieldValidation={mode}", json=with_env_value(8080))
        assert response.status == 400, mode
        assert (await response.json())["message"] == ENV_MESSAGE
    config_map = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"port": 80}}
    response = await hub.post("/api/v1/namespaces/default/configmaps", json=config_map)
    assert response.status == 400
    assert (await response.json())["message"] == (
        'ConfigMap in version "v1" cannot be handled as a ConfigMap: json: cannot unmarshal number into Go struct '
        "field ConfigMap.data of type string"
    )
    assert (await hub.get("/api/v1/namespaces/default/configmaps/c")).status == 404


def test_an_update_of_an_object_stored_with_a_mistyped_value_is_not_refused_for_it() -> None:
    rt = hub_registry().require("apps/v1", "Deployment")
    stored = with_env_value(8080)
    update = copy.deepcopy(stored)
    update["metadata"]["finalizers"] = ["gpufed.io/workload"]
    check_object(update, rt, field_validation=FieldValidation.STRICT, old=stored)
    update["metadata"]["labels"] = {"app": 1}  # another field mistyped: refused
    with pytest.raises(BadRequest, match=r"Go struct field ObjectMeta\.metadata\.labels of type string$"):
        check_object(update, rt, field_validation=FieldValidation.STRICT, old=stored)


@needs_kubectl
async def test_kubectl_apply_of_a_number_for_a_string_prints_kubes_error(hub_kubeconfig: Path) -> None:  # noqa: F811
    manifest = yaml.safe_dump(with_env_value(8080))
    code, out, err = await kubectl(hub_kubeconfig, "apply", "-f", "-", stdin=manifest)
    assert code != 0, out
    assert f'Error from server (BadRequest): error when creating "STDIN": {ENV_MESSAGE}' in err, err


async def test_server_side_apply_refuses_them_whatever_field_validation_says(hub: Client) -> None:  # noqa: F811
    """kube's field manager types the applied object against the kind's schema first: a field it
    does not declare is structured-merge-diff's error under every ``fieldValidation``, and
    nothing is stored (nor a managedFields entry naming a field that is not)."""
    url = f"{DEPLOYMENTS}/x?fieldManager=ci"
    headers = {"Content-Type": "application/apply-patch+yaml"}
    for validation in ("Strict", "Warn", "Ignore"):
        refused = await hub.patch(f"{url}&fieldValidation={validation}", data=yaml.safe_dump(misspelt()), headers=headers)
        assert refused.status == 422
        assert (await refused.json())["message"] == (
            "failed to create typed patch object (/x; apps/v1, Kind=Deployment): .spec.replica: field not declared in schema"
        )
    assert (await hub.get(f"{DEPLOYMENTS}/x")).status == 404


async def test_server_side_apply_of_a_kind_with_a_schema_of_its_own_refuses_its_undeclared_fields(
    hub: Client,  # noqa: F811
) -> None:
    """Karmada's policy is typed by its served schema, as kube types it by Karmada's CRD: undeclared
    fields (ObjectMeta's too) are SMD's refusal, listed together, and nothing is stored."""
    policy = {
        "apiVersion": "policy.karmada.io/v1alpha1", "kind": "PropagationPolicy",
        "metadata": {"name": "pp", "labelz": {"a": "b"}},
        "spec": {"resourceSelectors": [{"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"}], "bogus": 1},
    }
    applied = await hub.patch(
        f"{POLICIES}/pp?fieldManager=ci", data=yaml.safe_dump(policy),
        headers={"Content-Type": "application/apply-patch+yaml"},
    )
    assert applied.status == 422, await applied.text()
    assert (await applied.json())["message"] == (
        "failed to create typed patch object (/pp; policy.karmada.io/v1alpha1, Kind=PropagationPolicy): errors:\n"
        "  .metadata.labelz: field not declared in schema\n  .spec.bogus: field not declared in schema"
    )
    assert (await hub.get(f"{POLICIES}/pp")).status == 404


def test_a_custom_kinds_applied_configuration_loses_what_its_schema_does_not_declare() -> None:
    crd = {
        "metadata": {"name": "widgets.example.com"},
        "spec": {
            "group": "example.com", "scope": "Namespaced",
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
            "versions": [{"name": "v1", "served": True, "storage": True, "schema": {"openAPIV3Schema": {
                "type": "object",
                "properties": {"spec": {"type": "object", "properties": {"size": {"type": "integer"}}}},
            }}}],
        },
    }
    [rt] = custom_types(crd)
    applied = {"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w", "bogus": 1},
               "spec": {"size": 1, "sise": 2}}
    decoded = decoded_applied(rt, applied, FieldValidation.WARN)
    assert decoded.obj == {"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}, "spec": {"size": 1}}
    assert decoded.warnings == ['unknown field "metadata.bogus"', 'unknown field "spec.sise"']
    assert applied["spec"] == {"size": 1, "sise": 2}  # the request's own object is not changed
    with pytest.raises(BadRequest, match=r'unknown field "metadata\.bogus", unknown field "spec\.sise"$'):
        decoded_applied(rt, applied, FieldValidation.STRICT)
