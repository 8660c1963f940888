"""`gpufed cordon|uncordon|taint`: taint spec parsing and editing (table-driven), then the
commands against a real hub (embedded etcd, HTTPS, token auth), one for the module's tests: each
test's commands edit a cluster of its own."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any

import pytest
import pytest_asyncio

from controlplane.apis import constants as c
from controlplane.hub import Hub
from controlplane.hubconfig import HubConfig
from gpufed.cli import main
from gpufed.commands.cordon import (
    TaintChange,
    TaintSpecError,
    apply_taint_changes,
    cordoned_spec,
    parse_taint_spec,
)

NOW = datetime(2024, 5, 1, 10, 0, 0, tzinfo=UTC)
STAMP = "2024-05-01T10:00:00Z"


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ("gpufed.io/spot=true:PreferNoSchedule", TaintChange("gpufed.io/spot", "PreferNoSchedule", "true")),
        ("maintenance:NoExecute", TaintChange("maintenance", "NoExecute")),
        ("maintenance=:NoSchedule", TaintChange("maintenance", "NoSchedule")),
        ("maintenance:NoExecute-", TaintChange("maintenance", "NoExecute", remove=True)),
        ("maintenance-", TaintChange("maintenance", None, remove=True)),
    ],
)
def test_parse_taint_spec(spec: str, expected: TaintChange) -> None:
    assert parse_taint_spec(spec) == expected


@pytest.mark.parametrize(
    ("spec", "complaint"),
    [
        ("maintenance=yes", "an effect is required"),
        ("maintenance=yes:Sometimes", "effect 'Sometimes' is not one of NoSchedule, PreferNoSchedule, NoExecute"),
        ("=yes:NoSchedule", "the key is empty"),
        ("bad key:NoSchedule", "key 'bad key'"),
        ("k=not ok:NoSchedule", "value 'not ok'"),
        ("k=v:NoSchedule-", "without a value"),
    ],
)
def test_parse_taint_spec_rejects(spec: str, complaint: str) -> None:
    with pytest.raises(TaintSpecError) as caught:
        parse_taint_spec(spec)
    assert f"invalid taint spec {spec!r}" in str(caught.value)
    assert complaint in str(caught.value)


def t(key: str, effect: str, value: str | None = None, added: str | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {"key": key, "effect": effect}
    if value is not None:
        out["value"] = value
    if added is not None:
        out["timeAdded"] = added
    return out


OLD = "2024-01-01T00:00:00Z"


@pytest.mark.parametrize(
    ("current", "specs", "overwrite", "expected"),
    [
        ([], ["a=1:NoSchedule"], False, [t("a", "NoSchedule", "1", STAMP)]),
        ([t("a", "NoSchedule", "1", OLD)], ["a=1:NoExecute"], False,
         [t("a", "NoSchedule", "1", OLD), t("a", "NoExecute", "1", STAMP)]),
        ([t("a", "NoSchedule", "1", OLD)], ["a=2:NoSchedule"], True, [t("a", "NoSchedule", "2", STAMP)]),
        ([t("a", "NoSchedule"), t("a", "NoExecute"), t("b", "NoSchedule")], ["a-"], False, [t("b", "NoSchedule")]),
        ([t("a", "NoSchedule"), t("a", "NoExecute")], ["a:NoExecute-"], False, [t("a", "NoSchedule")]),
        ([t("a", "NoSchedule")], ["a:NoSchedule-", "b:NoExecute"], False, [t("b", "NoExecute", added=STAMP)]),
    ],
)
def test_apply_taint_changes(
    current: list[dict[str, Any]], specs: list[str], overwrite: bool, expected: list[dict[str, Any]]
) -> None:
    changes = [parse_taint_spec(spec) for spec in specs]
    assert apply_taint_changes(current, changes, overwrite=overwrite, now=NOW) == expected


@pytest.mark.parametrize(
    ("current", "spec", "complaint"),
    [
        ([t("a", "NoSchedule", "1")], "a=2:NoSchedule", "already has taint a=1:NoSchedule; pass --overwrite"),
        ([t("a", "NoSchedule")], "a:NoExecute-", "taint 'a:NoExecute' not found"),
        ([], "a-", "taint 'a' not found"),
    ],
)
def test_apply_taint_changes_refuses(current: list[dict[str, Any]], spec: str, complaint: str) -> None:
    with pytest.raises(TaintSpecError, match=complaint):
        apply_taint_changes(current, [parse_taint_spec(spec)], overwrite=False, now=NOW)


@pytest.mark.parametrize(
    ("spec", "cordon", "expected"),
    [
        ({}, True, {"unschedulable": True, "taints": [t(c.TAINT_CORDONED, "NoSchedule", added=STAMP)]}),
        ({"taints": [t("x", "NoExecute")]}, True,
         {"unschedulable": True, "taints": [t("x", "NoExecute"), t(c.TAINT_CORDONED, "NoSchedule", added=STAMP)]}),
        # A cordon taint already there keeps its timeAdded.
        ({"taints": [t(c.TAINT_CORDONED, "NoSchedule", added=OLD)]}, True,
         {"unschedulable": True, "taints": [t(c.TAINT_CORDONED, "NoSchedule", added=OLD)]}),
        ({"unschedulable": True, "taints": [t(c.TAINT_CORDONED, "NoSchedule"), t("x", "NoExecute")]}, False,
         {"unschedulable": None, "taints": [t("x", "NoExecute")]}),
        ({"unschedulable": True, "taints": [t(c.TAINT_CORDONED, "NoSchedule")]}, False,
         {"unschedulable": None, "taints": None}),
    ],
)
def test_cordoned_spec(spec: dict[str, Any], cordon: bool, expected: dict[str, Any]) -> None:
    assert cordoned_spec(spec, cordon=cordon, now=NOW) == expected


# --- against a real hub --------------------------------------------------------------------


#: The tests on the hub run on their module's event loop, where it runs.
SHARED_HUB = pytest.mark.asyncio(loop_scope="module")
#: The cluster :func:`test_command_errors` runs its commands on: none of them changes it.
UNCHANGED = "gpu-b"


async def add_cluster(hub: Hub, name: str) -> None:
    """Cluster ``name``, with a spot taint."""
    assert hub.objects is not None
    rt = hub.objects.registry.require("cluster.gpufed.io/v1alpha1", "Cluster")
    await hub.objects.create(rt, {
        "apiVersion": "cluster.gpufed.io/v1alpha1", "kind": "Cluster", "metadata": {"name": name},
        "spec": {"provider": "onprem", "taints": [t("gpufed.io/spot", "PreferNoSchedule", "true")]},
    })


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def hub(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Hub]:
    async with Hub(HubConfig(state_dir=tmp_path_factory.mktemp("hub"), port=0)) as running:
        await add_cluster(running, UNCHANGED)
        yield running


async def gpufed(hub: Hub, *argv: str) -> int:
    """Run the real command line (it runs its own event loop, so in a thread)."""
    return await asyncio.to_thread(main, [*argv, "--kubeconfig", str(hub.kubeconfig_path)])


async def cluster_spec(hub: Hub, name: str = "gpu-a") -> dict[str, Any]:
    assert hub.objects is not None
    rt = hub.objects.registry.require("cluster.gpufed.io/v1alpha1", "Cluster")
    obj = await hub.objects.get(rt, name=name)
    spec: dict[str, Any] = obj["spec"]
    return spec


def keys(spec: dict[str, Any]) -> list[str]:
    return [f"{x['key']}:{x['effect']}" for x in spec.get("taints") or ()]


@SHARED_HUB
async def test_cordon_taint_uncordon_against_a_hub(hub: Hub, capsys: pytest.CaptureFixture[str]) -> None:
    await add_cluster(hub, "gpu-a")
    assert await gpufed(hub, "cordon", "gpu-a") == 0
    assert capsys.readouterr().out == "cluster/gpu-a cordoned\n"
    spec = await cluster_spec(hub)
    assert spec["unschedulable"] is True
    assert keys(spec) == ["gpufed.io/spot:PreferNoSchedule", f"{c.TAINT_CORDONED}:NoSchedule"]

    assert await gpufed(hub, "cordon", "gpu-a") == 0
    assert capsys.readouterr().out == "cluster/gpu-a already cordoned\n"

    assert await gpufed(hub, "taint", "gpu-a", "maintenance=drain:NoExecute", "gpufed.io/spot-") == 0
    assert capsys.readouterr().out == "cluster/gpu-a modified\n"
    spec = await cluster_spec(hub)
    assert keys(spec) == [f"{c.TAINT_CORDONED}:NoSchedule", "maintenance:NoExecute"]
    assert spec["taints"][1]["value"] == "drain" and spec["taints"][1]["timeAdded"]

    assert await gpufed(hub, "uncordon", "gpu-a") == 0
    assert capsys.readouterr().out == "cluster/gpu-a uncordoned\n"
    spec = await cluster_spec(hub)
    assert "unschedulable" not in spec
    assert keys(spec) == ["maintenance:NoExecute"]

    assert await gpufed(hub, "taint", "gpu-a", "maintenance-") == 0
    assert capsys.readouterr().out == "cluster/gpu-a untainted\n"
    assert "taints" not in await cluster_spec(hub)


@SHARED_HUB
@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["cordon", "nope"], 'error: cluster "nope" not found'),
        (["taint", "nope", "a=b:NoSchedule"], 'error: cluster "nope" not found'),
        (["taint", UNCHANGED, "a=b"], "error: invalid taint spec 'a=b': an effect is required"),
        (["taint", UNCHANGED, "gpufed.io/spot=true:PreferNoSchedule"], "already has taint gpufed.io/spot=true:PreferNoSchedule"),
    ],
)
async def test_command_errors(hub: Hub, capsys: pytest.CaptureFixture[str], argv: list[str], message: str) -> None:
    before = await cluster_spec(hub, UNCHANGED)
    assert await gpufed(hub, *argv) == 1
    assert message in capsys.readouterr().err
    assert await cluster_spec(hub, UNCHANGED) == before
