"""Server-side apply: merge, pruning of omitted fields, shared ownership, conflicts, force.

Expected managedFields are written out in Kubernetes' FieldsV1 format, the form
``kubectl get -o yaml --show-managed-fields`` prints.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest

from controlplane.apiserver.patching import ApplyConflict, ApplyError

from .builders import make_object, record_update, server_side_apply

T1, T2, T3 = "2024-05-01T10:00:00Z", "2024-05-01T11:00:00Z", "2024-05-01T12:00:00Z"
LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"


def container(name: str, image: str, **extra: Any) -> dict[str, Any]:
    return {"name": name, "image": image, **extra}


def manifest(
    *,
    replicas: int | None = 2,
    containers: list[dict[str, Any]] | None = None,
    labels: dict[str, str] | None = None,
    **pod: Any,
) -> dict[str, Any]:
    """A Deployment as a user writes it."""
    spec: dict[str, Any] = {
        "selector": {"matchLabels": {"app": "web"}},
        "template": {
            "metadata": {"labels": {"app": "web"}},
            "spec": {"containers": containers if containers is not None else [container("a", "a:1")], **pod},
        },
    }
    if replicas is not None:
        spec["replicas"] = replicas
    metadata = {"labels": labels} if labels is not None else {}
    return make_object("Deployment", "web", metadata=metadata, spec=spec)


def partial(**spec: Any) -> dict[str, Any]:
    """A Deployment configuration that sets only the given spec fields (what a controller applies)."""
    return make_object("Deployment", "web", spec=spec)


def entries(obj: dict[str, Any]) -> list[dict[str, Any]]:
    result: list[dict[str, Any]] = obj["metadata"].get("managedFields", [])
    return result


def fields_of(obj: dict[str, Any], manager: str, operation: str = "Apply") -> dict[str, Any]:
    found = [e for e in entries(obj) if e["manager"] == manager and e["operation"] == operation]
    assert len(found) == 1, f"expected one {operation} entry for {manager}, got {entries(obj)}"
    result: dict[str, Any] = found[0]["fieldsV1"]
    return result


def without_managed_fields(obj: dict[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(obj)
    out["metadata"].pop("managedFields", None)
    return out


def apply(
    live: dict[str, Any] | None, config: dict[str, Any], manager: str, now: str = T1, force: bool = False
) -> dict[str, Any]:
    return server_side_apply(live, config, manager=manager, force=force, now=now)


CONTAINER_A = 'k:{"name":"a"}'


def test_create_records_an_apply_entry_in_fieldsv1() -> None:
    config = manifest(
        labels={"app": "web"}, containers=[container("a", "a:1", ports=[{"containerPort": 80}])]
    )

    created = apply(None, config, "kubectl")

    assert without_managed_fields(created) == config
    assert entries(created) == [
        {
            "manager": "kubectl",
            "operation": "Apply",
            "apiVersion": "apps/v1",
            "time": T1,
            "fieldsType": "FieldsV1",
            "fieldsV1": {
                "f:metadata": {"f:labels": {"f:app": {}}},
                "f:spec": {
                    "f:replicas": {},
                    "f:selector": {},
                    "f:template": {
                        "f:metadata": {"f:labels": {"f:app": {}}},
                        "f:spec": {
                            "f:containers": {
                                CONTAINER_A: {
                                    ".": {},
                                    "f:image": {},
                                    "f:name": {},
                                    "f:ports": {
                                        'k:{"containerPort":80,"protocol":"TCP"}': {
                                            ".": {},
                                            "f:containerPort": {},
                                        }
                                    },
                                }
                            }
                        },
                    },
                },
            },
        }
    ]


def test_system_metadata_and_status_from_the_configuration_are_neither_applied_nor_owned() -> None:
    live = apply(None, manifest(), "kubectl")
    live["metadata"].update(uid="u-1", resourceVersion="7", generation=1, creationTimestamp=T1)
    live["status"] = {"replicas": 2}
    config = manifest()
    config["metadata"].update(
        uid="other",
        resourceVersion="3",
        generation=9,
        creationTimestamp=T3,
        managedFields=[{"manager": "forged", "operation": "Apply", "fieldsType": "FieldsV1", "fieldsV1": {}}],
    )
    config["status"] = {"replicas": 99}

    result = apply(live, config, "kubectl", now=T2)

    assert {
        k: result["metadata"][k] for k in ("uid", "resourceVersion", "generation", "creationTimestamp")
    } == {
        "uid": "u-1",
        "resourceVersion": "7",
        "generation": 1,
        "creationTimestamp": T1,
    }
    assert result["status"] == {"replicas": 2}
    assert [e["manager"] for e in entries(result)] == ["kubectl"]
    owned = fields_of(result, "kubectl")
    assert set(owned) == {"f:spec"}, "no metadata (the configuration sets no labels) and no status"


@dataclass(frozen=True)
class Omission:
    id: str
    first: dict[str, Any]
    second: dict[str, Any]
    check: Callable[[dict[str, Any]], bool]


OMISSIONS = [
    Omission(
        "a label",
        manifest(labels={"app": "web", "tier": "gpu"}),
        manifest(labels={"app": "web"}),
        lambda obj: obj["metadata"]["labels"] == {"app": "web"},
    ),
    Omission(
        "all labels",
        manifest(labels={"app": "web"}),
        manifest(),
        lambda obj: "labels" not in obj["metadata"],
    ),
    Omission(
        "a scalar",
        manifest(replicas=3),
        manifest(replicas=None),
        lambda obj: "replicas" not in obj["spec"],
    ),
    Omission(
        "a container",
        manifest(containers=[container("a", "a:1"), container("b", "b:1")]),
        manifest(containers=[container("a", "a:1")]),
        lambda obj: [c["name"] for c in obj["spec"]["template"]["spec"]["containers"]] == ["a"],
    ),
    Omission(
        "an env var of a container",
        manifest(
            containers=[container("a", "a:1", env=[{"name": "X", "value": "1"}, {"name": "Y", "value": "2"}])]
        ),
        manifest(containers=[container("a", "a:1", env=[{"name": "X", "value": "1"}])]),
        lambda obj: obj["spec"]["template"]["spec"]["containers"][0]["env"] == [{"name": "X", "value": "1"}],
    ),
    Omission(
        "a nested object",
        manifest(containers=[container("a", "a:1", resources={"limits": {"nvidia.com/gpu": "1"}})]),
        manifest(containers=[container("a", "a:1")]),
        lambda obj: obj["spec"]["template"]["spec"]["containers"][0] == container("a", "a:1"),
    ),
    Omission(
        "a finalizer",
        make_object("ConfigMap", "c", metadata={"finalizers": ["x", "y"]}),
        make_object("ConfigMap", "c", metadata={"finalizers": ["y"]}),
        lambda obj: obj["metadata"]["finalizers"] == ["y"],
    ),
    Omission(
        "a ConfigMap key",
        make_object("ConfigMap", "c", data={"a": "1", "b": "2"}),
        make_object("ConfigMap", "c", data={"a": "1"}),
        lambda obj: obj["data"] == {"a": "1"},
    ),
]


@pytest.mark.parametrize("case", OMISSIONS, ids=[c.id for c in OMISSIONS])
def test_reapply_by_the_same_manager_removes_what_it_omits(case: Omission) -> None:
    first = apply(None, case.first, "kubectl")
    assert not case.check(first), "the first configuration must contain the field"

    second = apply(first, case.second, "kubectl", now=T2)

    assert case.check(second)
    assert without_managed_fields(second) == case.second
    assert entries(second)[0]["time"] == T2
    assert entries(apply(None, case.second, "kubectl")) == [{**entries(second)[0], "time": T1}], (
        "the manager must own exactly what its second configuration sets"
    )


def test_omitted_field_stays_while_another_manager_also_owns_it() -> None:
    live = apply(None, manifest(replicas=2, labels={"app": "web"}), "kubectl")
    live = apply(live, partial(replicas=2), "autoscaler", now=T2)

    result = apply(live, manifest(replicas=None, labels={"app": "web"}), "kubectl", now=T3)

    assert result["spec"]["replicas"] == 2
    assert "f:replicas" not in fields_of(result, "kubectl")["f:spec"]
    assert fields_of(result, "autoscaler") == {"f:spec": {"f:replicas": {}}}


def test_two_managers_applying_the_same_value_share_the_field() -> None:
    live = apply(None, manifest(labels={"app": "web", "team": "ml"}), "kubectl")

    result = apply(
        live, make_object("Deployment", "web", metadata={"labels": {"team": "ml"}}), "labeler", now=T2
    )

    assert result["metadata"]["labels"] == {"app": "web", "team": "ml"}
    assert fields_of(result, "labeler") == {"f:metadata": {"f:labels": {"f:team": {}}}}
    assert "f:team" in fields_of(result, "kubectl")["f:metadata"]["f:labels"]


@dataclass(frozen=True)
class Owner:
    id: str
    make_live: Callable[[], dict[str, Any]]
    message: str


OWNERS = [
    Owner(
        "an applier",
        lambda: apply(None, manifest(replicas=2), "kubectl"),
        'Apply failed with 1 conflict: conflict with "kubectl": .spec.replicas',
    ),
    Owner(
        "client-side apply (an updater)",
        lambda: record_update(
            None, manifest(replicas=2), manager="kubectl-client-side-apply", operation="Update", now=T1
        ),
        'Apply failed with 1 conflict: conflict with "kubectl-client-side-apply" using apps/v1: .spec.replicas',
    ),
]


@pytest.mark.parametrize("owner", OWNERS, ids=[o.id for o in OWNERS])
def test_changing_a_field_another_manager_owns_is_a_conflict(owner: Owner) -> None:
    live = owner.make_live()
    before = copy.deepcopy(live)

    with pytest.raises(ApplyConflict) as caught:
        apply(live, partial(replicas=5), "autoscaler", now=T2)

    assert str(caught.value) == owner.message
    manager = owner.message.split('"')[1]
    assert caught.value.conflicts == [(".spec.replicas", manager)]
    assert caught.value.causes == [
        {"type": "FieldManagerConflict", "message": owner.message.split(": ")[1], "field": ".spec.replicas"}
    ]
    assert live == before, "a refused apply must not change anything"


def test_several_conflicts_are_listed_per_manager() -> None:
    live = apply(None, manifest(replicas=2, containers=[container("a", "a:1")]), "kubectl")
    live = record_update(
        live,
        {**live, "metadata": {**live["metadata"], "labels": {"owner": "ops"}}},
        manager="ops",
        operation="Update",
        now=T2,
    )
    config = make_object(
        "Deployment",
        "web",
        metadata={"labels": {"owner": "ml"}},
        spec={"replicas": 4, "template": {"spec": {"containers": [container("a", "a:2")]}}},
    )

    with pytest.raises(ApplyConflict) as caught:
        apply(live, config, "other", now=T3)

    assert str(caught.value) == (
        "Apply failed with 3 conflicts: "
        'conflicts with "kubectl":\n'
        "- .spec.replicas\n"
        '- .spec.template.spec.containers[name="a"].image\n'
        'conflicts with "ops" using apps/v1:\n'
        "- .metadata.labels.owner"
    )
    assert sorted(caught.value.conflicts) == [
        (".metadata.labels.owner", "ops"),
        (".spec.replicas", "kubectl"),
        ('.spec.template.spec.containers[name="a"].image', "kubectl"),
    ]


def test_force_takes_the_field_from_its_owner() -> None:
    live = apply(None, manifest(replicas=2, labels={"app": "web"}), "kubectl")

    result = apply(live, partial(replicas=5), "autoscaler", now=T2, force=True)

    assert result["spec"]["replicas"] == 5
    assert fields_of(result, "autoscaler") == {"f:spec": {"f:replicas": {}}}
    assert "f:replicas" not in fields_of(result, "kubectl")["f:spec"]
    assert fields_of(result, "kubectl")["f:metadata"] == {"f:labels": {"f:app": {}}}


def test_force_drops_an_entry_left_owning_nothing() -> None:
    live = apply(None, partial(replicas=2), "first")

    result = apply(live, partial(replicas=5), "second", now=T2, force=True)

    assert [e["manager"] for e in entries(result)] == ["second"]


def test_associative_list_items_are_owned_per_key() -> None:
    live = apply(None, manifest(containers=[container("a", "a:1")]), "kubectl")
    sidecar = make_object(
        "Deployment", "web", spec={"template": {"spec": {"containers": [container("proxy", "p:1")]}}}
    )
    live = apply(live, sidecar, "mesh", now=T2)

    assert [c["name"] for c in live["spec"]["template"]["spec"]["containers"]] == ["a", "proxy"]
    assert fields_of(live, "mesh") == {
        "f:spec": {
            "f:template": {
                "f:spec": {"f:containers": {'k:{"name":"proxy"}': {".": {}, "f:image": {}, "f:name": {}}}}
            }
        }
    }
    with pytest.raises(
        ApplyConflict, match=r'conflict with "kubectl": \.spec\.template\.spec\.containers\[name="a"\]\.image'
    ):
        apply(
            live,
            make_object(
                "Deployment", "web", spec={"template": {"spec": {"containers": [container("a", "a:2")]}}}
            ),
            "mesh",
        )

    result = apply(live, manifest(containers=[container("b", "b:1")]), "kubectl", now=T3)

    assert [c["name"] for c in result["spec"]["template"]["spec"]["containers"]] == ["proxy", "b"]
    assert fields_of(result, "mesh") == fields_of(live, "mesh")


def test_empty_objects_are_owned_so_a_volume_can_switch_source() -> None:
    live = apply(None, manifest(volumes=[{"name": "v", "emptyDir": {}}]), "kubectl")
    volume = fields_of(live, "kubectl")["f:spec"]["f:template"]["f:spec"]["f:volumes"]['k:{"name":"v"}']
    assert volume == {".": {}, "f:emptyDir": {}, "f:name": {}}

    result = apply(live, manifest(volumes=[{"name": "v", "configMap": {"name": "cm"}}]), "kubectl", now=T2)

    assert result["spec"]["template"]["spec"]["volumes"] == [{"name": "v", "configMap": {"name": "cm"}}]


def test_ports_are_keyed_by_port_and_protocol() -> None:
    ports = [{"containerPort": 53, "protocol": "UDP"}, {"containerPort": 53}]

    created = apply(None, manifest(containers=[container("a", "a:1", ports=ports)]), "kubectl")

    owned = fields_of(created, "kubectl")["f:spec"]["f:template"]["f:spec"]["f:containers"][CONTAINER_A][
        "f:ports"
    ]
    assert owned == {
        'k:{"containerPort":53,"protocol":"TCP"}': {".": {}, "f:containerPort": {}},
        'k:{"containerPort":53,"protocol":"UDP"}': {".": {}, "f:containerPort": {}, "f:protocol": {}},
    }


def test_live_only_items_keep_their_place() -> None:
    live = apply(None, manifest(containers=[container("a", "a:1"), container("b", "b:1")]), "kubectl")
    live["spec"]["template"]["spec"]["containers"].insert(1, container("injected", "i:1"))

    result = apply(
        live, manifest(containers=[container("a", "a:2"), container("b", "b:2")]), "kubectl", now=T2
    )

    assert [(c["name"], c["image"]) for c in result["spec"]["template"]["spec"]["containers"]] == [
        ("a", "a:2"),
        ("injected", "i:1"),
        ("b", "b:2"),
    ]


@dataclass(frozen=True)
class AtomicField:
    id: str
    first: dict[str, Any]
    second: dict[str, Any]
    path: str


ATOMIC = [
    AtomicField(
        "container args",
        make_object(
            "Deployment",
            "web",
            spec={"template": {"spec": {"containers": [container("a", "a:1", args=["--x"])]}}},
        ),
        make_object(
            "Deployment",
            "web",
            spec={"template": {"spec": {"containers": [container("a", "a:1", args=["--y"])]}}},
        ),
        '.spec.template.spec.containers[name="a"].args',
    ),
    AtomicField(
        "tolerations",
        make_object(
            "Deployment",
            "web",
            spec={"template": {"spec": {"tolerations": [{"key": "gpu", "operator": "Exists"}]}}},
        ),
        make_object(
            "Deployment",
            "web",
            spec={"template": {"spec": {"tolerations": [{"key": "spot", "operator": "Exists"}]}}},
        ),
        ".spec.template.spec.tolerations",
    ),
    AtomicField(
        "the selector (an atomic object)",
        make_object("Deployment", "web", spec={"selector": {"matchLabels": {"app": "web"}}}),
        make_object("Deployment", "web", spec={"selector": {"matchLabels": {"app": "other"}}}),
        ".spec.selector",
    ),
    AtomicField(
        "a list of a kind without merge keys",
        {
            "apiVersion": "policy.gpufed.io/v1alpha1",
            "kind": "PropagationPolicy",
            "metadata": {"name": "p", "namespace": "default"},
            "spec": {"resourceSelectors": [{"kind": "Deployment", "name": "a"}]},
        },
        {
            "apiVersion": "policy.gpufed.io/v1alpha1",
            "kind": "PropagationPolicy",
            "metadata": {"name": "p", "namespace": "default"},
            "spec": {"resourceSelectors": [{"kind": "Deployment", "name": "b"}]},
        },
        ".spec.resourceSelectors",
    ),
]


@pytest.mark.parametrize("case", ATOMIC, ids=[c.id for c in ATOMIC])
def test_atomic_values_are_owned_and_replaced_whole(case: AtomicField) -> None:
    live = apply(None, case.first, "first")
    owned = json.dumps(fields_of(live, "first"))
    leaf = case.path.rsplit(".", 1)[1]
    assert f'"f:{leaf}": {{}}' in owned, "an atomic value is one owned leaf"

    with pytest.raises(ApplyConflict) as caught:
        apply(live, case.second, "second", now=T2)
    assert caught.value.conflicts == [(case.path, "first")]

    forced = apply(live, case.second, "second", now=T2, force=True)
    assert without_managed_fields(forced) == case.second


def test_set_lists_own_each_value() -> None:
    live = apply(None, make_object("ConfigMap", "c", metadata={"finalizers": ["gpufed.io/a"]}), "first")
    live = apply(
        live, make_object("ConfigMap", "c", metadata={"finalizers": ["gpufed.io/b"]}), "second", now=T2
    )

    assert live["metadata"]["finalizers"] == ["gpufed.io/a", "gpufed.io/b"]
    assert fields_of(live, "second") == {"f:metadata": {"f:finalizers": {'v:"gpufed.io/b"': {}}}}

    result = apply(live, make_object("ConfigMap", "c"), "first", now=T3)

    assert result["metadata"]["finalizers"] == ["gpufed.io/b"]


def test_client_side_apply_then_server_side_apply_shares_fields_without_conflict() -> None:
    config = manifest(replicas=2, labels={"app": "web"})
    created = copy.deepcopy(config)
    created["metadata"]["annotations"] = {LAST_APPLIED: json.dumps(config)}
    live = record_update(None, created, manager="kubectl-client-side-apply", operation="Update", now=T1)

    result = apply(live, config, "kubectl", now=T2)

    assert without_managed_fields(result) == without_managed_fields(live)
    assert [(e["manager"], e["operation"]) for e in entries(result)] == [
        ("kubectl", "Apply"),
        ("kubectl-client-side-apply", "Update"),
    ]
    ssa = fields_of(result, "kubectl")
    csa = fields_of(result, "kubectl-client-side-apply", "Update")
    assert "f:replicas" in ssa["f:spec"] and "f:replicas" in csa["f:spec"]
    assert csa["f:metadata"]["f:annotations"] == {".": {}, f"f:{LAST_APPLIED}": {}}

    with pytest.raises(ApplyConflict) as caught:
        apply(result, manifest(replicas=3, labels={"app": "web"}), "kubectl", now=T3)
    assert str(caught.value) == (
        'Apply failed with 1 conflict: conflict with "kubectl-client-side-apply" using apps/v1: .spec.replicas'
    )


def test_reapplying_the_same_configuration_changes_nothing() -> None:
    live = apply(None, manifest(), "kubectl")

    again = apply(live, manifest(), "kubectl", now=T3)

    assert again == live


def test_null_in_the_configuration_removes_the_field() -> None:
    live = apply(None, manifest(labels={"app": "web", "tmp": "1"}), "kubectl")
    config = manifest(labels={"app": "web"})
    config["metadata"]["labels"]["tmp"] = None

    result = apply(live, config, "kubectl", now=T2)

    assert result["metadata"]["labels"] == {"app": "web"}


def test_inputs_are_not_modified() -> None:
    live = apply(None, manifest(containers=[container("a", "a:1"), container("b", "b:1")]), "kubectl")
    config = manifest(containers=[container("a", "a:2")])
    live_before, config_before = copy.deepcopy(live), copy.deepcopy(config)

    apply(live, config, "kubectl", now=T2)

    assert live == live_before
    assert config == config_before


def test_unreadable_managed_fields_entries_are_dropped() -> None:
    live = apply(None, manifest(), "kubectl")
    live["metadata"]["managedFields"].append(
        {"manager": "broken", "operation": "Update", "fieldsType": "FieldsV1", "fieldsV1": {"x:oops": {}}}
    )

    result = apply(live, manifest(replicas=3), "kubectl", now=T2)

    assert [e["manager"] for e in entries(result)] == ["kubectl"]


def test_status_subresource_apply_owns_status_only_in_its_own_entry() -> None:
    live = apply(None, manifest(replicas=2), "kubectl")
    live["status"] = {"replicas": 2}
    report = make_object(
        "Deployment",
        "web",
        spec={"replicas": 99},
        status={"readyReplicas": 2, "conditions": [{"type": "Available", "status": "True"}]},
    )

    result = server_side_apply(
        live, report, manager="gpufed-status", force=False, now=T2, subresource="status"
    )

    assert result["spec"] == live["spec"]
    assert result["status"] == {
        "replicas": 2,
        "readyReplicas": 2,
        "conditions": [{"type": "Available", "status": "True"}],
    }
    entry = next(e for e in entries(result) if e["manager"] == "gpufed-status")
    assert entry == {
        "manager": "gpufed-status",
        "operation": "Apply",
        "apiVersion": "apps/v1",
        "time": T2,
        "fieldsType": "FieldsV1",
        "fieldsV1": {
            "f:status": {
                "f:conditions": {'k:{"type":"Available"}': {".": {}, "f:status": {}, "f:type": {}}},
                "f:readyReplicas": {},
            }
        },
        "subresource": "status",
    }
    assert fields_of(result, "kubectl") == fields_of(live, "kubectl")


@dataclass(frozen=True)
class Invalid:
    id: str
    live: dict[str, Any] | None
    config: dict[str, Any]
    message: str
    subresource: str | None = None
    manager: str = "kubectl"


INVALID = [
    Invalid(
        "list item without its key",
        None,
        manifest(containers=[{"image": "x"}]),
        ".spec.template.spec.containers: element 0: associative list with keys has an element that omits "
        'key field "name" (and doesn\'t have default value)',
    ),
    Invalid(
        "duplicate keys",
        None,
        manifest(containers=[container("a", "a:1"), container("a", "a:2")]),
        '.spec.template.spec.containers: duplicate entries for key [name="a"]',
    ),
    Invalid(
        "objects in a set list",
        None,
        make_object("ConfigMap", "c", metadata={"finalizers": [{"name": "x"}]}),
        ".metadata.finalizers: element 0: associative list without keys has an element that's a map type",
    ),
    Invalid(
        "creating through the status subresource",
        None,
        make_object("Deployment", "web", status={"replicas": 1}),
        "cannot create an object through the status subresource",
        subresource="status",
    ),
    Invalid("no field manager", None, manifest(), "needs a field manager", manager=""),
]


@pytest.mark.parametrize("case", INVALID, ids=[c.id for c in INVALID])
def test_invalid_configurations_are_refused(case: Invalid) -> None:
    with pytest.raises(ApplyError) as caught:
        server_side_apply(
            case.live, case.config, manager=case.manager, force=False, now=T1, subresource=case.subresource
        )

    assert case.message in str(caught.value)
