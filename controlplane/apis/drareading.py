"""A workload's DRA GPUs read from the claim templates, claims and DeviceClasses at hand, one way for
every reader of the hub (:mod:`controlplane.apis.dra` says how a claim counts).

:class:`ClaimReader` is that reading over two lookups a holder gives: a claim spec by kind, namespace
and name, a DeviceClass spec by name. The detector's holder watches the objects
(:class:`~controlplane.controllers.claimspecs.ClaimSpecs`); the waste report's is the objects listed
for one pass (:class:`ListedClaims`). So placement and the report's pending demand count the same
devices:

* :meth:`ClaimReader.resolved`: the copy of a workload the interpreter reads, each pod spec asking
  its own claims' (its templates') GPUs as device-plugin requests;
* :meth:`ClaimReader.shared`: the devices of the ResourceClaims its pod specs name directly, each
  claim once: what its replicas in one cluster hold together (``sharedResourceRequest``);
* :meth:`ClaimReader.shared_by_role`: the same, per role of a multi-role workload, for the roles
  whose pods name such a claim (a claim several roles name: with the first of them);
* :meth:`ClaimReader.unread`: why some claims count nothing (a DeviceClass outside what is read).

In: workloads and DRA objects as plain dicts. Out: workload copies and resource amounts. Pure.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from controlplane.apis.dra import (
    CLAIM,
    DEVICE_CLASS,
    TEMPLATE,
    ClaimedGpus,
    ClaimLookup,
    claim_spec_of,
    pod_specs,
    references_claims,
    shared_claim_resources,
    shared_claims,
    unread_classes,
    with_claimed_gpus,
)
from controlplane.apis.views import ObjectView


class ClaimReader:
    """Reads workloads' DRA claims through :meth:`spec` and :meth:`device_class`, which a holder gives."""

    def spec(self, kind: str, namespace: str, name: str) -> Mapping[str, Any] | None:
        """The claim spec of a template (its ``spec.spec``) or a claim (its ``spec``); None when absent."""
        raise NotImplementedError

    def device_class(self, name: str) -> Mapping[str, Any] | None:
        """The spec of the DeviceClass ``name``; None when none is held."""
        raise NotImplementedError

    def _lookup(self, workload: Mapping[str, Any]) -> ClaimLookup:
        namespace = ObjectView(dict(workload)).namespace
        return lambda kind, name: self.spec(kind, namespace, name)

    def resolved(self, workload: dict[str, Any]) -> dict[str, Any]:
        """``workload`` as the interpreter should read it (each pod with the GPUs of its own claims,
        its templates'): itself when no pod spec names a claim."""
        if not references_claims(workload):
            return workload
        return with_claimed_gpus(workload, self._lookup(workload), shared=False, classes=self.device_class)

    def unread(self, workload: dict[str, Any]) -> tuple[str, ...]:
        """Why some of ``workload``'s claims count nothing: a DeviceClass whose selectors gpufed does
        not read (:func:`~controlplane.apis.dra.class_selection`); empty when every one is read."""
        if not references_claims(workload):
            return ()
        return unread_classes(workload, self._lookup(workload), self.device_class)

    def shared(self, workload: dict[str, Any]) -> dict[str, int]:
        """The GPUs of the ResourceClaims ``workload``'s pod specs name directly, each once: what its
        replicas in a cluster share (the binding's ``replicaRequirements.sharedResourceRequest``)."""
        if not references_claims(workload):
            return {}
        return shared_claim_resources(workload, self._lookup(workload), self.device_class)

    def shared_by_role(
        self, workload: dict[str, Any], roles: Iterable[tuple[str, Mapping[str, Any]]]
    ) -> dict[str, dict[str, int]]:
        """For each role (its name and pod template, of ``workload``, in the workload's order) whose
        pods name ResourceClaims directly, those claims' GPUs: what the role's replicas in a cluster
        share. A claim several roles name is carried by the first of them only, so the roles
        together hold each claim once (as the workload's :meth:`shared` counts it)."""
        if not references_claims(workload):
            return {}
        lookup = self._lookup(workload)
        out: dict[str, dict[str, int]] = {}
        seen: set[str] = set()
        for role, template in roles:
            total = ClaimedGpus()
            for spec in pod_specs(template):
                for claim, found in shared_claims(spec, lookup, self.device_class).items():
                    if claim not in seen:
                        seen.add(claim)
                        total = total.plus(found)
            if resources := total.resources():
                out[role] = resources
        return out


def class_spec(found: Mapping[str, Any] | None) -> Mapping[str, Any] | None:
    """The spec of a DeviceClass object as :meth:`ClaimReader.device_class` gives it: None for no
    object, ``{}`` for one whose spec is absent or not a mapping."""
    if found is None:
        return None
    spec = found.get("spec")
    return spec if isinstance(spec, Mapping) else {}


class ListedClaims(ClaimReader):
    """The claim templates, claims and DeviceClasses of a listing (a waste report pass's), by name."""

    def __init__(self, objects: Iterable[Mapping[str, Any]] = ()) -> None:
        self._held: dict[tuple[str, str, str], Mapping[str, Any]] = {}
        for obj in objects:
            view = ObjectView(dict(obj))
            self._held[(str(obj.get("kind") or ""), view.namespace, view.name)] = obj

    def spec(self, kind: str, namespace: str, name: str) -> Mapping[str, Any] | None:
        return claim_spec_of(kind, self._held.get((kind, namespace, name)))

    def device_class(self, name: str) -> Mapping[str, Any] | None:
        return class_spec(self._held.get((DEVICE_CLASS, "", name)))


#: The kinds a :class:`ListedClaims` is built from (all of ``resource.k8s.io/v1``).
LISTED_KINDS = (TEMPLATE, CLAIM, DEVICE_CLASS)
