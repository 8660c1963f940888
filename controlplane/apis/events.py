"""The core/v1 Event vocabulary that every component writing Events shares.

Out: :class:`EventType`, the ``type`` of an Event (kube's ``EventTypeNormal`` and
``EventTypeWarning``), used by the hub's controllers (:mod:`controlplane.controllers.events`)
and by the simulated member's recorder (:mod:`simulator.events`). Each of them keeps its own
reasons: those are the vocabulary of the component that writes them.
"""

from __future__ import annotations

from enum import StrEnum


class EventType(StrEnum):
    """An Event's ``type``: kube accepts only these two."""

    NORMAL = "Normal"
    WARNING = "Warning"
