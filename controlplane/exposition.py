"""The hub's ``/metrics`` text as kube's metrics framework (component-base, on Prometheus's Go client)
writes it, from a prometheus_client registry. It differs from prometheus_client's own text in two ways:

* no ``_created`` series: the Go client's text format has none, so a counter, a histogram or a
  summary shows its samples only (kube's, Kueue's and client-go's metrics, and the hub's own);
* a counter kube declares under a name without ``_total`` (``apiserver_admission_webhook_rejection_count``)
  keeps that name on its ``HELP`` and ``TYPE`` lines as on its samples, where prometheus_client would
  name the family ``<name>_total``: such a counter is collected as a :class:`DeclaredCounterFamily`.

In: a registry (any collector). Out: the Prometheus text format (version 0.0.4) as bytes.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Iterator
from typing import Final

from prometheus_client import generate_latest
from prometheus_client.core import Metric
from prometheus_client.registry import Collector

#: The families prometheus_client gives a ``_created`` series.
_WITH_CREATED: Final = frozenset({"counter", "histogram", "summary"})


class DeclaredCounterFamily(Metric):
    """A counter family served under its declared name: no ``_total`` on its lines."""

    def __init__(self, name: str, documentation: str) -> None:
        super().__init__(name, documentation, "counter")


class _Families(Collector):
    """Families already collected, as a collector for :func:`generate_latest`."""

    def __init__(self, families: Iterable[Metric]) -> None:
        self._families = list(families)

    def collect(self) -> Iterator[Metric]:
        return iter(self._families)


def render(registry: Collector) -> bytes:
    """``registry``'s metrics in the text format, as kube serves them (see the module docstring)."""
    out: list[bytes] = []
    pending: list[Metric] = []
    for family in registry.collect():
        if isinstance(family, DeclaredCounterFamily):
            out.append(generate_latest(_Families(pending)))
            pending = []
            out.append(_declared_counter(family))
        else:
            pending.append(_without_created(family))
    out.append(generate_latest(_Families(pending)))
    return b"".join(out)


def _without_created(family: Metric) -> Metric:
    if family.type not in _WITH_CREATED:
        return family
    created = f"{family.name}_created"
    kept = [sample for sample in family.samples if sample.name != created]
    if len(kept) == len(family.samples):
        return family
    trimmed = copy.copy(family)
    trimmed.samples = kept
    return trimmed


def _declared_counter(family: DeclaredCounterFamily) -> bytes:
    # prometheus_client writes a gauge's HELP, TYPE and samples under the family's own name: the
    # same lines, typed counter, are kube's.
    as_gauge = Metric(family.name, family.documentation, "gauge")
    as_gauge.samples = [sample for sample in family.samples if sample.name == family.name]
    text = generate_latest(_Families([as_gauge]))
    return text.replace(f"# TYPE {family.name} gauge\n".encode(), f"# TYPE {family.name} counter\n".encode(), 1)


__all__ = ["DeclaredCounterFamily", "render"]
