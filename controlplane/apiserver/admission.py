"""Validating admission: a check that sees who writes and the object the write would store.

Authorization decides from the request line alone (verb, resource, name); some rules
need the object: "an agent may write its own Cluster, but not the fields an admin set".
As in kube-apiserver, the object layer calls a validation function once it has the
final object — after the patch is applied, defaults and validation ran, and field
ownership is recorded — and before anything is stored (dry runs included):

- the HTTP handlers build a :data:`ValidateWrite` per request from the configured
  :class:`AdmissionPlugin` and the authenticated user (:func:`write_validation`), asking the
  authorizer first about ``create`` where an update or a patch creates (:func:`create_authorized`);
- :class:`~controlplane.apiserver.objects.ObjectStore` calls it with a
  :class:`WriteAttributes` for every create and update it was given one for; a refusal
  is an ``ApiError`` (403 Forbidden) and nothing is written.

In-process writers (the hub's controllers) pass no validation: they are the hub.

A :data:`CheckCreate` is the other shape kube's in-tree plugins have: it reads other objects
(a ServiceAccount plugin looks the pod's account up) and applies to every create, in-process
ones included, as a kube controller's writes go through admission too. The object layer awaits
those it was given (:meth:`~controlplane.apiserver.objects.ObjectStore.check_creates`) at the
same point; a simulated member's API uses one (:mod:`simulator.admitting`). An
:data:`AdmitWrite` sees updates as well as creates, and whether the write is a dry run
(:meth:`~controlplane.apiserver.objects.ObjectStore.admit_writes`): the hub's quota admission.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Protocol

from controlplane.apiserver import errors
from controlplane.apiserver.identity import Authorizer, RequestAttributes, UserInfo, forbidden_message
from controlplane.apiserver.resources import ResourceType


class Operation(StrEnum):
    CREATE = "CREATE"
    UPDATE = "UPDATE"
    DELETE = "DELETE"


@dataclass(frozen=True, slots=True)
class WriteAttributes:
    """One write the object layer is about to store."""

    operation: Operation
    resource: ResourceType
    #: The object as it would be stored (with its managedFields).
    new: dict[str, Any]
    #: The stored object, for an update.
    old: dict[str, Any] | None = None
    #: ``"status"`` for a write through the status subresource.
    subresource: str | None = None
    #: A dry run: checked as any write, but nothing it would change is changed.
    dry_run: bool = False
    #: A write of the replicas through the ``scale`` subresource, stored as an update of the object
    #: itself (kube's admission sees it as ``<resource>/scale``, which webhooks of the resource miss).
    scale: bool = False


#: Awaited; raises an ``ApiError`` (normally Forbidden) to refuse the write.
ValidateWrite = Callable[[WriteAttributes], Awaitable[None]]


#: Awaited with every create's final object (dry runs included); raises an ``ApiError`` to
#: refuse it, and may set fields as kube's mutating plugins do.
CheckCreate = Callable[[ResourceType, dict[str, Any]], Awaitable[None]]


#: Awaited with every create and every update of a main resource (not a subresource), in-process
#: ones included and dry runs too (:attr:`WriteAttributes.dry_run`), after the checks above; raises
#: an ``ApiError`` to refuse the write. What kube's ResourceQuota admission needs: it reads and
#: writes other objects (the namespace's quotas) before the write is stored.
AdmitWrite = Callable[[WriteAttributes], Awaitable[None]]


@dataclass(frozen=True, slots=True)
class WebhookRequest:
    """One write as the configured admission webhooks see it (kube's ``admission.Attributes``)."""

    operation: Operation
    resource: ResourceType
    name: str
    namespace: str | None
    #: The object the write would store (None for a delete).
    obj: dict[str, Any] | None
    #: The stored object, for an update or delete.
    old: dict[str, Any] | None = None
    #: ``"status"`` or ``"scale"`` for a write through that subresource.
    subresource: str | None = None
    dry_run: bool = False
    #: The type the write was made through, when a webhook sees it as an equivalent one
    #: (``matchPolicy: Equivalent``: ``resource`` is then the rule's, ``obj`` and ``old`` converted).
    requested: ResourceType | None = None


class WebhookCalls(Protocol):
    """The admission webhooks of one request's writes, for its user (:mod:`controlplane.apiserver.webhooks`).

    The object layer awaits :meth:`mutate` once the object is defaulted, before it is validated
    (kube runs mutating admission before the strategy's validation), and :meth:`validate` with the
    final object, after the other checks above and before quota admission and the store."""

    async def mutate(self, request: WebhookRequest) -> dict[str, Any] | None:
        """The object as the mutating webhooks patched it; None when none changed it (or for a
        delete, which they may refuse but not change)."""
        ...

    async def validate(self, request: WebhookRequest) -> None:
        """Return to admit; raise an ``ApiError`` (the webhook's denial, or a failed call) to refuse."""
        ...

    def made_through(self, rt: ResourceType) -> WebhookCalls:
        """These calls for the writes of a request made through ``rt`` that the object layer makes
        in another version (the storage version of a CRD converted by its webhook): they see each
        write in ``rt``'s version, as kube's admission sees a write in its request's version."""
        ...


class AdmissionPlugin(Protocol):
    def validate(self, user: UserInfo, write: WriteAttributes) -> Awaitable[None] | None:
        """Return to admit ``write`` by ``user``; raise an ``ApiError`` to refuse it. A plugin that
        must read the store (kube's RBAC storage reads a role it cannot find in its cache) returns
        an awaitable doing so, awaited before the next plugin runs."""
        ...


def write_validation(plugins: tuple[AdmissionPlugin, ...], user: UserInfo | None) -> ValidateWrite | None:
    """The validation of one request's writes: every plugin, in order, for ``user``."""
    if not plugins or user is None:
        return None

    async def validate(write: WriteAttributes) -> None:
        for plugin in plugins:
            pending = plugin.validate(user, write)
            if pending is not None:
                await pending

    return validate


def create_authorized(validate: ValidateWrite | None, authorizer: Authorizer, attrs: RequestAttributes) -> ValidateWrite:
    """``validate``, preceded for a write that creates its object through an update or a patch
    (a PUT of a kind created on update, a server-side apply of a missing object) by the
    authorizer's answer on ``create``, as kube's handlers ask it then: one allowed to update but
    not to create gets kube's 403 and creates nothing."""
    creating = dataclasses.replace(attrs, verb="create")

    async def checked(write: WriteAttributes) -> None:
        if write.operation is Operation.CREATE:
            decision = authorizer.authorize(creating)
            if not decision.allowed:
                target = errors.Target(name=attrs.name or "", group=attrs.api_group, kind=attrs.resource)
                raise errors.Forbidden(decision.reason or forbidden_message(creating), target=target)
        if validate is not None:
            await validate(write)

    return checked
