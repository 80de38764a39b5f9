"""Turning the last samples into the text served on /metrics."""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from prometheus_client.core import (
    CollectorRegistry,
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.exposition import generate_latest

from pgq_exporter.catalogue import MetricSpec, MetricType
from pgq_exporter.collectors.base import AnySample, HistogramSample

Family = GaugeMetricFamily | CounterMetricFamily | HistogramMetricFamily


def families(
    specs: dict[str, MetricSpec], samples: Iterable[tuple[str, AnySample]]
) -> list[Metric]:
    """One family per metric name; ``samples`` pairs each sample with its database."""
    built: dict[str, Family] = {}
    for database, sample in samples:
        spec = specs[sample.metric]
        family = built.get(spec.name)
        if family is None:
            family = built[spec.name] = _new_family(spec)
        labels = (
            [database, *sample.labels] if spec.labels[:1] == ("database",) else [*sample.labels]
        )
        if isinstance(sample, HistogramSample):
            assert isinstance(family, HistogramMetricFamily)
            family.add_metric(labels, list(sample.buckets), sample.sum)
        else:
            assert not isinstance(family, HistogramMetricFamily)
            family.add_metric(labels, sample.value)
    return [built[name] for name in sorted(built)]


def _new_family(spec: MetricSpec) -> Family:
    if spec.type is MetricType.COUNTER:
        return CounterMetricFamily(spec.name, spec.help, labels=spec.labels)
    if spec.type is MetricType.HISTOGRAM:
        return HistogramMetricFamily(spec.name, spec.help, labels=spec.labels)
    return GaugeMetricFamily(spec.name, spec.help, labels=spec.labels)


class _Fixed:
    def __init__(self, metrics: list[Metric]) -> None:
        self._metrics = metrics

    def collect(self) -> Iterator[Metric]:
        yield from self._metrics


def render_text(metrics: list[Metric]) -> bytes:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Fixed(metrics))
    return generate_latest(registry)
