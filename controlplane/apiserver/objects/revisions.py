"""An update's ``metadata.resourceVersion`` as kube's store checks it.

kube's ``Store.Update`` reads the stored object, runs the update's transformers (mutating admission
among them) and then compares the resourceVersion of the object they return with the stored one:
none (or ``0``) is an unconditional update where the kind's strategy allows it, kube's 422
otherwise; any other must be the stored revision (a Conflict). :func:`version_precondition` checks
it at once when no mutating webhook will see the write (nothing in between can refuse or change
it), or hands :class:`VersionPrecondition` to the writer to check after the webhooks.
:func:`known_revision` spares the read of an update made from a revision the hub has just seen.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from controlplane.apiserver import errors
from controlplane.apiserver.objects.reading import parse_update_resource_version
from controlplane.apiserver.objects.values import WriteOptions
from controlplane.apiserver.resources import ResourceType
from controlplane.storage import interface as storage
from controlplane.storage.recent import known_stale, known_value


@dataclasses.dataclass(frozen=True, slots=True)
class VersionPrecondition:
    """An update's ``metadata.resourceVersion`` (``given``: None when it names none) and the stored
    key-value it is compared with, once the mutating webhooks have run."""

    stored: storage.KeyValue
    given: Any
    name: str


def version_precondition(
    rt: ResourceType, kv: storage.KeyValue, given: Any, *, name: str, options: WriteOptions | None
) -> VersionPrecondition | None:
    """An update's resourceVersion checked now (:func:`check_resource_version`), or, when mutating
    webhooks will see the write, its precondition for the writer to check after them, as kube's
    store compares the object its transformers (mutating admission) return. Without webhooks
    nothing runs in between that can refuse or change the write."""
    if options is not None and options.webhooks is not None:
        return VersionPrecondition(kv, given, name)
    check_resource_version(rt, kv, given, name=name)
    return None


def set_resource_version(obj: dict[str, Any], value: Any) -> None:
    """``obj``'s ``metadata.resourceVersion`` set to ``value``, or removed for None."""
    if value is None:
        obj["metadata"].pop("resourceVersion", None)
    else:
        obj["metadata"]["resourceVersion"] = value


def names_no_version(given: Any) -> bool:
    """Whether an update's ``metadata.resourceVersion`` makes it unconditional (none, ``""``, ``0``
    as kube's versioner reads it; one it cannot read is not, its error comes later)."""
    if not isinstance(given, str) or not given:
        return not given
    try:
        return parse_update_resource_version(given) == 0
    except errors.BadRequest:
        return False


def check_resource_version(rt: ResourceType, kv: storage.KeyValue, given: Any, *, name: str) -> None:
    """What kube's store checks of the ``metadata.resourceVersion`` a write's object carries,
    once it has read the stored one (``kv``): its versioner reads it first (``01`` is ``1``; one it
    cannot read is its error, :func:`parse_update_resource_version`). None, or ``0``, is an
    unconditional write where the kind's strategy allows it (:attr:`ResourceType.unconditional_update`)
    and otherwise kube's 422 naming the resourceVersion; any other must be the stored revision (a
    Conflict)."""
    revision = parse_update_resource_version(given) if isinstance(given, str) and given else given
    if not revision:
        if not rt.unconditional_update:
            raise errors.invalid(
                kind=rt.plural,
                group=rt.group,
                name=name,
                causes=[
                    errors.Cause(
                        errors.CauseType.FIELD_VALUE_INVALID,
                        "Invalid value: 0x0: must be specified for an update",
                        "metadata.resourceVersion",
                    )
                ],
            )
        return
    if str(revision) != str(kv.mod_revision):
        raise errors.conflict_modified(plural=rt.plural, group=rt.group, name=name)


def known_revision(
    store: storage.Store, rt: ResourceType, meta: dict[str, Any], wanted: Any, *, stale_conflicts: bool
) -> storage.KeyValue | None:
    """The stored value at the revision an update names, when the hub has just seen it; with
    ``stale_conflicts``, a Conflict when it has seen the object change since (the read would show
    the same)."""
    if (
        not isinstance(wanted, str)
        or not (wanted.isascii() and wanted.isdigit())
        or not int(wanted)
        or (rt.namespaced and not meta.get("namespace"))
    ):
        return None
    key = rt.key(namespace=meta.get("namespace"), name=meta["name"])
    if known_stale(store, key, int(wanted)):
        if rt.create_on_update or not stale_conflicts:
            return None  # the read tells: deleted since (created again), or changed (a Conflict)
        raise errors.conflict_modified(plural=rt.plural, group=rt.group, name=meta["name"])
    return known_value(store, key, int(wanted))
