"""kube's metric stability levels, as its metrics framework (component-base ``metrics``) shows them:
every metric kube defines has a level (``ALPHA`` unless declared otherwise) and its help text on
``/metrics`` starts with it in brackets (``[STABLE] Counter of apiserver requests...``). The hub's
metrics under kube's names use :func:`kube_help` with the level kube declares for each; gpufed's
own (``gpufed_*``) and Kueue's keep plain help texts, as those projects serve them."""

from __future__ import annotations

from enum import StrEnum


class Stability(StrEnum):
    ALPHA = "ALPHA"
    BETA = "BETA"
    STABLE = "STABLE"


def kube_help(level: Stability, text: str) -> str:
    """``text`` as kube's ``annotateStabilityLevel`` renders it: ``[LEVEL] text``."""
    return f"[{level}] {text}"


__all__ = ["Stability", "kube_help"]
