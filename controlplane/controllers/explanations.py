"""Keeping a placed binding's per-cluster explanation current when a cluster changes under it.

A binding's ``status.explanation`` is written with its scheduling decision. Placed work does not
move because a cluster's labels, taints or readiness changed (see ``scheduling.py``), so without
this the explanation would go on quoting a rejection that is no longer true ("cluster affinity:
label … not matched" after the label was added). When such a change happens the scheduler
judges the fleet again for the binding, without acting on it, and this module merges that
fresh verdict into the stored explanation: clusters that run replicas keep the entries of the
decision that put them there; every other cluster gets today's verdict, and one the fresh
decision would now use says so, and that its running replicas stay where they are.

Pure: wire dicts in (the stored explanation, the fresh one), wire dicts out.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

ELIGIBLE_NOW = (
    "eligible now: it passes every filter since its labels, taints or readiness changed after this "
    "decision; running replicas do not move for that (the workload's next change divides again)"
)


def refreshed_explanation(
    stored: Sequence[Mapping[str, Any]], fresh: Sequence[Mapping[str, Any]], *, placed: Mapping[str, int]
) -> list[dict[str, Any]]:
    """The explanation to store: ``stored`` entries for clusters in ``placed`` (they run the
    binding's replicas), ``fresh`` verdicts for the others; sorted by cluster."""
    kept = {str(entry.get("cluster")): dict(entry) for entry in stored if entry.get("cluster") in placed}
    out: dict[str, dict[str, Any]] = dict(kept)
    for entry in fresh:
        name = str(entry.get("cluster"))
        if name in kept:
            continue
        judged = dict(entry)
        if judged.get("chosen"):
            judged.update(chosen=False, replicas=0, reasons=[ELIGIBLE_NOW])
        out[name] = judged
    return [out[name] for name in sorted(out)]
