"""What a controller remembers of its own writes (:class:`OwnWrites`): the watch event that
brings a write back is recognised once; any other revision of the object is not."""

from __future__ import annotations

from typing import Any

from controlplane.controllers.reconciling import OwnWrites


def _obj(uid: str | None, revision: str | None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "web"}
    if uid is not None:
        meta["uid"] = uid
    if revision is not None:
        meta["resourceVersion"] = revision
    return {"metadata": meta}


def test_the_event_of_a_write_is_its_echo_once() -> None:
    own = OwnWrites()
    own.wrote(_obj("u1", "10"))
    assert own.is_echo(_obj("u1", "10"))
    assert not own.is_echo(_obj("u1", "10"))  # forgotten once asked


def test_another_revision_or_object_is_not_an_echo() -> None:
    own = OwnWrites()
    own.wrote(_obj("u1", "10"))
    assert not own.is_echo(_obj("u2", "10"))
    assert not own.is_echo(_obj("u1", "11"))  # someone's later write: handled, and the record dropped
    assert not own.is_echo(_obj("u1", "10"))


def test_the_last_write_of_an_object_is_the_one_remembered() -> None:
    own = OwnWrites()
    own.wrote(_obj("u1", "10"))
    own.wrote(_obj("u1", "12"))
    assert not own.is_echo(_obj("u1", "10"))
    own.wrote(_obj("u1", "12"))
    assert own.is_echo(_obj("u1", "12"))


def test_objects_without_uid_or_revision_are_never_echoes() -> None:
    own = OwnWrites()
    own.wrote(_obj(None, "10"))
    own.wrote(_obj("u1", None))
    assert not own.is_echo(_obj(None, "10"))
    assert not own.is_echo(_obj("u1", None))


def test_it_remembers_a_bounded_number_of_writes() -> None:
    own = OwnWrites(size=3)
    for index in range(5):
        own.wrote(_obj(f"u{index}", "1"))
    assert not own.is_echo(_obj("u0", "1")) and not own.is_echo(_obj("u1", "1"))  # the oldest went
    assert all(own.is_echo(_obj(f"u{index}", "1")) for index in (2, 3, 4))
