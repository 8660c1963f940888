"""The simulated member's controllers for kinds that own no GPU pods: DaemonSet, CronJob, and
the load balancers of Services and Ingresses.

* A DaemonSet runs one daemon pod on every Ready node its pod template's ``nodeSelector``
  matches and whose NoSchedule/NoExecute taints it tolerates. Daemon pods take no GPU, so they
  are counted, not created: the status says every such node runs a ready, up-to-date pod.
* A CronJob creates a Job from ``spec.jobTemplate`` at each time its ``schedule`` (and
  ``timeZone``) names, from its creation on, at most one run missed (kube's
  ``startingDeadlineSeconds``-less behaviour), skipping runs while ``suspend`` is true or, with
  ``concurrencyPolicy: Forbid``, while a Job of it is active. Its status lists the active Jobs
  (``status.active``), ``lastScheduleTime`` and ``lastSuccessfulTime``. The Jobs then run as
  any Job of the member does.
* A ``LoadBalancer`` Service and an Ingress get a ``status.loadBalancer.ingress`` IP from
  TEST-NET-3 (203.0.113.0/24), stable per object and member.

The decisions are pure functions; :class:`StatusControllers` polls the store and writes what
changed.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from croniter import croniter

from controlplane.apis.pods import FrozenTaint, FrozenToleration, untolerated
from controlplane.apis.timestamps import parse_time_or_none
from controlplane.apis.untyped import Obj
from controlplane.lifecycle import Service
from controlplane.objectclient import ObjectClient, ResourceType, errors
from simulator.clock import Clock, rfc3339
from simulator.controllers.base import owner_reference

log = logging.getLogger(__name__)


def _node_ready(node: Mapping[str, Any]) -> bool:
    for cond in (node.get("status") or {}).get("conditions") or ():
        if cond.get("type") == "Ready":
            return bool(cond.get("status") == "True")
    return False


def daemon_nodes(daemonset: Mapping[str, Any], nodes: Iterable[Mapping[str, Any]]) -> list[str]:
    """Names of the Ready nodes a daemon pod of ``daemonset`` runs on."""
    pod_spec = ((daemonset.get("spec") or {}).get("template") or {}).get("spec") or {}
    selector = pod_spec.get("nodeSelector") or {}
    tolerations = [FrozenToleration.from_dict(t) for t in pod_spec.get("tolerations") or () if isinstance(t, Mapping)]
    out = []
    for node in nodes:
        labels = (node.get("metadata") or {}).get("labels") or {}
        if any(labels.get(k) != v for k, v in selector.items()) or not _node_ready(node):
            continue
        taints = [FrozenTaint.from_dict(t) for t in (node.get("spec") or {}).get("taints") or () if isinstance(t, Mapping)]
        if untolerated(taints, tolerations):
            continue
        out.append(str((node.get("metadata") or {}).get("name")))
    return sorted(out)


def daemonset_status(daemonset: Mapping[str, Any], nodes: Iterable[Mapping[str, Any]]) -> Obj:
    count = len(daemon_nodes(daemonset, nodes))
    return {
        "currentNumberScheduled": count,
        "desiredNumberScheduled": count,
        "numberAvailable": count,
        "numberMisscheduled": 0,
        "numberReady": count,
        "updatedNumberScheduled": count,
        "observedGeneration": (daemonset.get("metadata") or {}).get("generation", 1),
    }


def load_balancer_ip(obj: Mapping[str, Any], *, salt: str) -> str:
    meta = obj.get("metadata") or {}
    digest = hashlib.sha256(f"{salt}/{obj.get('kind')}/{meta.get('namespace')}/{meta.get('name')}".encode()).digest()
    return f"203.0.113.{1 + digest[0] % 254}"


def load_balancer_status(obj: Mapping[str, Any], *, salt: str) -> Obj | None:
    """The ``status`` a LoadBalancer Service or an Ingress gets; None for other Services."""
    if obj.get("kind") == "Service" and (obj.get("spec") or {}).get("type") != "LoadBalancer":
        return None
    return {**(obj.get("status") or {}), "loadBalancer": {"ingress": [{"ip": load_balancer_ip(obj, salt=salt)}]}}


def _job_finished(job: Mapping[str, Any]) -> str | None:
    for cond in (job.get("status") or {}).get("conditions") or ():
        if cond.get("type") in ("Complete", "Failed") and cond.get("status") == "True":
            return str(cond["type"])
    return None


def cronjob_due(cronjob: Mapping[str, Any], now: datetime, *, active: int) -> datetime | None:
    """The scheduled time a new Job of ``cronjob`` must start for, or None (nothing due, suspended,
    Forbid with a Job active, or an unreadable schedule)."""
    spec = cronjob.get("spec") or {}
    if spec.get("suspend") is True:
        return None
    if spec.get("concurrencyPolicy") == "Forbid" and active:
        return None
    try:
        zone = ZoneInfo(str(spec["timeZone"])) if spec.get("timeZone") else UTC
    except (ZoneInfoNotFoundError, ValueError):
        return None
    status = cronjob.get("status") or {}
    since = parse_time_or_none(status.get("lastScheduleTime"), naive_as_utc=True) or parse_time_or_none(
        (cronjob.get("metadata") or {}).get("creationTimestamp"), naive_as_utc=True
    )
    if since is None:
        return None
    try:
        latest = croniter(str(spec.get("schedule", "")), now.astimezone(zone)).get_prev(datetime)
    except (ValueError, KeyError):
        return None
    latest = latest.astimezone(UTC)
    return latest if latest > since else None


def cronjob_job(cronjob: Mapping[str, Any], scheduled: datetime) -> Obj:
    """The Job a CronJob creates for ``scheduled``: ``<cronjob>-<minutes since the epoch>``, as kube names it."""
    meta = cronjob.get("metadata") or {}
    template = (cronjob.get("spec") or {}).get("jobTemplate") or {}
    template_meta = template.get("metadata") or {}
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": f"{meta.get('name')}-{int(scheduled.timestamp()) // 60}",
            "namespace": meta.get("namespace"),
            "labels": dict(template_meta.get("labels") or {}),
            "annotations": {
                **(template_meta.get("annotations") or {}),
                "batch.kubernetes.io/cronjob-scheduled-timestamp": rfc3339(scheduled.timestamp()),
            },
            "ownerReferences": [owner_reference(cronjob)],
        },
        "spec": dict(template.get("spec") or {}),
    }


def cronjob_status(
    cronjob: Mapping[str, Any], jobs: Sequence[Mapping[str, Any]], *, scheduled: datetime | None
) -> Obj:
    """``status`` of ``cronjob`` given its Jobs (and the time it just scheduled one for, if any)."""
    status = dict(cronjob.get("status") or {})
    active = [
        {
            "apiVersion": "batch/v1", "kind": "Job", "namespace": (job.get("metadata") or {}).get("namespace"),
            "name": (job.get("metadata") or {}).get("name"), "uid": (job.get("metadata") or {}).get("uid"),
        }
        for job in sorted(jobs, key=lambda j: str((j.get("metadata") or {}).get("name")))
        if _job_finished(job) is None
    ]
    if active:
        status["active"] = active
    else:
        status.pop("active", None)
    if scheduled is not None:
        status["lastScheduleTime"] = rfc3339(scheduled.timestamp())
    succeeded = [
        str((job.get("status") or {}).get("completionTime"))
        for job in jobs
        if _job_finished(job) == "Complete" and (job.get("status") or {}).get("completionTime")
    ]
    if succeeded:
        status["lastSuccessfulTime"] = max(succeeded)
    return status


class StatusControllers(Service):
    """Polls the member's DaemonSets, CronJobs, Services and Ingresses and writes their status
    (and a CronJob's Jobs). ``async with`` starts it; leaving stops it."""

    def __init__(
        self, objects: ObjectClient, *, clock: Clock, salt: str, interval: float = 0.5
    ) -> None:
        super().__init__("status-controllers")
        self.objects = objects
        self.clock = clock
        self.salt = salt
        self.interval = interval

    def _rt(self, api_version: str, kind: str) -> ResourceType | None:
        return self.objects.registry.for_kind(api_version, kind)

    def request_stop(self) -> None:
        """Stop polling at once (a pass is only reads and idempotent writes)."""
        if self._task is not None:
            self._task.cancel()

    async def run(self) -> None:
        while True:
            try:
                await self.pass_once()
            except (errors.ApiError, OSError) as exc:
                log.warning("status controllers: %s", exc)
            await asyncio.sleep(self.interval)

    async def _write_status(self, rt: ResourceType, obj: Obj, status: Obj) -> None:
        if status == (obj.get("status") or {}):
            return
        with contextlib.suppress(errors.Conflict, errors.NotFound):
            await self.objects.update_status(rt, {**obj, "status": status})

    async def pass_once(self) -> None:
        """One pass over every kind this module controls."""
        nodes_rt, ds_rt = self._rt("v1", "Node"), self._rt("apps/v1", "DaemonSet")
        if nodes_rt is not None and ds_rt is not None:
            nodes = (await self.objects.list(nodes_rt)).items
            for ds in (await self.objects.list(ds_rt)).items:
                await self._write_status(ds_rt, ds, daemonset_status(ds, nodes))
        for api_version, kind in (("v1", "Service"), ("networking.k8s.io/v1", "Ingress")):
            rt = self._rt(api_version, kind)
            if rt is None:
                continue
            for obj in (await self.objects.list(rt)).items:
                status = load_balancer_status(obj, salt=self.salt)
                if status is not None:
                    await self._write_status(rt, obj, status)
        await self._cronjobs()

    async def _cronjobs(self) -> None:
        cj_rt, job_rt = self._rt("batch/v1", "CronJob"), self._rt("batch/v1", "Job")
        if cj_rt is None or job_rt is None:
            return
        cronjobs = (await self.objects.list(cj_rt)).items
        if not cronjobs:
            return
        jobs = (await self.objects.list(job_rt)).items
        now = datetime.fromtimestamp(self.clock.now(), tz=UTC)
        for cronjob in cronjobs:
            uid = (cronjob.get("metadata") or {}).get("uid")
            owned = [
                job for job in jobs
                if any(ref.get("uid") == uid for ref in (job.get("metadata") or {}).get("ownerReferences") or ())
            ]
            active = sum(1 for job in owned if _job_finished(job) is None)
            scheduled = cronjob_due(cronjob, now, active=active)
            if scheduled is not None:
                with contextlib.suppress(errors.AlreadyExists):
                    owned.append(await self.objects.create(job_rt, cronjob_job(cronjob, scheduled)))
            await self._write_status(cj_rt, cronjob, cronjob_status(cronjob, owned, scheduled=scheduled))
