// gpufed dashboard, fleet quotas: Kueue's ClusterQueues as the hub's admission controller keeps
// them. One row per ClusterQueue, flavor and resource (as `gpufed queues`): nominal quota, usage,
// borrowed, with the queue's pending and admitted workloads on its first row. A namespace's view
// (/ui?namespace=team-a) lists that namespace's LocalQueues and the quota of the ClusterQueue
// behind each one when this token may read it (ClusterQueues are cluster-scoped).
// Uses dashboard.js's api, el, fill, $ and NAMESPACE; every value goes in with textContent.
"use strict";

const KUEUE = "/apis/kueue.x-k8s.io/v1beta1";

function quotaLines(cq) {
  const used = new Map();
  for (const flavor of (cq.status || {}).flavorsReservation || []) {
    for (const r of flavor.resources || []) used.set(`${flavor.name}\u0000${r.name}`, r);
  }
  const lines = [];
  for (const group of (cq.spec || {}).resourceGroups || []) {
    for (const flavor of group.flavors || []) {
      for (const quota of flavor.resources || []) {
        const u = used.get(`${flavor.name}\u0000${quota.name}`) || {};
        lines.push({ flavor: flavor.name, resource: quota.name, nominal: String(quota.nominalQuota ?? "–"),
          usage: String(u.total ?? "0"), borrowed: String(u.borrowed ?? "0") });
      }
    }
  }
  return lines;
}

function queueRows(key, title, subtitle, counts, cq) {
  const lines = cq ? quotaLines(cq) : [];
  return (lines.length ? lines : [null]).map((q, i) => {
    const attrs = { "data-queue": key };
    if (q) { attrs["data-flavor"] = q.flavor; attrs["data-resource"] = q.resource; }
    const first = i === 0;
    return el("tr", attrs,
      el("td", {}, first ? el("div", {}, title) : null, first && subtitle ? el("div", { class: "message" }, subtitle) : null),
      el("td", {}, q ? q.flavor : "–"),
      el("td", {}, q ? q.resource : "–"),
      el("td", { "data-field": "nominal" }, q ? q.nominal : "–"),
      el("td", { "data-field": "usage" }, q ? q.usage : "–"),
      el("td", { "data-field": "borrowed" }, q ? q.borrowed : "–"),
      el("td", { "data-field": "pending" }, first ? String(counts.pendingWorkloads || 0) : ""),
      el("td", { "data-field": "admitted" }, first ? String(counts.admittedWorkloads || 0) : ""));
  });
}

async function readableClusterQueue(name) {
  // A team bound to view in its namespace may not read cluster-scoped ClusterQueues (403): no
  // quota shown, and the note says why; a LocalQueue naming no or a missing ClusterQueue says so.
  if (!name) return { cq: null, why: "a LocalQueue names no ClusterQueue" };
  try {
    return { cq: await api(`${KUEUE}/clusterqueues/${encodeURIComponent(name)}`), why: null };
  } catch (error) {
    if (error instanceof Unauthorized) throw error;
    if (error.code === 403) return { cq: null, why: `ClusterQueue ${name}: reading it takes a cluster-wide view` };
    if (error.code === 404) return { cq: null, why: `ClusterQueue ${name} doesn't exist` };
    return { cq: null, why: `ClusterQueue ${name}: ${error.message}` };
  }
}

async function loadQueues() {
  const note = $("queues-note");
  note.hidden = true;
  try {
    if (!NAMESPACE) {
      const queues = (await api(`${KUEUE}/clusterqueues`)).items || [];
      queues.sort((a, b) => a.metadata.name.localeCompare(b.metadata.name));
      const rows = queues.flatMap((cq) => queueRows(cq.metadata.name, cq.metadata.name,
        (cq.spec || {}).cohort ? `cohort ${cq.spec.cohort}` : "", cq.status || {}, cq));
      fill($("queues"), rows, 8, "no ClusterQueues on the hub");
      return;
    }
    const locals = (await api(`${KUEUE}/namespaces/${encodeURIComponent(NAMESPACE)}/localqueues`)).items || [];
    locals.sort((a, b) => a.metadata.name.localeCompare(b.metadata.name));
    const rows = [];
    const unreadable = [];
    for (const lq of locals) {
      const target = (lq.spec || {}).clusterQueue || "";
      const { cq, why } = await readableClusterQueue(target);
      if (why && !unreadable.includes(why)) unreadable.push(why);
      rows.push(...queueRows(`${NAMESPACE}/${lq.metadata.name}`, lq.metadata.name, `→ ClusterQueue ${target}`, lq.status || {}, cq));
    }
    fill($("queues"), rows, 8, `no LocalQueues in namespace ${NAMESPACE}`);
    if (unreadable.length) {
      note.hidden = false;
      note.textContent = `Quota not shown: ${unreadable.join("; ")}.`;
    }
  } catch (error) {
    if (error instanceof Unauthorized) throw error;
    fill($("queues"), [], 8, `queues not shown: ${error.message}`);
  }
}
