"""The object layer: Kubernetes object semantics over a revisioned key-value store.

:class:`ObjectStore` is what the HTTP handlers *and* in-process controllers (hub
controllers, simulated member clusters) call. It takes and returns object dicts and
implements what makes a store an API server: uid/creationTimestamp/generation,
``resourceVersion`` = the key's ``mod_revision``, compare-and-swap updates with kube's
Conflict message, the ``status`` subresource, finalizers and ``deletionTimestamp``,
namespace lifecycle, label/field selectors, paginated lists with opaque continue
tokens, watches with selector-aware ADDED/MODIFIED/DELETED and BOOKMARK events,
validation (DNS-1123 names, pydantic models, ``fieldValidation``), dry-run and the
four patch types.

It works on any :class:`~controlplane.storage.interface.Store` (memory or etcd)
unchanged. Keys are ``/registry/<group or core>/<plural>/[<namespace>/]<name>``;
values are JSON without ``resourceVersion`` (see ``codec``). Errors raised are the
``errors.ApiError`` tree.

One module per concern: ``store`` (the :class:`ObjectStore` façade), ``values`` (the
options and results it takes and returns), ``reading`` (gets, list pages and continue
tokens), ``writing`` (create, update, patch), ``deleting``, ``swapping`` (the
compare-and-swap writes and deletes both make), ``events`` (watch),
``scale`` (the scale subresource) and ``namespaces`` (namespace lifecycle). This package
exports what callers use; the rest is in the module of its concern.
"""

from controlplane.apiserver.objects.store import ObjectStore
from controlplane.apiserver.objects.values import (
    DeleteResult,
    EncodedList,
    ListArgs,
    ListOptions,
    ObjectEvent,
    ObjectList,
    Preconditions,
    WatchEventType,
    WriteArgs,
    WriteOptions,
    utc_now,
)

__all__ = [
    "DeleteResult",
    "EncodedList",
    "ListArgs",
    "ListOptions",
    "ObjectEvent",
    "ObjectList",
    "ObjectStore",
    "Preconditions",
    "WatchEventType",
    "WriteArgs",
    "WriteOptions",
    "utc_now",
]
