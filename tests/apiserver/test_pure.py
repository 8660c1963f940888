"""Pure pieces of the API server, table-driven: selectors, names, columns, the codec,
merge patch, request routing, Accept negotiation, continue tokens."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from controlplane.apis.durations import human_duration
from controlplane.apis.kube.selectors import (
    LabelSelector,
    SelectorError,
    parse_field_selector,
    parse_label_selector,
    scale_status_selector,
)
from controlplane.apiserver import codec
from controlplane.apiserver.errors import NotAcceptable
from controlplane.apiserver.kinds.core import core_resources
from controlplane.apiserver.kinds.workloads import workload_resources
from controlplane.apiserver.negotiation import conversion_asked, response_media
from controlplane.apiserver.objectmeta import name_errors
from controlplane.apiserver.patches import merge_patch
from controlplane.apiserver.podcolumns import pod_status
from controlplane.apiserver.resources import NameRule, Registry
from controlplane.apiserver.routing import parse_request
from controlplane.apiserver.tables import (
    IncludeObject,
    column_definitions,
    row,
    table,
    table_content_type,
    wants_table,
)
from controlplane.storage import KeyValue


@pytest.mark.parametrize(
    ("selector", "labels", "expected"),
    [
        ("app=web", {"app": "web"}, True),
        ("app==web", {"app": "web"}, True),
        ("app=web", {"app": "db"}, False),
        ("app!=web", {}, True),
        ("app!=web", {"app": "web"}, False),
        ("app", {"app": ""}, True),
        ("!app", {"app": "x"}, False),
        ("!app", {}, True),
        ("tier in (a, b)", {"tier": "b"}, True),
        ("tier in (a,b)", {"tier": "c"}, False),
        ("tier notin (a,b)", {}, True),
        ("tier notin (a,b)", {"tier": "a"}, False),
        ("app=web,tier in (a,b),!canary", {"app": "web", "tier": "a"}, True),
        ("app=web,tier in (a,b),!canary", {"app": "web", "tier": "a", "canary": "1"}, False),
        ("gpu.count>2", {"gpu.count": "4"}, True),
        ("gpu.count<2", {"gpu.count": "4"}, False),
        ("example.com/role=gpu", {"example.com/role": "gpu"}, True),
        ("app=", {"app": ""}, True),
        ("", {"anything": "x"}, True),
    ],
)
def test_label_selector_matches(selector: str, labels: dict[str, str], expected: bool) -> None:
    assert parse_label_selector(selector).matches(labels) is expected


@pytest.mark.parametrize("selector", ["app in a", "app in ()", "=x", "a b", "Bad Key=1", "a=b c", "a=(", "app=x!"])
def test_label_selector_rejects_malformed(selector: str) -> None:
    with pytest.raises(SelectorError, match="unable to parse requirement"):
        parse_label_selector(selector)


@pytest.mark.parametrize(
    ("selector", "text"),
    [
        ({"matchLabels": {"b": "2", "a": "1"}}, "a=1,b=2"),
        ({"matchExpressions": [{"key": "t", "operator": "In", "values": ["y", "x"]}]}, "t in (x,y)"),
        ({"matchExpressions": [{"key": "t", "operator": "DoesNotExist"}]}, "!t"),
    ],
)
def test_label_selector_from_dict_round_trips(selector: dict[str, Any], text: str) -> None:
    parsed = LabelSelector.from_dict(selector)
    assert parsed.to_string() == text
    assert parse_label_selector(text) == LabelSelector(tuple(sorted(parsed.requirements, key=lambda r: r.key)))


@pytest.mark.parametrize(
    ("obj", "path", "label_set", "shown"),
    [
        ({"spec": {"selector": {"matchLabels": {"app": "a"}}}}, "spec.selector", False, "app=a"),
        ({"spec": {"selector": {"app": "a", "b": "1"}}}, "spec.selector", True, "app=a,b=1"),
        ({"spec": {"selector": {}}}, "spec.selector", False, ""),
        ({"status": {"hpaPodSelector": "x in (1)"}}, "status.hpaPodSelector", False, "x in (1)"),
        ({"status": {"hpaPodSelector": ""}}, "status.hpaPodSelector", False, None),
        ({"spec": {"selector": {"matchLabels": {"app": "a"}}}}, "", False, None),
        ({"spec": {}}, "spec.selector", False, None),
    ],
)
def test_scale_status_selector(obj: dict[str, Any], path: str, label_set: bool, shown: str | None) -> None:
    assert scale_status_selector(obj, path=path, label_set=label_set) == shown


def test_scale_status_selector_refuses_an_unknown_operator() -> None:
    selector = {"matchExpressions": [{"key": "a", "operator": "Near"}]}
    with pytest.raises(SelectorError, match='"Near" is not a valid label selector operator'):
        scale_status_selector({"spec": {"selector": selector}}, path="spec.selector", label_set=False)


POD_FIELDS = {r.plural: r for r in core_resources()}["pods"].field_selectors


@pytest.mark.parametrize(
    ("selector", "obj", "expected"),
    [
        ("metadata.name=a", {"metadata": {"name": "a"}}, True),
        ("metadata.name!=a", {"metadata": {"name": "a"}}, False),
        ("status.phase=Running,spec.nodeName=n1", {"metadata": {}, "status": {"phase": "Running"}, "spec": {"nodeName": "n1"}}, True),
        ("spec.nodeName=", {"metadata": {}, "spec": {}}, True),
        ("spec.nodeName==n2", {"metadata": {}, "spec": {"nodeName": "n1"}}, False),
    ],
)
def test_field_selector(selector: str, obj: dict[str, Any], expected: bool) -> None:
    assert parse_field_selector(selector, POD_FIELDS).matches(obj) is expected


def test_field_selector_rejects_unknown_field() -> None:
    with pytest.raises(SelectorError, match=r"field label not supported: spec\.foo"):
        parse_field_selector("spec.foo=1", POD_FIELDS)


@pytest.mark.parametrize(
    ("name", "rule", "ok"),
    [
        ("web", NameRule.SUBDOMAIN, True),
        ("web.example.com", NameRule.SUBDOMAIN, True),
        ("Web", NameRule.SUBDOMAIN, False),
        ("-web", NameRule.SUBDOMAIN, False),
        ("a" * 253, NameRule.SUBDOMAIN, True),
        ("a" * 254, NameRule.SUBDOMAIN, False),
        ("web.x", NameRule.LABEL, False),
        ("a" * 64, NameRule.LABEL, False),
        ("1abc", NameRule.LABEL, True),
        ("1abc", NameRule.LABEL_1035, False),
    ],
)
def test_name_rules(name: str, rule: NameRule, ok: bool) -> None:
    assert (name_errors(name, rule) == []) is ok


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(0, "0s"), (45, "45s"), (119, "119s"), (150, "2m30s"), (600, "10m"), (3 * 3600 + 60, "3h1m"),
     (10 * 3600, "10h"), (50 * 3600, "2d2h"), (30 * 86400, "30d"), (3 * 365 * 86400, "3y"), (-5, "<invalid>")],
)
def test_human_duration(seconds: int, text: str) -> None:
    assert human_duration(seconds) == text


@pytest.mark.parametrize(
    "obj",
    [
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a", "resourceVersion": "99"}, "data": {"metadata": "x"}},
        {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {}, "spec": {"template": {"metadata": {"labels": {}}}}},
        {"kind": "Odd", "apiVersion": "x/v1", "metadata": {"name": "\"metadata\":{"}},
    ],
)
def test_codec_splices_resource_version_like_decode(obj: dict[str, Any]) -> None:
    stored = codec.encode(obj)
    assert b"resourceVersion" not in stored
    kv = KeyValue(key="/k", value=stored, create_revision=3, mod_revision=7)
    spliced = codec.loads(codec.with_resource_version(kv))
    assert spliced == codec.decode(kv)
    assert spliced["metadata"]["resourceVersion"] == "7"


@pytest.mark.parametrize(
    ("target", "patch", "expected"),
    [
        ({"a": "b"}, {"a": "c"}, {"a": "c"}),
        ({"a": "b"}, {"b": "c"}, {"a": "b", "b": "c"}),
        ({"a": "b"}, {"a": None}, {}),
        ({"a": {"b": "c"}}, {"a": {"b": "d", "c": None}}, {"a": {"b": "d"}}),
        ({"a": [1, 2]}, {"a": [3]}, {"a": [3]}),
        ({"a": "b"}, {"a": {"c": None}}, {"a": {}}),
        ({"e": None}, {"a": 1}, {"e": None, "a": 1}),
    ],
)
def test_merge_patch_rfc7386(target: Any, patch: Any, expected: Any) -> None:
    assert merge_patch(target, patch) == expected


@pytest.mark.parametrize(
    ("method", "path", "query", "expected"),
    [
        ("GET", "/api/v1/namespaces", {}, ("list", "", "namespaces", None, None, "")),
        ("GET", "/api/v1/namespaces/default", {}, ("get", "", "namespaces", None, "default", "")),
        ("PUT", "/api/v1/namespaces/x/status", {}, ("update", "", "namespaces", None, "x", "status")),
        ("GET", "/api/v1/namespaces/default/pods", {"watch": "true"}, ("watch", "", "pods", "default", None, "")),
        # kube's reading of a query boolean: only 0 and false (any case) are false.
        ("GET", "/api/v1/pods", {"watch": "yes"}, ("watch", "", "pods", None, None, "")),
        ("GET", "/api/v1/pods", {"watch": ""}, ("watch", "", "pods", None, None, "")),
        ("GET", "/api/v1/pods", {"watch": "FALSE"}, ("list", "", "pods", None, None, "")),
        ("GET", "/api/v1/pods", {"watch": "0"}, ("list", "", "pods", None, None, "")),
        ("PATCH", "/apis/apps/v1/namespaces/d/deployments/w/scale", {}, ("patch", "apps", "deployments", "d", "w", "scale")),
        ("DELETE", "/apis/apps/v1/namespaces/d/deployments", {}, ("deletecollection", "apps", "deployments", "d", None, "")),
        ("POST", "/apis/apps/v1/deployments", {}, ("create", "apps", "deployments", None, None, "")),
        # kube's deprecated /watch/ paths: a watch whatever the query, of a collection or one object.
        ("GET", "/api/v1/watch/pods", {}, ("watch", "", "pods", None, None, "")),
        ("GET", "/api/v1/watch/namespaces/d/pods/p", {}, ("watch", "", "pods", "d", "p", "")),
        ("GET", "/apis/apps/v1/watch/namespaces/d/deployments", {"watch": "false"}, ("watch", "apps", "deployments", "d", None, "")),
        ("GET", "/api/v1/watch/namespaces/x", {}, ("watch", "", "namespaces", None, "x", "")),
        ("PUT", "/api/v1/watch/namespaces/d/pods/p", {}, ("", "", "pods", "d", "p", "")),
    ],
)
def test_routing(method: str, path: str, query: dict[str, str], expected: tuple[Any, ...]) -> None:
    info = parse_request(method, path, query)
    assert info.is_resource
    assert (info.verb, info.group, info.resource, info.namespace, info.name, info.subresource) == expected


@pytest.mark.parametrize("path", ["/api", "/apis", "/apis/apps", "/apis/apps/v1", "/api/v1", "/version", "/openapi/v3"])
def test_routing_non_resource(path: str) -> None:
    assert not parse_request("GET", path, {}).is_resource


@pytest.mark.parametrize(
    ("accept", "expected"),
    [
        ("application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json", True),
        ("application/json", False),
        # The first acceptable clause wins: a PartialObjectMetadataList is no Table.
        ("application/json;as=PartialObjectMetadataList;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1;g=meta.k8s.io", False),
        ("application/json;as=PartialObjectMetadataList;v=v1;g=meta.k8s.io,application/json", False),
        # A clause asking for what kube does not convert to is passed over, as kube passes it over.
        ("application/json;as=Table;v=v2;g=meta.k8s.io,application/json;as=Table;v=v1;g=meta.k8s.io", True),
        ("application/vnd.kubernetes.protobuf;as=Table;v=v1;g=meta.k8s.io,application/json", False),
        ("application/json;q=0.5,application/json;as=Table;v=v1;g=meta.k8s.io", True),
        (None, False),
        ("application/vnd.kubernetes.protobuf,application/json", False),
    ],
)
def test_wants_table(accept: str | None, expected: bool) -> None:
    assert (wants_table(accept) is not None) is expected


@pytest.mark.parametrize(
    ("accept", "written"),
    [
        ("application/vnd.kubernetes.protobuf,application/json", "application/json"),
        ("application/vnd.kubernetes.protobuf,application/yaml;q=0.5", "application/yaml"),
        # A conversion in protobuf is still made (kube writes PartialObjectMetadata of a custom resource so).
        ("application/vnd.kubernetes.protobuf;as=PartialObjectMetadata;g=meta.k8s.io;v=v1", "application/json"),
        ("application/vnd.kubernetes.protobuf", None),
        ("application/vnd.kubernetes.protobuf;q=1,text/plain", None),
    ],
)
def test_a_resource_served_without_protobuf_passes_its_clause_over(accept: str, written: str | None) -> None:
    """As kube's CRD handler: protobuf is among the types it names, not among those it writes."""
    assert response_media(accept) == "application/json"
    if written is None:
        with pytest.raises(NotAcceptable):
            response_media(accept, protobuf=False)
    else:
        assert response_media(accept, protobuf=False) == written


@pytest.mark.parametrize(
    ("accept", "kind"),
    [
        ("application/vnd.kubernetes.protobuf, application/json;as=Table;v=v1;g=meta.k8s.io", "Table"),
        ("application/vnd.kubernetes.protobuf,application/yaml;as=PartialObjectMetadata;g=meta.k8s.io;v=v1",
         "PartialObjectMetadata"),
        ("application/vnd.kubernetes.protobuf,application/json,application/json;as=Table;v=v1;g=meta.k8s.io", None),
    ],
)
def test_a_resource_served_without_protobuf_converts_as_its_next_clause_asks(accept: str, kind: str | None) -> None:
    """kube's negotiation passes over the clause the CRD handler cannot write, conversion included."""
    assert conversion_asked(accept) is None
    asked = conversion_asked(accept, protobuf=False)
    assert (asked.kind if asked is not None else None) == kind


@pytest.mark.parametrize("version", ["v1", "v1beta1"])
def test_a_table_is_of_the_version_asked(version: str) -> None:
    """kube's asTable answers a Table, and its rows' PartialObjectMetadata, of the version asked."""
    asked = wants_table(f"application/json;as=Table;v={version};g=meta.k8s.io,application/json")
    assert asked is not None and asked.version == version
    pods = Registry(core_resources()).require("v1", "Pod")
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "default"}}
    rendered = table(pods, [pod], include=IncludeObject.METADATA, now=datetime(2026, 1, 1, tzinfo=UTC),
                     version=asked.version)
    assert rendered["apiVersion"] == f"meta.k8s.io/{version}"
    assert rendered["rows"][0]["object"]["apiVersion"] == f"meta.k8s.io/{version}"
    assert table_content_type(version) == f"application/json;as=Table;v={version};g=meta.k8s.io"


def test_event_table_is_kubes_name_last_and_wide() -> None:
    events = Registry(core_resources()).require("v1", "Event")
    pods = Registry(core_resources()).require("v1", "Pod")
    now = datetime(2026, 1, 1, 0, 10, tzinfo=UTC)
    event = {
        "metadata": {"name": "web-1.17f0", "namespace": "default"},
        "involvedObject": {"kind": "Pod", "name": "web-1"},
        "reason": "FailedScheduling",
        "type": "Warning",
        "message": "0/3 nodes are available",
        "source": {"component": "default-scheduler"},
        "firstTimestamp": "2026-01-01T00:00:00Z",
        "lastTimestamp": "2026-01-01T00:09:00Z",
        "count": 4,
    }
    definitions = column_definitions(events)
    shown = [d["name"] for d in definitions if d["priority"] == 0]
    assert shown == ["Last Seen", "Type", "Reason", "Object", "Message"]
    assert [d["name"] for d in definitions][-1] == "Name"
    cells = row(events, event, include=IncludeObject.NONE, now=now)["cells"]
    by_name = dict(zip([d["name"] for d in definitions], cells, strict=True))
    assert by_name == {
        "Last Seen": "60s", "Type": "Warning", "Reason": "FailedScheduling", "Object": "pod/web-1",
        "Subobject": "", "Source": "default-scheduler", "Message": "0/3 nodes are available",
        "First Seen": "10m", "Count": 4, "Name": "web-1.17f0",
    }
    assert column_definitions(pods)[0]["name"] == "Name"


def test_registry_rejects_duplicates_and_finds_kinds() -> None:
    registry = Registry(core_resources(), workload_resources())
    assert registry.require("apps/v1", "Deployment").plural == "deployments"
    assert registry.get("", "v1", "pods") is not None
    with pytest.raises(ValueError, match="registered twice"):
        Registry(core_resources(), core_resources())


def test_service_account_columns_are_kubes() -> None:
    accounts = Registry(core_resources()).require("v1", "ServiceAccount")
    obj = {"metadata": {"name": "trainer", "creationTimestamp": "2024-01-01T00:00:00Z"}, "secrets": [{"name": "token"}]}
    now = datetime(2024, 1, 1, 0, 5, tzinfo=UTC)
    assert [(c.name, c.getter(obj, now)) for c in accounts.columns] == [("Secrets", 1), ("Age", "5m")]


def test_pod_wide_columns_are_kubes() -> None:
    pods = Registry(core_resources()).require("v1", "Pod")
    now = datetime(2024, 1, 1, 0, 5, tzinfo=UTC)
    wide = [c.name for c in pods.columns if c.priority]
    assert wide == ["IP", "Node", "Nominated Node", "Readiness Gates"]
    pending = {"metadata": {"name": "p"}, "spec": {}}
    assert [c.getter(pending, now) for c in pods.columns if c.priority] == ["<none>"] * 4
    gated = {
        "metadata": {"name": "p"},
        "spec": {"nodeName": "n1", "readinessGates": [{"conditionType": "a"}, {"conditionType": "b"}]},
        "status": {"podIP": "10.0.0.7", "conditions": [{"type": "a", "status": "True"}, {"type": "b", "status": "False"}]},
    }
    assert [c.getter(gated, now) for c in pods.columns if c.priority] == ["10.0.0.7", "n1", "<none>", "1/2"]


def test_cluster_columns_from_status() -> None:
    from controlplane.apiserver.kinds.gpufed import gpufed_resource_types

    clusters = gpufed_resource_types(cluster_model=None, binding_model=None, work_model=None, policy_models={})[0]
    obj = {
        "metadata": {"name": "a", "creationTimestamp": "2024-01-01T00:00:00Z"},
        "spec": {"provider": "aws"},
        "status": {
            "conditions": [{"type": "Ready", "status": "True"}],
            "gpuSummary": [
                {"resource": "nvidia.com/gpu", "product": "H100", "capacity": 8, "allocatable": 8, "allocated": 3},
                {"resource": "nvidia.com/mig-1g.10gb", "product": "A100", "capacity": 14, "allocatable": 14, "allocated": 4},
            ],
        },
    }
    now = datetime(2024, 1, 1, 0, 5, tzinfo=UTC)
    cells = [column.getter(obj, now) for column in clusters.columns]
    names = [column.name for column in clusters.columns]
    assert dict(zip(names, cells, strict=True)) == {
        "Ready": "True", "Provider": "aws", "GPUs": 8, "Free": 5, "Models": "A100,H100", "Age": "5m",
        "Region": "", "Tier": 1, "MIG Free": "10/14", "Spot": "<none>",
    }
    spot = {**obj, "status": {**obj["status"], "nodeSummary": {"total": 3, "ready": 3, "spot": 2}}}
    assert clusters.columns[names.index("Spot")].getter(spot, now) == "2/3"
    cordoned = {**obj, "spec": {"provider": "aws", "unschedulable": True}}
    assert clusters.columns[0].getter(cordoned, now) == "True,SchedulingDisabled"


@pytest.mark.parametrize(
    ("conditions", "expected"),
    [
        # The hub's Propagated condition comes after the job's own: the job's state still shows.
        ([("Created", "True"), ("Running", "False"), ("Succeeded", "True"), ("Propagated", "True")], "Succeeded"),
        ([("Created", "True"), ("Running", "True"), ("Propagated", "True")], "Running"),
        ([("Propagated", "True"), ("Created", "True")], "Created"),
        ([("Propagated", "True")], ""),
    ],
)
def test_training_job_state_is_the_jobs_own(conditions: list[tuple[str, str]], expected: str) -> None:
    registry = Registry(core_resources(), workload_resources())
    now = datetime(2024, 1, 1, tzinfo=UTC)
    for kind in ("PyTorchJob", "TFJob", "XGBoostJob", "PaddleJob", "JAXJob", "MPIJob"):
        rt = registry.require("kubeflow.org/v1", kind)
        obj = {"metadata": {"name": "j"}, "status": {"conditions": [{"type": t, "status": v} for t, v in conditions]}}
        state = next(column for column in rt.columns if column.name == "State")
        assert state.getter(obj, now) == expected


def test_job_wide_columns_are_kubes() -> None:
    """``kubectl get jobs -o wide`` ends with the Job's selector, as kube prints it (it was missing)."""
    jobs = Registry(workload_resources()).require("batch/v1", "Job")
    job = {
        "metadata": {"name": "train", "creationTimestamp": "2024-01-01T00:00:00Z"},
        "spec": {
            "selector": {"matchLabels": {"batch.kubernetes.io/controller-uid": "u-1"}},
            "template": {"spec": {"containers": [{"name": "main", "image": "trainer:1"}]}},
        },
    }
    now = datetime(2024, 1, 1, 0, 5, tzinfo=UTC)
    assert [c.name for c in jobs.columns if c.priority] == ["Containers", "Images", "Selector"]
    assert [c.getter(job, now) for c in jobs.columns if c.priority] == [
        "main", "trainer:1", "batch.kubernetes.io/controller-uid=u-1"
    ]


def test_persistent_volume_claim_columns_are_kubes() -> None:
    """``kubectl get pvc`` shows VOLUMEATTRIBUTESCLASS, and ``-o wide`` VOLUMEMODE, as kube's (both were missing)."""
    claims = Registry(core_resources()).require("v1", "PersistentVolumeClaim")
    claim = {
        "metadata": {"name": "data", "creationTimestamp": "2024-01-01T00:00:00Z"},
        "spec": {
            "accessModes": ["ReadWriteOnce"], "storageClassName": "fast", "volumeMode": "Filesystem", "volumeName": "pv-1",
        },
        "status": {"phase": "Bound", "accessModes": ["ReadWriteOnce"], "capacity": {"storage": "1Gi"}},
    }
    now = datetime(2024, 1, 1, 0, 5, tzinfo=UTC)
    shown = [(c.name, c.getter(claim, now)) for c in claims.columns]
    assert shown == [
        ("Status", "Bound"), ("Volume", "pv-1"), ("Capacity", "1Gi"), ("Access Modes", "RWO"), ("StorageClass", "fast"),
        ("VolumeAttributesClass", "<unset>"), ("Age", "5m"), ("VolumeMode", "Filesystem"),
    ]
    assert [c.name for c in claims.columns if c.priority] == ["VolumeMode"]


@pytest.mark.parametrize(
    ("status", "shown"),
    [
        ({"phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "False", "reason": "SchedulingGated"}]},
         "SchedulingGated"),
        ({"phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}]}, "Pending"),
        ({"phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "False", "reason": "SchedulingGated"}],
          "containerStatuses": [{"state": {"waiting": {"reason": "ContainerCreating"}}}]}, "ContainerCreating"),
    ],
)
def test_a_gated_pods_status_reads_as_kubectls(status: dict[str, Any], shown: str) -> None:
    """kubectl's printPod: a PodScheduled condition with reason SchedulingGated names the pod's
    status, unless a container's state says more."""
    assert pod_status({"status": status}, datetime.now(UTC)) == shown
