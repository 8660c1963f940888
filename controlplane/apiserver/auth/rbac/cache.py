"""Keeps the :class:`RbacIndex` current, and writes the default policy on start.

:class:`RbacCache` runs one informer per RBAC kind (list, then watch) and applies every
change to the index the authorizer reads, so an authorization costs no store read and a
new RoleBinding takes effect as soon as its watch event arrives. Every hub replica runs
one; :meth:`RbacCache.wait_synced` holds the API back until the first lists are in, as
kube-apiserver waits for its RBAC informers.

:func:`ensure_default_policy` creates the default ClusterRoles and ClusterRoleBindings
(:mod:`.policy`) that are missing and, for those still annotated
``rbac.authorization.kubernetes.io/autoupdate: "true"``, adds back missing rules, subjects
and labels, as kube's bootstrap-roles hook reconciles them, and removes the rules earlier defaults
granted that a security fix withdrew (``policy.WITHDRAWN_RULES``; kube only ever adds).
Aggregated roles' rules are the aggregation controller's.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any

from controlplane.apis.kube.roleaggregation import aggregate_all
from controlplane.apiserver import errors
from controlplane.apiserver.auth.rbac.index import (
    CLUSTER_ROLE,
    CLUSTER_ROLE_BINDING,
    ROLE,
    ROLE_BINDING,
    RbacIndex,
)
from controlplane.apiserver.auth.rbac.policy import (
    AUTOUPDATE_ANNOTATION,
    RBAC_API_VERSION,
    WITHDRAWN_RULES,
    cluster_role_bindings,
    cluster_roles,
    namespace_roles,
)
from controlplane.apiserver.auth.rbac.rules import PolicyRule, rules_of, uncovered
from controlplane.apiserver.objects import ObjectStore, WatchEventType
from controlplane.controllers.informing import Informer

log = logging.getLogger(__name__)

KINDS = (ROLE, CLUSTER_ROLE, ROLE_BINDING, CLUSTER_ROLE_BINDING)


class RbacCache:
    """The four RBAC kinds, watched into an :class:`RbacIndex`."""

    def __init__(self, objects: ObjectStore, index: RbacIndex | None = None) -> None:
        self.index = index or RbacIndex()
        self._objects = objects
        self.informers: list[Informer] = []
        for kind in KINDS:
            informer = Informer(objects, objects.registry.require(RBAC_API_VERSION, kind))
            informer.add_handler(self._handler(kind))
            self.informers.append(informer)

    def _handler(self, kind: str) -> Any:
        async def apply(event: WatchEventType, obj: dict[str, Any], _old: dict[str, Any] | None) -> None:
            if event is WatchEventType.DELETED:
                meta = obj.get("metadata") or {}
                self.index.remove(kind, str(meta.get("namespace") or ""), str(meta.get("name") or ""))
            else:
                self.index.put(kind, obj)

        return apply

    async def read_role(self, kind: str, name: str, namespace: str) -> tuple[PolicyRule, ...] | None:
        """A Role's or ClusterRole's rules read from the store, not the index (None: no such role):
        for a binding's escalation check when the index has not yet seen the role it names."""
        if kind not in (ROLE, CLUSTER_ROLE):
            return None
        rt = self._objects.registry.require(RBAC_API_VERSION, kind)
        try:
            return rules_of(await self._objects.get(rt, namespace=namespace or None, name=name))
        except errors.NotFound:
            return None

    async def run(self) -> None:
        async with asyncio.TaskGroup() as group:
            for informer in self.informers:
                group.create_task(informer.run(), name=f"rbac-informer-{informer.rt.plural}")

    async def wait_synced(self) -> None:
        await asyncio.gather(*(informer.synced.wait() for informer in self.informers))


async def ensure_default_policy(objects: ObjectStore) -> None:
    """Create or reconcile the default ClusterRoles, ClusterRoleBindings and kube-system Roles."""
    role_type = objects.registry.require(RBAC_API_VERSION, CLUSTER_ROLE)
    binding_type = objects.registry.require(RBAC_API_VERSION, CLUSTER_ROLE_BINDING)
    namespaced_type = objects.registry.require(RBAC_API_VERSION, ROLE)
    roles = cluster_roles()
    # New aggregated roles start filled from the defaults, so that admin, edit and view work
    # from the first request on a new hub; the aggregation controller keeps them current.
    aggregate_all(roles)
    kinds = ((role_type, roles), (binding_type, cluster_role_bindings()), (namespaced_type, namespace_roles()))
    for rt, wanted_objects in kinds:
        for wanted in wanted_objects:
            name, namespace = wanted["metadata"]["name"], wanted["metadata"].get("namespace")
            try:
                current = await objects.get(rt, namespace=namespace, name=name)
            except errors.NotFound:
                with contextlib.suppress(errors.AlreadyExists):
                    await objects.create(rt, wanted, namespace=namespace)
                    log.info("created default %s %s", rt.kind, name)
                continue
            updated = _reconciled(current, wanted)
            if updated is not None:
                with contextlib.suppress(errors.Conflict, errors.NotFound):
                    await objects.update(rt, updated)
                    log.info("added missing defaults back to %s %s", rt.kind, name)


def _reconciled(current: dict[str, Any], wanted: dict[str, Any]) -> dict[str, Any] | None:
    """``current`` with what ``wanted`` adds (None: nothing to do, or autoupdate is off)."""
    meta = current.get("metadata") or {}
    if (meta.get("annotations") or {}).get(AUTOUPDATE_ANNOTATION, "true") != "true":
        return None
    out = {**current, "metadata": {**meta, "labels": {**(meta.get("labels") or {})}}}
    changed = False
    for key, value in wanted["metadata"]["labels"].items():
        if out["metadata"]["labels"].get(key) != value:
            out["metadata"]["labels"][key] = value
            changed = True
    if "aggregationRule" in wanted:
        selectors = list((current.get("aggregationRule") or {}).get("clusterRoleSelectors") or [])
        for selector in wanted["aggregationRule"]["clusterRoleSelectors"]:
            if selector not in selectors:
                selectors.append(selector)
                changed = True
        out["aggregationRule"] = {"clusterRoleSelectors": selectors}
    elif "rules" in wanted:
        named = WITHDRAWN_RULES.get(meta.get("name", ""), ()) if wanted.get("kind") == CLUSTER_ROLE else ()
        withdrawn = {PolicyRule.of(r) for r in named}
        kept = [r for r in current.get("rules") or [] if PolicyRule.of(r) not in withdrawn]
        out["rules"] = kept
        if len(kept) != len(current.get("rules") or []):
            changed = True
        missing = uncovered(rules_of(out), rules_of(wanted))
        if missing:
            out["rules"] = [*kept, *wanted["rules"]]
            changed = True
    if "subjects" in wanted:
        subjects = list(current.get("subjects") or [])
        for subject in wanted["subjects"]:
            if subject not in subjects:
                subjects.append(subject)
                changed = True
        out["subjects"] = subjects
    return out if changed else None
