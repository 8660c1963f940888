"""Where the hub keeps its objects: the :class:`Store` contract and its implementations.

``MemoryStore`` serves unit tests and simulated member clusters; ``EtcdStore`` is the
hub's real store; ``EmbeddedEtcd`` runs a local etcd server for development, tests and
``gpufed up``. Callers import everything from this package.
"""

from controlplane.storage.connecting import EtcdClientTls, EtcdConfigError
from controlplane.storage.embedded import EmbeddedEtcd, EtcdClientTransport, EtcdStartError, find_etcd_binary
from controlplane.storage.etcd import EtcdStore
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
