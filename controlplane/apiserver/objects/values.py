"""The values the object layer takes and returns: request options and results.

The options are kube's metav1 options (``ListOptions``; ``CreateOptions``,
``UpdateOptions`` and ``PatchOptions`` as one :class:`WriteOptions`, plus where a write's
warnings go and the admission check; ``WatchOptions``), each also as a ``TypedDict`` so that the store's
calls take them as keyword arguments. The results are what reads, deletes and watches
return: :class:`ObjectList`, :class:`EncodedList` (items still encoded, for the HTTP
layer), :class:`DeleteResult` and :class:`ObjectEvent`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any, TypedDict

from controlplane.apis.bookmarks import BOOKMARK_BEFORE_TIMEOUT
from controlplane.apis.kube.selectors import FieldSelector, LabelSelector
from controlplane.apiserver import codec
from controlplane.apiserver.admission import ValidateWrite, WebhookCalls
from controlplane.apiserver.offloading import is_large
from controlplane.apiserver.validation import FieldValidation
from controlplane.storage import interface as storage


def utc_now() -> datetime:
    return datetime.now(UTC)


def format_time(moment: datetime) -> str:
    """RFC 3339 in UTC to the second (``2024-05-01T10:00:00Z``), as kube writes timestamps."""
    # isoformat is about twice as fast as strftime, and this runs on every write.
    return moment.astimezone(UTC).isoformat(timespec="seconds")[:19] + "Z"


class WatchEventType(StrEnum):
    ADDED = "ADDED"
    MODIFIED = "MODIFIED"
    DELETED = "DELETED"
    BOOKMARK = "BOOKMARK"
    ERROR = "ERROR"


@dataclass(frozen=True, slots=True)
class ObjectEvent:
    type: WatchEventType
    object: dict[str, Any]
    #: The store revision of the event (for BOOKMARK: the last revision seen).
    revision: int


@dataclass(frozen=True, slots=True)
class ObjectList:
    items: list[dict[str, Any]]
    resource_version: str
    continue_token: str = ""
    #: kube's ``remainingItemCount`` (None: not known, as with selectors).
    remaining_item_count: int | None = None


@dataclass(frozen=True, slots=True)
class EncodedList:
    """A list page for the HTTP layer: its items as stored, encoded to JSON (with
    resourceVersion) one by one as the response is written (:meth:`items`)."""

    kvs: list[storage.KeyValue]
    resource_version: str
    continue_token: str = ""
    #: kube's ``remainingItemCount`` (None: not known, as with selectors).
    remaining_item_count: int | None = None
    #: One stored object as served (``reading.encoded`` for its kind: its served apiVersion,
    #: resourceVersion and kube's defaults).
    encode: Callable[[storage.KeyValue], bytes] = codec.with_resource_version

    def items(self) -> Iterator[bytes]:
        return (self.encode(kv) for kv in self.kvs)

    @property
    def stored_bytes(self) -> int:
        return sum(len(kv.value) for kv in self.kvs)


@dataclass(frozen=True, slots=True)
class Preconditions:
    uid: str | None = None
    resource_version: str | None = None


@dataclass(frozen=True, slots=True)
class DeleteResult:
    object: dict[str, Any]
    #: False when finalizers keep the object (it now has a deletionTimestamp).
    deleted: bool





#: Where a write appends warnings for the client (unknown fields under fieldValidation=Warn, and
#: what the kind's ``ResourceType.warn`` hook says about the object written).
WarningSink = list[str]
LabelSelectorArg = str | LabelSelector | None
FieldSelectorArg = str | FieldSelector | None


@dataclass(frozen=True, slots=True)
class WriteOptions:
    """What a create, update or patch asks for besides its object: kube's metav1
    Create/Update/PatchOptions (``dryRun``, ``fieldValidation``, ``fieldManager``), where
    the write's warnings go, and the admission check that sees the final object before
    it is stored."""

    dry_run: bool = False
    field_validation: FieldValidation = FieldValidation.STRICT
    field_manager: str | None = None
    warnings: WarningSink | None = None
    validate: ValidateWrite | None = None
    #: The admission webhooks the write is sent to (None: none is configured, or an in-process write).
    webhooks: WebhookCalls | None = None
    #: Called when a patch creates the object (a server-side apply of a missing one), or an update
    #: does (a PUT of a missing object of a kind whose strategy creates it: only with this given,
    #: an in-process update of a missing object stays a 404): the HTTP layer answers 201 Created
    #: then, as kube does, and 200 OK for a write of an existing object.
    on_create: Callable[[], None] | None = None
    #: The subresource a write of the main resource was asked for through (``scale``: the
    #: replicas it sets), recorded in the writer's managedFields entry as kube records it.
    recorded_subresource: str | None = None
    #: The uid the patched object must have: a Scale's ``metadata.uid``, which kube's scale
    #: subresource takes as a precondition (409 Conflict when the object's uid differs).
    expected_uid: str | None = None
    #: The writer recorded the write's managedFields itself (in the version the request was made
    #: in): the object's are kept as given, a status write's too.
    recorded_managed_fields: bool = False
    #: The size of the request body the write came in (0: a write made in-process): with the
    #: stored object's, it decides whether the write is large (``offloading.is_large``).
    body_bytes: int = 0
    #: A large write: its pure steps (validation, the managedFields record) run in a worker thread.
    off_loop: bool = False

    def sized(self, *stored: storage.KeyValue) -> WriteOptions:
        """These options, off the loop when the write is large: its body and the ``stored`` object."""
        if self.off_loop or not is_large(self.body_bytes, *(len(kv.value) for kv in stored)):
            return self
        return replace(self, off_loop=True)


class WriteArgs(TypedDict, total=False):
    """:class:`WriteOptions` as the keyword arguments of ``create``, ``update`` and ``patch``."""

    dry_run: bool
    field_validation: FieldValidation
    field_manager: str | None
    warnings: WarningSink | None
    validate: ValidateWrite | None
    webhooks: WebhookCalls | None
    on_create: Callable[[], None] | None
    recorded_subresource: str | None
    expected_uid: str | None
    recorded_managed_fields: bool
    body_bytes: int
    off_loop: bool


@dataclass(frozen=True, slots=True)
class ListOptions:
    """kube's metav1.ListOptions for a list: selectors, paging, and the revision to read."""

    label_selector: LabelSelectorArg = None
    field_selector: FieldSelectorArg = None
    limit: int = 0
    continue_token: str | None = None
    resource_version: str | None = None
    resource_version_match: str | None = None


@dataclass(frozen=True, slots=True)
class DeleteOptions:
    """kube's metav1.DeleteOptions: preconditions, ``propagationPolicy`` (or the legacy
    ``orphanDependents``) and ``dryRun``."""

    preconditions: Preconditions | None = None
    propagation_policy: str | None = None
    dry_run: bool = False
    orphan_dependents: bool | None = None
    webhooks: WebhookCalls | None = None


@dataclass(frozen=True, slots=True)
class WatchOptions:
    """kube's metav1.ListOptions for a watch: selectors, the revision to start after, how often
    to send a BOOKMARK (None: never), and the event-loop time at which the server ends the watch
    (its ``timeoutSeconds``; None: none), ``bookmark_before_timeout`` seconds before which it sends
    one more (:func:`controlplane.apis.bookmarks.next_bookmark`)."""

    label_selector: LabelSelectorArg = None
    field_selector: FieldSelectorArg = None
    resource_version: str | None = None
    bookmark_interval: float | None = None
    bookmark_before_timeout: float = BOOKMARK_BEFORE_TIMEOUT
    deadline: float | None = None


class WatchArgs(TypedDict, total=False):
    """:class:`WatchOptions` as the keyword arguments of ``watch`` (the object store's, the
    watch cache's and its in-process client's)."""

    label_selector: LabelSelectorArg
    field_selector: FieldSelectorArg
    resource_version: str | None
    bookmark_interval: float | None
    bookmark_before_timeout: float
    deadline: float | None


class ListArgs(TypedDict, total=False):
    """:class:`ListOptions` as the keyword arguments of ``list`` and ``list_encoded``."""

    label_selector: LabelSelectorArg
    field_selector: FieldSelectorArg
    limit: int
    continue_token: str | None
    resource_version: str | None
    resource_version_match: str | None
