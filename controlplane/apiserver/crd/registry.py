"""A registry that also serves the kinds of CustomResourceDefinitions, swapped in atomically.

:class:`DynamicRegistry` is a :class:`Registry` (every component that holds the hub's
registry keeps holding the same object) whose contents are the static kinds plus the
custom kinds of the established CRDs. :meth:`DynamicRegistry.serve` replaces the custom
part in one synchronous step, so a request sees either the old set or the new one, never
a mix, and look-ups stay plain dict reads. :func:`name_conflicts` decides which CRDs' names
are accepted (kube's naming controller: a plural, singular, kind or short name already
served in the group, by a built-in kind or an older CRD, is refused). Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

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


def _names(crd: dict[str, Any]) -> tuple[str, list[tuple[str, str]], str]:
    spec = crd["spec"]
    names = spec["names"]
    resource_names = [("PluralConflict", names["plural"]), ("SingularConflict", names.get("singular") or "")]
    resource_names += [("ShortNamesConflict", short) for short in names.get("shortNames") or []]
    return spec["group"], [(reason, name) for reason, name in resource_names if name], names["kind"]


def _accepted(crd: dict[str, Any]) -> bool:
    conditions = (crd.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "NamesAccepted" and c.get("status") == "True" for c in conditions)


def name_conflicts(crds: list[dict[str, Any]], static: Iterable[ResourceType]) -> dict[str, tuple[str, str]]:
    """CRD name → (reason, message) of its NamesAccepted=False condition, as kube's naming
    controller words them. CRDs whose names were accepted keep them; the others are considered
    oldest first, and a refused one takes no names."""
    taken: dict[str, set[str]] = {}
    kinds: dict[str, set[str]] = {}
    for rt in static:
        taken.setdefault(rt.group, set()).update({rt.plural, rt.singular, *rt.short_names})
        kinds.setdefault(rt.group, set()).add(rt.kind)
    out: dict[str, tuple[str, str]] = {}
    ordered = sorted(crds, key=lambda c: (not _accepted(c), c["metadata"].get("creationTimestamp") or "", c["metadata"]["name"]))
    for crd in ordered:
        group, resource_names, kind = _names(crd)
        used = [(reason, name) for reason, name in resource_names if name in taken.get(group, set())]
        if used:
            out[crd["metadata"]["name"]] = (used[0][0], f'"{used[0][1]}" is already in use')
            continue
        if kind in kinds.get(group, set()):
            out[crd["metadata"]["name"]] = ("KindConflict", f'"{kind}" is already in use')
            continue
        taken.setdefault(group, set()).update(name for _, name in resource_names)
        kinds.setdefault(group, set()).add(kind)
    return out
