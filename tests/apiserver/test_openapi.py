"""OpenAPI v2 and v3 of the hub: upstream schemas for built-in kinds, user-facing descriptions
for gpufed's and Karmada's kinds, the v2 protobuf kubectl reads, and kube's caching headers."""

from __future__ import annotations

import gzip
import json
import re
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer

from controlplane.apiserver import visibility
from controlplane.apiserver.app import create_app
from controlplane.apiserver.auth.rbac.reviews import LOCAL_SUBJECT_ACCESS_REVIEWS, SELF_SUBJECT_ACCESS_REVIEWS
from controlplane.apiserver.auth.serviceaccounts import TOKEN_REQUESTS
from controlplane.apiserver.objects import ObjectStore
from controlplane.apiserver.openapi.catalog import SchemaCatalog
from controlplane.apiserver.openapi.documents import OpenApiDocuments
from controlplane.apiserver.openapi.gnostic import ACCEPTED_MEDIA_TYPES
from controlplane.apiserver.openapi.gnostic import MEDIA_TYPE as PROTOBUF_V2_MEDIA_TYPE
from controlplane.apiserver.openapi.upstream import DEFINITIONS_PREFIX, UpstreamDefinitions
from controlplane.apiserver.protobuf.wire import iter_fields
from controlplane.apiserver.resources import Registry, ResourceType
from controlplane.controllers.workloads import is_plain, is_propagatable
from controlplane.hub import hub_registry
from controlplane.storage.memory import MemoryStore

Client = TestClient[Any, Any]
DEPLOYMENT = "io.k8s.api.apps.v1.Deployment"
#: Markup of developer docs (reStructuredText, Markdown code) that must not reach users.
_DEVELOPER_MARKUP = re.compile(r":(class|meth|func|data|mod|attr):|``|\bTODO\b|\bself\.")


@pytest.fixture(scope="module")
def registry() -> Registry:
    return hub_registry()


@pytest.fixture(scope="module")
def upstream() -> UpstreamDefinitions:
    return UpstreamDefinitions.load()


@pytest.fixture(scope="module")
def catalog(registry: Registry, upstream: UpstreamDefinitions) -> SchemaCatalog:
    return SchemaCatalog(registry, upstream)


def _own_kinds(registry: Registry) -> list[ResourceType]:
    """The kinds whose schemas the project writes: every kind kube has no definition of."""
    upstream = UpstreamDefinitions.load()
    return [rt for rt in registry if upstream.for_kind(rt.group, rt.version, rt.kind) is None]


def _properties(name: str, schema: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    """Every property of a schema, nested ones included, as (dotted path, schema)."""
    for prop, sub in (schema.get("properties") or {}).items():
        yield f"{name}.{prop}", sub
        yield from _properties(f"{name}.{prop}", sub)
    for key in ("items", "additionalProperties"):
        if isinstance(schema.get(key), dict):
            yield from _properties(f"{name}[]", schema[key])


def test_every_built_in_kind_served_has_kubes_schema(registry: Registry, upstream: UpstreamDefinitions,
                                                     catalog: SchemaCatalog) -> None:
    built_in = [rt for rt in registry if rt.group in ("", "apps", "batch", "coordination.k8s.io", "scheduling.k8s.io")]
    assert len(built_in) >= 12
    for rt in built_in:
        name = catalog.kind(rt).name
        assert name == upstream.for_kind(rt.group, rt.version, rt.kind), rt.kind
        schema = upstream.definitions[name]
        assert schema["description"] and {"group": rt.group, "version": rt.version, "kind": rt.kind} in (
            schema["x-kubernetes-group-version-kind"]
        )
    containers = upstream.definitions["io.k8s.api.core.v1.PodSpec"]["properties"]["containers"]
    assert containers["x-kubernetes-patch-merge-key"] == "name"
    assert containers["x-kubernetes-list-type"] == "map"


def test_kinds_kube_does_not_have_a_definition_of_are_found_by_group_version_kind(upstream: UpstreamDefinitions) -> None:
    # Any kind another part of the hub starts serving gets kube's schema without wiring.
    assert upstream.for_kind("apps", "v1", "DaemonSet") == "io.k8s.api.apps.v1.DaemonSet"
    assert upstream.for_kind("rbac.authorization.k8s.io", "v1", "ClusterRole") == (
        "io.k8s.api.rbac.v1.ClusterRole"
    )
    assert upstream.for_kind("", "v1", "DeleteOptions") == "io.k8s.apimachinery.pkg.apis.meta.v1.DeleteOptions"
    assert upstream.for_kind("apps", "v1", "Deploymnt") is None


@pytest.mark.parametrize("kind", [f"{rt.group}/{rt.kind}" for rt in _own_kinds(hub_registry())])
def test_every_field_of_the_projects_kinds_has_a_description_for_users(
    kind: str, registry: Registry, catalog: SchemaCatalog
) -> None:
    group, name = kind.split("/")
    rt = next(rt for rt in registry if rt.group == group and rt.kind == name)
    own = catalog.kind(rt)
    assert own.definitions, "the kind must have a schema of its own"
    kind_schema = own.definitions[own.name]
    assert kind_schema.get("description"), own.name
    for definition, schema in own.definitions.items():
        for path, sub in _properties(definition, schema):
            description = sub.get("description", "")
            assert description.strip(), f"{path} has no description"
            assert not _DEVELOPER_MARKUP.search(description), f"{path}: {description!r}"
        assert not _DEVELOPER_MARKUP.search(schema.get("description", "")), definition


def test_v3_documents_resolve_every_reference_and_carry_upstream_descriptions(registry: Registry) -> None:
    documents = OpenApiDocuments(registry)
    for key in documents.index()["paths"]:
        rendered = documents.document(key)
        assert rendered is not None
        document = json.loads(rendered.body)
        schemas = document["components"]["schemas"]
        refs = set(re.findall(r'"#/components/schemas/([^"]+)"', rendered.body.decode()))
        assert refs <= set(schemas), (key, refs - set(schemas))
    apps = json.loads(documents.document("apis/apps/v1").body)  # type: ignore[union-attr]
    spec = apps["components"]["schemas"]["io.k8s.api.apps.v1.DeploymentSpec"]["properties"]
    assert spec["replicas"]["description"].startswith("Number of desired pods.")
    # A reference with its own description is wrapped, as kube-openapi serves v3.
    assert spec["template"]["allOf"] == [{"$ref": "#/components/schemas/io.k8s.api.core.v1.PodTemplateSpec"}]
    int_or_string = apps["components"]["schemas"]["io.k8s.apimachinery.pkg.util.intstr.IntOrString"]
    assert int_or_string["oneOf"] == [{"type": "integer"}, {"type": "string"}]


#: Fields whose upstream CRDs embed a kube type, and the kube definition each is served as. (A
#: ResourceFlavor's tolerations are not: Kueue's CRD adds CEL rules to kube's Toleration, and the
#: served schema carries them, in a definition of its own, as the CRD does inline.)
EMBEDDED_KUBE_TYPES = [
    ("kueue.x-k8s.io", "v1beta1", "Workload", "spec.podSets[].template", "io.k8s.api.core.v1.PodTemplateSpec"),
    ("kueue.x-k8s.io", "v1beta2", "Workload", "spec.podSets[].template", "io.k8s.api.core.v1.PodTemplateSpec"),
    ("policy.karmada.io", "v1alpha1", "PropagationPolicy", "spec.placement.clusterTolerations[]",
     "io.k8s.api.core.v1.Toleration"),
    ("jobset.x-k8s.io", "v1alpha2", "JobSet", "spec.replicatedJobs[].template", "io.k8s.api.batch.v1.JobTemplateSpec"),
    ("leaderworkerset.x-k8s.io", "v1", "LeaderWorkerSet", "spec.leaderWorkerTemplate.leaderTemplate",
     "io.k8s.api.core.v1.PodTemplateSpec"),
    ("leaderworkerset.x-k8s.io", "v1", "LeaderWorkerSet", "spec.leaderWorkerTemplate.workerTemplate",
     "io.k8s.api.core.v1.PodTemplateSpec"),
    ("kubeflow.org", "v1", "PyTorchJob", "spec.pytorchReplicaSpecs{}.template", "io.k8s.api.core.v1.PodTemplateSpec"),
    ("ray.io", "v1", "RayCluster", "spec.workerGroupSpecs[].template", "io.k8s.api.core.v1.PodTemplateSpec"),
]


def _v3_reference(schema: dict[str, Any]) -> str | None:
    """The definition a v3 property schema refers to (``$ref``, or kube-openapi's ``allOf`` wrap)."""
    ref = schema.get("$ref") or next((s["$ref"] for s in schema.get("allOf", ()) if "$ref" in s), None)
    return ref.removeprefix("#/components/schemas/") if ref else None


@pytest.mark.parametrize(("group", "version", "kind", "path", "target"), EMBEDDED_KUBE_TYPES)
def test_fields_that_embed_a_kube_type_are_served_as_kubes_definition(
    registry: Registry, group: str, version: str, kind: str, path: str, target: str
) -> None:
    documents = OpenApiDocuments(registry)
    rendered = documents.document(f"apis/{group}/{version}")
    assert rendered is not None
    schemas = json.loads(rendered.body)["components"]["schemas"]
    rt = next(rt for rt in registry if (rt.group, rt.version, rt.kind) == (group, version, kind))
    schema = schemas[SchemaCatalog(registry, UpstreamDefinitions.load()).kind(rt).name]
    for step in path.split("."):
        name, _, rest = step.partition("[") if "[" in step else step.partition("{")
        if (ref := _v3_reference(schema)) is not None:
            schema = schemas[ref]
        schema = schema["properties"][name]
        if rest:
            schema = schema["items" if step.endswith("[]") else "additionalProperties"]
    assert _v3_reference(schema) == target, (kind, path, schema)
    # kubectl explain walks on into kube's own fields: all of them are in the same document.
    assert "io.k8s.api.core.v1.ResourceRequirements" in schemas or target.endswith("Toleration")


# --- v2: JSON and the protobuf kubectl reads ----------------------------------------------------


def _message(data: bytes) -> dict[int, list[int | bytes]]:
    fields: dict[int, list[int | bytes]] = {}
    for field in iter_fields(data):
        fields.setdefault(field.number, []).append(field.value)
    return fields


def _named(data: bytes, number: int) -> dict[str, bytes]:
    """A repeated Named* field of gnostic's messages as {name: value bytes}."""
    out = {}
    for entry in _message(data).get(number, []):
        assert isinstance(entry, bytes)
        pair = _message(entry)
        out[bytes(pair[1][0]).decode()] = bytes(pair[2][0])  # type: ignore[arg-type]
    return out


def test_v2_protobuf_is_gnostics_document_with_kubes_deployment(registry: Registry) -> None:
    documents = OpenApiDocuments(registry)
    swagger = json.loads(documents.swagger(protobuf=False).body)
    assert swagger["swagger"] == "2.0"
    assert swagger["definitions"][DEPLOYMENT]["x-kubernetes-group-version-kind"] == [
        {"group": "apps", "kind": "Deployment", "version": "v1"}
    ]
    document = _message(documents.swagger(protobuf=True).body)
    assert document[1] == [b"2.0"]  # Document.swagger
    definitions = _named(bytes(document[9][0]), 1)  # type: ignore[arg-type]  # Document.definitions
    assert set(definitions) == set(swagger["definitions"])
    deployment = _message(definitions[DEPLOYMENT])
    assert bytes(deployment[4][0]).decode() == swagger["definitions"][DEPLOYMENT]["description"]  # type: ignore[arg-type]
    assert [bytes(t) for t in _message(bytes(deployment[22][0]))[1]] == [b"object"]  # type: ignore[arg-type]
    extensions = _named(definitions[DEPLOYMENT], 31)
    gvk_yaml = _message(extensions["x-kubernetes-group-version-kind"])[2][0]
    assert json.loads(bytes(gvk_yaml)) == [{"group": "apps", "kind": "Deployment", "version": "v1"}]  # type: ignore[arg-type]
    properties = _named(bytes(deployment[25][0]), 1)  # type: ignore[arg-type]
    assert bytes(_message(properties["spec"])[1][0]).decode() == (  # type: ignore[arg-type]
        "#/definitions/io.k8s.api.apps.v1.DeploymentSpec"
    )
    paths = _named(bytes(document[8][0]), 2)  # type: ignore[arg-type]
    patch = _message(paths["/apis/apps/v1/namespaces/{namespace}/deployments/{name}"])[8][0]
    consumes = {bytes(c).decode() for c in _message(bytes(patch))[7]}  # type: ignore[arg-type]
    assert "application/strategic-merge-patch+json" in consumes


# --- over HTTP -----------------------------------------------------------------------------------


@pytest.fixture
async def hub_api(registry: Registry) -> AsyncIterator[Client]:
    async with MemoryStore() as memory:
        objects = ObjectStore(memory, registry)
        await objects.bootstrap()
        async with TestClient(TestServer(create_app(objects, registry))) as client:
            yield client


async def test_v2_is_served_as_json_and_as_the_protobuf_kubectl_asks_for(hub_api: Client) -> None:
    as_json = await hub_api.get("/openapi/v2")
    assert as_json.status == 200 and as_json.content_type == "application/json"
    assert DEPLOYMENT in (await as_json.json())["definitions"]
    for accept in ACCEPTED_MEDIA_TYPES:
        protobuf = await hub_api.get("/openapi/v2", headers={"Accept": f"{accept}, application/json"})
        assert protobuf.status == 200
        assert protobuf.headers["Content-Type"] == PROTOBUF_V2_MEDIA_TYPE
        assert _message(await protobuf.read())[1] == [b"2.0"]


async def test_documents_answer_if_none_match_and_compress(hub_api: Client) -> None:
    first = await hub_api.get("/openapi/v2")
    etag = first.headers["ETag"]
    again = await hub_api.get("/openapi/v2", headers={"If-None-Match": etag})
    assert again.status == 304 and await again.read() == b""
    raw = await hub_api.get("/openapi/v2", headers={"Accept-Encoding": "gzip"}, auto_decompress=False)
    assert raw.headers["Content-Encoding"] == "gzip"
    assert json.loads(gzip.decompress(await raw.read()))["swagger"] == "2.0"


async def test_v3_by_hash_is_immutable_and_a_stale_hash_redirects(hub_api: Client) -> None:
    index = await (await hub_api.get("/openapi/v3")).json()
    url = index["paths"]["apis/apps/v1"]["serverRelativeURL"]
    current = await hub_api.get(url)
    assert current.status == 200 and current.headers["Cache-Control"] == "public, immutable"
    assert url.endswith(current.headers["ETag"].strip('"'))
    stale = await hub_api.get("/openapi/v3/apis/apps/v1?hash=0123", allow_redirects=False)
    assert stale.status == 301 and stale.headers["Location"] == url
    unhashed = await hub_api.get("/openapi/v3/apis/apps/v1")
    assert unhashed.status == 200 and "immutable" not in unhashed.headers["Cache-Control"]
    missing = await hub_api.get("/openapi/v3/apis/nope.io/v1")
    assert missing.status == 404 and (await missing.json())["reason"] == "NotFound"


def test_models_are_served_in_kubes_dialect_with_kubes_shared_types(registry: Registry, catalog: SchemaCatalog) -> None:
    cluster = catalog.kind(registry.require("cluster.gpufed.io/v1alpha1", "Cluster"))
    spec = cluster.definitions["io.gpufed.cluster.v1alpha1.ClusterSpec"]["properties"]
    # Optional[list[Taint]] is a list of kube's Taint, described by the field's docstring.
    assert spec["taints"]["items"] == {"$ref": "#/definitions/io.k8s.api.core.v1.Taint"}
    assert spec["taints"]["type"] == "array" and spec["taints"]["description"].startswith("Taints of the cluster")
    assert spec["pricing"] == {
        "description": spec["pricing"]["description"], "type": "object", "additionalProperties": {"type": "number"},
    }
    status = cluster.definitions["io.gpufed.cluster.v1alpha1.ClusterStatus"]["properties"]
    assert status["nodeScoring"]["$ref"] == "#/definitions/io.gpufed.cluster.v1alpha1.NodeScoring"
    assert status["nodeScoring"]["description"].startswith("How the member's scheduler ranks the nodes")
    assert cluster.definitions["io.gpufed.cluster.v1alpha1.NodeScoring"]["enum"] == [
        "LeastAllocated", "MostAllocated", "RequestedToCapacityRatio", "FragmentationAware", "Unknown",
    ]
    kind = cluster.definitions[cluster.name]
    assert kind["properties"]["metadata"]["$ref"] == "#/definitions/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"
    assert kind["x-kubernetes-group-version-kind"] == [
        {"group": "cluster.gpufed.io", "version": "v1alpha1", "kind": "Cluster"}
    ]
    assert not any(name.endswith((".ObjectMeta", ".Taint", ".Condition")) for name in cluster.definitions)

    policy = catalog.kind(registry.require("policy.karmada.io/v1alpha1", "PropagationPolicy"))
    assert policy.name == "io.karmada.policy.v1alpha1.PropagationPolicy"
    scheduling = policy.definitions["io.karmada.policy.v1alpha1.ReplicaSchedulingStrategy"]["properties"]
    assert scheduling["replicaDivisionPreference"]["enum"] == ["Aggregated", "Weighted", "TieredOverflow"]
    shape = policy.definitions["io.karmada.policy.v1alpha1.GpuShapeAlternative"]["properties"]
    # dict[str, str | int]: quantities that are either, as kube's int-or-string.
    assert shape["resources"]["additionalProperties"] == {"type": "string", "format": "int-or-string"}


def test_a_newly_served_built_in_kind_gets_kubes_schema_without_wiring() -> None:
    daemonset = ResourceType("apps", "v1", "DaemonSet", "daemonsets", "daemonset", namespaced=True,
                             has_status=True, strategic_merge=True)
    documents = OpenApiDocuments(Registry([daemonset]))
    rendered = documents.document("apis/apps/v1")
    assert rendered is not None
    document = json.loads(rendered.body)
    schema = document["components"]["schemas"]["io.k8s.api.apps.v1.DaemonSet"]
    assert schema["description"].startswith("DaemonSet represents the configuration of a daemon set.")
    assert {"group": "apps", "version": "v1", "kind": "DaemonSet"} in schema["x-kubernetes-group-version-kind"]
    created = document["paths"]["/apis/apps/v1/namespaces/{namespace}/daemonsets"]["post"]
    assert created["requestBody"]["content"]["application/json"]["schema"] == {
        "$ref": "#/components/schemas/io.k8s.api.apps.v1.DaemonSet"
    }
    # Everything the kind refers to comes along: the pod template, down to containers.
    assert "io.k8s.api.core.v1.Container" in document["components"]["schemas"]


def test_every_kind_the_hub_writes_conditions_on_has_them_in_its_schema(
    registry: Registry, catalog: SchemaCatalog
) -> None:
    # The hub adds Propagated and Schedulable to a workload's status.conditions; kubectl checks
    # what `get -o yaml` printed against /openapi/v2 when it goes back (replace, apply), so
    # every such kind's status must have the field.
    kinds = [rt for rt in registry if rt.has_status and is_propagatable(rt) and not is_plain(rt.api_version, rt.kind)]
    assert {"Deployment", "PyTorchJob", "RayJob", "RayCluster", "JobSet"} <= {rt.kind for rt in kinds}
    for rt in kinds:
        definitions = catalog.definitions([rt])

        def resolved(schema: dict[str, Any], definitions: dict[str, Any] = definitions) -> dict[str, Any]:
            ref = schema.get("$ref")
            return definitions[ref.removeprefix(DEFINITIONS_PREFIX)] if ref else schema

        kind = resolved(definitions[catalog.kind(rt).name])
        if "properties" not in kind:  # an open schema (LeaderWorkerSet, JobSet): every field is kept
            assert kind["x-kubernetes-preserve-unknown-fields"] is True, rt.kind
            continue
        status = resolved(kind["properties"]["status"])
        assert "conditions" in status.get("properties", {}), rt.kind


def test_the_create_only_resources_have_kubes_schemas_and_their_post(registry: Registry) -> None:
    """The reviews and a ServiceAccount's token: `kubectl explain selfsubjectaccessreview` found
    no schema (no document served their group-version)."""
    documents = OpenApiDocuments(
        registry, computed=[SELF_SUBJECT_ACCESS_REVIEWS, LOCAL_SUBJECT_ACCESS_REVIEWS, TOKEN_REQUESTS]
    )
    assert "apis/authorization.k8s.io/v1" in documents.index()["paths"]
    rendered = documents.document("apis/authorization.k8s.io/v1")
    assert rendered is not None
    document = json.loads(rendered.body)
    review = document["components"]["schemas"]["io.k8s.api.authorization.v1.SelfSubjectAccessReview"]
    assert review["x-kubernetes-group-version-kind"] == [
        {"group": "authorization.k8s.io", "kind": "SelfSubjectAccessReview", "version": "v1"}
    ]
    assert "io.k8s.api.authorization.v1.ResourceAttributes" in document["components"]["schemas"]
    post = document["paths"]["/apis/authorization.k8s.io/v1/namespaces/{namespace}/localsubjectaccessreviews"]["post"]
    assert post["x-kubernetes-group-version-kind"]["kind"] == "LocalSubjectAccessReview"
    assert set(document["paths"]["/apis/authorization.k8s.io/v1/selfsubjectaccessreviews"]) == {"parameters", "post"}
    core = json.loads(documents.document("api/v1").body)  # type: ignore[union-attr]
    token = core["paths"]["/api/v1/namespaces/{namespace}/serviceaccounts/{name}/token"]["post"]
    assert token["x-kubernetes-group-version-kind"] == {"group": "authentication.k8s.io", "version": "v1", "kind": "TokenRequest"}
    assert "io.k8s.api.authentication.v1.TokenRequest" in core["components"]["schemas"]
    swagger = json.loads(documents.swagger(protobuf=False).body)
    assert "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews" in swagger["paths"]
    assert "io.k8s.api.authorization.v1.SelfSubjectAccessReviewSpec" in swagger["definitions"]


@pytest.mark.parametrize("version", ["v1beta2", "v1beta1"])
def test_kueues_visibility_api_has_its_paths_and_pending_workloads_summary(registry: Registry, version: str) -> None:
    """Generated clients and OpenAPI readers find the pendingworkloads reads and their answer's
    schema under Kueue's definition names; the parents, listed without verbs, have no path."""
    documents = OpenApiDocuments(registry, computed=visibility.RESOURCES)
    key = f"apis/visibility.kueue.x-k8s.io/{version}"
    assert key in documents.index()["paths"]
    document = json.loads(documents.document(key).body)  # type: ignore[union-attr]
    base = f"/apis/visibility.kueue.x-k8s.io/{version}"
    assert set(document["paths"]) == {
        f"{base}/clusterqueues/{{name}}/pendingworkloads",
        f"{base}/namespaces/{{namespace}}/localqueues/{{name}}/pendingworkloads",
    }
    summary = f"io.k8s.kueue.visibility.{version}.PendingWorkloadsSummary"
    for path, operation_id, parameters in (
        (f"{base}/clusterqueues/{{name}}/pendingworkloads", "readClusterQueuePendingworkloads", ["name"]),
        (f"{base}/namespaces/{{namespace}}/localqueues/{{name}}/pendingworkloads", "readLocalQueuePendingworkloads",
         ["namespace", "name"]),
    ):
        item = document["paths"][path]
        assert set(item) == {"parameters", "get"}
        assert [p["name"] for p in item["parameters"]] == parameters
        get = item["get"]
        assert get["operationId"] == operation_id
        assert get["x-kubernetes-group-version-kind"] == {
            "group": "visibility.kueue.x-k8s.io", "version": version, "kind": "PendingWorkloadsSummary"}
        assert [(p["name"], p["in"], p["schema"]["type"]) for p in get["parameters"]] == [
            ("limit", "query", "integer"), ("offset", "query", "integer")]
        assert get["responses"]["200"]["content"]["application/json"]["schema"] == {
            "$ref": f"#/components/schemas/{summary}"}
    schemas = document["components"]["schemas"]
    assert schemas[summary]["x-kubernetes-group-version-kind"] == [
        {"group": "visibility.kueue.x-k8s.io", "version": version, "kind": "PendingWorkloadsSummary"}]
    items = schemas[summary]["properties"]["items"]["items"]  # a $ref with a default: wrapped, as kube's v3
    assert items["allOf"] == [{"$ref": f"#/components/schemas/io.k8s.kueue.visibility.{version}.PendingWorkload"}]
    pending_workload = schemas[f"io.k8s.kueue.visibility.{version}.PendingWorkload"]
    assert set(pending_workload["properties"]) == {
        "metadata", "priority", "localQueueName", "positionInClusterQueue", "positionInLocalQueue"}
    assert "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta" in schemas  # what PendingWorkload's metadata is
    swagger = json.loads(documents.swagger(protobuf=False).body)
    assert f"{base}/clusterqueues/{{name}}/pendingworkloads" in swagger["paths"]
    assert summary in swagger["definitions"]
