"""The operators' CRDs' CEL rules (``x-kubernetes-validations``), as kube runs a CRD's: the served
schemas carry each rule of the CRDs (``tests/data/operator_crd_fields.txt``, its ``[rules ...]``
sections) and nothing else, and the hub refuses what a rule refuses in kube's words: ``<field>:
Invalid value: "<the field's schema type>": <the rule's message>`` (a rule of the object itself
at kube's nil path, ``<nil>``); a transition rule (``self == oldSelf``) only on an update whose
stored object has the field. One case per rule, over HTTP, on the hub's registry and an etcd store."""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from controlplane.apiserver.openapi.structural import structural_schema

from .karmada_crd_fields import read_fields
from .test_kueue_defaults import ok, served  # noqa: F401 (fixtures)
from .test_operator_crd_fields import DATA, KINDS
from .test_operator_crd_rules import Served, runtime_stored
from .test_operator_schema_types import (
    CLUSTER_RUNTIMES,
    JOBSETS,
    RAYCLUSTERS,
    RAYJOBS,
    TRAINJOBS,
    cluster_runtime,
    jobset,
    ray_job,
    trainjob,
)

Obj = dict[str, Any]
Rule = tuple[str, str, str]  # (path, rule, message)


def upstream_rules() -> dict[tuple[str, str], list[Rule]]:
    """Each kind's CEL rules in the data file, by (group/version, kind)."""
    out: dict[tuple[str, str], list[Rule]] = {}
    for name, lines in read_fields(DATA.read_text()).items():
        if not name.startswith("rules "):
            continue
        head, _, alias = name.removeprefix("rules ").partition(" = ")
        group_version, kind = head.split()
        if alias:
            out[(group_version, kind)] = out[(group_version, alias)]
            continue
        rules = []
        for line in lines:
            path, text = line.split(" ", 1)
            spec = json.loads(text)
            rules.append((path, spec["rule"], spec["message"]))
        out[(group_version, kind)] = rules
    return out


def served_rules(node: dict[str, Any], path: str = "") -> Iterator[Rule]:
    """Every ``x-kubernetes-validations`` rule of a structural schema, at the data file's paths."""
    for spec in node.get("x-kubernetes-validations") or ():
        yield path or ".", spec["rule"], spec["message"]
    for prop, sub in (node.get("properties") or {}).items():
        yield from served_rules(sub, f"{path}.{prop}" if path else prop)
    if isinstance(node.get("items"), dict):
        yield from served_rules(node["items"], path + "[]")
    if isinstance(node.get("additionalProperties"), dict):
        yield from served_rules(node["additionalProperties"], path + "{}")


UPSTREAM = upstream_rules()


@pytest.mark.parametrize(("group_version", "kind"), KINDS, ids=[kind for _, kind in KINDS])
def test_the_served_schema_has_the_crds_cel_rules_and_no_other(group_version: str, kind: str) -> None:
    group, _, version = group_version.rpartition("/")
    schema = structural_schema(group, version, kind)
    assert schema is not None
    assert sorted(served_rules(schema)) == sorted(UPSTREAM.get((group_version, kind), []))


def test_the_data_file_lists_rules_of_the_kinds_it_lists() -> None:
    assert set(UPSTREAM) <= set(KINDS)
    assert len([r for rules in UPSTREAM.values() for r in rules]) >= 40


# --- one case per rule, over HTTP -------------------------------------------------------------


def failed(field: str, shown: str, message: str) -> dict[str, str]:
    return {"reason": "FieldValueInvalid", "message": f'Invalid value: "{shown}": {message}', "field": field}


def _tmpl() -> Obj:
    return {
        "spec": {
            "template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "c:1"}]}}
        }
    }


def _jobset_spec(**fields: Any) -> Obj:
    spec = {"replicatedJobs": [{"name": "a", "template": _tmpl()}, {"name": "b", "template": _tmpl()}]}
    return {**spec, **fields}


def _ray_cluster(**spec: Any) -> Obj:
    template = {"spec": {"containers": [{"name": "ray-head", "image": "rayproject/ray:2.9.0"}]}}
    return {
        "apiVersion": "ray.io/v1",
        "kind": "RayCluster",
        "metadata": {"name": "rc", "namespace": "default"},
        "spec": {"headGroupSpec": {"rayStartParams": {}, "template": template}, **spec},
    }


def _ray_job_with_cluster(**cluster: Any) -> Obj:
    """A RayJob whose cluster template has ``cluster``'s fields."""
    return ray_job(rayClusterSpec={k: v for k, v in _ray_cluster(**cluster)["spec"].items()})


def _with(obj: Obj, change: Callable[[Obj], None]) -> Obj:
    out = copy.deepcopy(obj)
    change(out)
    return out


_DEPENDS = [{"name": "a", "status": "Ready"}]
_MULTIKUEUE = "kueue.x-k8s.io/multikueue"
_KUBERAY = "ray.io/kuberay-operator"
_RAY_MANAGED_BY = (
    "the managedBy field value must be either 'ray.io/kuberay-operator' or 'kueue.x-k8s.io/multikueue'"
)
_PATCH_SPEC = (
    "spec.runtimePatches[0].trainingRuntimeSpec.template.spec.replicatedJobs[0].template.spec.template.spec"
)


def _pod_patch(**fields: Any) -> Obj:
    """A TrainJob's runtime patch of one replicated job's pod spec."""
    pod = {"spec": {"template": {"spec": fields}}}
    return {
        "runtimeRef": {"name": "torch"},
        "runtimePatches": [
            {
                "manager": "kueue.x-k8s.io/manager",
                "trainingRuntimeSpec": {
                    "template": {"spec": {"replicatedJobs": [{"name": "node", "template": pod}]}}
                },
            }
        ],
    }


def _js(**fields: Any) -> Obj:
    return {**jobset(1), "spec": _jobset_spec(**fields)}


#: (collection, the object created, None or what an update changes, the cause) per rule.
CASES: list[tuple[str, Obj, Callable[[Obj], None] | None, dict[str, str]]] = [
    # JobSet (jobset_types.go)
    (
        JOBSETS,
        _js(
            startupPolicy={"startupPolicyOrder": "InOrder"},
            replicatedJobs=[
                {"name": "a", "template": _tmpl()},
                {"name": "b", "template": _tmpl(), "dependsOn": _DEPENDS},
            ],
        ),
        None,
        failed("spec", "object", "StartupPolicy and DependsOn APIs are mutually exclusive"),
    ),
    (
        JOBSETS,
        _js(network={"enableDNSHostnames": True}),
        lambda o: o["spec"]["network"].update(enableDNSHostnames=False),
        failed("spec.network", "object", "Value is immutable"),
    ),
    (
        JOBSETS,
        _js(successPolicy={"operator": "All"}),
        lambda o: o["spec"]["successPolicy"].update(operator="Any"),
        failed("spec.successPolicy", "object", "Value is immutable"),
    ),
    (
        JOBSETS,
        _js(failurePolicy={"maxRestarts": 1}),
        lambda o: o["spec"]["failurePolicy"].update(maxRestarts=2),
        failed("spec.failurePolicy", "object", "Value is immutable"),
    ),
    (
        JOBSETS,
        _js(startupPolicy={"startupPolicyOrder": "AnyOrder"}),
        lambda o: o["spec"]["startupPolicy"].update(startupPolicyOrder="InOrder"),
        failed("spec.startupPolicy", "object", "Value is immutable"),
    ),
    (
        JOBSETS,
        _js(
            replicatedJobs=[
                {"name": "a", "template": _tmpl()},
                {"name": "b", "template": _tmpl(), "dependsOn": _DEPENDS},
            ]
        ),
        lambda o: o["spec"]["replicatedJobs"][1]["dependsOn"][0].update(status="Complete"),
        failed("spec.replicatedJobs[1].dependsOn", "array", "Value is immutable"),
    ),
    # RayCluster and RayJob (raycluster_types.go, rayjob_types.go)
    (
        RAYCLUSTERS,
        _ray_cluster(managedBy="someone"),
        None,
        failed("spec.managedBy", "string", _RAY_MANAGED_BY),
    ),
    (
        RAYCLUSTERS,
        _ray_cluster(managedBy=_KUBERAY),
        lambda o: o["spec"].update(managedBy=_MULTIKUEUE),
        failed("spec.managedBy", "string", "the managedBy field is immutable"),
    ),
    (RAYJOBS, ray_job(managedBy="someone"), None, failed("spec.managedBy", "string", _RAY_MANAGED_BY)),
    (
        RAYJOBS,
        ray_job(managedBy=_MULTIKUEUE),
        lambda o: o["spec"].update(managedBy=_KUBERAY),
        failed("spec.managedBy", "string", "the managedBy field is immutable"),
    ),
    (
        RAYJOBS,
        _ray_job_with_cluster(managedBy="someone"),
        None,
        failed("spec.rayClusterSpec.managedBy", "string", _RAY_MANAGED_BY),
    ),
    (
        RAYJOBS,
        _ray_job_with_cluster(managedBy=_KUBERAY),
        lambda o: o["spec"]["rayClusterSpec"].update(managedBy=_MULTIKUEUE),
        failed("spec.rayClusterSpec.managedBy", "string", "the managedBy field is immutable"),
    ),
    (
        RAYJOBS,
        ray_job(deletionPolicy="DeleteAll"),
        None,
        failed(
            "spec.deletionPolicy",
            "string",
            "the deletionPolicy field value must be either 'DeleteCluster', "
            "'DeleteWorkers', 'DeleteSelf', or 'DeleteNone'",
        ),
    ),
    # The runtimes (trainingruntime_types.go; a template's JobSet spec has JobSet's rules)
    (
        CLUSTER_RUNTIMES,
        _with(cluster_runtime(), lambda o: o["spec"]["mlPolicy"].update(torch={}, mpi={})),
        None,
        failed("spec.mlPolicy", "object", "Only one of the policy can be configured"),
    ),
    (
        CLUSTER_RUNTIMES,
        _with(cluster_runtime(), lambda o: o["spec"]["mlPolicy"].update(torch={"numProcPerNode": 0})),
        None,
        failed(
            "spec.mlPolicy.torch.numProcPerNode",
            "",
            "NumProcPerNode must be equal to auto, cpu, gpu, or int value",
        ),
    ),
    (
        CLUSTER_RUNTIMES,
        _with(cluster_runtime(), lambda o: o["spec"]["mlPolicy"].update(torch={"numProcPerNode": "tpu"})),
        None,
        failed(
            "spec.mlPolicy.torch.numProcPerNode",
            "",
            "'no such overload': call arguments did not match a supported "
            "operator, function or macro signature for rule: NumProcPerNode must be equal to auto, cpu, gpu, or "
            "int value",
        ),
    ),
    (
        CLUSTER_RUNTIMES,
        _with(
            cluster_runtime(),
            lambda o: o["spec"].update(template={"spec": _jobset_spec(network={"enableDNSHostnames": True})}),
        ),
        lambda o: o["spec"]["template"]["spec"]["network"].update(enableDNSHostnames=False),
        failed("spec.template.spec.network", "object", "Value is immutable"),
    ),
    # TrainJob (trainjob_types.go)
    (
        TRAINJOBS,
        _with(trainjob({"runtimeRef": {"name": "torch"}}), lambda o: o["metadata"].update(name="1tj")),
        None,
        failed("<nil>", "object", "metadata.name must match RFC 1035 DNS label format"),
    ),
    (
        TRAINJOBS,
        _with(trainjob({"runtimeRef": {"name": "torch"}}), lambda o: o["metadata"].update(name="t" * 64)),
        None,
        failed("<nil>", "object", "metadata.name must be no more than 63 characters"),
    ),
    (
        TRAINJOBS,
        trainjob({"runtimeRef": {"name": "torch"}, "activeDeadlineSeconds": 60}),
        lambda o: o["spec"].update(activeDeadlineSeconds=120),
        failed("spec.activeDeadlineSeconds", "integer", "field is immutable"),
    ),
    (
        TRAINJOBS,
        trainjob({"runtimeRef": {"name": "torch"}, "initializer": {"model": {"storageUri": "hf://m"}}}),
        lambda o: o["spec"]["initializer"]["model"].update(storageUri="hf://n"),
        failed("spec.initializer", "object", "field is immutable"),
    ),
    (
        TRAINJOBS,
        trainjob({"runtimeRef": {"name": "torch"}, "runtimePatches": [{"manager": "a.io/m"}]}),
        lambda o: o["spec"]["runtimePatches"][0].update(manager="b.io/m"),
        None,
    ),
    *[
        (
            TRAINJOBS,
            trainjob(_pod_patch(**{name: value})),
            lambda o, name=name, other=other: o["spec"]["runtimePatches"][0]["trainingRuntimeSpec"][
                "template"
            ]["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"].update({name: other}),
            failed(f"{_PATCH_SPEC}.{name}", shown, "field is immutable"),
        )
        for name, value, other, shown in (
            ("serviceAccountName", "a", "b", "string"),
            ("volumes", [{"name": "v", "emptyDir": {}}], [{"name": "w", "emptyDir": {}}], "array"),
            ("initContainers", [{"name": "i"}], [{"name": "j"}], "array"),
            (
                "containers",
                [{"name": "node"}],
                [{"name": "node", "env": [{"name": "A", "value": "1"}]}],
                "array",
            ),
            ("imagePullSecrets", [{"name": "s"}], [{"name": "t"}], "array"),
            ("securityContext", {"runAsUser": 1}, {"runAsUser": 2}, "object"),
        )
    ],
]


def _case_id(case: tuple[str, Obj, Any, dict[str, str] | None]) -> str:
    _, obj, update, cause = case
    where = cause["field"] if cause else "runtimePatches-manager"
    return f"{obj['kind']}:{where}:{'update' if update else 'create'}:{re.sub(r'[^a-z]+', '-', (cause or {}).get('message', '')[17:40].lower())}"


@pytest.mark.parametrize(("collection", "obj", "update", "cause"), CASES, ids=[_case_id(c) for c in CASES])
async def test_each_rule_refuses_in_kubes_words(
    served: Served,  # noqa: F811
    collection: str,
    obj: Obj,
    update: Callable[[Obj], None] | None,
    cause: dict[str, str] | None,
) -> None:
    client, _ = served
    if obj["kind"] == "TrainJob":
        await runtime_stored(client)
    name = obj["metadata"]["name"]
    if update is None:
        response = await client.post(collection, json=obj)
        assert (await client.get(f"{collection}/{name}")).status == 404
    else:
        stored = await ok(await client.post(collection, json=obj), 201)
        update(stored)
        response = await client.put(f"{collection}/{name}", json=stored)
    body = await response.json()
    if cause is None:  # a runtime patch's manager: the list is a map keyed by it, so a new key is a new item
        assert response.status == 200, body
        return
    assert response.status == 422, body
    assert body["reason"] == "Invalid"
    assert body["details"]["causes"] == [cause]


async def test_a_transition_rule_holds_where_the_stored_object_lacks_the_field(served: Served) -> None:  # noqa: F811
    """kube runs ``self == oldSelf`` only where the old object has the field: setting a JobSet's
    network on an update is taken, changing it afterwards is not."""
    client, _ = served
    stored = await ok(await client.post(JOBSETS, json=_js()), 201)
    stored["spec"]["network"] = {"enableDNSHostnames": True}
    stored = await ok(await client.put(f"{JOBSETS}/js", json=stored), 200)
    stored["spec"]["network"] = {"enableDNSHostnames": False}
    refused = await client.put(f"{JOBSETS}/js", json=stored)
    assert refused.status == 422
    assert (await refused.json())["details"]["causes"] == [
        failed("spec.network", "object", "Value is immutable")
    ]


async def test_a_status_write_keeps_the_rules_of_the_status(served: Served) -> None:  # noqa: F811
    """A TrainJob's ``status.trainerStatus`` needs its ``lastUpdatedTime`` (the CRD's rule), on the
    status subresource; the stored spec's rules hold there (its transition rules see it unchanged)."""
    client, _ = served
    await runtime_stored(client)
    job = await ok(await client.post(TRAINJOBS, json=trainjob({"runtimeRef": {"name": "torch"}})), 201)
    job["status"] = {"trainerStatus": {"progressPercentage": 50}}
    refused = await client.put(f"{TRAINJOBS}/tj/status", json=job)
    assert refused.status == 422
    assert (await refused.json())["details"]["causes"] == [
        failed("status.trainerStatus", "object", "lastUpdatedTime is required when trainerStatus is present")
    ]
    job["status"]["trainerStatus"]["lastUpdatedTime"] = "2026-01-01T00:00:00Z"
    await ok(await client.put(f"{TRAINJOBS}/tj/status", json=job), 200)
