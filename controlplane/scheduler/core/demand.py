"""The recent demand the hub has seen: task shapes of the latest arrivals, learned online.

The scheduler keeps one :class:`DemandHistory` in its cache (``SchedulerCache.demand``). Every
decision for a binding with replicas records the binding's replica as a
:class:`~controlplane.apis.fragmentation.TaskShape` (once per binding while it is in the
window: a binding decided again, rescaled or rescheduled, is not counted twice). Two things are
read from it:

* the **demand mix** (:meth:`DemandHistory.mix`): FGD's popular task shapes of the window,
  recomputed when enough new arrivals have come in (half the window, at least
  :data:`MIN_REFRESH`), each recomputation a new :attr:`DemandHistory.version`, so answers
  memoised per version stay valid;
* the **constrained demand** (:meth:`DemandHistory.constrained`): per GPU model, the GPUs of
  recent replicas that accept only some GPU models (a replica accepting two models counts half
  for each);
* the **needs** (:meth:`DemandHistory.needs`): the arrivals per task shape and memory, every
  shape of the window (not only the mix's popular ones), for the scarcity of node shapes
  (:mod:`~controlplane.scheduler.core.shapescarcity`);
* the **multi-GPU share** (:meth:`DemandHistory.multi_gpu_percent`): the percent of the window's
  GPUs asked for by replicas of two GPUs or more, which need a node with that many free, and how
  many such arrivals the window holds (:meth:`DemandHistory.multi_gpu_arrivals`), for packing
  hints (:mod:`~controlplane.scheduler.core.packhints`), and those needs apart
  (:meth:`DemandHistory.multi_gpu_needs`), for rare node steering
  (:mod:`~controlplane.scheduler.core.rarenodes`);
* the **shares' part** (:meth:`DemandHistory.share_percent`): the percent of the window's GPUs asked
  for by replicas of a fraction of one GPU, for ties between packing members
  (:mod:`~controlplane.scheduler.core.sharefit`).

Bounded: the window holds at most ``limit`` arrivals; the oldest leave as new ones come. No I/O.
"""

from __future__ import annotations

import itertools
from collections import Counter, deque
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Final

from controlplane.apis.fragmentation import GPU_MILLI, DemandMix, TaskShape

Need = tuple[TaskShape, int]
"""A replica as node shapes see it: its task shape and its memory (bytes)."""

#: Arrivals the window holds.
WINDOW: Final = 4096
#: Fewest new arrivals before the mix is worked out again.
MIN_REFRESH: Final = 1

_VERSIONS: Iterator[int] = itertools.count(1)
"""Source of mix versions for every history: answers memoised per version (on node shapes, which
two caches may share) must never mean two mixes."""


@dataclass(eq=False)
class DemandHistory:
    """The latest ``limit`` arrivals, their mix and their constrained GPU demand (see the module)."""

    limit: int = WINDOW
    version: int = 0
    """Changes whenever :meth:`mix` changes (unique across histories)."""
    _window: deque[tuple[str, TaskShape, int]] = field(default_factory=deque)
    _keys: Counter[str] = field(default_factory=Counter)
    _counts: Counter[TaskShape] = field(default_factory=Counter)
    _needs: Counter[Need] = field(default_factory=Counter)
    _multi_needs: Counter[Need] = field(default_factory=Counter)
    """Of :attr:`_needs`, those asking for two GPUs or more."""
    _constrained: dict[str, float] = field(default_factory=dict)
    _milli: int = 0
    """Thousandths of a GPU the window's arrivals ask for."""
    _multi_milli: int = 0
    """Of :attr:`_milli`, those of arrivals asking for two GPUs or more."""
    _multi: int = 0
    """Arrivals of the window asking for two GPUs or more."""
    _share_milli: int = 0
    """Of :attr:`_milli`, those of arrivals asking for a fraction of one GPU."""
    _since: int = 0
    _mix: DemandMix = field(default_factory=lambda: DemandMix(()))

    def __len__(self) -> int:
        return len(self._window)

    def copy(self) -> DemandHistory:
        """An independent history with the same arrivals, mix and version."""
        return DemandHistory(
            limit=self.limit,
            version=self.version,
            _window=deque(self._window),
            _keys=Counter(self._keys),
            _counts=Counter(self._counts),
            _needs=Counter(self._needs),
            _multi_needs=Counter(self._multi_needs),
            _constrained=dict(self._constrained),
            _milli=self._milli,
            _multi_milli=self._multi_milli,
            _multi=self._multi,
            _share_milli=self._share_milli,
            _since=self._since,
            _mix=self._mix,
        )

    def observe(self, key: str, task: TaskShape, memory: int = 0) -> None:
        """Record one arrival of binding ``key`` asking ``memory`` bytes per replica (ignored while
        ``key`` is in the window)."""
        if key in self._keys:
            return
        self._window.append((key, task, memory))
        self._keys[key] += 1
        self._counts[task] += 1
        self._needs[task, memory] += 1
        if task.num_gpu >= 2:
            self._multi_needs[task, memory] += 1
        self._add_constrained(task, 1.0)
        self._add_gpus(task, 1)
        if len(self._window) > self.limit:
            old_key, old_task, old_memory = self._window.popleft()
            self._keys[old_key] -= 1
            if not self._keys[old_key]:
                del self._keys[old_key]
            self._counts[old_task] -= 1
            if not self._counts[old_task]:
                del self._counts[old_task]
            self._needs[old_task, old_memory] -= 1
            if not self._needs[old_task, old_memory]:
                del self._needs[old_task, old_memory]
            if old_task.num_gpu >= 2:
                self._multi_needs[old_task, old_memory] -= 1
                if not self._multi_needs[old_task, old_memory]:
                    del self._multi_needs[old_task, old_memory]
            self._add_constrained(old_task, -1.0)
            self._add_gpus(old_task, -1)
        self._since += 1

    def _add_gpus(self, task: TaskShape, sign: int) -> None:
        milli = sign * task.num_gpu * task.gpu_milli
        self._milli += milli
        if task.num_gpu >= 2:
            self._multi_milli += milli
            self._multi += sign
        elif task.gpu_milli < GPU_MILLI:
            self._share_milli += milli

    def _add_constrained(self, task: TaskShape, sign: float) -> None:
        if not task.models or not task.num_gpu:
            return
        gpus = sign * task.num_gpu * task.gpu_milli / GPU_MILLI / len(task.models)
        for model in task.models:
            value = self._constrained.get(model, 0.0) + gpus
            if value > 1e-9:
                self._constrained[model] = value
            else:
                self._constrained.pop(model, None)

    def mix(self) -> DemandMix:
        """FGD's demand mix of the window, worked out again once enough arrivals are new."""
        if self._since >= max(MIN_REFRESH, len(self._window) // 2):
            self._mix = DemandMix.from_counts(self._counts)
            self._since = 0
            self.version = next(_VERSIONS)
        return self._mix

    def constrained(self) -> dict[str, float]:
        """Per GPU model: GPUs recent model-constrained replicas need (see the module)."""
        return self._constrained

    def multi_gpu_percent(self) -> float:
        """Percent of the GPUs the window's arrivals ask for that replicas of two GPUs or more ask
        for (0 when none asks for GPUs)."""
        return 100.0 * self._multi_milli / self._milli if self._milli else 0.0

    def share_percent(self) -> float:
        """Percent of the GPUs the window's arrivals ask for that replicas of a fraction of one GPU
        ask for (0 when none asks for GPUs)."""
        return 100.0 * self._share_milli / self._milli if self._milli else 0.0

    def multi_gpu_arrivals(self) -> int:
        """Arrivals of the window that ask for two GPUs or more."""
        return self._multi

    def needs(self) -> Counter[Need]:
        """Arrivals of the window per (task shape, memory) (see the module)."""
        return self._needs

    def multi_gpu_needs(self) -> Counter[Need]:
        """Of :meth:`needs`, those asking for two GPUs or more."""
        return self._multi_needs
