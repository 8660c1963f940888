"""The agent against a real hub (HTTPS, tokens, embedded etcd) and a simulated member API.

Both servers run in-process on 127.0.0.1; the agent reaches them only over HTTP(S), exactly as
in production. The member serves the simulator's nodes through the same API machinery.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import threading
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import pytest
import yaml
from aiohttp import web
from pydantic import SecretStr

from controlplane import hub as hub_module
from controlplane.apiserver import app as app_module
from controlplane.apiserver import errors
from controlplane.apiserver.identity import Role
from controlplane.apiserver.kinds.coordination import coordination_resources
from controlplane.apiserver.kinds.core import core_resources
from controlplane.apiserver.kinds.dra import RESOURCE_CLAIM, RESOURCE_CLAIM_TEMPLATE
from controlplane.apiserver.kinds.workloads import workload_resources
from controlplane.apiserver.objects import ObjectStore
from controlplane.apiserver.patches import PatchType
from controlplane.apiserver.resources import Registry, with_kube_rules
from controlplane.apiserver.tls import ca_hash
from controlplane.hubconfig import HubConfig
from controlplane.storage import MemoryStore
from member_agent import capacity
from member_agent.agent import Agent
from member_agent.config import AgentConfig
from member_agent.trust import TrustError
from simulator.nodes import build_nodes
from simulator.profile import parse_fleet

Hub = Any

pytestmark = [pytest.mark.timeout(120), pytest.mark.waiting]

T = TypeVar("T")
CLUSTER = "sim-a"
WORK_NS = f"gpufed-es-{CLUSTER}"
FLEET = {
    "clusters": [
        {
            "name": CLUSTER,
            "nodeGroups": [
                {
                    "name": "whole",
                    "count": 2,
                    "cpu": 64,
                    "memoryGiB": 512,
                    "gpu": {"product": "NVIDIA-A100-SXM4-80GB", "count": 8},
                },
                {
                    "name": "mig",
                    "count": 1,
                    "cpu": 64,
                    "memoryGiB": 512,
                    "gpu": {
                        "product": "NVIDIA-H100-80GB-HBM3",
                        "count": 4,
                        "mig": {"strategy": "mixed", "layout": ["3g.40gb", "2g.20gb", "1g.10gb", "1g.10gb"]},
                    },
                },
            ],
        }
    ]
}


async def eventually(
    probe: Callable[[], Awaitable[T | None]], *, within: float = 30.0, what: str = "condition"
) -> T:
    """Poll ``probe`` until it returns something truthy."""
    deadline = asyncio.get_running_loop().time() + within
    last: Any = None
    while True:
        try:
            last = await probe()
            if last:
                return last  # type: ignore[no-any-return]
        except (errors.ApiError, KeyError, IndexError) as exc:
            last = exc
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"timed out waiting for {what}; last: {last!r}")
        await asyncio.sleep(0.1)


@dataclass
class Member:
    objects: ObjectStore
    kubeconfig: Path

    def rt(self, api_version: str, kind: str) -> Any:
        return self.objects.registry.require(api_version, kind)

    async def get(
        self, api_version: str, kind: str, name: str, namespace: str | None = None
    ) -> dict[str, Any] | None:
        try:
            return await self.objects.get(self.rt(api_version, kind), namespace=namespace, name=name)
        except errors.NotFound:
            return None


@pytest.fixture
async def hub(tmp_path: Path) -> AsyncIterator[Hub]:
    async with hub_module.Hub(HubConfig(state_dir=tmp_path / "hub", port=0)) as running:
        assert running.objects is not None
        namespace = running.objects.registry.require("v1", "Namespace")
        await running.objects.create(
            namespace, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": WORK_NS}}
        )
        yield running


@pytest.fixture
async def member(tmp_path: Path, request: pytest.FixtureRequest) -> AsyncIterator[Member]:
    """The simulated member; a test parametrised indirectly with resource types has them served too."""
    async with MemoryStore() as store:
        registry = Registry(core_resources(), workload_resources(), coordination_resources(), with_kube_rules(list(getattr(request, "param", ()))))
        objects = ObjectStore(store, registry)
        await objects.bootstrap()
        node_type = registry.require("v1", "Node")
        for node in build_nodes(parse_fleet(FLEET).clusters[0]):
            # As a kubelet does: register the node, then report its status.
            created = await objects.create(node_type, node)
            await objects.update_status(node_type, {**created, "status": node["status"]})
        runner = web.AppRunner(app_module.create_app(objects, registry), access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        port = runner.addresses[0][1]
        kubeconfig = tmp_path / "member.kubeconfig"
        kubeconfig.write_text(
            yaml.safe_dump(
                {
                    "apiVersion": "v1",
                    "kind": "Config",
                    "clusters": [{"name": "sim", "cluster": {"server": f"http://127.0.0.1:{port}"}}],
                    "users": [{"name": "agent", "user": {"token": "unused"}}],
                    "contexts": [{"name": "sim", "context": {"cluster": "sim", "user": "agent"}}],
                    "current-context": "sim",
                }
            )
        )
        try:
            yield Member(objects=objects, kubeconfig=kubeconfig)
        finally:
            await runner.cleanup()


async def agent_config(hub: Hub, member: Member, state_dir: Path, *, token: str | None) -> AgentConfig:
    assert hub.pki is not None
    return AgentConfig(
        hub=hub.url,
        hub_ca_hash=ca_hash(hub.pki.ca_pem),
        bootstrap_token=SecretStr(token) if token else None,
        cluster_name=CLUSTER,
        kubeconfig=member.kubeconfig,
        state_dir=state_dir,
        provider="onprem",
        region="eu-west",
        labels={"team": "ml"},
        pricing={"NVIDIA-A100-SXM4-80GB": 1.2},
        heartbeat_interval=0.5,
        report_interval=1.0,
        report_debounce=0.1,
        # Longer than any test: Work statuses must follow member events, not the periodic pass.
        status_resync_interval=3600,
    )


async def joining_agent_config(hub: Hub, member: Member, state_dir: Path) -> AgentConfig:
    """The config of an agent that joins with a fresh one-time bootstrap token."""
    assert hub.tokens is not None
    issued = await hub.tokens.create(
        role=Role.BOOTSTRAP, name="join-sim-a", cluster=CLUSTER, ttl=dt.timedelta(hours=1), one_time=True
    )
    return await agent_config(hub, member, state_dir, token=issued.token)


def work_object(name: str, manifests: list[dict[str, Any]], **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "work.gpufed.io/v1alpha1",
        "kind": "Work",
        "metadata": {"name": name, "namespace": WORK_NS},
        "spec": {"workload": {"manifests": manifests}, **spec},
    }


DEPLOYMENT = {
    "apiVersion": "apps/v1",
    "kind": "Deployment",
    "metadata": {"name": "infer", "namespace": "ml"},
    "spec": {
        "replicas": 2,
        "selector": {"matchLabels": {"app": "infer"}},
        "template": {
            "metadata": {"labels": {"app": "infer"}},
            "spec": {
                "containers": [
                    {
                        "name": "main",
                        "image": "infer:1",
                        "resources": {"limits": {"nvidia.com/mig-1g.10gb": "1"}},
                    }
                ]
            },
        },
    },
}
CONFIGMAP = {
    "apiVersion": "v1",
    "kind": "ConfigMap",
    "metadata": {"name": "settings", "namespace": "ml"},
    "data": {"k": "v"},
}


async def test_agent_registers_reports_applies_and_prunes(hub: Hub, member: Member, tmp_path: Path) -> None:
    assert hub.objects is not None
    cfg = await joining_agent_config(hub, member, tmp_path / "agent")
    cluster_rt = hub.objects.registry.require("cluster.gpufed.io/v1alpha1", "Cluster")
    work_rt = hub.objects.registry.require("work.gpufed.io/v1alpha1", "Work")
    lease_rt = hub.objects.registry.require("coordination.k8s.io/v1", "Lease")

    async def cluster_status() -> dict[str, Any] | None:
        cluster = await hub.objects.get(cluster_rt, name=CLUSTER)
        status = cluster.get("status") or {}
        return cluster if status.get("gpuSummary") else None

    async with Agent(cfg):
        cluster = await eventually(cluster_status, what="the Cluster's first capacity report")
        assert cluster["spec"]["provider"] == "onprem" and cluster["spec"]["region"] == "eu-west"
        assert cluster["metadata"]["labels"]["team"] == "ml"
        status = cluster["status"]
        assert status["nodeSummary"] == {"total": 3, "ready": 3}
        assert status["nodeScoring"] == "LeastAllocated"  # the agent's default: kube-scheduler's
        gpus = {(e["resource"], e["product"]): e for e in status["gpuSummary"]}
        assert gpus[("nvidia.com/gpu", "NVIDIA-A100-SXM4-80GB")]["allocatable"] == 16
        assert gpus[("nvidia.com/mig-1g.10gb", "NVIDIA-H100-80GB-HBM3")]["allocatable"] == 8
        assert sorted(s["count"] for s in status["nodeShapes"]) == [1, 2]
        assert status["conditions"][0]["type"] == "Ready" and status["conditions"][0]["status"] == "True"

        lease = await eventually(
            lambda: hub.objects.get(lease_rt, namespace="gpufed-cluster-lease", name=CLUSTER), what="lease"
        )
        first_renewal = lease["spec"]["renewTime"]

        async def renewed() -> bool:
            again = await hub.objects.get(lease_rt, namespace="gpufed-cluster-lease", name=CLUSTER)
            return bool(again["spec"]["renewTime"] != first_renewal)

        await eventually(renewed, what="a lease renewal")

        # A Work is applied into the member (namespace created), and its status comes back.
        await hub.objects.create(work_rt, work_object("infer", [DEPLOYMENT, CONFIGMAP]))
        deployment = await eventually(
            lambda: member.get("apps/v1", "Deployment", "infer", "ml"), what="the Deployment in the member"
        )
        labels = deployment["metadata"]["labels"]
        assert labels["work.gpufed.io/name"] == "infer" and labels["work.gpufed.io/namespace"] == WORK_NS
        assert any(
            m.get("manager") == "gpufed-agent" for m in deployment["metadata"].get("managedFields") or []
        )
        assert await member.get("v1", "Namespace", "ml") is not None

        async def applied() -> dict[str, Any] | None:
            work = await hub.objects.get(work_rt, namespace=WORK_NS, name="infer")
            conditions = {c["type"]: c for c in (work.get("status") or {}).get("conditions") or []}
            return work if conditions.get("Applied", {}).get("status") == "True" else None

        work = await eventually(applied, what="the Work's Applied condition")
        kinds = [m["identifier"]["kind"] for m in work["status"]["manifestStatuses"]]
        assert kinds == ["Deployment", "ConfigMap"]

        # The Work's status follows the member: the Deployment's rollout and a pod the member's
        # scheduler cannot place reach the hub without waiting for a periodic refresh.
        assert {c["type"]: c["status"] for c in work["status"]["conditions"]}["Available"] != "True"
        deployment_rt = member.rt("apps/v1", "Deployment")
        live = await member.get("apps/v1", "Deployment", "infer", "ml")
        assert live is not None
        rolled_out = {
            "observedGeneration": live["metadata"]["generation"],
            "replicas": 2,
            "updatedReplicas": 2,
        }
        await member.objects.update_status(
            deployment_rt, {**live, "status": {**rolled_out, "readyReplicas": 2, "availableReplicas": 2}}
        )

        async def available() -> dict[str, Any] | None:
            w = await hub.objects.get(work_rt, namespace=WORK_NS, name="infer")
            conditions = {c["type"]: c for c in (w.get("status") or {}).get("conditions") or []}
            return w if conditions.get("Available", {}).get("status") == "True" else None

        work = await eventually(available, what="the Work's Available condition after the rollout")
        assert work["status"]["manifestStatuses"][0]["status"]["availableReplicas"] == 2

        await member.objects.create(
            member.rt("v1", "Pod"),
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {
                    "name": "infer-5d9c7-x1x2x",
                    "namespace": "ml",
                    "labels": {"app": "infer", "pod-template-hash": "5d9c7"},
                    "ownerReferences": [
                        {
                            "apiVersion": "apps/v1",
                            "kind": "ReplicaSet",
                            "name": "infer-5d9c7",
                            "uid": "rs-uid",
                            "controller": True,
                        }
                    ],
                },
                "spec": {"containers": [{"name": "main", "image": "infer:1"}]},
            },
        )
        pod = await member.get("v1", "Pod", "infer-5d9c7-x1x2x", "ml")
        assert pod is not None
        refused = "0/3 nodes are available: 3 Insufficient nvidia.com/mig-1g.10gb."
        await member.objects.update_status(
            member.rt("v1", "Pod"),
            {
                **pod,
                "status": {
                    "phase": "Pending",
                    "conditions": [
                        {
                            "type": "PodScheduled",
                            "status": "False",
                            "reason": "Unschedulable",
                            "message": refused,
                        }
                    ],
                },
            },
        )

        async def unschedulable() -> dict[str, Any] | None:
            w = await hub.objects.get(work_rt, namespace=WORK_NS, name="infer")
            entry = (w.get("status") or {}).get("manifestStatuses", [{}])[0]
            return entry.get("unschedulable")  # type: ignore[no-any-return]

        assert await eventually(unschedulable, what="the unschedulable pod in the Work status") == {
            "pods": 1,
            "message": refused,
        }

        # Dropping a manifest prunes it from the member.
        work = await hub.objects.get(work_rt, namespace=WORK_NS, name="infer")
        work["spec"]["workload"]["manifests"] = [DEPLOYMENT]
        await hub.objects.update(work_rt, work)

        async def configmap_gone() -> bool:
            return await member.get("v1", "ConfigMap", "settings", "ml") is None

        await eventually(configmap_gone, what="the dropped ConfigMap to be pruned")

        # Abort: an object gpufed does not own is left alone and the Work says so.
        configmap_rt = member.rt("v1", "ConfigMap")
        await member.objects.create(
            configmap_rt,
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": "theirs", "namespace": "ml"},
                "data": {"a": "1"},
            },
        )
        theirs = {**CONFIGMAP, "metadata": {"name": "theirs", "namespace": "ml"}, "data": {"a": "2"}}
        await hub.objects.create(work_rt, work_object("conflicting", [theirs]))

        async def conflict_reported() -> dict[str, Any] | None:
            w = await hub.objects.get(work_rt, namespace=WORK_NS, name="conflicting")
            conditions = {c["type"]: c for c in (w.get("status") or {}).get("conditions") or []}
            return (
                conditions.get("Applied")
                if conditions.get("Applied", {}).get("reason") == "ApplyConflict"
                else None
            )

        condition = await eventually(conflict_reported, what="the Abort conflict in the Work status")
        assert condition["status"] == "False" and "theirs" in condition["message"]
        untouched = await member.get("v1", "ConfigMap", "theirs", "ml")
        assert untouched is not None and untouched["data"] == {"a": "1"}

        # Deleting the Work deletes what it applied.
        await hub.objects.delete(work_rt, namespace=WORK_NS, name="infer")

        async def deployment_gone() -> bool:
            return await member.get("apps/v1", "Deployment", "infer", "ml") is None

        await eventually(deployment_gone, what="the deleted Work's Deployment to go")

    # A restart reuses the stored credential (the one-time bootstrap token is spent).
    restarted = await agent_config(hub, member, tmp_path / "agent", token=None)
    before = (await hub.objects.get(cluster_rt, name=CLUSTER))["status"]["lastReportTime"]
    reported_at = dt.datetime.fromisoformat(before.replace("Z", "+00:00"))

    async def next_second() -> bool:  # report times have a one-second resolution
        return dt.datetime.now(dt.UTC).replace(microsecond=0) > reported_at

    await eventually(next_second, what="a report time that differs from the last one")

    async def reported_again() -> bool:
        cluster = await hub.objects.get(cluster_rt, name=CLUSTER)
        return bool(cluster["status"]["lastReportTime"] != before)

    async with Agent(restarted):
        await eventually(reported_again, what="a report from the restarted agent")


RETAIN_MEMBER_VALUE = """
function Retain(desiredObj, observedObj)
  desiredObj.data.retained = observedObj.data.extra
  return desiredObj
end
"""


async def test_a_changed_retention_applies_the_works_of_its_kind_again(
    hub: Hub, member: Member, tmp_path: Path
) -> None:
    """A customization whose retention comes (or changes) applies the Works carrying its kind at
    once, not at the next Work change or periodic resync (300 s, longer than this test)."""
    assert hub.objects is not None
    cfg = await joining_agent_config(hub, member, tmp_path / "agent")
    work_rt = hub.objects.registry.require("work.gpufed.io/v1alpha1", "Work")
    customization_rt = hub.objects.registry.require("config.karmada.io/v1alpha1", "ResourceInterpreterCustomization")
    async with Agent(cfg):
        await hub.objects.create(work_rt, work_object("settings", [CONFIGMAP]))
        await eventually(lambda: member.get("v1", "ConfigMap", "settings", "ml"), what="the ConfigMap in the member")
        await member.objects.patch(
            member.rt("v1", "ConfigMap"), namespace="ml", name="settings", patch_type=PatchType.MERGE,
            # A key the Work does not set: the agent's repair of the member's change keeps it.
            patch={"data": {"extra": "member"}}, field_manager="someone-else",
        )
        await hub.objects.create(
            customization_rt,
            {
                "apiVersion": "config.karmada.io/v1alpha1",
                "kind": "ResourceInterpreterCustomization",
                "metadata": {"name": "configmap-retention"},
                "spec": {
                    "target": {"apiVersion": "v1", "kind": "ConfigMap"},
                    "customizations": {"retention": {"luaScript": RETAIN_MEMBER_VALUE}},
                },
            },
        )

        async def retained() -> dict[str, Any] | None:
            live = await member.get("v1", "ConfigMap", "settings", "ml")
            return live if live is not None and (live.get("data") or {}).get("retained") == "member" else None

        live = await eventually(retained, what="the ConfigMap applied again with the new retention")
        assert live["data"]["k"] == "v"  # the Work's value applied again, the member's kept aside


async def test_agent_refuses_a_hub_whose_ca_does_not_match_the_pin(
    hub: Hub, member: Member, tmp_path: Path
) -> None:
    cfg = (await agent_config(hub, member, tmp_path / "agent", token="abcdef.0123456789abcdef")).model_copy(
        update={"hub_ca_hash": "sha256:" + "0" * 64}
    )
    with pytest.raises(TrustError, match="does not match"):
        await asyncio.wait_for(Agent(cfg).run(), 20)
    assert not (tmp_path / "agent" / "credential.json").exists()


async def test_the_agent_renews_its_lease_while_a_report_is_being_summed(
    hub: Hub, member: Member, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A member of thousands of busy nodes takes seconds of CPU to sum up: the summary runs
    beside the agent's loop, not in it. A held summary must not hold the lease renewals (the
    hub runs on the same loop here: on the loop, the summary would stop both)."""
    assert hub.objects is not None
    cfg = await joining_agent_config(hub, member, tmp_path / "agent")
    cluster_rt = hub.objects.registry.require("cluster.gpufed.io/v1alpha1", "Cluster")
    lease_rt = hub.objects.registry.require("coordination.k8s.io/v1", "Lease")
    hold, held, release = threading.Event(), threading.Event(), threading.Event()
    released_in_time: list[bool] = []
    summarize = capacity.summarize

    def held_summary(*args: Any, **kwargs: Any) -> dict[str, Any]:
        if hold.is_set() and not held.is_set():
            held.set()
            released_in_time.append(release.wait(timeout=10))
        return summarize(*args, **kwargs)

    monkeypatch.setattr(capacity, "summarize", held_summary)

    async def lease() -> dict[str, Any]:
        return await hub.objects.get(lease_rt, namespace="gpufed-cluster-lease", name=CLUSTER)  # type: ignore[no-any-return]

    async def reported() -> bool:
        return bool(((await hub.objects.get(cluster_rt, name=CLUSTER)).get("status") or {}).get("gpuSummary"))

    agent = Agent(cfg)
    async with agent:
        await eventually(reported, what="the Cluster's first capacity report")
        first = (await eventually(lease, what="the lease"))["spec"]["renewTime"]
        written = agent.reports_written
        hold.set()  # the next report (at most report_interval away) is held in its summary

        async def summary_held() -> bool:
            return held.is_set()

        await eventually(summary_held, what="a report held in its summary")
        renewal = (await lease())["spec"]["renewTime"]

        async def renewed_while_held() -> bool:
            return bool((await lease())["spec"]["renewTime"] not in (first, renewal))

        await eventually(renewed_while_held, within=5, what="a lease renewal while the summary is held")
        release.set()

        async def written_after() -> bool:
            return agent.reports_written > written

        await eventually(written_after, what="the held report written")
    assert released_in_time == [True]


async def test_the_report_follows_node_changes_as_a_walk_of_every_node_would(
    hub: Hub, member: Member, tmp_path: Path
) -> None:
    """The agent keeps its report's node part over the node informer's changes: after nodes
    are cordoned, relabelled, deleted and added and a pod is bound, its report says what a
    report summed over every node the member now has says."""
    cfg = await joining_agent_config(hub, member, tmp_path / "agent")
    node_rt, pod_rt = member.rt("v1", "Node"), member.rt("v1", "Pod")
    parts = ("nodeSummary", "gpuSummary", "resourceSummary", "nodeShapes")
    agent = Agent(cfg)

    async def reported() -> dict[str, Any] | None:
        return agent.last_status

    async with agent:
        first = await eventually(reported, what="the first capacity report")
        whole = sorted(n["metadata"]["name"] for n in (await member.objects.list(node_rt)).items if "whole" in n["metadata"]["name"])
        mig = next(n for n in (await member.objects.list(node_rt)).items if "mig" in n["metadata"]["name"])

        cordoned = await member.get("v1", "Node", whole[0])
        assert cordoned is not None
        await member.objects.update(node_rt, {**cordoned, "spec": {**cordoned["spec"], "unschedulable": True}})
        relabelled = await member.get("v1", "Node", whole[1])
        assert relabelled is not None
        labels = {**relabelled["metadata"]["labels"], "example.com/pool": "b"}
        await member.objects.update(node_rt, {**relabelled, "metadata": {**relabelled["metadata"], "labels": labels}})
        await member.objects.delete(node_rt, name=mig["metadata"]["name"])
        extra = {**mig, "metadata": {"name": "sim-a-extra", "labels": mig["metadata"]["labels"]}}
        created = await member.objects.create(node_rt, extra)
        await member.objects.update_status(node_rt, {**created, "status": mig["status"]})
        await member.objects.create(pod_rt, {
            "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "train-0", "namespace": "default"},
            "spec": {"nodeName": whole[1], "containers": [
                {"name": "main", "image": "train:1", "resources": {"limits": {"nvidia.com/gpu": "3"}}}]},
        })

        async def as_a_full_walk() -> dict[str, Any] | None:
            nodes = (await member.objects.list(node_rt)).items
            pods = (await member.objects.list(pod_rt)).items
            expected = capacity.summarize(nodes, pods, now="2026-01-01T00:00:00Z")
            got = agent.last_status or {}
            return expected if all(got.get(part) == expected[part] for part in parts) else None

        expected = await eventually(as_a_full_walk, what="the report of every node the member now has")
    assert all(expected[part] != first[part] for part in ("gpuSummary", "resourceSummary", "nodeShapes"))
    assert expected["resourceSummary"]["allocated"]["nvidia.com/gpu"] == 3


@pytest.mark.parametrize("member", [(RESOURCE_CLAIM, RESOURCE_CLAIM_TEMPLATE)], indirect=True)
async def test_the_report_counts_the_gpus_a_pod_holds_through_an_allocated_claim(
    hub: Hub, member: Member, tmp_path: Path
) -> None:
    """A member serving DRA: a pod with no GPU request that holds 2 GPUs through its allocated
    claim is reported as holding them, and 3 once its claim is allocated a third (the report follows
    the claim, not only the pod)."""
    cfg = await joining_agent_config(hub, member, tmp_path / "agent")
    claim_rt, pod_rt, node_rt = member.rt("resource.k8s.io/v1", "ResourceClaim"), member.rt("v1", "Pod"), member.rt("v1", "Node")
    node = next(n["metadata"]["name"] for n in (await member.objects.list(node_rt)).items if "whole" in n["metadata"]["name"])
    claim = await member.objects.create(claim_rt, {
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": "train-0-gpus", "namespace": "default"},
        "spec": {"devices": {"requests": [{"name": "gpus", "exactly": {"deviceClassName": "gpu.nvidia.com", "count": 2}}]}},
    })

    def allocated(*devices: str) -> dict[str, Any]:
        return {"allocation": {"devices": {"results": [
            {"request": "gpus", "driver": "gpu.nvidia.com", "pool": node, "device": device} for device in devices]}}}

    claim = await member.objects.update_status(claim_rt, {**claim, "status": allocated("gpu-0", "gpu-1")})
    pod = await member.objects.create(pod_rt, {
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "train-0", "namespace": "default"},
        "spec": {"nodeName": node, "resourceClaims": [{"name": "gpus", "resourceClaimTemplateName": "two-gpus"}],
                 "containers": [{"name": "main", "image": "train:1", "resources": {"claims": [{"name": "gpus"}]}}]},
    })
    await member.objects.update_status(pod_rt, {**pod, "status": {
        "phase": "Running", "resourceClaimStatuses": [{"name": "gpus", "resourceClaimName": "train-0-gpus"}]}})
    agent = Agent(cfg)

    def held_gpus(amount: int) -> Callable[[], Awaitable[bool]]:
        async def probe() -> bool:
            allocated_now = ((agent.last_status or {}).get("resourceSummary") or {}).get("allocated") or {}
            return allocated_now.get("nvidia.com/gpu") == amount
        return probe

    async with agent:
        await eventually(held_gpus(2), what="the claim's 2 GPUs in the report")
        await member.objects.update_status(claim_rt, {**claim, "status": allocated("gpu-0", "gpu-1", "gpu-2")})
        await eventually(held_gpus(3), what="the claim's 3 GPUs in the report")
