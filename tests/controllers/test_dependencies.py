"""``propagateDeps`` on the in-process hub: the ConfigMaps, Secrets... a workload's pods reference
follow it to exactly its clusters through one attached binding per object, move when it moves,
change when they change on the hub, and go when no workload needs them."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from controlplane.apis.constants import LABEL_BINDING, LABEL_WORK_NAMESPACE
from controlplane.apis.work_v1alpha1 import ConditionType
from controlplane.apiserver import errors
from controlplane.apiserver.objects import ObjectStore, WatchEventType
from controlplane.controllers.attachments import (
    BindingSnapshot,
    DependencyKey,
    attached_spec,
    dependencies_condition,
    encode_required_by,
    held_clusters,
    is_attached,
    parent_clusters,
    required_by,
)
from controlplane.controllers.context import ControllerContext
from controlplane.controllers.dependencies import DependenciesController
from controlplane.controllers.manager import ControllerManager
from controlplane.interpreter import Dependency, DependencyKind

from .conftest import FAST
from .fleet import deployment, eventually, node_shape, put_cluster, settled

pytestmark = pytest.mark.waiting

WORK_API = "work.gpufed.io/v1alpha1"
NS = "default"
CM, SECRET = DependencyKind.CONFIG_MAP, DependencyKind.SECRET


# --- pure helpers -----------------------------------------------------------------------------


def binding(**spec: Any) -> dict[str, Any]:
    return {"metadata": {"name": "b", "namespace": NS}, "spec": spec}


PARENTS = [BindingSnapshot(NS, "web-deployment", ("b", "a")), BindingSnapshot(NS, "api-deployment", ("c",))]


def test_required_by_round_trips_through_the_spec() -> None:
    encoded = encode_required_by(PARENTS)
    assert [p["name"] for p in encoded] == ["api-deployment", "web-deployment"]
    assert encoded[1]["clusters"] == [{"name": "a"}, {"name": "b"}]
    assert [(p.name, p.clusters) for p in required_by(binding(requiredBy=encoded)) or []] == [
        ("api-deployment", ("c",)),
        ("web-deployment", ("a", "b")),
    ]
    assert required_by(binding()) is None
    assert required_by(binding(requiredBy=["not a snapshot"])) == []


@pytest.mark.parametrize(
    ("obj", "attached"),
    [
        (binding(requiredBy=[], resource={"kind": "ConfigMap"}), True),
        (binding(resource={"kind": "ConfigMap"}), False),
        (binding(requiredBy=[], placement={}, policy={"name": "p"}), False),
        (binding(requiredBy=[], policy={"kind": "PropagationPolicy", "name": "p"}), False),
        (None, False),
    ],
    ids=["parents-only", "no-parents", "own-placement", "own-policy", "absent"],
)
def test_attached_means_parents_and_no_placement_or_policy_of_its_own(obj: dict[str, Any] | None, attached: bool) -> None:
    assert is_attached(obj) is attached


def test_a_parent_runs_where_it_is_chosen_and_where_an_evicted_copy_still_runs() -> None:
    parent = binding(clusters=[{"name": "b", "replicas": 2}, {"name": "a", "replicas": 1}], gracefulEvictionTasks=[{"fromCluster": "c"}])
    assert parent_clusters(parent) == ("a", "b", "c")
    assert parent_clusters(binding()) == ()


def test_the_attached_spec_is_the_union_of_the_parents_clusters() -> None:
    obj = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cfg", "namespace": NS, "uid": "u1"}}
    spec = attached_spec(DependencyKey(NS, "ConfigMap", "cfg"), obj, PARENTS)
    assert spec["resource"] == {"apiVersion": "v1", "kind": "ConfigMap", "namespace": NS, "name": "cfg", "uid": "u1"}
    assert spec["clusters"] == [{"name": "a"}, {"name": "b"}, {"name": "c"}]
    assert "placement" not in spec and "policy" not in spec


@pytest.mark.parametrize(
    ("holds", "held"),
    [([], set()), (["onprem"], {"onprem"}), (["b", "a", "b"], {"a", "b"})],
    ids=["none", "one", "sorted-once"],
)
def test_a_held_cluster_is_a_never_purged_eviction_task_and_no_target(holds: list[str], held: set[str]) -> None:
    obj = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cfg", "namespace": NS}}
    spec = attached_spec(DependencyKey(NS, "ConfigMap", "cfg"), obj, PARENTS, holds=holds)
    assert held_clusters({"spec": spec}) == held
    assert [t["fromCluster"] for t in spec.get("gracefulEvictionTasks", [])] == sorted(held)
    assert all(t["purgeMode"] == "Never" for t in spec.get("gracefulEvictionTasks", []))
    assert spec["clusters"] == [{"name": "a"}, {"name": "b"}, {"name": "c"}]  # the parents' only
    foreign = {"spec": {"gracefulEvictionTasks": [{"fromCluster": "x", "reason": "ApplicationFailure"}]}}
    assert held_clusters(foreign) == set()


@pytest.mark.parametrize(
    ("following", "missing", "independent", "status", "reason", "says"),
    [
        ([], [], {}, None, None, []),
        ([Dependency(CM, "cfg")], [], {}, "True", "DependenciesPropagated", ["following the workload to its clusters: ConfigMap cfg"]),
        ([], [Dependency(SECRET, "tok")], {}, "False", "DependencyMissing", ["Secret tok is referenced by the pod template but not on the hub"]),
        (
            [Dependency(CM, "cfg")],
            [Dependency(CM, "a"), Dependency(SECRET, "b")],
            {},
            "False",
            "DependencyMissing",
            ["ConfigMap a, Secret b are referenced", "they follow", "following the workload to its clusters: ConfigMap cfg"],
        ),
        ([], [], {Dependency(CM, "shared"): "PropagationPolicy default/cm"}, "True", "DependenciesPropagated", ["ConfigMap shared is placed by its own policy PropagationPolicy default/cm"]),
    ],
    ids=["nothing", "all-follow", "one-missing", "two-missing", "own-policy"],
)
def test_the_parent_condition_says_what_follows_and_what_is_missing(
    following: list[Dependency],
    missing: list[Dependency],
    independent: dict[Dependency, str],
    status: str | None,
    reason: str | None,
    says: list[str],
) -> None:
    condition = dependencies_condition(following, missing, independent)
    if status is None:
        assert condition is None
        return
    assert condition is not None
    assert (condition["type"], condition["status"], condition["reason"]) == ("DependenciesPropagated", status, reason)
    for text in says:
        assert text in condition["message"]


# --- on the hub -------------------------------------------------------------------------------


def rt(objects: ObjectStore, api_version: str, kind: str) -> Any:
    return objects.registry.require(api_version, kind)


async def create(objects: ObjectStore, obj: dict[str, Any]) -> dict[str, Any]:
    return await objects.create(rt(objects, obj["apiVersion"], obj["kind"]), obj)


async def get_or_none(objects: ObjectStore, api_version: str, kind: str, name: str) -> dict[str, Any] | None:
    try:
        return await objects.get(rt(objects, api_version, kind), namespace=NS, name=name)
    except errors.NotFound:
        return None


async def change(objects: ObjectStore, api_version: str, kind: str, name: str, edit: Any) -> None:
    current = copy.deepcopy(await objects.get(rt(objects, api_version, kind), namespace=NS, name=name))
    edit(current)
    await objects.update(rt(objects, api_version, kind), current)


def config_map(name: str, **data: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": NS}, "data": data or {"k": "v"}}


def secret(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name, "namespace": NS}, "stringData": {"token": "t"}}


def web(name: str = "web", *, config: str = "model-config", token: str | None = "hf-token") -> dict[str, Any]:
    """A Deployment mounting ``config`` as a volume and reading ``token`` from a Secret."""
    workload = deployment(name, replicas=1)
    pod = workload["spec"]["template"]["spec"]
    pod["volumes"] = [{"name": "config", "configMap": {"name": config}}]
    if token:
        pod["containers"][0]["env"] = [{"name": "TOKEN", "valueFrom": {"secretKeyRef": {"name": token, "key": "token"}}}]
    return workload


def policy(name: str, *, clusters: list[str], propagate_deps: bool = True, selects: str | None = None, kind: str = "Deployment") -> dict[str, Any]:
    selector: dict[str, Any] = {"apiVersion": "apps/v1" if kind == "Deployment" else "v1", "kind": kind}
    if selects:
        selector["name"] = selects
    spec: dict[str, Any] = {"resourceSelectors": [selector], "placement": {"clusterAffinity": {"clusterNames": clusters}}}
    if propagate_deps:
        spec["propagateDeps"] = True
    return {"apiVersion": "policy.gpufed.io/v1alpha1", "kind": "PropagationPolicy", "metadata": {"name": name, "namespace": NS}, "spec": spec}


async def two_clusters(objects: ObjectStore, manager: ControllerManager | None = None) -> None:
    """Two Ready clusters with room; with ``manager``, once its scheduler has seen them Ready."""
    await put_cluster(objects, "onprem", node_shape(4, gpus=4))
    await put_cluster(objects, "cloud", node_shape(4, gpus=8), provider="aws")
    if manager is not None:
        await settled(manager)


async def works_of(objects: ObjectStore, binding_name: str) -> dict[str, dict[str, Any]]:
    listed = await objects.list(
        rt(objects, WORK_API, "Work"), label_selector=f"{LABEL_BINDING}={binding_name},{LABEL_WORK_NAMESPACE}={NS}"
    )
    return {w["metadata"]["namespace"].removeprefix("gpufed-es-"): w for w in listed.items}


async def clusters_of(objects: ObjectStore, binding_name: str) -> set[str]:
    return set(await works_of(objects, binding_name))


async def works_in(objects: ObjectStore, binding_name: str, expected: set[str]) -> dict[str, dict[str, Any]]:
    async def probe() -> dict[str, dict[str, Any]] | None:
        works = await works_of(objects, binding_name)
        return works if set(works) == expected else None

    if not expected:
        await eventually(lambda: _none(objects, binding_name), what=f"no Work of {binding_name}")
        return {}
    return await eventually(probe, what=f"Works of {binding_name} in exactly {sorted(expected)}")


async def _none(objects: ObjectStore, binding_name: str) -> bool:
    return not await works_of(objects, binding_name)


async def binding_of(objects: ObjectStore, name: str) -> dict[str, Any] | None:
    return await get_or_none(objects, WORK_API, "ResourceBinding", name)


def parents(obj: dict[str, Any] | None) -> dict[str, tuple[str, ...]]:
    return {p.name: p.clusters for p in required_by(obj) or []}


def manifest(work: dict[str, Any]) -> dict[str, Any]:
    found: dict[str, Any] = work["spec"]["workload"]["manifests"][0]
    return found


async def test_dependencies_follow_the_workload_to_exactly_its_clusters(objects: ObjectStore, manager: ControllerManager) -> None:
    await two_clusters(objects, manager)
    await create(objects, config_map("model-config", model="llama"))
    await create(objects, secret("hf-token"))
    await create(objects, config_map("unrelated"))
    await create(objects, policy("web", clusters=["onprem"]))
    await create(objects, web())

    await works_in(objects, "web-deployment", {"onprem"})
    works = await works_in(objects, "model-config-configmap", {"onprem"})
    assert manifest(works["onprem"]) == {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "model-config", "namespace": NS},
        "data": {"model": "llama"},
    }
    await works_in(objects, "hf-token-secret", {"onprem"})
    attached = await binding_of(objects, "model-config-configmap")
    assert attached is not None and is_attached(attached)
    assert parents(attached) == {"web-deployment": ("onprem",)}
    assert attached["spec"]["clusters"] == [{"name": "onprem"}]
    scheduled = [c for c in attached["status"]["conditions"] if c["type"] == "Scheduled"]
    assert scheduled and scheduled[0]["status"] == "True" and "web-deployment (onprem)" in scheduled[0]["message"]
    await settled(manager)
    assert await binding_of(objects, "unrelated-configmap") is None

    parent = await binding_of(objects, "web-deployment")
    condition = next(c for c in parent["status"]["conditions"] if c["type"] == ConditionType.DEPENDENCIES_PROPAGATED)  # type: ignore[index]
    assert condition["status"] == "True"
    assert "ConfigMap model-config" in condition["message"] and "Secret hf-token" in condition["message"]


async def test_dependencies_follow_a_rescheduling(objects: ObjectStore, manager: ControllerManager) -> None:
    await two_clusters(objects, manager)
    await create(objects, config_map("model-config"))
    await create(objects, policy("web", clusters=["onprem"]))
    await create(objects, web(token=None))
    await works_in(objects, "model-config-configmap", {"onprem"})

    def place(clusters: list[str]) -> Any:
        def edit(obj: dict[str, Any]) -> None:
            obj["spec"]["placement"]["clusterAffinity"]["clusterNames"] = clusters

        return edit

    await change(objects, "policy.gpufed.io/v1alpha1", "PropagationPolicy", "web", place(["onprem", "cloud"]))
    await works_in(objects, "web-deployment", {"onprem", "cloud"})
    await works_in(objects, "model-config-configmap", {"onprem", "cloud"})

    await change(objects, "policy.gpufed.io/v1alpha1", "PropagationPolicy", "web", place(["cloud"]))
    await works_in(objects, "web-deployment", {"cloud"})
    await works_in(objects, "model-config-configmap", {"cloud"})
    assert parents(await binding_of(objects, "model-config-configmap")) == {"web-deployment": ("cloud",)}


async def test_a_shared_dependency_has_one_binding_and_one_work_per_cluster(
    objects: ObjectStore, manager: ControllerManager
) -> None:
    await two_clusters(objects, manager)
    await create(objects, config_map("shared"))
    await create(objects, policy("a", clusters=["onprem"], selects="a"))
    await create(objects, policy("b", clusters=["onprem", "cloud"], selects="b"))
    await create(objects, web("a", config="shared", token=None))
    await create(objects, web("b", config="shared", token=None))

    await works_in(objects, "shared-configmap", {"onprem", "cloud"})

    async def both() -> dict[str, Any] | None:
        found = await binding_of(objects, "shared-configmap")
        return found if set(parents(found)) == {"a-deployment", "b-deployment"} else None

    attached = await eventually(both, what="two parents on the shared ConfigMap's binding")
    assert parents(attached) == {"a-deployment": ("onprem",), "b-deployment": ("cloud", "onprem")}
    works = await objects.list(rt(objects, WORK_API, "Work"), namespace="gpufed-es-onprem")
    config_works = [w for w in works.items if manifest(w)["kind"] == "ConfigMap"]
    assert [w["metadata"]["name"] for w in config_works] == ["default-shared-configmap"]

    # One parent goes: the object stays for the other, only where the other runs.
    await objects.delete(rt(objects, "apps/v1", "Deployment"), namespace=NS, name="b")
    await works_in(objects, "shared-configmap", {"onprem"})
    assert parents(await binding_of(objects, "shared-configmap")) == {"a-deployment": ("onprem",)}

    # The last parent goes: the attached binding and its Works go too.
    await objects.delete(rt(objects, "apps/v1", "Deployment"), namespace=NS, name="a")
    await works_in(objects, "shared-configmap", set())
    await eventually(lambda: _gone(objects, "shared-configmap"), what="the attached binding deleted")
    assert await get_or_none(objects, "v1", "ConfigMap", "shared") is not None  # the hub keeps the object


async def _gone(objects: ObjectStore, name: str) -> bool:
    return await binding_of(objects, name) is None


async def test_a_dependency_edited_on_the_hub_is_edited_in_its_works(objects: ObjectStore, manager: ControllerManager) -> None:
    await two_clusters(objects, manager)
    await create(objects, config_map("model-config", model="llama"))
    await create(objects, policy("web", clusters=["onprem", "cloud"]))
    await create(objects, web(token=None))
    await works_in(objects, "model-config-configmap", {"onprem", "cloud"})

    def edit(obj: dict[str, Any]) -> None:
        obj["data"] = {"model": "mistral"}

    await change(objects, "v1", "ConfigMap", "model-config", edit)

    async def updated() -> dict[str, str] | None:
        works = await works_of(objects, "model-config-configmap")
        data = {name: manifest(w)["data"]["model"] for name, w in works.items()}
        return data if data == {"onprem": "mistral", "cloud": "mistral"} else None

    await eventually(updated, what="both Works carrying the new data")


PLAIN_EDITS = [
    # (the object, its edit on the hub, where its Works show it, the value they show after)
    (config_map("settings", a="1"), lambda obj: obj["data"].update(a="2"), ("data", "a"), "2"),
    (
        {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "token", "namespace": NS}, "data": {"t": "eA=="}},
        lambda obj: obj["data"].update(t="eQ=="), ("data", "t"), "eQ==",
    ),
    (
        {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web", "namespace": NS},
         "spec": {"selector": {"app": "web"}, "ports": [{"name": "http", "port": 80}]}},
        lambda obj: obj["spec"]["ports"][0].update(port=8080), ("spec", "ports", 0, "port"), 8080,
    ),
    # A ConfigMap with a generation of its own (one an older hub stored: it no longer moves).
    (
        {**config_map("legacy", a="1"), "metadata": {"name": "legacy", "namespace": NS, "generation": 1}},
        lambda obj: obj["data"].update(a="2"), ("data", "a"), "2",
    ),
]


@pytest.mark.parametrize(("obj", "edit", "where", "after"), PLAIN_EDITS, ids=["ConfigMap", "Secret", "Service", "legacy"])
async def test_an_edit_of_an_object_without_a_generation_reaches_its_works(
    objects: ObjectStore, manager: ControllerManager, obj: dict[str, Any], edit: Any, where: tuple[Any, ...], after: Any
) -> None:
    name, kind = obj["metadata"]["name"], obj["kind"]
    bound = f"{name}-{kind.lower()}"
    await two_clusters(objects, manager)
    await create(objects, policy(name, clusters=["onprem", "cloud"], propagate_deps=False, selects=name, kind=kind))
    await create(objects, copy.deepcopy(obj))
    await works_in(objects, bound, {"onprem", "cloud"})
    await change(objects, "v1", kind, name, edit)

    def shown(work: dict[str, Any]) -> Any:
        value: Any = manifest(work)
        for step in where:
            value = value[step]
        return value

    async def edited() -> bool:
        works = await works_of(objects, bound)
        return {cluster: shown(w) for cluster, w in works.items()} == {"onprem": after, "cloud": after}

    await eventually(edited, what=f"both Works of the {kind} carrying the edit")


async def test_without_propagate_deps_nothing_follows_and_turning_it_off_removes_them(
    objects: ObjectStore, manager: ControllerManager
) -> None:
    await two_clusters(objects, manager)
    await create(objects, config_map("model-config"))
    await create(objects, policy("web", clusters=["onprem"], propagate_deps=False))
    await create(objects, web(token=None))
    await works_in(objects, "web-deployment", {"onprem"})
    await settled(manager)
    assert await binding_of(objects, "model-config-configmap") is None
    assert await works_of(objects, "model-config-configmap") == {}

    def turn(on: bool) -> Any:
        def edit(obj: dict[str, Any]) -> None:
            obj["spec"]["propagateDeps"] = on

        return edit

    await change(objects, "policy.gpufed.io/v1alpha1", "PropagationPolicy", "web", turn(True))
    await works_in(objects, "model-config-configmap", {"onprem"})
    await change(objects, "policy.gpufed.io/v1alpha1", "PropagationPolicy", "web", turn(False))
    await works_in(objects, "model-config-configmap", set())
    await eventually(lambda: _gone(objects, "model-config-configmap"), what="the attached binding deleted")
    await works_in(objects, "web-deployment", {"onprem"})  # the workload itself stays


async def test_a_missing_dependency_is_reported_and_follows_once_created(
    objects: ObjectStore, manager: ControllerManager
) -> None:
    await two_clusters(objects, manager)
    await create(objects, policy("web", clusters=["onprem"]))
    await create(objects, web(config="model-config", token=None))
    await works_in(objects, "web-deployment", {"onprem"})  # the workload propagates anyway

    async def condition(status: str) -> dict[str, Any] | None:
        parent = await binding_of(objects, "web-deployment")
        for cond in ((parent or {}).get("status") or {}).get("conditions") or ():
            if cond["type"] == "DependenciesPropagated" and cond["status"] == status:
                return dict(cond)
        return None

    missing = await eventually(lambda: condition("False"), what="DependenciesPropagated=False")
    assert missing["reason"] == "DependencyMissing"
    assert "ConfigMap model-config is referenced by the pod template but not on the hub" in missing["message"]

    async def warned() -> list[dict[str, Any]] | None:
        events = await objects.list(rt(objects, "v1", "Event"), namespace=NS)
        found = [e for e in events.items if e["reason"] == "DependencyMissing" and e["involvedObject"]["name"] == "web"]
        return found or None

    [event] = await eventually(warned, what="a DependencyMissing Event on the Deployment")
    assert event["type"] == "Warning" and "ConfigMap model-config" in event["message"]
    assert await binding_of(objects, "model-config-configmap") is None

    await create(objects, config_map("model-config"))
    await works_in(objects, "model-config-configmap", {"onprem"})
    await eventually(lambda: condition("True"), what="DependenciesPropagated=True once created")

    # Deleted again on the hub: its binding, its Works and the member copies go; reported again.
    await objects.delete(rt(objects, "v1", "ConfigMap"), namespace=NS, name="model-config")
    await works_in(objects, "model-config-configmap", set())
    await eventually(lambda: condition("False"), what="DependenciesPropagated=False after deletion")


async def test_a_dependency_a_policy_selects_itself_keeps_its_own_binding(
    objects: ObjectStore, manager: ControllerManager
) -> None:
    await two_clusters(objects, manager)
    await create(objects, config_map("model-config"))
    await create(objects, policy("config-everywhere", clusters=["cloud"], kind="ConfigMap", propagate_deps=False))
    await create(objects, policy("web", clusters=["onprem"]))
    await create(objects, web(token=None))
    await works_in(objects, "web-deployment", {"onprem"})
    await works_in(objects, "model-config-configmap", {"cloud"})
    await settled(manager)
    own = await binding_of(objects, "model-config-configmap")
    assert own is not None and not is_attached(own)
    assert own["spec"]["policy"]["name"] == "config-everywhere"
    assert "requiredBy" not in own["spec"]
    assert await clusters_of(objects, "model-config-configmap") == {"cloud"}
    parent = await binding_of(objects, "web-deployment")
    condition = next(c for c in parent["status"]["conditions"] if c["type"] == "DependenciesPropagated")  # type: ignore[index]
    assert "placed by its own policy PropagationPolicy default/config-everywhere" in condition["message"]


async def test_a_restarted_hub_keeps_the_attached_bindings_as_they_are(objects: ObjectStore) -> None:
    await two_clusters(objects)
    await create(objects, config_map("model-config"))
    await create(objects, policy("web", clusters=["onprem", "cloud"]))
    await create(objects, web(token=None))
    async with ControllerManager(objects, settings=FAST) as first:
        await works_in(objects, "model-config-configmap", {"onprem", "cloud"})
        await settled(first)
    before = await binding_of(objects, "model-config-configmap")
    works_before = await works_of(objects, "model-config-configmap")
    async with ControllerManager(objects, settings=FAST) as second:
        await settled(second, settle=0.3)
    after = await binding_of(objects, "model-config-configmap")
    assert before is not None and after is not None
    assert after["metadata"]["uid"] == before["metadata"]["uid"]
    assert after["metadata"]["resourceVersion"] == before["metadata"]["resourceVersion"]
    assert {n: w["metadata"]["resourceVersion"] for n, w in (await works_of(objects, "model-config-configmap")).items()} == {
        n: w["metadata"]["resourceVersion"] for n, w in works_before.items()
    }


async def test_every_role_of_a_training_job_brings_its_pvc_and_service_account(
    objects: ObjectStore, manager: ControllerManager
) -> None:
    await two_clusters(objects, manager)
    await create(
        objects,
        {
            "apiVersion": "v1",
            "kind": "PersistentVolumeClaim",
            "metadata": {"name": "checkpoints", "namespace": NS},
            "spec": {"accessModes": ["ReadWriteMany"], "resources": {"requests": {"storage": "100Gi"}}},
        },
    )
    await create(objects, {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "trainer", "namespace": NS}})
    job_policy = policy("train", clusters=["cloud"])
    job_policy["spec"]["resourceSelectors"] = [{"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob"}]
    await create(objects, job_policy)

    def role(replicas: int, **pod: Any) -> dict[str, Any]:
        containers = [{"name": "pytorch", "image": "train:1", "resources": {"limits": {"nvidia.com/gpu": "1"}}}]
        return {"replicas": replicas, "template": {"spec": {"containers": containers, **pod}}}

    await create(
        objects,
        {
            "apiVersion": "kubeflow.org/v1",
            "kind": "PyTorchJob",
            "metadata": {"name": "finetune", "namespace": NS},
            "spec": {
                "pytorchReplicaSpecs": {
                    "Master": role(1, serviceAccountName="trainer"),
                    "Worker": role(2, volumes=[{"name": "ckpt", "persistentVolumeClaim": {"claimName": "checkpoints"}}]),
                }
            },
        },
    )
    await works_in(objects, "finetune-pytorchjob", {"cloud"})
    pvc = await works_in(objects, "checkpoints-persistentvolumeclaim", {"cloud"})
    assert manifest(pvc["cloud"])["spec"]["resources"] == {"requests": {"storage": "100Gi"}}
    assert "status" not in manifest(pvc["cloud"])
    await works_in(objects, "trainer-serviceaccount", {"cloud"})


# --- review findings: scale, a deleted policy, preserved copies, lost events ----------------


async def test_hundreds_of_workloads_in_one_namespace_settle_each_with_its_own_configmap(
    objects: ObjectStore, manager: ControllerManager
) -> None:
    count = 300
    await put_cluster(objects, "onprem", node_shape(count, gpus=8))
    await settled(manager)
    everything = policy("all", clusters=["onprem"])
    await create(objects, everything)
    for i in range(count):
        await create(objects, config_map(f"cfg-{i}"))
        await create(objects, web(f"w-{i}", config=f"cfg-{i}", token=None))
    # A liveness bound, not a speed figure: before attached bindings were found by index, a
    # namespace this size kept the controllers busy for minutes.
    await settled(manager, settle=0.2, seconds=150)
    listed = await objects.list(rt(objects, WORK_API, "ResourceBinding"), namespace=NS)
    attached = {b["metadata"]["name"]: b for b in listed.items if is_attached(b)}
    assert sorted(attached) == sorted(f"cfg-{i}-configmap" for i in range(count))
    for i in range(count):
        assert parents(attached[f"cfg-{i}-configmap"]) == {f"w-{i}-deployment": ("onprem",)}


async def test_deleting_the_policy_keeps_the_dependencies_with_the_workload(
    objects: ObjectStore, manager: ControllerManager
) -> None:
    await two_clusters(objects, manager)
    await create(objects, config_map("model-config"))
    await create(objects, policy("web", clusters=["onprem"]))
    await create(objects, web(token=None))
    await works_in(objects, "model-config-configmap", {"onprem"})
    parent = await binding_of(objects, "web-deployment")
    assert parent is not None and parent["spec"]["propagateDeps"] is True

    await objects.delete(rt(objects, "policy.gpufed.io/v1alpha1", "PropagationPolicy"), namespace=NS, name="web")
    await settled(manager, settle=0.3)
    # The detector keeps the workload's binding (PolicyRemoved), and so its objects stay.
    assert await clusters_of(objects, "web-deployment") == {"onprem"}
    assert await clusters_of(objects, "model-config-configmap") == {"onprem"}
    assert parents(await binding_of(objects, "model-config-configmap")) == {"web-deployment": ("onprem",)}


async def test_a_binding_left_by_a_deleted_configmap_policy_is_taken_back_as_attached(
    objects: ObjectStore, manager: ControllerManager
) -> None:
    await two_clusters(objects, manager)
    await create(objects, config_map("model-config"))
    await create(objects, policy("web", clusters=["onprem"]))
    await create(objects, web(token=None))
    await works_in(objects, "model-config-configmap", {"onprem"})
    await create(objects, policy("config-in-cloud", clusters=["cloud"], kind="ConfigMap", propagate_deps=False))
    await works_in(objects, "model-config-configmap", {"cloud"})

    await objects.delete(rt(objects, "policy.gpufed.io/v1alpha1", "PropagationPolicy"), namespace=NS, name="config-in-cloud")

    async def attached_again() -> dict[str, Any] | None:
        found = await binding_of(objects, "model-config-configmap")
        return found if is_attached(found) else None

    taken = await eventually(attached_again, what="the ConfigMap's binding attached again")
    assert "policy" not in taken["spec"] and "placement" not in taken["spec"]
    assert parents(taken) == {"web-deployment": ("onprem",)}
    await works_in(objects, "model-config-configmap", {"onprem"})
    await settled(manager)
    parent = await binding_of(objects, "web-deployment")
    condition = next(c for c in parent["status"]["conditions"] if c["type"] == "DependenciesPropagated")  # type: ignore[index]
    assert "own policy" not in condition["message"] and "ConfigMap model-config" in condition["message"]


@pytest.mark.parametrize(
    ("plain_runs_in", "onprem_after"),
    [(["cloud"], set()), (["onprem", "cloud"], {"onprem"})],
    ids=["elsewhere", "in-the-same-cluster-too"],
)
async def test_a_preserved_workload_keeps_a_configmap_it_shares_with_one_that_does_not_preserve(
    objects: ObjectStore, manager: ControllerManager, plain_runs_in: list[str], onprem_after: set[str]
) -> None:
    await two_clusters(objects, manager)
    assert manager.context is not None
    deleted: list[dict[str, Any]] = []

    async def on_work(event: WatchEventType, obj: dict[str, Any], old: dict[str, Any] | None) -> None:
        if event is WatchEventType.DELETED and obj["metadata"]["name"] == "default-shared-configmap":
            deleted.append(obj)

    manager.context.works.add_handler(on_work)
    await create(objects, config_map("shared"))
    keep = policy("keep", clusters=["onprem"], selects="keeper")
    keep["spec"]["preserveResourcesOnDeletion"] = True
    await create(objects, keep)
    await create(objects, policy("plain", clusters=plain_runs_in, selects="plain"))
    await create(objects, web("keeper", config="shared", token=None))
    await create(objects, web("plain", config="shared", token=None))
    works = await works_in(objects, "shared-configmap", {"onprem", "cloud"})
    assert all(w["spec"].get("preserveResourcesOnDeletion") is True for w in works.values())

    await objects.delete(rt(objects, "apps/v1", "Deployment"), namespace=NS, name="keeper")
    await eventually(lambda: _gone(objects, "keeper-deployment"), what="the keeper's binding gone")
    await works_in(objects, "shared-configmap", {"cloud"} | onprem_after)
    await settled(manager)
    remaining = await works_of(objects, "shared-configmap")
    if onprem_after:
        # The onprem copy still serves the plain workload, and keeps the flag for the keeper.
        assert remaining["onprem"]["spec"].get("preserveResourcesOnDeletion") is True
        assert not deleted
        await objects.delete(rt(objects, "apps/v1", "Deployment"), namespace=NS, name="plain")
        await works_in(objects, "shared-configmap", set())
    else:
        assert "preserveResourcesOnDeletion" not in remaining["cloud"]["spec"]
        assert parents(await binding_of(objects, "shared-configmap")) == {"plain-deployment": ("cloud",)}
    # The onprem copy was deleted with the flag: the agent leaves the ConfigMap running beside
    # the Deployment it keeps. (The Work informer delivers the deletion after storage has it.)

    async def onprem_deleted() -> list[dict[str, Any]]:
        return [w for w in deleted if w["metadata"]["namespace"] == "gpufed-es-onprem"]

    onprem = await eventually(onprem_deleted, what="the onprem Work's deletion delivered")
    assert onprem[0]["spec"].get("preserveResourcesOnDeletion") is True


async def test_the_missing_dependency_event_is_recorded_before_the_condition(
    objects: ObjectStore, manager: ControllerManager
) -> None:
    await two_clusters(objects, manager)
    assert manager.context is not None
    reported: list[int] = []

    async def on_binding(event: WatchEventType, obj: dict[str, Any], old: dict[str, Any] | None) -> None:
        for cond in (obj.get("status") or {}).get("conditions") or ():
            if cond["type"] == "DependenciesPropagated" and cond["reason"] == "DependencyMissing":
                reported.append(int(obj["metadata"]["resourceVersion"]))

    manager.context.bindings.add_handler(on_binding)
    await create(objects, policy("web", clusters=["onprem"]))
    await create(objects, web(config="absent", token=None))
    await eventually(lambda: _true(bool(reported)), what="the DependencyMissing condition")
    events = await objects.list(rt(objects, "v1", "Event"), namespace=NS)
    [event] = [e for e in events.items if e["reason"] == "DependencyMissing"]
    # Written first: a reconcile that stops between the two writes reports again.
    assert int(event["metadata"]["resourceVersion"]) < min(reported)


async def _true(value: bool) -> bool:
    return value


async def test_a_parent_deleted_meanwhile_is_not_an_error(objects: ObjectStore) -> None:
    controller = DependenciesController(ControllerContext(objects, settings=FAST))
    gone = {
        "apiVersion": WORK_API,
        "kind": "ResourceBinding",
        "metadata": {"name": "web-deployment", "namespace": NS, "resourceVersion": "7", "uid": "u"},
        "spec": {"resource": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web", "namespace": NS}},
    }
    condition = dependencies_condition([Dependency(CM, "cfg")], [], {})
    await controller.write_parent_condition(gone, condition, missing=[])  # raised NotFound before
    assert await binding_of(objects, "web-deployment") is None
