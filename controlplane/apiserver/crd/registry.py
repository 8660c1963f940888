"""A registry that also serves the kinds of CustomResourceDefinitions, swapped in atomically.

:class:`DynamicRegistry` is a :class:`Registry` (every component that holds the hub's
registry keeps holding the same object) whose contents are the static kinds plus the
custom kinds of the established CRDs. :meth:`DynamicRegistry.serve` replaces the custom
part in one synchronous step, so a request sees either the old set or the new one, never
a mix, and look-ups stay plain dict reads. :func:`name_decisions` decides which CRDs' names
are accepted (kube's naming controller: a plural, singular, short name, kind or list kind
already served in the group, by a built-in kind or another CRD's accepted names, is refused).
Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from controlplane.apis.kube import field
from controlplane.apiserver.resources import Registry, ResourceType


class DynamicRegistry(Registry):
    """The static kinds plus the custom kinds last given to :meth:`serve`."""

    def __init__(self, *groups: Iterable[ResourceType]) -> None:
        super().__init__(*groups)
        self.static: tuple[ResourceType, ...] = self._types
        self.custom: tuple[ResourceType, ...] = ()
        self.generation = 0
        self._listeners: list[Callable[[], None]] = []

    def add_listener(self, listener: Callable[[], None]) -> None:
        """Call ``listener`` (synchronously, no arguments) after every change of the served kinds."""
        self._listeners.append(listener)

    def remove_listener(self, listener: Callable[[], None]) -> None:
        if listener in self._listeners:
            self._listeners.remove(listener)

    def serve(self, custom: Iterable[ResourceType]) -> None:
        """Serve the static kinds and ``custom`` from now on (one atomic swap)."""
        custom = tuple(custom)
        if custom == self.custom:
            return
        fresh = Registry(self.static, custom)
        # Three attribute stores with no await between them: no request runs in between.
        self._types, self._by_resource, self._by_kind = fresh._types, fresh._by_resource, fresh._by_kind
        self.custom = custom
        self.generation += 1
        for listener in list(self._listeners):
            listener()


#: A name a built-in (static) kind holds: no CRD can take it.
_STATIC = ""


@dataclass(frozen=True)
class NamesDecision:
    """What kube's naming controller makes of one CRD's names: its ``status.acceptedNames`` and,
    when a requested name is taken, the ``(reason, message)`` of ``NamesAccepted=False``."""

    accepted: dict[str, Any]
    conflict: tuple[str, str] | None


def _names_of(names: dict[str, Any]) -> dict[str, Any]:
    """``names`` as kube's Go struct holds them: every field, empty when absent."""
    return {
        "plural": names.get("plural") or "", "singular": names.get("singular") or "",
        "shortNames": list(names.get("shortNames") or []), "kind": names.get("kind") or "",
        "listKind": names.get("listKind") or "", "categories": list(names.get("categories") or []),
    }


def _as_status(names: dict[str, Any]) -> dict[str, Any]:
    """kube's JSON of CustomResourceDefinitionNames: ``plural`` and ``kind`` always, the rest omitted when empty."""
    return {k: v for k, v in names.items() if v or k in ("plural", "kind")}


def _resource_names(names: dict[str, Any]) -> list[str]:
    return [n for n in (names["plural"], names["singular"], *names["shortNames"]) if n]


def _accepted(crd: dict[str, Any]) -> bool:
    conditions = (crd.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "NamesAccepted" and c.get("status") == "True" for c in conditions)


def _in_use(requested: str, accepted: str, owners: dict[str, str], me: str) -> str | None:
    """kube's ``equalToAcceptedOrFresh``: why ``requested`` cannot be taken, or None."""
    if requested == accepted or owners.get(requested, me) == me:
        return None
    return f'"{requested}" is already in use'


def _decide(crd: dict[str, Any], resources: dict[str, str], kinds: dict[str, str]) -> NamesDecision:
    """kube's ``calculateNamesAndConditions``: each requested name that is its own already or free
    is accepted, the others keep the accepted one; the last name refused gives the reason."""
    me = crd["metadata"]["name"]
    requested = _names_of(crd["spec"]["names"])
    accepted = _names_of((crd.get("status") or {}).get("acceptedNames") or {})
    new = dict(accepted)
    conflict: tuple[str, str] | None = None
    for key, reason in (("plural", "PluralConflict"), ("singular", "SingularConflict")):
        if (problem := _in_use(requested[key], accepted[key], resources, me)) is not None:
            conflict = (reason, problem)
        else:
            new[key] = requested[key]
    if requested["shortNames"] != accepted["shortNames"]:
        problems = [
            problem for short in requested["shortNames"]
            if short not in accepted["shortNames"] and short not in (accepted["plural"], accepted["singular"])
            and (problem := _in_use(short, "", resources, me)) is not None
        ]
        if problems:
            conflict = ("ShortNamesConflict", field.aggregate(problems))
        else:
            new["shortNames"] = requested["shortNames"]
    for key, reason in (("kind", "KindConflict"), ("listKind", "ListKindConflict")):
        if (problem := _in_use(requested[key], accepted[key], kinds, me)) is not None:
            conflict = (reason, problem)
        else:
            new[key] = requested[key]
    new["categories"] = requested["categories"]
    return NamesDecision(_as_status(new), conflict)


def _claim(owners: dict[str, str], me: str, names: list[str]) -> None:
    for name in [n for n, owner in owners.items() if owner == me and n not in names]:
        del owners[name]
    for name in names:
        owners.setdefault(name, me)


def name_decisions(crds: list[dict[str, Any]], static: Iterable[ResourceType]) -> dict[str, NamesDecision]:
    """CRD name → its accepted names and conflict, as kube's naming controller decides them: a
    name is taken when a built-in kind serves it in the group or another CRD has it among its
    ``acceptedNames``. A CRD keeps the names it was given, so one that asks for another CRD's
    name is refused that name and keeps being served by its old ones; CRDs with no accepted
    names yet are considered oldest first."""
    resources: dict[str, dict[str, str]] = {}
    kinds: dict[str, dict[str, str]] = {}
    for rt in static:
        resources.setdefault(rt.group, {}).update(dict.fromkeys((rt.plural, rt.singular, *rt.short_names), _STATIC))
        kinds.setdefault(rt.group, {})[rt.kind] = _STATIC
    for crd in crds:
        accepted = _names_of((crd.get("status") or {}).get("acceptedNames") or {})
        group, me = crd["spec"]["group"], crd["metadata"]["name"]
        for name in _resource_names(accepted):
            resources.setdefault(group, {}).setdefault(name, me)
        for name in (accepted["kind"], accepted["listKind"]):
            if name:
                kinds.setdefault(group, {}).setdefault(name, me)
    out: dict[str, NamesDecision] = {}
    ordered = sorted(crds, key=lambda c: (not _accepted(c), c["metadata"].get("creationTimestamp") or "", c["metadata"]["name"]))
    for crd in ordered:
        group, me = crd["spec"]["group"], crd["metadata"]["name"]
        decision = _decide(crd, resources.setdefault(group, {}), kinds.setdefault(group, {}))
        names = _names_of(decision.accepted)
        _claim(resources[group], me, _resource_names(names))
        _claim(kinds[group], me, [n for n in (names["kind"], names["listKind"]) if n])
        out[me] = decision
    return out
