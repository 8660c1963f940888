"""``spec_unchanged``: the guard by which watch handlers pass over status and metadata writes."""

from __future__ import annotations

from typing import Any

import pytest

from controlplane.controllers.informing import spec_unchanged
from controlplane.objectclient import WatchEventType


@pytest.mark.parametrize(
    ("event", "old", "new", "unchanged"),
    [
        (WatchEventType.MODIFIED, {"spec": {"a": 1}, "status": {}}, {"spec": {"a": 1}, "status": {"b": 2}}, True),
        (WatchEventType.MODIFIED, {"metadata": {"labels": {"x": "1"}}}, {"metadata": {}}, True),
        (WatchEventType.MODIFIED, {"spec": {"a": 1}}, {"spec": {"a": 2}}, False),
        (WatchEventType.MODIFIED, {}, {"spec": {}}, False),
        (WatchEventType.MODIFIED, None, {"spec": {"a": 1}}, False),
        (WatchEventType.ADDED, None, {"spec": {"a": 1}}, False),
        (WatchEventType.DELETED, {"spec": {"a": 1}}, {"spec": {"a": 1}}, False),
    ],
)
def test_an_update_that_kept_the_spec_is_unchanged_and_nothing_else_is(
    event: WatchEventType, old: dict[str, Any] | None, new: dict[str, Any], unchanged: bool
) -> None:
    assert spec_unchanged(old, new, event) is unchanged
