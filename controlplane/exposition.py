"""The hub's ``/metrics`` text as kube's metrics framework (component-base, on Prometheus's Go client)
writes it, from a prometheus_client registry: the Go registry's ``Gather`` followed by expfmt's
``MetricFamilyToText``. It differs from prometheus_client's own text in these ways:

* families sorted by name, and a family with no series (a labelled vector nothing has observed yet)
  left out, HELP and TYPE lines included (``NormalizeMetricFamilies``);
* each family's series sorted by their label values, labels by name, with a histogram's ``le`` and
  a summary's ``quantile`` last; a histogram's ``_sum`` before its ``_count``;
* numbers as Go's ``strconv`` shortest ``'g'`` form: ``1``, ``2.5``, ``1e+06`` (``1.0``, ``1000000.0``
  in Python's), bucket bounds alike (``le="1"``);
* no ``_created`` series: the Go client's text format has none, so a counter, a histogram or a
  summary shows its samples only (kube's, Kueue's and client-go's metrics, and the hub's own);
* a counter kube declares under a name without ``_total`` (``apiserver_admission_webhook_rejection_count``)
  keeps that name on its ``HELP`` and ``TYPE`` lines as on its samples, where prometheus_client would
  name the family ``<name>_total``: such a counter is collected as a :class:`DeclaredCounterFamily`.

In: a registry (any collector). Out: the Prometheus text format (version 0.0.4) as bytes.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Final

from prometheus_client.core import Metric
from prometheus_client.registry import Collector
from prometheus_client.samples import Sample

from controlplane.apis.kube.field import go_float

#: The label a series' bound or quantile is written under, last among its labels (expfmt's
#: ``additionalLabelName``).
_BOUND_LABELS: Final = ("le", "quantile")
#: Where a sample of a histogram or summary stands within its series: bounds first, then
#: ``_sum``, then ``_count``, as expfmt writes them.
_SUFFIX_ORDER: Final = {"_bucket": 0, "": 0, "_sum": 1, "_count": 2}


class DeclaredCounterFamily(Metric):
    """A counter family served under its declared name: no ``_total`` on its lines."""

    def __init__(self, name: str, documentation: str) -> None:
        super().__init__(name, documentation, "counter")


def render(registry: Collector) -> bytes:
    """``registry``'s metrics in the text format, as kube serves them (see the module docstring)."""
    families: list[tuple[str, str]] = []
    for family in registry.collect():
        name, kind = _exposed(family)
        samples = [sample for sample in family.samples if not sample.name.endswith("_created")]
        if samples:
            families.append((name, _family_text(name, kind, family.documentation, samples)))
    families.sort(key=lambda pair: pair[0])
    return "".join(text for _, text in families).encode()


def go_value(value: float) -> str:
    """expfmt's ``writeFloat``: ``0`` for either zero, ``+Inf``/``-Inf``/``NaN``, else strconv's
    shortest ``'g'``."""
    value = float(value)
    if value == 0:
        return "0"
    return go_float(value)


def _exposed(family: Metric) -> tuple[str, str]:
    """The family's name and type on its HELP and TYPE lines, as prometheus_client's text names
    them (a counter ``<name>_total``, an info ``<name>_info`` typed gauge) but for a declared counter."""
    kind = family.type
    if isinstance(family, DeclaredCounterFamily):
        return family.name, "counter"
    if kind == "counter":
        return f"{family.name}_total", "counter"
    if kind == "info":
        return f"{family.name}_info", "gauge"
    if kind == "stateset":
        return family.name, "gauge"
    if kind == "gaugehistogram":
        return family.name, "histogram"
    if kind == "unknown":
        return family.name, "untyped"
    return family.name, kind


def _family_text(name: str, kind: str, documentation: str, samples: Iterable[Sample]) -> str:
    lines = [f"# HELP {name} {_escaped(documentation)}\n", f"# TYPE {name} {kind}\n"]
    series: dict[tuple[tuple[str, str], ...], list[Sample]] = {}
    for sample in samples:
        labels = tuple(sorted((k, v) for k, v in sample.labels.items() if k not in _BOUND_LABELS))
        series.setdefault(labels, []).append(sample)
    # Go's MetricSorter: fewer labels first, then the label values in the order of their names.
    for labels in sorted(series, key=lambda key: (len(key), [value for _, value in key])):
        ordered = sorted(series[labels], key=lambda sample: _SUFFIX_ORDER.get(sample.name[len(name):], 0))
        lines.extend(_sample_line(sample, labels) for sample in ordered)
    return "".join(lines)


def _sample_line(sample: Sample, labels: tuple[tuple[str, str], ...]) -> str:
    pairs = [f'{key}="{_escaped(value, quote=True)}"' for key, value in labels]
    pairs.extend(f'{key}="{go_value(float(sample.labels[key]))}"' for key in _BOUND_LABELS if key in sample.labels)
    text = sample.name + ("{" + ",".join(pairs) + "}" if pairs else "") + " " + go_value(sample.value)
    if sample.timestamp is not None:
        text += f" {math.floor(float(sample.timestamp) * 1000)}"
    return text + "\n"


def _escaped(text: str, *, quote: bool = False) -> str:
    text = text.replace("\\", "\\\\").replace("\n", "\\n")
    return text.replace('"', '\\"') if quote else text


__all__ = ["DeclaredCounterFamily", "go_value", "render"]
