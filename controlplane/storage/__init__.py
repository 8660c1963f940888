"""Where the hub keeps its objects: the :class:`Store` contract and its implementations.

``MemoryStore`` serves unit tests and simulated member clusters; ``EtcdStore`` is the
hub's real store; ``EmbeddedEtcd`` runs a local etcd server for development, tests and
``gpufed up``. Callers import everything from this package.

The etcd side (``EtcdStore``, ``EmbeddedEtcd`` and the client's settings, which bring gRPC and
aetcd) is imported on first use of one of its names: a simulated member, and every module that
reads only :mod:`.interface`, start without the etcd client.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

# gRPC reads its settings from the environment once, when first imported: they go first.
from controlplane.storage import grpcsettings  # noqa: F401

# isort: split
from controlplane.storage.interface import (
    AlreadyExists,
    Conflict,
    EventType,
    Fenced,
    Gone,
    KeyValue,
    ListResult,
    NotFound,
    StorageError,
    Store,
    Unavailable,
    WatchEvent,
)
from controlplane.storage.memory import MemoryStore

if TYPE_CHECKING:
    from controlplane.storage.connecting import EtcdClientTls, EtcdConfigError
    from controlplane.storage.embedded import (
        EmbeddedEtcd,
        EtcdClientTransport,
        EtcdStartError,
        find_etcd_binary,
    )
    from controlplane.storage.etcd import EtcdStore

#: The etcd side's names, by the module that defines them.
_ETCD_NAMES = {
    "EtcdClientTls": "controlplane.storage.connecting",
    "EtcdConfigError": "controlplane.storage.connecting",
    "EmbeddedEtcd": "controlplane.storage.embedded",
    "EtcdClientTransport": "controlplane.storage.embedded",
    "EtcdStartError": "controlplane.storage.embedded",
    "find_etcd_binary": "controlplane.storage.embedded",
    "EtcdStore": "controlplane.storage.etcd",
}


def __getattr__(name: str) -> Any:
    """An etcd side name, imported on its first use (PEP 562)."""
    if (module := _ETCD_NAMES.get(name)) is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)

__all__ = [
    "AlreadyExists",
    "Conflict",
    "EmbeddedEtcd",
    "EtcdClientTls",
    "EtcdClientTransport",
    "EtcdConfigError",
    "EtcdStartError",
    "EtcdStore",
    "EventType",
    "Fenced",
    "Gone",
    "KeyValue",
    "ListResult",
    "MemoryStore",
    "NotFound",
    "StorageError",
    "Store",
    "Unavailable",
    "WatchEvent",
    "find_etcd_binary",
]
