"""kube-controller-manager's legacy service account token cleaner: an auto-generated token Secret
that nobody has used for a clean-up period is marked invalid, and deleted a period later.

Once every sync interval (a day, kube's ``DefaultCleanerSyncInterval``) the cleaner looks at every
Secret of type ``kubernetes.io/service-account-token`` and applies kube's rules
(:func:`~controlplane.apis.kube.serviceaccounttokens.cleanup_step`): one created more than a
period ago, not being deleted, whose ``kubernetes.io/legacy-token-last-used`` day is more than a
period ago (or that has none), that its ServiceAccount lists in ``secrets`` (kube's sign of an
auto-generated token: a Secret made by hand is never cleaned) and that no Pod of its namespace
names is labelled ``kubernetes.io/legacy-token-invalid-since: <today>`` (written on a fresh read of
that very Secret, by its uid), from when on the hub refuses its token; one so labelled more than a period ago is deleted
(its resourceVersion as the precondition). Nothing happens before the hub has tracked token use
for a period: kube-apiserver's record of the day tracking began
(``kube-system/kube-apiserver-legacy-service-account-token-tracking``, ``since``) is written here
when it is missing or unreadable, as kube-apiserver's tracking controller writes it. As kube's, the
cleaner writes no events: its log lines are the record.

In: the ServiceAccount and token Secret informers of the hub's token check (shared, as kube's
controllers share informers), Pods read a namespace at a time (from the watch cache on the hub),
the period (``--legacy-service-account-token-clean-up-period``). Out: label writes and deletes.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import functools
import logging
from collections.abc import Callable
from typing import Any

from controlplane.apis.kube.serviceaccounttokens import (
    DEFAULT_CLEAN_UP_PERIOD,
    INVALID_SINCE_LABEL,
    TRACKING_CONFIG_MAP,
    TRACKING_SINCE_KEY,
    Cleanup,
    cleanup_step,
    token_secret,
    tracked_since,
)
from controlplane.controllers.informing import Informer
from controlplane.interpreter.dependencies import DependencyKind, pod_spec_dependencies
from controlplane.objectclient import ObjectClient, Preconditions, errors
from controlplane.objectclient.paging import list_pages

log = logging.getLogger(__name__)

#: kube's ``DefaultCleanerSyncInterval``.
SYNC_SECONDS = 24 * 3600.0
TRACKING_NAMESPACE = "kube-system"



def _still_invalid(secret: dict[str, Any], **step: Any) -> bool:
    """Whether ``secret`` (read afresh) is still one to mark invalid (:func:`cleanup_step`)."""
    return cleanup_step(secret, **step) is Cleanup.MARK_INVALID

class LegacyTokenCleaner:
    def __init__(
        self, objects: ObjectClient, *, accounts: Informer, secrets: Informer,
        period: dt.timedelta = DEFAULT_CLEAN_UP_PERIOD, sync_seconds: float = SYNC_SECONDS,
        clock: Callable[[], dt.datetime] = lambda: dt.datetime.now(dt.UTC),
    ) -> None:
        if period <= dt.timedelta(0):
            raise ValueError(f"invalid clean-up period: {period}")
        self._objects = objects
        self.accounts, self.secrets = accounts, secrets
        self._period, self._sync, self._clock = period, sync_seconds, clock
        self._secrets_rt = objects.registry.require("v1", "Secret")
        self._pods_rt = objects.registry.for_kind("v1", "Pod")
        self._config_maps_rt = objects.registry.require("v1", "ConfigMap")

    async def run(self) -> None:
        await self.accounts.synced.wait()
        await self.secrets.synced.wait()
        while True:
            try:
                await self.evaluate()
            except (errors.ApiError, errors.StorageError) as exc:  # the next pass tries again
                log.warning("legacy service account token cleaner: %s", exc)
            await asyncio.sleep(self._sync)

    async def evaluate(self) -> None:
        """One pass over the token Secrets (kube's ``evaluateSATokens``)."""
        now = self._clock()
        since = tracked_since(await self._tracking_since(now))
        if since is None or now < since + self._period:
            return  # not tracked for long enough
        mounted: dict[str, set[str]] = {}
        for secret in self.secrets.items():
            held = token_secret(secret)
            account = self._account(held.namespace, held.account, held.account_uid) if held is not None else None
            namespace = str(secret["metadata"].get("namespace") or "")
            if account is not None and namespace not in mounted:
                mounted[namespace] = await self._mounted(namespace)
            step = cleanup_step(secret, account, mounted=mounted.get(namespace, ()), now=now, period=self._period)
            if step is Cleanup.MARK_INVALID:
                await self._mark_invalid(secret, now, functools.partial(
                    _still_invalid, account=account, mounted=mounted.get(namespace, ()), now=now, period=self._period,
                ))
            elif step is Cleanup.DELETE:
                await self._delete(secret)

    def _account(self, namespace: str, name: str, uid: str) -> dict[str, Any] | None:
        """kube's ``getServiceAccount``: the cached account, when it has the uid the Secret names."""
        account = self.accounts.get(namespace, name)
        if account is None or (uid and str(account["metadata"].get("uid") or "") != uid):
            return None
        return account

    async def _mounted(self, namespace: str) -> set[str]:
        """The Secrets the Pods of ``namespace`` name (kube's ``VisitPodSecretNames``)."""
        names: set[str] = set()
        if self._pods_rt is None:
            return names
        async for page in list_pages(self._objects, self._pods_rt, namespace=namespace, resource_version="0"):
            for pod in page.items:
                names.update(d.name for d in pod_spec_dependencies(pod.get("spec")) if d.kind is DependencyKind.SECRET)
        return names

    async def _mark_invalid(
        self, secret: dict[str, Any], now: dt.datetime, still: Callable[[dict[str, Any]], bool]
    ) -> None:
        """Label the Secret invalid since today: on a fresh read of the one the cache showed (its uid),
        if ``still`` judges the fresh Secret so too (a use labelled since the cache's copy keeps it),
        written as a compare-and-swap (a Secret changed meanwhile is looked at again next pass)."""
        meta = secret["metadata"]
        namespace, name, day = meta.get("namespace"), meta["name"], now.astimezone(dt.UTC).date().isoformat()
        try:
            current = await self._objects.get(self._secrets_rt, namespace=namespace, name=name)
            if current["metadata"].get("uid") != meta.get("uid") or not still(current):
                return  # another Secret of that name now, or used since the cache's copy
            log.info("marking the auto-generated service account token %s/%s invalid since %s", namespace, name, day)
            labels = {**(current["metadata"].get("labels") or {}), INVALID_SINCE_LABEL: day}
            await self._objects.update(self._secrets_rt, {**current, "metadata": {**current["metadata"], "labels": labels}})
        except (errors.Conflict, errors.NotFound):
            return
        except errors.ApiError as exc:
            log.error("could not label token secret %s/%s invalid: %s", namespace, name, exc)

    async def _delete(self, secret: dict[str, Any]) -> None:
        meta = secret["metadata"]
        namespace, name = meta.get("namespace"), meta["name"]
        labels = meta.get("labels") or {}
        log.info("deleting the auto-generated service account token %s/%s (created %s, invalid since %s)",
                 namespace, name, meta.get("creationTimestamp"), labels.get(INVALID_SINCE_LABEL))
        try:
            await self._objects.delete(
                self._secrets_rt, namespace=namespace, name=name,
                preconditions=Preconditions(resource_version=str(meta.get("resourceVersion") or "") or None),
            )
        except (errors.Conflict, errors.NotFound):
            return  # changed or gone since the cache saw it
        except errors.ApiError as exc:
            log.error("could not delete token secret %s/%s: %s", namespace, name, exc)

    async def _tracking_since(self, now: dt.datetime) -> str | None:
        """The ``since`` day of kube-apiserver's tracking record, written (today) when missing or
        unreadable, as kube-apiserver's ``legacytokentracking`` controller writes it."""
        rt, today = self._config_maps_rt, now.astimezone(dt.UTC).date().isoformat()
        try:
            record = await self._objects.get(rt, namespace=TRACKING_NAMESPACE, name=TRACKING_CONFIG_MAP)
        except errors.NotFound:
            body = {"metadata": {"name": TRACKING_CONFIG_MAP, "namespace": TRACKING_NAMESPACE},
                    "data": {TRACKING_SINCE_KEY: today}}
            with contextlib.suppress(errors.AlreadyExists):
                await self._objects.create(rt, body)
            return None  # tracked from today: nothing is due for a period
        since = (record.get("data") or {}).get(TRACKING_SINCE_KEY)
        if tracked_since(since) is None:
            await self._objects.update(rt, {**record, "data": {**(record.get("data") or {}), TRACKING_SINCE_KEY: today}})
            return None
        return str(since)
