"""Where the hub keeps its objects: the :class:`Store` contract and its implementations.

``MemoryStore`` serves unit tests and simulated member clusters; ``EtcdStore`` is the
hub's real store; ``EmbeddedEtcd`` runs a local etcd server for development, tests and
``gpufed up``. Callers import everything from this package.
"""

# gRPC reads its settings from the environment once, when first imported: they go first.
from controlplane.storage import grpcsettings  # noqa: F401

# isort: split
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
