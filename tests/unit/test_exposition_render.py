"""The exposition written from the samples is byte for byte what prometheus_client's
generate_latest writes for the same metric families, in both formats."""

from __future__ import annotations

import random
from collections.abc import Iterator

import pytest
from prometheus_client.core import (
    CollectorRegistry,
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.exposition import generate_latest
from prometheus_client.openmetrics.exposition import generate_latest as generate_openmetrics

from pgq_exporter.catalogue import CATALOGUE, MetricSpec, MetricType
from pgq_exporter.exposition import (
    Form,
    Format,
    Parts,
    Snapshot,
    content_type,
    merge,
    render,
)
from pgq_exporter.samples import AnySample, HistogramSample, Sample
from tests.support.exposition import sample_parts

ODD_TEXT = ["plain", 'with "quotes"', "back\\slash", "new\nline", "日本", "", "a=b,c}"]


class _Fixed:
    def __init__(self, metrics: list[Metric]) -> None:
        self._metrics = metrics

    def collect(self) -> Iterator[Metric]:
        yield from self._metrics


def _reference(specs: dict[str, MetricSpec], samples: list[tuple[str, AnySample]]) -> list[Metric]:
    """The same samples as prometheus_client's own metric families, in name order."""
    built: dict[str, Metric] = {}
    for database, sample in samples:
        spec = specs[sample.metric]
        if spec.name not in built:
            kind = {MetricType.COUNTER: CounterMetricFamily, MetricType.GAUGE: GaugeMetricFamily,
                    MetricType.HISTOGRAM: HistogramMetricFamily}[spec.type]  # fmt: skip
            built[spec.name] = kind(spec.name, spec.help, labels=spec.labels)
        values = [database, *sample.labels] if spec.labels[:1] == ("database",) else sample.labels
        family = built[spec.name]
        if isinstance(sample, HistogramSample):
            family.add_metric(list(values), list(sample.buckets), sample.sum)  # type: ignore[attr-defined]
        else:
            family.add_metric(list(values), sample.value)  # type: ignore[attr-defined]
    return [built[name] for name in sorted(built)]


def _random_samples(rng: random.Random) -> list[tuple[str, AnySample]]:
    """Samples of 25 catalogue metrics, with odd label values; no label set twice (that
    is a warning here, and two series in prometheus_client)."""
    samples: list[tuple[str, AnySample]] = []
    for spec in rng.sample(list(CATALOGUE), 25):
        for n in range(rng.randint(1, 4) if spec.labels else 1):
            labels = tuple(rng.choice(ODD_TEXT) + str(rng.random()) for _ in spec.labels[1:])
            if spec.labels[:1] != ("database",):
                labels = tuple(rng.choice(ODD_TEXT) + str(n) for _ in spec.labels)
            database = rng.choice(ODD_TEXT) + str(n)
            if spec.type is MetricType.HISTOGRAM:
                counts = sorted(rng.randint(0, 10**6) for _ in range(4))
                buckets = tuple(zip(("0.005", "1.0", "60.0", "+Inf"), map(float, counts),
                                    strict=True))  # fmt: skip
                samples.append((database, HistogramSample(spec.name, labels, buckets,
                                                          rng.random() * 1e7)))  # fmt: skip
            else:
                value = rng.choice([0.0, 1.0, rng.random() * 1e12, -3.5, float("nan"),
                                    float("inf"), 1e-9, 123456789.0])  # fmt: skip
                samples.append((database, Sample(spec.name, labels, value)))
    return samples


@pytest.mark.parametrize("seed", range(20))
def test_both_formats_match_prometheus_client(seed: int) -> None:
    specs = {spec.name: spec for spec in CATALOGUE}
    specs["pgq_custom_odd"] = MetricSpec("pgq_custom_odd", MetricType.GAUGE,
                                         'Help with "quotes", \\ and\nnewline.', ("database",),
                                         "custom")  # fmt: skip
    samples = _random_samples(random.Random(seed))
    samples.append(("main", Sample("pgq_custom_odd", (), 2.0)))
    ours = merge(specs, sample_parts(specs, samples))
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Fixed(_reference(specs, samples)))
    assert render(ours) == generate_latest(registry)
    assert render(ours, openmetrics=True) == generate_openmetrics(registry)  # type: ignore[no-untyped-call]


def test_a_snapshot_serves_each_form_and_makes_up_front_those_asked_for() -> None:
    specs = {spec.name: spec for spec in CATALOGUE}
    parts = Parts.same(sample_parts(specs, [("main", Sample("pgq_up", (), 1.0))]))
    first = Snapshot(specs, parts)
    assert first.rendered() == {}
    gzipped = Form(Format.OPENMETRICS, True)
    body, kind = first.body(gzipped), content_type(gzipped)
    assert kind.startswith("application/openmetrics-text") and body[:2] == b"\x1f\x8b"
    assert set(first.rendered()) == {gzipped}
    second = Snapshot(specs, parts, {gzipped})
    assert second.rendered()[gzipped] == body  # made before any request
    assert b'pgq_up{database="main"} 1.0' in second.body()
