"""Turning the last samples into the text served on /metrics."""

from __future__ import annotations

import gzip
import logging
import threading
from collections.abc import Iterable, Iterator

from prometheus_client.core import (
    CollectorRegistry,
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.exposition import generate_latest
from prometheus_client.openmetrics.exposition import CONTENT_TYPE_LATEST as OPENMETRICS
from prometheus_client.openmetrics.exposition import generate_latest as generate_openmetrics

from pgq_exporter.catalogue import MetricSpec, MetricType
from pgq_exporter.collectors.base import AnySample, HistogramSample

Family = GaugeMetricFamily | CounterMetricFamily | HistogramMetricFamily
log = logging.getLogger("pgq_exporter.exposition")
# Metrics already warned about: a render runs after every collection.
_warned: set[str] = set()


def families(
    specs: dict[str, MetricSpec], samples: Iterable[tuple[str, AnySample]]
) -> list[Metric]:
    """One family per metric name; ``samples`` pairs each sample with its database."""
    built: dict[str, Family] = {}
    seen: set[tuple[str, tuple[str, ...]]] = set()
    for database, sample in samples:
        spec = specs[sample.metric]
        family = built.get(spec.name)
        if family is None:
            family = built[spec.name] = _new_family(spec)
        labels = (
            [database, *sample.labels] if spec.labels[:1] == ("database",) else [*sample.labels]
        )
        key = (spec.name, tuple(labels))
        if key in seen:  # Prometheus would keep one of them, silently
            _warn_duplicate(spec.name)
            continue
        seen.add(key)
        if isinstance(sample, HistogramSample):
            assert isinstance(family, HistogramMetricFamily)
            family.add_metric(labels, list(sample.buckets), sample.sum)
        else:
            assert not isinstance(family, HistogramMetricFamily)
            family.add_metric(labels, sample.value)
    return [built[name] for name in sorted(built)]


def _warn_duplicate(name: str) -> None:
    if name not in _warned:
        _warned.add(name)
        log.warning("duplicate label set; only the first sample is served", extra={"metric": name})


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
    return generate_latest(_registry(metrics))


def _registry(metrics: list[Metric]) -> CollectorRegistry:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Fixed(metrics))
    return registry


TEXT = "text/plain; version=0.0.4; charset=utf-8"


Form = tuple[bool, bool]  # (OpenMetrics, gzipped)
TEXT_FORM: Form = (False, False)


class Snapshot:
    """One rendering of the samples, in each form a scraper may ask for: the text
    format or OpenMetrics, plain or gzipped. The forms scrapers asked of the previous
    snapshot (``forms``) are made here, by the thread that renders after a collection,
    so that a scrape only writes bytes out; a form asked for the first time is made by
    that first request, once."""

    def __init__(self, metrics: list[Metric], forms: Iterable[Form] = ()) -> None:
        self._metrics = metrics
        self._forms: dict[Form, bytes] = {}
        self._lock = threading.Lock()
        for form in sorted({TEXT_FORM, *forms}):  # plain before gzipped: gzip reuses it
            self._forms[form] = self._render(form)
        self.text = self._forms[TEXT_FORM]

    @property
    def forms(self) -> frozenset[Form]:
        """The forms made so far: the next snapshot makes them up front."""
        return frozenset(self._forms)

    def body(self, *, openmetrics: bool, gzipped: bool) -> tuple[bytes, str]:
        """The body and its content type."""
        form = (openmetrics, gzipped)
        body = self._forms.get(form)
        if body is None:
            with self._lock:
                body = self._forms.get(form) or self._render(form)
                self._forms[form] = body
        return body, OPENMETRICS if openmetrics else TEXT

    def _render(self, form: Form) -> bytes:
        openmetrics, gzipped = form
        if gzipped:
            plain = self._forms.get((openmetrics, False)) or self._render((openmetrics, False))
            return gzip.compress(plain, compresslevel=6)
        if openmetrics:
            text: bytes = generate_openmetrics(_registry(self._metrics))  # type: ignore[no-untyped-call]
            return text
        return render_text(self._metrics)
