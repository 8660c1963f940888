// gpufed dashboard: reads the hub's JSON APIs with the user's bearer token and draws the fleet.
// No framework and no build step; every value is put in the page with textContent.
"use strict";

const STATES = ["busy", "idle-allocated", "unmeasured", "free-needed", "free-fragmented", "free-spare", "unavailable"];
const WASTE_STATES = ["idle-allocated", "free-needed", "free-fragmented"];
const FREE_STATES = ["free-needed", "free-fragmented", "free-spare"];
// /ui?namespace=team-a is one team's view: its namespace's share of the reports and its
// workloads, all a team bound to view/edit/admin there may read; without it, the fleet.
const NAMESPACE = new URLSearchParams(window.location.search).get("namespace") || "";
function inNamespace(path) {
  const cut = path.lastIndexOf("/");
  return NAMESPACE ? `${path.slice(0, cut)}/namespaces/${encodeURIComponent(NAMESPACE)}${path.slice(cut)}` : path;
}
const REPORTS = inNamespace("/apis/reports.gpufed.io/v1alpha1/wastereports");
const CLUSTERS = "/apis/cluster.gpufed.io/v1alpha1/clusters";
const BINDINGS = inNamespace("/apis/work.gpufed.io/v1alpha1/resourcebindings");
const WORKS = "/apis/work.gpufed.io/v1alpha1/works";
const TOKEN_KEY = "gpufed.token";
const WINDOW_KEY = "gpufed.window";
const STEPS = { "15m": "1m", "1h": "1m", "6h": "5m", "24h": "15m", "7d": "2h" };
const REFRESH_MS = 30000;

const $ = (id) => document.getElementById(id);
let refreshTimer = null;
let lastSeries = [];
let lastEmptyText = "";

class Unauthorized extends Error {}

// ---------------------------------------------------------------------------------------------
// Formatting (the browser test parses these back; keep them plain numbers with $ , % only)

function fmtHours(v) {
  if (v >= 1000) return Math.round(v).toLocaleString("en-US");
  if (v >= 10) return v.toFixed(1);
  return v.toFixed(3);
}
function fmtMoney(v) {
  if (v >= 1000) return "$" + Math.round(v).toLocaleString("en-US");
  if (v >= 1) return "$" + v.toFixed(2);
  return "$" + v.toFixed(4);
}
function fmtPct(v) { return v.toFixed(1) + "%"; }
function fmtGpus(v) { return v >= 10 ? v.toFixed(1) : v.toFixed(2); }
function sum(map, keys) { return keys.reduce((total, key) => total + (map[key] || 0), 0); }
function localTime(iso) {
  const d = new Date(iso);
  return isNaN(d) ? iso : d.toLocaleString([], { dateStyle: "medium", timeStyle: "medium" });
}

// ---------------------------------------------------------------------------------------------
// DOM helpers

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (key === "class") node.className = value;
    else if (key === "text") node.textContent = value;
    else node.setAttribute(key, value);
  }
  for (const child of children) {
    if (child === null || child === undefined) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}
function fill(tbody, rows, columns, emptyText) {
  tbody.replaceChildren(...(rows.length ? rows : [el("tr", { class: "empty" }, el("td", { colspan: String(columns) }, emptyText))]));
}
function setStat(testid, text, raw) {
  const node = document.querySelector(`[data-testid="${testid}"]`);
  node.textContent = text;
  node.dataset.value = String(raw);
}
function swatch(state) { return el("span", { class: `swatch s-${state}` }); }
function badge(status) {
  const kind = status === "True" ? "ok" : status === "False" ? "bad" : "unknown";
  return el("span", { class: `badge ${kind}` }, status === "True" ? "Ready" : status === "False" ? "NotReady" : "Unknown");
}
function condition(obj, type) {
  return ((obj.status || {}).conditions || []).find((c) => c.type === type) || null;
}

// ---------------------------------------------------------------------------------------------
// API

async function api(path) {
  const token = sessionStorage.getItem(TOKEN_KEY);
  const response = await fetch(path, { headers: { Authorization: `Bearer ${token}`, Accept: "application/json" } });
  if (response.status === 401) throw new Unauthorized("the hub did not accept this token");
  const text = await response.text();
  let body = null;
  try { body = text ? JSON.parse(text) : null; } catch (_) { body = null; }
  if (!response.ok) {
    const message = body && body.message ? body.message : `${response.status} ${response.statusText}`;
    const error = new Error(message);
    error.code = response.status;
    throw error;
  }
  return body;
}

// ---------------------------------------------------------------------------------------------
// Rendering

function renderOverview(report, clusters) {
  const totals = report.totals;
  const observed = report.window.observed_hours;
  const ready = clusters.filter((c) => (condition(c, "Ready") || {}).status === "True").length;
  setStat("clusters-ready", `${ready}/${clusters.length}`, ready);
  const gpus = observed > 0 ? totals.gpu_hours_total / observed : 0;
  setStat("gpus-mean", fmtGpus(gpus), gpus);
  setStat("gpu-hours-total", fmtHours(totals.gpu_hours_total), totals.gpu_hours_total);
  setStat("waste-pct", fmtPct(totals.waste_pct), totals.waste_pct);
  setStat("waste-cost", fmtMoney(totals.waste_cost_usd), totals.waste_cost_usd);
  setStat("cost-total", fmtMoney(totals.cost_usd_total), totals.cost_usd_total);
  setStat("window-from", localTime(report.window.from), report.window.from);
  setStat("window-to", localTime(report.window.to), report.window.to);
  setStat("observed-hours", observed.toFixed(3), observed);
  // Allocated GPU time with no utilization measured is neither busy nor idle: say where it is.
  const unmeasured = report.unmeasured || [];
  const hours = unmeasured.reduce((total, u) => total + u.gpu_hours, 0);
  const note = $("unmeasured");
  note.hidden = unmeasured.length === 0;
  note.dataset.value = String(hours);
  note.textContent = unmeasured.length
    ? `Utilization not measured for ${fmtHours(hours)} GPU-hours on clusters ${unmeasured.map((u) => u.cluster).join(", ")} (no DCGM data): neither busy nor idle.`
    : "";
  // Spot reclaims whose replicas the hub replaced elsewhere, in the window.
  const reclaims = report.spot_reclaims || { reclaims: 0, replicas: 0 };
  const survived = $("spot-reclaims");
  survived.hidden = !reclaims.reclaims;
  survived.dataset.value = String(reclaims.reclaims || 0);
  survived.textContent = reclaims.reclaims
    ? `Spot reclaims survived: ${reclaims.reclaims} (${reclaims.replicas} replica(s) replaced elsewhere).`
    : "";
}

function renderStates(report) {
  const totals = report.totals;
  const rows = STATES.map((state) => {
    const hours = totals.gpu_hours[state] || 0;
    const share = totals.gpu_hours_total > 0 ? (100 * hours) / totals.gpu_hours_total : 0;
    return el("tr", { "data-state": state },
      el("td", {}, swatch(state), state),
      el("td", { "data-field": "gpu_hours" }, fmtHours(hours)),
      el("td", { "data-field": "cost_usd" }, fmtMoney(totals.cost_usd[state] || 0)),
      el("td", { "data-field": "share" }, fmtPct(share)));
  });
  fill($("states"), rows, 4, "no data");
}

function renderClusters(byCluster, clusters) {
  const observed = byCluster.window.observed_hours;
  const groups = new Map(byCluster.groups.map((g) => [g.key.cluster, g]));
  const names = new Set([...clusters.map((c) => c.metadata.name), ...groups.keys()]);
  const objects = new Map(clusters.map((c) => [c.metadata.name, c]));
  const rows = [...names].sort().map((name) => {
    const group = groups.get(name) || { gpu_hours: {}, cost_usd: {}, waste_pct: 0 };
    const hours = sum(group.gpu_hours, STATES);
    const ready = objects.has(name) ? (condition(objects.get(name), "Ready") || {}).status : "Unknown";
    const provider = objects.has(name) ? objects.get(name).spec.provider : "";
    return el("tr", { "data-cluster": name },
      el("td", {}, el("div", {}, name), el("div", { class: "message" }, provider || "")),
      el("td", {}, badge(ready)),
      el("td", { "data-field": "gpus" }, fmtGpus(observed > 0 ? hours / observed : 0)),
      el("td", { "data-field": "busy" }, fmtHours(group.gpu_hours.busy || 0)),
      el("td", { "data-field": "idle" }, fmtHours(group.gpu_hours["idle-allocated"] || 0)),
      el("td", { "data-field": "free" }, fmtHours(sum(group.gpu_hours, FREE_STATES))),
      el("td", { "data-field": "waste_pct" }, fmtPct(group.waste_pct || 0)),
      el("td", { "data-field": "waste_cost" }, fmtMoney(sum(group.cost_usd, WASTE_STATES))));
  });
  fill($("clusters"), rows, 8, "no clusters have joined yet");
}

function renderNamespaces(byNamespace) {
  const rows = byNamespace.groups.map((group) => {
    const name = group.key.namespace || "(free or unassigned)";
    return el("tr", { "data-namespace": group.key.namespace || "" },
      el("td", {}, name),
      el("td", { "data-field": "busy" }, fmtHours(group.gpu_hours.busy || 0)),
      el("td", { "data-field": "idle" }, fmtHours(group.gpu_hours["idle-allocated"] || 0)),
      el("td", { "data-field": "waste_pct" }, fmtPct(group.waste_pct || 0)),
      el("td", { "data-field": "cost" }, fmtMoney(sum(group.cost_usd, STATES))));
  });
  fill($("namespaces"), rows, 5, "no data in this window");
}

function renderIdle(report) {
  const rows = report.top_idle_workloads.map((w) => el("tr", { "data-workload": `${w.namespace}/${w.workload}` },
    el("td", {}, el("div", {}, `${w.namespace}/${w.workload.split("/").pop()}`), el("div", { class: "message" }, w.workload.split("/")[0])),
    el("td", { "data-field": "gpus_now" }, fmtGpus(w.gpus_now || 0)),
    el("td", { "data-field": "allocated_gpu_hours" }, fmtHours(w.allocated_gpu_hours || 0)),
    el("td", {}, w.mean_utilization === null ? "–" : fmtPct(100 * w.mean_utilization)),
    el("td", { "data-field": "idle_gpu_hours" }, fmtHours(w.idle_gpu_hours)),
    el("td", { "data-field": "idle_cost_usd" }, fmtMoney(w.idle_cost_usd))));
  fill($("idle"), rows, 6, "no idle GPUs in this window");
}

function renderRecommendations(report) {
  // The text already states the saving ("…: saves $X/day"): shown once, as the report words it.
  const items = report.recommendations.map((r) => el("li", { "data-kind": r.kind }, r.text));
  $("recommendations").replaceChildren(...(items.length ? items : [el("li", { class: "muted" }, "Nothing to recommend in this window.")]));
}

function renderMoves(report) {
  // Replicas moved back from dearer tiers when cheaper ones had room, and what that saved in the window.
  const moves = report.moves || { moves: 0, replicas_moved: 0, gpu_hours_shifted: 0, saved_usd: 0 };
  const text = moves.gpu_hours_shifted
    ? `${moves.replicas_moved} replica(s) moved in ${moves.moves} move(s); ${fmtHours(moves.gpu_hours_shifted)} GPU-h shifted, ${fmtMoney(moves.saved_usd)} saved`
    : "No replicas moved back in this window.";
  const node = $("moves");
  node.textContent = text;
  node.dataset.savedUsd = String(moves.saved_usd || 0);
}

function workloadName(binding) {
  const resource = binding.spec.resource || {};
  return `${resource.namespace || binding.metadata.namespace}/${resource.name || binding.metadata.name}`;
}

function renderWorkloads(bindings) {
  const rows = bindings.map((b) => {
    const placed = (b.spec.clusters || []).filter((t) => t.replicas > 0);
    const scheduled = condition(b, "Scheduled");
    return el("tr", { "data-binding": `${b.metadata.namespace}/${b.metadata.name}` },
      el("td", {}, el("div", {}, workloadName(b)), el("div", { class: "message" }, (b.spec.resource || {}).kind || "")),
      el("td", {}, String(b.spec.replicas ?? "")),
      el("td", {}, ...(placed.length ? placed.map((t) => el("span", { class: "chip" }, `${t.name} × ${t.replicas}`)) : ["–"])),
      el("td", {}, scheduled ? el("span", { class: `badge ${scheduled.status === "True" ? "ok" : "bad"}` }, scheduled.reason || scheduled.status) : "–"),
      el("td", {}, podsButton(b)));
  });
  fill($("workloads"), rows, 5, "no workloads on the hub");
}

// ---------------------------------------------------------------------------------------------
// A workload's pods per cluster (the hub reads them through the cluster proxy with this token)
// and a pod's log (the proxy's pods/<name>/log route, so clusters/proxy RBAC decides).

let shownPods = null;
function podsButton(binding) {
  const button = el("button", { class: "link", type: "button", "data-pods": `${binding.metadata.namespace}/${binding.metadata.name}` }, "pods");
  button.addEventListener("click", () => {
    shownPods = { namespace: binding.metadata.namespace, name: binding.metadata.name, title: workloadName(binding) };
    loadPods();
  });
  return button;
}

function percentText(value) { return value === undefined || value === null ? "–" : `${Math.round(value * 100)}%`; }
function deviceText(devices) {
  return (devices || []).map((d) => d.profile ? `gpu${d.gpu}/${d.profile}` : `gpu${d.gpu}`).join(", ") || "–";
}

async function loadPods() {
  if (!shownPods) return;
  const path = `/apis/work.gpufed.io/v1alpha1/namespaces/${encodeURIComponent(shownPods.namespace)}/resourcebindings/${encodeURIComponent(shownPods.name)}/pods`;
  $("pods-card").hidden = false;
  $("pods-workload").textContent = shownPods.title;
  let answer;
  try {
    answer = await api(path);
  } catch (error) {
    fill($("pods"), [], 10, `pods not shown: ${error.message}`);
    return;
  }
  const rows = [];
  for (const cluster of answer.clusters || []) {
    if (cluster.forbidden || cluster.error) {
      rows.push(el("tr", { "data-cluster": cluster.name }, el("td", {}, cluster.name),
        el("td", { colspan: "9", class: "message" }, cluster.forbidden ? `pods not shown: ${cluster.forbidden}` : cluster.error)));
    }
    for (const pod of cluster.pods || []) {
      const log = el("button", { class: "link", type: "button", "data-log": pod.logPath }, "log");
      log.addEventListener("click", () => showLog(pod));
      rows.push(el("tr", { "data-pod": `${cluster.name}/${pod.name}` },
        el("td", {}, cluster.name), el("td", {}, pod.name), el("td", {}, pod.ready || "–"), el("td", {}, pod.status),
        el("td", {}, pod.node),
        el("td", {}, pod.gpuRequest), el("td", {}, deviceText(pod.devices)), el("td", {}, percentText(pod.gpuUtilization)),
        el("td", {}, String(pod.restartsShown ?? pod.restarts)), el("td", {}, pod.logPath ? log : "–")));
    }
  }
  fill($("pods"), rows, 10, "no pods yet");
}

async function showLog(pod) {
  const token = sessionStorage.getItem(TOKEN_KEY);
  const view = $("pod-log");
  view.hidden = false;
  const response = await fetch(`${pod.logPath}?tailLines=200`, { headers: { Authorization: `Bearer ${token}` } });
  const text = await response.text();
  if (response.ok) {
    view.textContent = text || `(${pod.name} has written nothing yet)`;
    return;
  }
  let message = `${response.status} ${response.statusText}`;
  try { message = JSON.parse(text).message || message; } catch (_) { /* not a Status */ }
  view.textContent = `log of ${pod.name} not shown: ${message}`;
}

function renderPending(bindings, works) {
  const rows = [];
  for (const b of bindings) {
    const placed = (b.spec.clusters || []).reduce((n, t) => n + (t.replicas || 0), 0);
    const waiting = (b.spec.replicas || 0) - placed;
    if (waiting <= 0) continue;
    const scheduled = condition(b, "Scheduled");
    rows.push(el("tr", { "data-pending": workloadName(b) },
      el("td", {}, workloadName(b)),
      el("td", {}, `${waiting} replica${waiting === 1 ? "" : "s"}`),
      el("td", {}, el("div", { class: "reason" }, scheduled ? scheduled.reason || "" : "Waiting for the scheduler"),
        el("div", { class: "message" }, scheduled ? scheduled.message || "" : ""))));
  }
  for (const w of works) {
    const cluster = w.metadata.namespace.replace(/^gpufed-es-/, "");
    for (const m of (w.status || {}).manifestStatuses || []) {
      const pods = (m.unschedulable || {}).pods || 0;
      if (pods <= 0) continue;
      const id = m.identifier || {};
      rows.push(el("tr", { "data-pending": `${id.namespace}/${id.name}` },
        el("td", {}, `${id.namespace}/${id.name}`),
        el("td", {}, `${pods} pod${pods === 1 ? "" : "s"} in ${cluster}`),
        el("td", {}, el("div", { class: "reason" }, "MemberUnschedulable"), el("div", { class: "message" }, m.unschedulable.message || ""))));
    }
  }
  fill($("pending"), rows, 3, "nothing is waiting");
}

// ---------------------------------------------------------------------------------------------
// The stacked chart (inline SVG, steps: each point covers [from, to))

const SVG = "http://www.w3.org/2000/svg";
function svg(tag, attrs, text) {
  const node = document.createElementNS(SVG, tag);
  for (const [key, value] of Object.entries(attrs || {})) node.setAttribute(key, String(value));
  if (text !== undefined) node.textContent = text;
  return node;
}
function niceStep(value) {
  if (value <= 0) return 0.25;
  const magnitude = Math.pow(10, Math.floor(Math.log10(value)));
  for (const step of [1, 2, 2.5, 5, 10]) if (value <= step * magnitude) return step * magnitude;
  return 10 * magnitude;
}
function timeLabel(ms, span) {
  const d = new Date(ms);
  const hm = d.toLocaleTimeString([], { hour: "2-digit", minute: "2-digit" });
  return span > 36 * 3600e3 ? `${d.toLocaleDateString([], { month: "short", day: "numeric" })} ${hm}` : hm;
}

function renderChart(series, emptyText) {
  lastSeries = series;
  lastEmptyText = emptyText;
  const box = $("chart");
  const points = series.map((p) => ({ t0: Date.parse(p.from), t1: Date.parse(p.to), observed: p.observed_hours, gpus: p.gpus }));
  const first = points.findIndex((p) => p.observed > 0);
  const width = Math.max(box.clientWidth, 320);
  const height = Math.max(box.clientHeight, 200);
  const root = svg("svg", { viewBox: `0 0 ${width} ${height}`, role: "img", "aria-label": "GPUs by state over time" });
  if (first < 0) {
    root.append(svg("text", { x: width / 2, y: height / 2, "text-anchor": "middle", class: "empty" }, emptyText));
    box.replaceChildren(root);
    return;
  }
  const shown = points.slice(first);
  const m = { left: 46, right: 12, top: 10, bottom: 24 };
  const x0 = shown[0].t0;
  const x1 = shown[shown.length - 1].t1;
  const highest = Math.max(...shown.map((p) => sum(p.gpus, STATES)));
  const ystep = niceStep(highest / 4);
  const yticks = Math.max(Math.ceil(highest / ystep - 1e-9), 1);
  const ymax = ystep * yticks;
  const x = (t) => m.left + ((t - x0) / Math.max(x1 - x0, 1)) * (width - m.left - m.right);
  const y = (v) => height - m.bottom - (v / ymax) * (height - m.top - m.bottom);

  const axis = svg("g", { class: "axis" });
  for (let i = 0; i <= yticks; i++) {
    const v = ystep * i;
    axis.append(svg("line", { x1: m.left, x2: width - m.right, y1: y(v), y2: y(v), class: "grid-line" }));
    axis.append(svg("text", { x: m.left - 6, y: y(v) + 4, "text-anchor": "end" }, Number.isInteger(v) ? v : v.toFixed(1)));
  }
  const ticks = Math.min(6, shown.length + 1);
  for (let i = 0; i < ticks; i++) {
    const t = x0 + ((x1 - x0) * i) / Math.max(ticks - 1, 1);
    axis.append(svg("text", { x: x(t), y: height - 6, "text-anchor": i === 0 ? "start" : i === ticks - 1 ? "end" : "middle" }, timeLabel(t, x1 - x0)));
  }
  root.append(axis);

  const base = shown.map(() => 0);
  for (const state of STATES) {
    const tops = shown.map((p, i) => base[i] + (p.gpus[state] || 0));
    if (tops.every((top, i) => top === base[i])) continue;
    let d = "";
    shown.forEach((p, i) => { d += `${i === 0 ? "M" : "L"}${x(p.t0).toFixed(1)},${y(tops[i]).toFixed(1)}L${x(p.t1).toFixed(1)},${y(tops[i]).toFixed(1)}`; });
    for (let i = shown.length - 1; i >= 0; i--) d += `L${x(shown[i].t1).toFixed(1)},${y(base[i]).toFixed(1)}L${x(shown[i].t0).toFixed(1)},${y(base[i]).toFixed(1)}`;
    root.append(svg("path", { d: d + "Z", class: `layer s-${state}`, "data-state": state }));
    tops.forEach((top, i) => { base[i] = top; });
  }
  for (const p of shown) {
    const hover = svg("rect", { x: x(p.t0), y: m.top, width: Math.max(x(p.t1) - x(p.t0), 1), height: height - m.top - m.bottom, fill: "transparent" });
    const lines = STATES.filter((s) => p.gpus[s] > 0).map((s) => `${s}: ${fmtGpus(p.gpus[s])} GPUs`);
    hover.append(svg("title", {}, `${timeLabel(p.t0, 0)}–${timeLabel(p.t1, 0)}\n${lines.join("\n") || "no data"}`));
    root.append(hover);
  }
  box.replaceChildren(root);
}

function renderLegend() {
  $("legend").replaceChildren(...STATES.map((s) => el("li", {}, swatch(s), s)));
}

// ---------------------------------------------------------------------------------------------
// Loading

function settled(result, fallback, what, problems) {
  if (result.status === "fulfilled") return result.value;
  if (result.reason instanceof Unauthorized) throw result.reason;
  problems.push(`${what}: ${result.reason.message}`);
  return fallback;
}

async function load() {
  const windowLength = $("window").value;
  const step = STEPS[windowLength] || "1m";
  try {
    const main = await api(`${REPORTS}/last-${windowLength}?step=${step}&top=10`);
    const report = main.status;
    const range = `from=${encodeURIComponent(report.window.from)}&to=${encodeURIComponent(report.window.to)}`;
    const results = await Promise.allSettled([
      api(`${REPORTS}/custom?${range}&by=cluster`),
      api(`${REPORTS}/custom?${range}&by=namespace`),
      // Clusters and Works are the fleet's: a namespace's view leaves them out.
      NAMESPACE ? Promise.resolve({ items: [] }) : api(CLUSTERS),
      api(BINDINGS),
      NAMESPACE ? Promise.resolve({ items: [] }) : api(WORKS),
    ]);
    const problems = [];
    const empty = { status: { window: report.window, groups: [] } };
    const byCluster = settled(results[0], empty, "report by cluster", problems).status;
    const byNamespace = settled(results[1], empty, "report by namespace", problems).status;
    const clusters = settled(results[2], { items: [] }, "clusters", problems).items;
    const bindings = settled(results[3], { items: [] }, "workloads", problems).items;
    const works = settled(results[4], { items: [] }, "works", problems).items;
    renderOverview(report, clusters);
    renderStates(report);
    renderChart(report.series || [], NAMESPACE ? `The fleet's chart is not shown for one namespace (${NAMESPACE})` : "No samples in this window yet");
    renderClusters(byCluster, clusters);
    renderNamespaces(byNamespace);
    renderIdle(report);
    renderRecommendations(report);
    renderMoves(report);
    renderWorkloads(bindings);
    renderPending(bindings, works);
    loadPods();
    await loadQueues();  // queues.js
    $("error").hidden = problems.length === 0;
    $("error").textContent = problems.join("; ");
    $("updated").textContent = new Date().toLocaleTimeString();
    document.body.dataset.loaded = "true";
  } catch (error) {
    if (error instanceof Unauthorized) {
      signOut("The hub did not accept this token: sign in again.");
      return;
    }
    $("error").hidden = false;
    $("error").textContent = `Could not load the dashboard: ${error.message}`;
  }
}

function showDashboard() {
  if (NAMESPACE) {
    document.body.dataset.namespace = NAMESPACE;
    $("scope").textContent = `namespace ${NAMESPACE}`;
  }
  $("login").hidden = true;
  $("dashboard").hidden = false;
  $("controls").hidden = false;
  renderLegend();
  load();
  clearInterval(refreshTimer);
  refreshTimer = setInterval(() => { if (!document.hidden) load(); }, REFRESH_MS);
}

function signOut(message) {
  sessionStorage.removeItem(TOKEN_KEY);
  clearInterval(refreshTimer);
  delete document.body.dataset.loaded;
  $("dashboard").hidden = true;
  $("controls").hidden = true;
  $("login").hidden = false;
  $("login-error").textContent = message || "";
  $("token").focus();
}

document.addEventListener("DOMContentLoaded", () => {
  const remembered = sessionStorage.getItem(WINDOW_KEY);
  if (remembered && STEPS[remembered]) $("window").value = remembered;
  $("login-form").addEventListener("submit", (event) => {
    event.preventDefault();
    const token = $("token").value.trim();
    if (!token) return;
    sessionStorage.setItem(TOKEN_KEY, token);
    $("token").value = "";
    showDashboard();
  });
  $("signout").addEventListener("click", () => signOut(""));
  $("refresh").addEventListener("click", () => load());
  $("window").addEventListener("change", () => { sessionStorage.setItem(WINDOW_KEY, $("window").value); load(); });
  let resizeTimer = null;
  window.addEventListener("resize", () => { clearTimeout(resizeTimer); resizeTimer = setTimeout(() => renderChart(lastSeries, lastEmptyText), 150); });
  if (sessionStorage.getItem(TOKEN_KEY)) showDashboard();
  else signOut("");
});
