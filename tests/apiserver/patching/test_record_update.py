"""Field ownership of ordinary writes (operation Update), status subresource entries included."""

from __future__ import annotations

import copy
import re
from typing import Any

import pytest

from controlplane.apiserver.patching import ApplyConflict

from .builders import make_object, record_update, server_side_apply

T1, T2, T3 = "2024-05-01T10:00:00Z", "2024-05-01T11:00:00Z", "2024-05-01T12:00:00Z"


def deployment(replicas: int = 2, labels: dict[str, str] | None = None, **extra: Any) -> dict[str, Any]:
    metadata = {"labels": labels} if labels is not None else {}
    spec = {
        "replicas": replicas,
        "template": {"spec": {"containers": [{"name": "a", "image": "a:1"}]}},
    }
    return make_object("Deployment", "web", metadata=metadata, spec=spec, **extra)


def entries(obj: dict[str, Any]) -> list[dict[str, Any]]:
    result: list[dict[str, Any]] = obj["metadata"].get("managedFields", [])
    return result


def entry(
    obj: dict[str, Any], manager: str, operation: str = "Update", subresource: str | None = None
) -> dict[str, Any]:
    found = [
        e
        for e in entries(obj)
        if e["manager"] == manager and e["operation"] == operation and e.get("subresource") == subresource
    ]
    assert len(found) == 1, f"expected one entry for {manager}: {entries(obj)}"
    return found[0]


def edited(obj: dict[str, Any], **changes: Any) -> dict[str, Any]:
    """``obj`` as a client sends it back after changing top-level spec fields or labels."""
    out = copy.deepcopy(obj)
    if "labels" in changes:
        labels = changes.pop("labels")
        if labels is None:
            out["metadata"].pop("labels", None)
        else:
            out["metadata"]["labels"] = labels
    out["spec"].update(changes)
    return out


def test_create_owns_every_field_it_sets() -> None:
    config_map = make_object("ConfigMap", "c", metadata={"labels": {"x": "y"}}, data={"a": "1"})

    created = record_update(None, config_map, manager="kubectl-create", operation="Update", now=T1)

    assert entries(created) == [
        {
            "manager": "kubectl-create",
            "operation": "Update",
            "apiVersion": "v1",
            "time": T1,
            "fieldsType": "FieldsV1",
            "fieldsV1": {
                "f:data": {".": {}, "f:a": {}},
                "f:metadata": {"f:labels": {".": {}, "f:x": {}}},
            },
        }
    ]
    created["metadata"].pop("managedFields")
    assert created == config_map


def test_changed_fields_move_to_the_updater() -> None:
    live = server_side_apply(
        None, deployment(replicas=2, labels={"app": "web"}), manager="kubectl", force=False, now=T1
    )

    result = record_update(live, edited(live, replicas=5), manager="kubectl-edit", operation="Update", now=T2)

    assert result["spec"]["replicas"] == 5
    assert entry(result, "kubectl-edit")["fieldsV1"] == {"f:spec": {"f:replicas": {}}}
    assert entry(result, "kubectl-edit")["time"] == T2
    kubectl = entry(result, "kubectl", "Apply")["fieldsV1"]
    assert "f:replicas" not in kubectl["f:spec"]
    assert kubectl["f:metadata"] == {"f:labels": {"f:app": {}}}
    with pytest.raises(
        ApplyConflict, match=re.escape('conflict with "kubectl-edit" using apps/v1: .spec.replicas')
    ):
        server_side_apply(
            result, deployment(replicas=2, labels={"app": "web"}), manager="kubectl", force=False, now=T3
        )


def test_removed_fields_leave_every_manager() -> None:
    live = server_side_apply(
        None, deployment(labels={"app": "web", "tmp": "1"}), manager="kubectl", force=False, now=T1
    )

    result = record_update(
        live, edited(live, labels={"app": "web"}), manager="cleaner", operation="Update", now=T2
    )

    assert entry(result, "kubectl", "Apply")["fieldsV1"]["f:metadata"] == {"f:labels": {"f:app": {}}}
    assert [e["manager"] for e in entries(result)] == ["kubectl"], "a write that only removes owns nothing"


def test_a_write_that_changes_nothing_records_nothing() -> None:
    live = record_update(None, deployment(), manager="creator", operation="Update", now=T1)

    result = record_update(live, copy.deepcopy(live), manager="noop", operation="Update", now=T2)

    assert result == live


def test_the_same_updater_accumulates_in_one_entry() -> None:
    live = record_update(None, deployment(replicas=1), manager="ops", operation="Update", now=T1)
    live = record_update(live, edited(live, replicas=2), manager="other", operation="Update", now=T2)

    result = record_update(
        live, edited(live, labels={"team": "ml"}), manager="ops", operation="Update", now=T3
    )

    ops = entry(result, "ops")
    assert ops["time"] == T3
    assert "f:replicas" not in ops["fieldsV1"]["f:spec"]
    assert ops["fieldsV1"]["f:metadata"] == {"f:labels": {".": {}, "f:team": {}}}
    assert entry(result, "other")["fieldsV1"] == {"f:spec": {"f:replicas": {}}}


def test_updaters_get_one_entry_per_api_version() -> None:
    live = record_update(None, deployment(replicas=1), manager="ops", operation="Update", now=T1)
    newer = edited(live, replicas=2)
    newer["apiVersion"] = "apps/v2"

    result = record_update(live, newer, manager="ops", operation="Update", now=T2)

    assert sorted((e["manager"], e["apiVersion"]) for e in entries(result)) == [
        ("ops", "apps/v1"),
        ("ops", "apps/v2"),
    ]


def test_status_writes_are_tracked_in_a_status_entry() -> None:
    live = record_update(None, deployment(), manager="kubectl", operation="Update", now=T1)
    reported = copy.deepcopy(live)
    reported["status"] = {"readyReplicas": 2, "conditions": [{"type": "Available", "status": "True"}]}
    reported["spec"]["replicas"] = 99  # a status write cannot change the spec; the server resets it

    result = record_update(
        live, reported, manager="gpufed-status", operation="Update", now=T2, subresource="status"
    )

    status_entry = entry(result, "gpufed-status", subresource="status")
    assert status_entry == {
        "manager": "gpufed-status",
        "operation": "Update",
        "apiVersion": "apps/v1",
        "time": T2,
        "fieldsType": "FieldsV1",
        "fieldsV1": {
            "f:status": {
                "f:conditions": {".": {}, 'k:{"type":"Available"}': {".": {}, "f:status": {}, "f:type": {}}},
                "f:readyReplicas": {},
            }
        },
        "subresource": "status",
    }
    assert entry(result, "kubectl") == entry(live, "kubectl")


def test_main_resource_writes_never_own_status() -> None:
    live = record_update(None, deployment(), manager="kubectl", operation="Update", now=T1)
    changed = edited(live, replicas=3)
    changed["status"] = {"replicas": 3}

    result = record_update(live, changed, manager="kubectl-edit", operation="Update", now=T2)

    assert entry(result, "kubectl-edit")["fieldsV1"] == {"f:spec": {"f:replicas": {}}}


def test_conflict_with_a_status_writer_names_the_subresource() -> None:
    live = record_update(None, deployment(), manager="kubectl", operation="Update", now=T1)
    reported = copy.deepcopy(live)
    reported["status"] = {"readyReplicas": 2}
    live = record_update(
        live, reported, manager="kube-controller", operation="Update", now=T2, subresource="status"
    )

    with pytest.raises(ApplyConflict) as caught:
        server_side_apply(
            live,
            make_object("Deployment", "web", status={"readyReplicas": 1}),
            manager="gpufed-status",
            force=False,
            now=T3,
            subresource="status",
        )

    assert str(caught.value) == (
        'Apply failed with 1 conflict: conflict with "kube-controller" with subresource "status" '
        "using apps/v1: .status.readyReplicas"
    )


@pytest.mark.parametrize(
    ("sent", "expected_managers"),
    [
        pytest.param("absent", ["creator", "editor"], id="absent: the stored entries are kept"),
        pytest.param("echoed", ["creator", "editor"], id="sent back unchanged: same as stored"),
        pytest.param("empty", ["editor"], id="empty list: reset, only this write is recorded"),
        pytest.param("custom", ["imported", "editor"], id="non-empty list: used as sent"),
    ],
)
def test_managed_fields_in_the_request(sent: str, expected_managers: list[str]) -> None:
    live = record_update(None, deployment(replicas=1), manager="creator", operation="Update", now=T1)
    request = edited(live, replicas=2)
    if sent == "absent":
        request["metadata"].pop("managedFields")
    elif sent == "empty":
        request["metadata"]["managedFields"] = []
    elif sent == "custom":
        request["metadata"]["managedFields"] = [
            {
                "manager": "imported",
                "operation": "Update",
                "apiVersion": "apps/v1",
                "time": T1,
                "fieldsType": "FieldsV1",
                "fieldsV1": {"f:spec": {"f:template": {}}},
            }
        ]

    result = record_update(live, request, manager="editor", operation="Update", now=T2)

    assert [e["manager"] for e in entries(result)] == expected_managers
    assert entry(result, "editor")["fieldsV1"] == {"f:spec": {"f:replicas": {}}}


def test_entries_are_ordered_appliers_first_then_by_time() -> None:
    live = record_update(None, deployment(replicas=1), manager="zeta", operation="Update", now=T1)
    live = record_update(live, edited(live, labels={"a": "b"}), manager="alpha", operation="Update", now=T2)
    live = server_side_apply(
        live, make_object("Deployment", "web", spec={"paused": True}), manager="applier", force=False, now=T3
    )

    assert [(e["operation"], e["manager"]) for e in entries(live)] == [
        ("Apply", "applier"),
        ("Update", "zeta"),
        ("Update", "alpha"),
    ]


def test_ownership_of_a_removed_object_is_dropped_with_it() -> None:
    with_strategy = deployment()
    with_strategy["spec"]["strategy"] = {"rollingUpdate": {"maxSurge": 1}}
    live = record_update(None, with_strategy, manager="ops", operation="Update", now=T1)
    imported = copy.deepcopy(live)
    imported["metadata"]["managedFields"].append(
        {
            "manager": "cluster-import",
            "operation": "Update",
            "apiVersion": "apps/v1",
            "time": T1,
            "fieldsType": "FieldsV1",
            "fieldsV1": {"f:spec": {"f:strategy": {"f:rollingUpdate": {".": {}, "f:maxSurge": {}}}}},
        }
    )
    without_strategy = copy.deepcopy(imported)
    del without_strategy["spec"]["strategy"]

    result = record_update(imported, without_strategy, manager="ops", operation="Update", now=T2)

    # cluster-import owned nothing but the rollingUpdate (a Deployment's Go object always has a strategy).
    assert [e["manager"] for e in entries(result)] == ["ops"]
    assert "f:strategy" not in entry(result, "ops")["fieldsV1"]["f:spec"]


def widget(**spec: Any) -> dict[str, Any]:
    return {"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w", "namespace": "default"}, "spec": spec}


@pytest.mark.parametrize("old", [None, {}], ids=["create", "create-general-path"])
def test_a_custom_resources_creator_owns_the_objects_it_adds(old: dict[str, Any] | None) -> None:
    """A custom resource is unstructured in kube: the old value lacks every object the write adds,
    so each is owned itself (``.``), nested ones and those inside list items too."""
    created = widget(size="S", nested={"deep": {"x": True}}, items=[{"name": "a", "limits": {"cpu": "1"}}])

    result = record_update(old, created, manager="kubectl-create", operation="Update", now=T1)

    assert entry(result, "kubectl-create")["fieldsV1"] == {
        "f:spec": {
            ".": {},
            "f:items": {},
            "f:nested": {".": {}, "f:deep": {".": {}, "f:x": {}}},
            "f:size": {},
        },
    }


def test_a_custom_resources_writer_owns_an_object_it_adds_and_a_status_it_adds() -> None:
    live = record_update(None, widget(size="S"), manager="creator", operation="Update", now=T1)
    changed = copy.deepcopy(live)
    changed["spec"]["placement"] = {"zone": "a"}
    reported = copy.deepcopy(live)
    reported["status"] = {"phase": "Up"}

    updated = record_update(live, changed, manager="editor", operation="Update", now=T2)
    written = record_update(live, reported, manager="kopf", operation="Update", now=T2, subresource="status")

    assert entry(updated, "editor")["fieldsV1"] == {"f:spec": {"f:placement": {".": {}, "f:zone": {}}}}
    assert entry(updated, "creator")["fieldsV1"] == {"f:spec": {".": {}, "f:size": {}}}
    assert entry(written, "kopf", subresource="status")["fieldsV1"] == {"f:status": {".": {}, "f:phase": {}}}


NGINX = {
    "name": "nginx", "image": "nginx", "imagePullPolicy": "Always", "resources": {},
    "ports": [{"containerPort": 8888, "protocol": "TCP"}],
    "terminationMessagePath": "/dev/termination-log", "terminationMessagePolicy": "File",
}
OWNED_NGINX = {
    ".": {}, "f:image": {}, "f:imagePullPolicy": {}, "f:name": {},
    "f:ports": {".": {}, 'k:{"containerPort":8888,"protocol":"TCP"}': {".": {}, "f:containerPort": {}, "f:protocol": {}}},
    "f:resources": {}, "f:terminationMessagePath": {}, "f:terminationMessagePolicy": {},
}


@pytest.mark.parametrize("old", [None, {}], ids=["create", "create-general-path"])
def test_a_deployments_creator_owns_what_its_go_object_lacked(old: dict[str, Any] | None) -> None:
    """kube compares a built-in kind's write with its Go object, whose structs exist before any
    write and whose lists are null: a Deployment's creator owns ``rollingUpdate`` (a pointer) and
    each container and its ``ports``, not ``spec``, ``strategy``, ``template`` or ``containers``
    (the record of ``kubectl create deployment`` against kube)."""
    defaulted = make_object(
        "Deployment", "web", metadata={"labels": {"app": "web"}},
        spec={
            "progressDeadlineSeconds": 600, "replicas": 1, "revisionHistoryLimit": 10,
            "selector": {"matchLabels": {"app": "web"}},
            "strategy": {"rollingUpdate": {"maxSurge": "25%", "maxUnavailable": "25%"}, "type": "RollingUpdate"},
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {
                    "containers": [NGINX], "dnsPolicy": "ClusterFirst", "restartPolicy": "Always",
                    "schedulerName": "default-scheduler", "securityContext": {}, "terminationGracePeriodSeconds": 30,
                },
            },
        },
        status={},
    )

    result = record_update(old, defaulted, manager="kubectl-create", operation="Update", now=T1)

    assert entry(result, "kubectl-create")["fieldsV1"] == {
        "f:metadata": {"f:labels": {".": {}, "f:app": {}}},
        "f:spec": {
            "f:progressDeadlineSeconds": {}, "f:replicas": {}, "f:revisionHistoryLimit": {}, "f:selector": {},
            "f:strategy": {"f:rollingUpdate": {".": {}, "f:maxSurge": {}, "f:maxUnavailable": {}}, "f:type": {}},
            "f:template": {
                "f:metadata": {"f:labels": {".": {}, "f:app": {}}},
                "f:spec": {
                    "f:containers": {'k:{"name":"nginx"}': OWNED_NGINX},
                    "f:dnsPolicy": {}, "f:restartPolicy": {}, "f:schedulerName": {}, "f:securityContext": {},
                    "f:terminationGracePeriodSeconds": {},
                },
            },
        },
    }


def test_a_built_in_kinds_writer_owns_a_struct_its_go_object_lacked() -> None:
    """An update that adds a pointer struct (``affinity``) owns it; one that fills a struct the
    Go object always has (``strategy``, absent from the stored object) does not own that."""
    live = record_update(None, deployment(), manager="creator", operation="Update", now=T1)
    changed = copy.deepcopy(live)
    changed["spec"]["strategy"] = {"type": "Recreate"}
    changed["spec"]["template"]["spec"]["affinity"] = {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": []}}

    result = record_update(live, changed, manager="editor", operation="Update", now=T2)

    owned = entry(result, "editor")["fieldsV1"]["f:spec"]
    assert owned["f:strategy"] == {"f:type": {}}
    assert owned["f:template"]["f:spec"]["f:affinity"] == {
        ".": {}, "f:nodeAffinity": {".": {}, "f:preferredDuringSchedulingIgnoredDuringExecution": {}},
    }
