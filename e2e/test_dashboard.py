"""The dashboard in a real headless Chromium (Debian's chromium and chromium-driver, driven by
selenium): sign in with the hub's token, load /ui, check the numbers on the page against the
reports API for the same window, and save a screenshot to test-artifacts/dashboard.png.

The browser is installed by this module's setup when /usr/bin/chromium is missing
(``apt-get update && apt-get install -y chromium chromium-driver``; CI runs as root with
Debian's mirror reachable). Selenium is given both binaries, so it downloads nothing.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from e2e.harness import FAST_WASTE, GPUFED, Kubectl, ProcessGroup, wait_for

FLEET = Path(__file__).parent / "fleets" / "waste.yaml"
ARTIFACTS = Path(__file__).resolve().parent.parent / "test-artifacts"
CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")
REPORTS = "/apis/reports.gpufed.io/v1alpha1/wastereports"
pytestmark = [pytest.mark.e2e, pytest.mark.timeout(600)]


@pytest.fixture(scope="session")
def chromium() -> Path:
    """Debian's chromium and its driver, installed on first use."""
    if not (CHROMIUM.exists() and CHROMEDRIVER.exists()):
        if shutil.which("apt-get") is None:
            pytest.fail("chromium is missing and apt-get is not available to install it")
        env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
        subprocess.run(["apt-get", "update"], check=True, env=env, capture_output=True, timeout=300)
        subprocess.run(
            ["apt-get", "install", "-y", "--no-install-recommends", "chromium", "chromium-driver"],
            check=True, env=env, capture_output=True, timeout=900,
        )
    assert CHROMIUM.exists() and CHROMEDRIVER.exists()
    return CHROMIUM


@pytest.fixture
def browser(chromium: Path) -> Iterator[Any]:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    profile = tempfile.mkdtemp(prefix="gpufed-chromium-")
    options = webdriver.ChromeOptions()
    options.binary_location = str(chromium)
    for flag in (
        "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync",
        "--disable-dev-shm-usage", "--ignore-certificate-errors", "--window-size=1440,1700",
        f"--user-data-dir={profile}",
    ):
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(executable_path=str(CHROMEDRIVER)), options=options)
    try:
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


def _number(text: str) -> float:
    """A displayed number: ``$1,234.50`` / ``12.5%`` / ``0.083`` -> float."""
    cleaned = re.sub(r"[$,%\s]", "", text)
    return float(cleaned)


def _precision(text: str) -> float:
    """Half a unit of the last digit shown (``0.083`` -> 0.0005, ``$12`` -> 0.5)."""
    cleaned = re.sub(r"[$,%\s]", "", text)
    decimals = len(cleaned.split(".")[1]) if "." in cleaned else 0
    return 0.5 * 10**-decimals + 1e-9


def _matches(shown: str, value: float) -> bool:
    return abs(_number(shown) - value) <= _precision(shown)


def _token(kubeconfig: Path) -> str:
    return str(yaml.safe_load(kubeconfig.read_text())["users"][0]["user"]["token"])


def _hub_url(kubeconfig: Path) -> str:
    return str(yaml.safe_load(kubeconfig.read_text())["clusters"][0]["cluster"]["server"])


def _api(hub: Kubectl, path: str) -> Any:
    return json.loads(hub.run("get", "--raw", path).stdout)


# Everything the test compares, read in one script run so a refresh cannot slip in between.
_READ_PAGE = """
const text = (id) => document.querySelector(`[data-testid="${id}"]`).textContent;
const value = (id) => document.querySelector(`[data-testid="${id}"]`).dataset.value;
const rows = (selector, key) => Object.fromEntries([...document.querySelectorAll(selector)].map((row) =>
  [row.dataset[key], Object.fromEntries([...row.querySelectorAll("td[data-field]")].map((td) => [td.dataset.field, td.textContent]))]));
return {
  from: value("window-from"), to: value("window-to"),
  stats: Object.fromEntries(["clusters-ready", "gpus-mean", "gpu-hours-total", "waste-pct", "waste-cost", "cost-total",
                             "observed-hours"].map((id) => [id, text(id)])),
  states: rows("#states tr[data-state]", "state"),
  clusters: rows("#clusters tr[data-cluster]", "cluster"),
  idle: rows("#idle tr[data-workload]", "workload"),
  layers: [...document.querySelectorAll("#chart path[data-state]")].map((p) => p.dataset.state),
  pending: [...document.querySelectorAll("#pending tr[data-pending]")].map((r) => r.textContent),
  recommendations: [...document.querySelectorAll("#recommendations li[data-kind]")].map((li) => li.dataset.kind),
  unmeasured: document.getElementById("unmeasured").hidden ? null : text("unmeasured"),
  recommendationTexts: [...document.querySelectorAll("#recommendations li[data-kind]")].map((li) => li.textContent),
  queues: [...document.querySelectorAll("#queues tr[data-queue]")].map((row) => ({
    queue: row.dataset.queue, resource: row.dataset.resource || null,
    cells: Object.fromEntries([...row.querySelectorAll("td[data-field]")].map((td) => [td.dataset.field, td.textContent]))})),
  queuesNote: document.getElementById("queues-note").hidden ? null : text("queues-note"),
};
"""


@pytest.mark.slow
def test_dashboard_shows_the_same_numbers_as_the_api(processes: ProcessGroup, tmp_path: Path, browser: Any) -> None:
    from selenium.webdriver.common.by import By

    launched = {name: processes.launch_member(FLEET, name) for name in ("gpu-a", "mig-b")}
    _, hub = processes.start_hub("hub", *FAST_WASTE)
    processes.join_members(hub, FLEET, launched)
    wait_for(lambda: len(hub.json("get", "clusters")["items"]) == 2, timeout=90, what="both clusters to join")
    work = {
        "apiVersion": "work.gpufed.io/v1alpha1", "kind": "Work",
        "metadata": {"name": "team-a-idle", "namespace": "gpufed-es-gpu-a"},
        "spec": {"workload": {"manifests": [{
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "idle-infer", "namespace": "team-a"},
            "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "idle"}}, "template": {
                "metadata": {"labels": {"app": "idle"}, "annotations": {"sim.gpufed.io/gpu-utilization": "0.03"}},
                "spec": {"containers": [{"name": "main", "image": "registry.example.com/ml:1",
                                         "resources": {"limits": {"nvidia.com/gpu": 1}}}]}}},
        }]}},
    }
    (tmp_path / "work.yaml").write_text(yaml.safe_dump(work))
    hub.run("create", "-f", str(tmp_path / "work.yaml"))

    def idle_accounted() -> bool:
        report = _api(hub, f"{REPORTS}/last-1h")["status"]
        return bool(report["totals"]["gpu_hours"]["idle-allocated"] > 0 and report["top_idle_workloads"])

    # A team's quota (Kueue's ClusterQueue and its LocalQueue), for the queues view.
    hub.run("create", "namespace", "team-a")
    (tmp_path / "queues.yaml").write_text(yaml.safe_dump_all([
        {"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "ResourceFlavor", "metadata": {"name": "a100"}},
        {"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "ClusterQueue", "metadata": {"name": "team-a"}, "spec": {
            "namespaceSelector": {}, "cohort": "research", "resourceGroups": [{"coveredResources": ["nvidia.com/gpu"],
                "flavors": [{"name": "a100", "resources": [{"name": "nvidia.com/gpu", "nominalQuota": 8}]}]}]}},
        {"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "LocalQueue", "metadata": {"name": "team-a", "namespace": "team-a"},
         "spec": {"clusterQueue": "team-a"}},
    ]))
    hub.run("apply", "-f", str(tmp_path / "queues.yaml"))

    # Reports end at the last complete bucket (5 s here): wait for one with the idle workload in it.
    wait_for(idle_accounted, timeout=150, interval=2, what="the idle workload to show in the report")

    # Sign in as a user would: the page asks for the token.
    kubeconfig = hub.kubeconfig
    browser.get(f"{_hub_url(kubeconfig)}/ui")
    wait_for(lambda: browser.find_element(By.ID, "login").is_displayed(), timeout=20, what="the login form")
    browser.find_element(By.ID, "token").send_keys(_token(kubeconfig))
    browser.find_element(By.CSS_SELECTOR, "#login-form button").click()
    wait_for(lambda: browser.execute_script("return document.body.dataset.loaded === 'true'"), timeout=30,
             what="the dashboard to load its data")
    page = browser.execute_script(_READ_PAGE)

    # The same window through the API, as the page asked for it.
    window = f"from={page['from']}&to={page['to']}"
    report = _api(hub, f"{REPORTS}/custom?{window}")["status"]
    by_cluster = _api(hub, f"{REPORTS}/custom?{window}&by=cluster")["status"]
    clusters = hub.json("get", "clusters")["items"]
    totals = report["totals"]

    stats = page["stats"]
    assert stats["clusters-ready"] == f"2/{len(clusters)}"
    assert _matches(stats["gpu-hours-total"], totals["gpu_hours_total"]), (stats, totals)
    assert _matches(stats["waste-pct"], totals["waste_pct"]), (stats, totals)
    assert _matches(stats["waste-cost"], totals["waste_cost_usd"]), (stats, totals)
    assert _matches(stats["cost-total"], totals["cost_usd_total"]), (stats, totals)
    assert _matches(stats["observed-hours"], report["window"]["observed_hours"])
    observed = report["window"]["observed_hours"]
    assert observed > 0
    assert _matches(stats["gpus-mean"], totals["gpu_hours_total"] / observed)
    for state, cells in page["states"].items():
        assert _matches(cells["gpu_hours"], totals["gpu_hours"][state]), (state, cells, totals)
        assert _matches(cells["cost_usd"], totals["cost_usd"][state]), (state, cells, totals)
    groups = {g["key"]["cluster"]: g for g in by_cluster["groups"]}
    assert set(page["clusters"]) == set(groups) == {"gpu-a", "mig-b"}
    for name, cells in page["clusters"].items():
        group = groups[name]
        waste_cost = sum(group["cost_usd"][s] for s in ("idle-allocated", "free-needed", "free-fragmented"))
        assert _matches(cells["waste_cost"], waste_cost), (name, cells, group)
        assert _matches(cells["busy"], group["gpu_hours"]["busy"]), (name, cells, group)
        assert _matches(cells["idle"], group["gpu_hours"]["idle-allocated"]), (name, cells, group)
        assert _matches(cells["waste_pct"], group["waste_pct"]), (name, cells, group)
    idle = {f"{w['namespace']}/{w['workload']}": w for w in report["top_idle_workloads"]}
    assert set(page["idle"]) == set(idle) == {"team-a/Deployment/idle-infer"}
    for key, cells in page["idle"].items():
        assert _matches(cells["idle_cost_usd"], idle[key]["idle_cost_usd"])
        # GPUs held now (a count) apart from the GPU-hours over the window.
        assert _matches(cells["gpus_now"], idle[key]["gpus_now"]), (cells, idle[key])
        assert _matches(cells["allocated_gpu_hours"], idle[key]["allocated_gpu_hours"]), (cells, idle[key])
    # Both members measure utilization: no "not measured" line.
    assert report["unmeasured"] == [] and page["unmeasured"] is None, page["unmeasured"]
    assert "idle-allocated" in page["layers"]  # the chart draws the idle GPUs
    assert "right-size" in page["recommendations"]
    # Each recommendation reads as the report words it: its saving stated once, not twice.
    assert page["recommendationTexts"] == [r["text"] for r in report["recommendations"]]
    assert all(text.count("/day") == 1 for text in page["recommendationTexts"]), page["recommendationTexts"]

    # The queues view: the ClusterQueue's quota as the hub keeps it.
    assert page["queues"] == [{"queue": "team-a", "resource": "nvidia.com/gpu", "cells": {
        "nominal": "8", "usage": "0", "borrowed": "0", "pending": "0", "admitted": "0"}}], page["queues"]

    ARTIFACTS.mkdir(exist_ok=True)
    browser.save_screenshot(str(ARTIFACTS / "dashboard.png"))
    assert (ARTIFACTS / "dashboard.png").stat().st_size > 10_000

    # A team's view: alice, in group team-a bound to view in team-a, sees team-a's share.
    hub.run("create", "rolebinding", "team-a-view", "--clusterrole=view", "--group=team-a", "-n", "team-a")
    alice = subprocess.run(
        [GPUFED, "token", "create", "--user", "alice", "--group", "team-a", "--kubeconfig", str(kubeconfig)],
        capture_output=True, text=True, check=True, timeout=60,
    ).stdout.strip()
    browser.execute_script("sessionStorage.setItem('gpufed.token', arguments[0])", alice)
    browser.get(f"{_hub_url(kubeconfig)}/ui?namespace=team-a")
    wait_for(lambda: browser.execute_script("return document.body.dataset.loaded === 'true'"), timeout=30,
             what="the team's dashboard to load its data")
    team_page = browser.execute_script(_READ_PAGE)
    assert browser.find_element(By.ID, "scope").text == "namespace team-a"
    assert browser.find_element(By.ID, "error").is_displayed() is False, browser.find_element(By.ID, "error").text
    team_window = f"from={team_page['from']}&to={team_page['to']}"
    team = _api(hub, f"/apis/reports.gpufed.io/v1alpha1/namespaces/team-a/wastereports/custom?{team_window}")["status"]
    assert _matches(team_page["stats"]["gpu-hours-total"], team["totals"]["gpu_hours_total"]), (team_page, team)
    assert team["totals"]["gpu_hours"]["free-spare"] == 0  # no fleet capacity in a team's view
    assert set(team_page["idle"]) == {"team-a/Deployment/idle-infer"}
    assert team_page["recommendations"] == []
    # Its LocalQueue; the ClusterQueue behind it is cluster-scoped, beyond a namespace's view.
    assert [(q["queue"], q["cells"]["nominal"], q["cells"]["pending"]) for q in team_page["queues"]] == [
        ("team-a/team-a", "\u2013", "0")], team_page["queues"]
    assert "ClusterQueue team-a: reading it takes a cluster-wide view" in (team_page["queuesNote"] or ""), team_page["queuesNote"]

    # A wrong token sends the user back to the login form with a message.
    browser.execute_script("sessionStorage.setItem('gpufed.token', 'not-a-token')")
    browser.find_element(By.ID, "refresh").click()
    wait_for(lambda: browser.find_element(By.ID, "login").is_displayed(), timeout=20, what="the login form again")
    assert "did not accept" in browser.find_element(By.ID, "login-error").text
