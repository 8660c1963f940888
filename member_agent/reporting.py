"""The member agent's capacity reports: ``Cluster.status`` from the node and pod informers, the
member API probe's verdict and the last DCGM scrape (:func:`member_agent.capacity.summarize`).

The report is written ``report_debounce`` seconds after nodes or pods change and every
``report_interval`` anyway; a cluster gone from the hub is registered again. The probe asks the
member's ``/readyz`` and ``/livez`` every ``member_probe_interval``; a change of its verdict is
reported at once.

Summing a report and parsing a DCGM page run in worker threads: at 5,000 fully allocated
nodes they take some 8 and 6 CPU-seconds, during which the loop must go on renewing the
lease and applying Works. The report's node part is kept over node changes
(:class:`~member_agent.nodetotals.NodeTotals`), so a report walks the nodes that changed and
those that hold pods, not every node.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
from collections.abc import Callable
from typing import Any

import aiohttp

from controlplane.apis.apienablements import enablements_condition
from controlplane.apis.cluster_v1alpha1 import ClusterConditionType
from controlplane.apis.timestamps import format_time
from member_agent import apienabling, capacity, dcgm, probing
from member_agent.agentbase import MAX_BACKOFF, AgentBase
from member_agent.kubeapi import ApiError, NotFound
from member_agent.nodetotals import NodeTotals
from member_agent.podstates import no_claim_trouble
from member_agent.reachability import failure_level
from member_agent.registering import desired_cluster, register_cluster, write_cluster_status

logger = logging.getLogger(__name__)

#: After a Work with a CRD is applied the member's APIs are read at once, then again after this
#: many seconds, the pause doubling until the list changes.
CRD_RECHECK = 1.0


class CapacityReporting(AgentBase):
    """The capacity report, the member API probe and the DCGM scraper of one agent."""

    def _on_capacity_change(self, key: str) -> None:
        self._report_due.set()

    def _status_job(self) -> Callable[[], dict[str, Any]]:
        """The report of what the agent knows now, to compute later: the pod informer's objects
        and the last scrape are taken here (in the loop); the summary may then run in a worker
        thread, where the node totals take the node changes noted until then (a report costs
        those and the nodes holding pods, not every node)."""
        assert self.nodes is not None and self.pods is not None
        previous = (self.cluster or {}).get("status") or {}
        problem = self.member_api_health.problem if self.member_api_health is not None else None
        return functools.partial(
            _summarize,
            self.node_totals,
            list(self.pods.objects.values()),
            now=format_time(self.clock()),
            utilization=self._utilization,
            utilization_time=self._utilization_time,
            kubernetes_version=self._kubernetes_version
            or capacity.kubelet_version(self.nodes.objects.values()),
            previous_conditions=previous.get("conditions") or [],
            api_problem=(problem.reason, problem.message) if problem is not None else None,
            requests_of=self._pod_requests,
            claims=self.claims.snapshot() if self.claims is not None else no_claim_trouble,
            node_scoring=self.config.member_node_scoring.value,
            dra_claims=self.dra.snapshot() if self.dra is not None else None,
        )

    async def _probe_loop(self) -> None:
        assert self.member is not None
        cfg = self.config
        health = self.member_api_health = probing.MemberApiHealth(
            server=self.member.server, failure_threshold=cfg.member_failure_threshold
        )
        loop = asyncio.get_running_loop()
        while True:
            before = health.problem
            result = await probing.probe_member_api(
                self.member, request_timeout=min(cfg.request_timeout, cfg.member_probe_interval)
            )
            problem = health.observe(result, now=loop.time())
            if (before and before.reason) != (problem and problem.reason):
                if problem is None:
                    logger.info("the API of member cluster %s answers again", cfg.cluster_name)
                else:
                    logger.warning("cluster %s is not ready: %s", cfg.cluster_name, problem.message)
                self._report_due.set()
            elif result.outcome is not probing.ProbeOutcome.OK and problem is None:
                logger.info("probe of member cluster %s failed: %s", cfg.cluster_name, result.detail)
            await asyncio.sleep(cfg.member_probe_interval)

    async def _report_loop(self) -> None:
        assert self.nodes is not None and self.pods is not None and self.hub is not None
        await self.nodes.synced.wait()
        await self.pods.synced.wait()
        failures = 0
        while True:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self.config.report_interval):
                    await self._report_due.wait()
                await asyncio.sleep(self.config.report_debounce)  # let a burst of changes settle
            self._report_due.clear()
            # Off the loop: the agent's leases, watches and applies go on while a large
            # member's report is summed (the objects it reads are replaced, never changed).
            status = await asyncio.to_thread(self._status_job())
            self._add_api_enablements(status)
            try:
                assert self.cluster is not None
                self.cluster = await write_cluster_status(self.hub, self.cluster, status)
                self.last_status = status
                self.reports_written += 1
                self.metrics.report_written()
                failures = 0
            except NotFound:
                logger.warning(
                    "cluster %s is gone from the hub; registering it again", self.config.cluster_name
                )
                self.cluster = await self._reregister()
                self._report_due.set()
            except ApiError as exc:
                failures += 1
                self.metrics.report_failed()
                logger.log(
                    failure_level(exc),
                    "capacity report for cluster %s failed: %s",
                    self.config.cluster_name,
                    exc,
                )
                self._report_due.set()
                await asyncio.sleep(min(MAX_BACKOFF, 0.5 * 2**failures))

    def _add_api_enablements(self, status: dict[str, Any]) -> None:
        """``status.apiEnablements`` and its ``CompleteAPIEnablements`` condition. Until the first
        reading, those the stored Cluster has are carried over (a restarted agent's first report
        must not erase them); a Cluster that has none reports none, as an older agent's."""
        stored = (self.cluster or {}).get("status") or {}
        previous = stored.get("conditions") or []
        collected = self.api_enablements
        if collected is None:
            kind = str(ClusterConditionType.COMPLETE_API_ENABLEMENTS)
            condition = next((c for c in previous if isinstance(c, dict) and c.get("type") == kind), None)
            if isinstance(stored.get("apiEnablements"), list):
                status["apiEnablements"] = stored["apiEnablements"]
            if condition is not None:
                status["conditions"] = [*(status.get("conditions") or []), condition]
            return
        if collected.enablements:
            status["apiEnablements"] = collected.enablements
        status["conditions"] = [
            *(status.get("conditions") or []),
            enablements_condition(collected, now=status["lastReportTime"], previous=previous),
        ]

    async def _api_enablements_loop(self) -> None:
        """Read the member's discovery every ``api_enablements_interval``, and when asked (a Work
        brought a CRD); a list that changed is reported at once. A CRD is served once the member
        establishes it, moments after it is applied: asked, the agent reads at once, then again
        after 1 s, doubling, until the list changes or the pause reaches the interval. A reading
        that fails in any way is logged and the list kept: it never stops the agent."""
        interval = self.config.api_enablements_interval
        wait = interval
        while True:
            try:
                changed = await self._gather_api_enablements()
            except Exception:
                logger.warning("reading the member's APIs failed; the last list is kept", exc_info=True)
                changed = False
            wait = interval if changed or wait >= interval else min(interval, wait * 2)
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(wait):
                    await self._api_enablements_due.wait()
            if self._api_enablements_due.is_set():
                self._api_enablements_due.clear()
                wait = CRD_RECHECK / 2  # doubled to the pause after the read made at once

    async def _gather_api_enablements(self) -> bool:
        """Read the member's APIs; whether they changed (a report is then due at once; an
        unchanged list waits for the next report, which carries it anyway). A reading that found
        nothing (``/api`` or ``/apis`` failed, no group version answered) keeps the list."""
        assert self.member is not None
        known = self.api_enablements
        if known is not None:
            previous: list[Any] = known.enablements
        else:  # before the first reading: the list the stored Cluster has
            stored = ((self.cluster or {}).get("status") or {}).get("apiEnablements")
            previous = stored if isinstance(stored, list) else []
        collected = await apienabling.collect(self.member, previous=previous)
        if collected is None or collected == known:
            return False
        self.api_enablements = collected
        self._report_due.set()
        return True

    def _desired_cluster(self) -> dict[str, Any]:
        cfg = self.config
        return desired_cluster(
            cfg.cluster_name,
            provider=cfg.provider,
            region=cfg.region,
            zone=cfg.zone,
            tier=cfg.tier,
            labels=cfg.labels,
            pricing=cfg.pricing,
        )

    async def _reregister(self) -> dict[str, Any]:
        cfg = self.config
        assert self.hub is not None
        desired = self._desired_cluster()
        while True:
            try:
                return await register_cluster(self.hub, desired)
            except ApiError as exc:
                logger.warning("registering cluster %s again failed: %s", cfg.cluster_name, exc)
                await asyncio.sleep(MAX_BACKOFF)

    async def _dcgm_loop(self, url: str) -> None:
        async with aiohttp.ClientSession() as session:
            while True:
                try:
                    text = await dcgm.scrape(
                        session,
                        url,
                        request_timeout=min(self.config.request_timeout, dcgm.DEFAULT_SCRAPE_TIMEOUT),
                        max_bytes=self.config.dcgm_max_bytes,
                    )
                    self._utilization = await asyncio.to_thread(_utilization_by_node, text)
                    self._utilization_time = format_time(self.clock())
                    self.metrics.dcgm_scraped(ok=True)
                except dcgm.ScrapeError as exc:
                    self.metrics.dcgm_scraped(ok=False)
                    logger.warning("DCGM scrape failed: %s", exc)
                await asyncio.sleep(self.config.dcgm_interval)


def _summarize(totals: NodeTotals, pods: list[dict[str, Any]], **options: Any) -> dict[str, Any]:
    """:func:`capacity.summarize` after the node changes noted since the last report."""
    totals.update()
    return capacity.summarize(totals, pods, **options)


def _utilization_by_node(text: str) -> dict[str, list[dict[str, Any]]]:
    """A scraped page's device samples by node (in a worker thread: 300,000 series of a member
    of 5,000 busy nodes take seconds to parse)."""
    return dcgm.utilization_by_node(dcgm.parse_metrics(text))
