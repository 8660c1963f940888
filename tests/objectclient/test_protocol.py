"""The object client protocol is what the API server's ObjectStore offers, call for call."""

from __future__ import annotations

import inspect

import pytest

from controlplane import objectclient
from controlplane.apiserver import errors as apiserver_errors
from controlplane.apiserver.objects import ObjectStore
from controlplane.objectclient import ObjectClient, errors
from controlplane.storage import interface as storage_interface
from controlplane.storage import ledger

MEMBERS = sorted(
    name for name in vars(ObjectClient) if not name.startswith("_") and name not in {"registry"}
)


def test_protocol_covers_the_calls_consumers_make() -> None:
    assert MEMBERS == [
        "create", "delete", "get", "get_latest_seen", "list", "update", "update_status", "update_with_status", "watch"
    ]
    assert isinstance(inspect.getattr_static(ObjectClient, "registry"), property)


@pytest.mark.parametrize("name", MEMBERS)
def test_each_call_has_the_object_stores_signature(name: str) -> None:
    protocol = inspect.signature(getattr(ObjectClient, name))
    store = inspect.signature(getattr(ObjectStore, name))
    assert protocol == store
    assert inspect.iscoroutinefunction(getattr(ObjectClient, name)) == inspect.iscoroutinefunction(
        getattr(ObjectStore, name)
    )


STORE_ERRORS = {"StorageError": "StorageError", "StoreGone": "Gone", "StoreUnavailable": "Unavailable"}


@pytest.mark.parametrize("name", sorted(set(errors.__all__) - set(STORE_ERRORS)))
def test_errors_are_the_api_servers_own_classes(name: str) -> None:
    # ``except errors.NotFound`` in a consumer catches what the object layer raises.
    assert getattr(errors, name) is getattr(apiserver_errors, name)


@pytest.mark.parametrize(("name", "store_name"), sorted(STORE_ERRORS.items()))
def test_store_errors_the_object_layer_lets_through_are_the_stores_own(name: str, store_name: str) -> None:
    # ``except errors.StoreGone`` in an informer catches the compacted revision a watch raises.
    assert getattr(errors, name) is getattr(storage_interface, store_name)


def test_the_writer_is_the_write_ledgers() -> None:
    assert objectclient.WRITER is ledger.WRITER


def test_the_error_tree_consumers_catch_is_complete() -> None:
    raised = {
        name
        for name, value in vars(apiserver_errors).items()
        if isinstance(value, type) and issubclass(value, apiserver_errors.ApiError)
    }
    # Unauthorized, MethodNotAllowed, NotAcceptable and the media-type/size errors are the
    # HTTP layer's alone; everything the object layer raises is re-exported.
    http_only = {"Unauthorized", "MethodNotAllowed", "NotAcceptable", "UnsupportedMediaType", "RequestEntityTooLarge"}
    assert raised - http_only <= set(errors.__all__)


def test_the_values_are_the_object_layers() -> None:
    from controlplane.apiserver import objects as layer

    for name in ("DeleteResult", "ObjectEvent", "ObjectList", "Preconditions", "WatchEventType"):
        assert getattr(objectclient, name) is getattr(layer, name)
