"""GPU waste accounting end to end: a hub sampling every second into 5-second rollup buckets
(``FAST_WASTE``), two simulated members joined by
their agents, Works created by hand, and `gpufed waste -o json` checked against dollars and
GPU-hours computed by hand from the fleet's pricing.

The fleet (e2e/fleets/waste.yaml):

* gpu-a, A100 at $1.20/h, one node with 4 whole GPUs: ``idle-infer`` holds 2 GPUs at 3 %
  utilization (idle-allocated), ``busy-train`` holds 1 at 80 % (busy), 1 GPU is free, and
  ``needs-3g`` asks for a MIG 3g.40gb slice that gpu-a does not have (unschedulable there, so
  it waits for any other cluster);
* mig-b, A100 at $2.00/h, one GPU cut into seven 1g.10gb slices, all free: the waiting 3g.40gb
  request cannot use them, so they are stranded (free-fragmented); gpu-a's free GPU cannot take
  the request either, but the request excludes gpu-a, so that one is free-spare.

The report covers four whole buckets during which nothing changed (a bucket-aligned window is
exact); every number is then a multiple of that window's observed hours H: busy 1 H,
idle-allocated 2 H, free-fragmented 1 H, free-spare 1 H, total 5 H (the fleet's 5 GPUs).
"""

from __future__ import annotations

import json
import math
import subprocess
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml

from controlplane.apis.utilization import expand_utilization
from e2e.harness import FAST_WASTE, GPUFED, WASTE_BUCKET_SECONDS, Kubectl, ProcessGroup, next_bucket, wait_for

FLEET = Path(__file__).parent / "fleets" / "waste.yaml"
pytestmark = [pytest.mark.e2e, pytest.mark.timeout(360)]

A100 = "NVIDIA-A100-SXM4-80GB"
PRICE = {"gpu-a": 1.20, "mig-b": 2.00}
IDLE_UTILIZATION = "0.03"
BUSY_UTILIZATION = "0.8"
#: The window the report covers: four whole rollup buckets.
WINDOW = timedelta(seconds=4 * WASTE_BUCKET_SECONDS)


def _deployment(name: str, *, replicas: int, resource: str, utilization: str) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": "team-a"},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {
                    "labels": {"app": name},
                    "annotations": {"sim.gpufed.io/gpu-utilization": utilization},
                },
                "spec": {"containers": [{
                    "name": "main", "image": "registry.example.com/ml:1",
                    "resources": {"limits": {resource: 1}},
                }]},
            },
        },
    }


def _ready(cluster: dict[str, Any]) -> bool:
    return any(
        c["type"] == "Ready" and c["status"] == "True" for c in cluster.get("status", {}).get("conditions", [])
    )


def _fleet_gpus(clusters: list[dict[str, Any]]) -> float:
    """The fleet's GPU count from the agents' gpuSummary: whole GPUs plus MIG slices as their
    compute share (a 1g slice is 1/7 of a GPU)."""
    total = 0.0
    for cluster in clusters:
        for entry in cluster["status"]["gpuSummary"]:
            resource = entry["resource"]
            if resource == "nvidia.com/gpu":
                total += entry["capacity"]
            elif resource.startswith("nvidia.com/mig-"):
                total += entry["capacity"] * int(resource.removeprefix("nvidia.com/mig-").split("g.")[0]) / 7
    return total


def _stable(hub: Kubectl) -> bool:
    """Both members report what the scenario needs: 3 GPU pods with their utilization in gpu-a,
    seven free slices in mig-b, and the 3g.40gb pod unschedulable in gpu-a."""
    work = hub.json("get", "work", "team-a-waste", "-n", "gpufed-es-gpu-a")
    statuses = {m["identifier"]["name"]: m for m in work.get("status", {}).get("manifestStatuses", [])}
    if statuses.get("needs-3g", {}).get("unschedulable", {}).get("pods") != 1:
        return False
    clusters = {c["metadata"]["name"]: c for c in hub.json("get", "clusters")["items"]}
    nodes_a = expand_utilization(clusters["gpu-a"]["status"].get("utilization"))
    held = [d for n in nodes_a for d in n.get("devices", []) if d.get("pod")]
    utilizations = sorted(d.get("utilization") for d in held)
    nodes_b = expand_utilization(clusters["mig-b"]["status"].get("utilization"))
    slices = [d for n in nodes_b for d in n.get("devices", []) if d.get("profile") == "1g.10gb"]
    return (
        len(held) == 3
        and utilizations[:2] == [float(IDLE_UTILIZATION)] * 2
        and utilizations[2] == float(BUSY_UTILIZATION)
        and len(slices) == 7
        and not any(d.get("pod") for d in slices)
    )


def _gpufed_waste(hub: Kubectl, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [GPUFED, "waste", "--kubeconfig", str(hub.kubeconfig), *args],
        capture_output=True, text=True, timeout=60, check=False,
    )


@pytest.mark.slow
def test_idle_and_stranded_gpus_are_reported_with_hand_computed_dollars(
    processes: ProcessGroup, tmp_path: Path
) -> None:
    launched = {name: processes.launch_member(FLEET, name) for name in ("gpu-a", "mig-b")}
    _, hub = processes.start_hub("hub", *FAST_WASTE)
    processes.join_members(hub, FLEET, launched)

    def joined() -> list[dict[str, Any]]:
        items = hub.json("get", "clusters")["items"]
        ok = len(items) == 2 and all(_ready(c) and c["status"].get("gpuSummary") for c in items)
        return items if ok else []

    clusters = wait_for(joined, timeout=90, what="gpu-a and mig-b Ready with GPU reports")
    fleet_gpus = _fleet_gpus(clusters)
    assert fleet_gpus == pytest.approx(5.0)

    work = {
        "apiVersion": "work.gpufed.io/v1alpha1",
        "kind": "Work",
        "metadata": {"name": "team-a-waste", "namespace": "gpufed-es-gpu-a"},
        "spec": {"workload": {"manifests": [
            _deployment("idle-infer", replicas=2, resource="nvidia.com/gpu", utilization=IDLE_UTILIZATION),
            _deployment("busy-train", replicas=1, resource="nvidia.com/gpu", utilization=BUSY_UTILIZATION),
            _deployment("needs-3g", replicas=1, resource="nvidia.com/mig-3g.40gb", utilization=BUSY_UTILIZATION),
        ]}},
    }
    (tmp_path / "work.yaml").write_text(yaml.safe_dump(work))
    hub.run("create", "-f", str(tmp_path / "work.yaml"))
    wait_for(lambda: _stable(hub), timeout=90, what="the idle, busy and unschedulable pods to be reported")

    # Whole buckets that start after the state settled and a second of margin for the
    # sample before them; then wait until a sample after their end has been accounted.
    start = next_bucket(datetime.now(UTC) + timedelta(seconds=4))
    end = start + WINDOW
    _listing_and_gauges(hub)  # checked while the window passes
    time.sleep(max((end - datetime.now(UTC)).total_seconds() + 3, 0))
    assert _stable(hub), "the scenario changed during the measured window"

    result = _gpufed_waste(
        hub, "--from", start.strftime("%Y-%m-%dT%H:%M:%SZ"), "--to", end.strftime("%Y-%m-%dT%H:%M:%SZ"),
        "--by", "cluster", "-o", "json",
    )
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["window"]["from"] == start.strftime("%Y-%m-%dT%H:%M:%SZ")
    assert report["window"]["to"] == end.strftime("%Y-%m-%dT%H:%M:%SZ")
    # The sampler ran through the whole window (a sample every second): H is the window.
    observed = (end - start).total_seconds() / 3600
    assert report["window"]["observed_hours"] == pytest.approx(observed, abs=1e-4)
    assert report["window"]["unobserved_hours"] == 0

    hours, dollars = report["totals"]["gpu_hours"], report["totals"]["cost_usd"]
    expected_hours = {
        "busy": 1 * observed, "idle-allocated": 2 * observed, "unmeasured": 0.0, "free-needed": 0.0,
        "free-fragmented": 1 * observed, "free-spare": 1 * observed, "unavailable": 0.0,
    }
    expected_dollars = {
        "busy": 1 * observed * PRICE["gpu-a"],
        "idle-allocated": 2 * observed * PRICE["gpu-a"],
        "unmeasured": 0.0,  # every agent has a DCGM source
        "free-needed": 0.0,
        "free-fragmented": 7 * (1 / 7) * observed * PRICE["mig-b"],
        "free-spare": 1 * observed * PRICE["gpu-a"],
        "unavailable": 0.0,
    }
    rounding = 1e-4  # the JSON contract rounds hours and dollars to 4 digits
    for state, value in expected_hours.items():
        assert hours[state] == pytest.approx(value, abs=rounding), (state, report["totals"])
    for state, value in expected_dollars.items():
        assert dollars[state] == pytest.approx(value, abs=rounding), (state, report["totals"])
    # Totals reconcile with the fleet's GPU count x the window.
    assert report["totals"]["gpu_hours_total"] == pytest.approx(fleet_gpus * observed, abs=rounding)
    assert report["totals"]["waste_cost_usd"] == pytest.approx(
        expected_dollars["idle-allocated"] + expected_dollars["free-fragmented"], abs=rounding
    )
    # Per cluster: the stranded slices are all in mig-b, the idle GPUs in gpu-a.
    groups = {g["key"]["cluster"]: g for g in report["groups"]}
    assert groups["mig-b"]["gpu_hours"]["free-fragmented"] == pytest.approx(observed, abs=rounding)
    assert groups["mig-b"]["cost_usd"]["free-fragmented"] == pytest.approx(observed * PRICE["mig-b"], abs=rounding)
    assert groups["gpu-a"]["gpu_hours"]["free-fragmented"] == 0
    assert groups["gpu-a"]["cost_usd"]["idle-allocated"] == pytest.approx(2 * observed * PRICE["gpu-a"], abs=rounding)

    idle = {w["workload"]: w for w in report["top_idle_workloads"]}
    assert set(idle) == {"Deployment/idle-infer"}
    assert idle["Deployment/idle-infer"]["namespace"] == "team-a"
    assert idle["Deployment/idle-infer"]["allocated_gpus"] == pytest.approx(2.0, abs=0.01)
    assert idle["Deployment/idle-infer"]["gpus_now"] == 2  # held in the newest sample: a count
    assert idle["Deployment/idle-infer"]["mean_utilization"] == pytest.approx(float(IDLE_UTILIZATION), abs=1e-3)
    assert idle["Deployment/idle-infer"]["idle_cost_usd"] == pytest.approx(expected_dollars["idle-allocated"], abs=rounding)
    kinds = {r["kind"] for r in report["recommendations"]}
    assert {"right-size", "repartition"} <= kinds, report["recommendations"]
    repartition = next(r for r in report["recommendations"] if r["kind"] == "repartition")
    assert "mig-b" in repartition["text"] and "1g.10gb" in repartition["text"]

    # The same window as a table: the states and the money are there for a person to read.
    table = _gpufed_waste(
        hub, "--from", start.strftime("%Y-%m-%dT%H:%M:%SZ"), "--to", end.strftime("%Y-%m-%dT%H:%M:%SZ")
    )
    assert table.returncode == 0, table.stderr
    assert "idle-allocated" in table.stdout and "free-fragmented" in table.stdout
    assert "team-a/idle-infer" in table.stdout

    # kubectl reads the same resource.
    raw = json.loads(hub.run(
        "get", "--raw",
        "/apis/reports.gpufed.io/v1alpha1/wastereports/custom"
        f"?from={start.strftime('%Y-%m-%dT%H:%M:%SZ')}&to={end.strftime('%Y-%m-%dT%H:%M:%SZ')}&by=cluster",
    ).stdout)
    assert raw["kind"] == "WasteReport"
    assert raw["status"]["totals"] == report["totals"]

    # The dashboard's window (last-1h with its series and top 10) and the same window asked as
    # custom classify every second alike, busy-train's first seconds too (bound but not yet
    # running, at 0 %: idle-allocated in both, like any allocated GPU under the threshold).
    reports = "/apis/reports.gpufed.io/v1alpha1/wastereports"
    named = json.loads(hub.run("get", "--raw", f"{reports}/last-1h?step=1m&top=10").stdout)["status"]
    window = named["window"]
    same = json.loads(hub.run("get", "--raw", f"{reports}/custom?from={window['from']}&to={window['to']}").stdout)
    assert same["status"]["totals"] == named["totals"]
    assert same["status"]["top_idle_workloads"] == named["top_idle_workloads"]


def _listing_and_gauges(hub: Kubectl) -> None:
    """What does not depend on the measured window: kubectl's Table of the WasteReports, one
    column per state, and the hub's /metrics (the accounting as counters, the fleet now as gauges)."""
    listing = hub.run("get", "wastereports").stdout.splitlines()
    assert listing[0].split()[:3] == ["NAME", "FROM", "OBSERVED"], listing
    assert {"BUSY", "IDLE-ALLOCATED", "FREE-FRAGMENTED", "WASTE"} <= set(listing[0].split())
    assert [line.split()[0] for line in listing[1:]] == ["last-1h", "last-24h", "last-7d", "last-30d"]
    expected = {("idle-allocated", "gpu-a", A100): 2.0, ("free-fragmented", "mig-b", A100): 1.0}

    def sampled() -> str | None:
        """/metrics once the hub's sampler has seen the stable scenario (a sample a second)."""
        metrics = hub.run("get", "--raw", "/metrics").stdout
        gauges = _samples(metrics, "gpufed_gpus")
        return metrics if all(gauges.get(key) == pytest.approx(value) for key, value in expected.items()) else None

    metrics = wait_for(sampled, timeout=30, interval=1, what=f"the gpufed_gpus gauges {expected}")
    assert any(line.startswith("gpufed_apiserver_request_duration_seconds_bucket") for line in metrics.splitlines())
    lag = _samples(metrics, "gpufed_agent_report_lag_seconds", labels=("cluster",))
    assert set(lag) == {("gpu-a",), ("mig-b",)} and all(math.isfinite(v) for v in lag.values())


def _samples(text: str, name: str, *, labels: tuple[str, ...] = ("state", "cluster", "model")) -> dict[tuple[str, ...], float]:
    """Values of one metric from the Prometheus text format, keyed by ``labels``."""
    from prometheus_client.parser import text_string_to_metric_families

    out: dict[tuple[str, ...], float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == name:
                out[tuple(sample.labels[label] for label in labels)] = sample.value
    return out
