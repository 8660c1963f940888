"""What moving burst replicas back to cheaper tiers saved: the waste report's "moves".

In: the ResourceBindings' moves annotation (``scheduler.gpufed.io/moves``, written by the
scheduler when a move back to a cheaper tier finishes; see
:mod:`controlplane.scheduler.core.returning`). Out: :class:`MoveRecord` values, and for a
window a :class:`MovesSummary`: the moves finished in it and the replicas they moved, and the
GPU-hours shifted to the cheaper tier and the dollars saved within the window by every move
finished before its end (counted from the move to the window's end: the replicas are assumed
to keep running where they moved; a binding keeps its latest 20 moves, and a deleted
workload's moves leave the report with it). Pure.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from controlplane.apis.constants import ANNOTATION_MOVES
from controlplane.apis.timestamps import parse_time


@dataclass(frozen=True)
class MoveRecord:
    """One finished move of ``replicas`` replicas of a workload from ``source`` to ``target``."""

    namespace: str
    workload: str
    time: datetime
    source: str
    target: str
    replicas: int
    gpus_per_replica: float
    saving_per_hour: float

    def to_json(self) -> dict[str, Any]:
        return {
            "namespace": self.namespace,
            "workload": self.workload,
            "time": self.time.isoformat().replace("+00:00", "Z"),
            "from": self.source,
            "to": self.target,
            "replicas": self.replicas,
            "gpus_per_replica": self.gpus_per_replica,
            "saving_usd_per_hour": self.saving_per_hour,
        }

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> MoveRecord:
        return cls(
            namespace=str(doc.get("namespace") or ""),
            workload=str(doc.get("workload") or ""),
            time=parse_time(str(doc["time"])),
            source=str(doc.get("from") or ""),
            target=str(doc.get("to") or ""),
            replicas=int(doc.get("replicas") or 0),
            gpus_per_replica=float(doc.get("gpus_per_replica") or 0.0),
            saving_per_hour=float(doc.get("saving_usd_per_hour") or 0.0),
        )


@dataclass(frozen=True)
class MovesSummary:
    """The moves a window counts (see the module docstring)."""

    moves: int = 0
    replicas_moved: int = 0
    gpu_hours_shifted: float = 0.0
    saved_usd: float = 0.0


def moves_of_binding(binding: Mapping[str, Any]) -> list[MoveRecord]:
    """The finished moves a binding records (none when its annotation is absent or unreadable)."""
    meta = binding.get("metadata") or {}
    raw = (meta.get("annotations") or {}).get(ANNOTATION_MOVES)
    resource = (binding.get("spec") or {}).get("resource") or {}
    try:
        entries = json.loads(raw) if raw else []
    except ValueError:
        return []
    out: list[MoveRecord] = []
    for entry in entries if isinstance(entries, list) else ():
        try:
            out.append(
                MoveRecord(
                    namespace=str(meta.get("namespace") or ""),
                    workload=str(resource.get("name") or meta.get("name") or ""),
                    time=parse_time(str(entry["time"])),
                    source=str(entry["source"]),
                    target=str(entry["target"]),
                    replicas=int(entry["replicas"]),
                    gpus_per_replica=float(entry.get("gpusPerReplica") or 0.0),
                    saving_per_hour=float(entry.get("savingPerHour") or 0.0),
                )
            )
        except (KeyError, TypeError, ValueError):
            continue
    return out


def in_window(moves: Iterable[MoveRecord], end: datetime) -> tuple[MoveRecord, ...]:
    """The moves finished before ``end`` (those that shift GPU-hours into a window ending then)."""
    return tuple(sorted((m for m in moves if m.time < end), key=lambda m: (m.time, m.namespace, m.workload)))


def summarize(moves: Iterable[MoveRecord], start: datetime, end: datetime) -> MovesSummary:
    """Moves finished in [start, end), and what every move before ``end`` shifted and saved in it."""
    count = replicas = 0
    shifted = saved = 0.0
    for move in moves:
        if move.time >= end:
            continue
        if move.time >= start:
            count += 1
            replicas += move.replicas
        hours = (end - max(start, move.time)).total_seconds() / 3600.0
        shifted += move.replicas * move.gpus_per_replica * hours
        saved += move.saving_per_hour * hours
    return MovesSummary(moves=count, replicas_moved=replicas, gpu_hours_shifted=shifted, saved_usd=saved)
