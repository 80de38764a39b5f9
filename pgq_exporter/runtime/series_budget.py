"""A target's series within limits.series, as each format counts them. Past the limit,
in this order, each step only as far as needed: the per-queue histograms' classic
buckets are merged (two into one, then four, ...), then the histograms of the queues
that finished the fewest jobs are folded into one ``queue="other"``, then whole metrics
are left out from the last collector on. The collectors' own series are always served.
Each step is exact for what it serves, and what it left out is counted."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from pgq_exporter.catalogue import EXPORTER, MetricSpec, MetricType
from pgq_exporter.exposition import Part
from pgq_exporter.exposition.fitting import (
    OTHER_QUEUE,
    Counting,
    folded,
    merged_buckets,
    series_of,
)
from pgq_exporter.exposition.part import ChunkMade
from pgq_exporter.samples import AnySample, HistogramSample

# Classic buckets are merged no further than this many bounds left.
MIN_CLASSIC_BOUNDS = 4


@dataclass(frozen=True, slots=True)
class Fitted:
    """The parts as served, and what fitting them took."""

    parts: list[Part]
    merged: int = 1  # classic buckets merged into one
    folded: int = 0  # queues whose histograms are in queue="other"
    dropped: int = 0  # series left out


@dataclass(frozen=True, slots=True)
class _Histogram:
    part: int  # its index among the parts
    metric: str
    queue_at: int  # the queue label's index in the sample's labels
    sample: HistogramSample

    @property
    def queue(self) -> str:
        return self.sample.labels[self.queue_at]


def fit(specs: dict[str, MetricSpec], parts: list[Part], limit: int, counting: Counting) -> Fitted:
    total = sum(part.total(counting) for part in parts)
    if total <= limit:
        return Fitted(parts)
    histograms = list(_queue_histograms(specs, parts))
    rest = total - sum(series_of(h.sample, counting) for h in histograms)
    every = _merging(histograms, rest, limit, counting)
    gone = _folding(histograms, rest, limit, counting, every)
    if every > 1 or gone:
        parts = _remade(specs, parts, histograms, every, gone)
    kept, dropped = _dropping(specs, parts, limit, counting)
    return Fitted(kept, every, len(gone), dropped)


def _queue_histograms(specs: dict[str, MetricSpec], parts: list[Part]) -> Iterator[_Histogram]:
    for index, part in enumerate(parts):
        for name, samples in part.samples.items():
            queue_at = _queue_at(specs[name])
            if queue_at is None:
                continue
            for sample in samples:
                if isinstance(sample, HistogramSample):
                    yield _Histogram(index, name, queue_at, sample)


def _merging(histograms: list[_Histogram], rest: int, limit: int, counting: Counting) -> int:
    """How many classic buckets to merge into one: the fewest that fit, as far as
    MIN_CLASSIC_BOUNDS allows."""
    every = 1
    if not counting.classic or not histograms:
        return every
    fewest = min(len(h.sample.buckets) - 1 for h in histograms)
    while (
        rest + sum(series_of(h.sample, counting, every) for h in histograms) > limit
        and fewest // (every * 2) >= MIN_CLASSIC_BOUNDS
    ):
        every *= 2
    return every


def _folding(
    histograms: list[_Histogram], rest: int, limit: int, counting: Counting, every: int
) -> frozenset[str]:
    """The queues whose histograms go into queue="other": those that finished the
    fewest jobs, as many as it takes to fit (a queue named "other" among them)."""
    by_queue: dict[str, list[_Histogram]] = {}
    for histogram in histograms:
        by_queue.setdefault(histogram.queue, []).append(histogram)
    total = rest + sum(series_of(h.sample, counting, every) for h in histograms)
    if total <= limit:
        return frozenset()
    # One "other" per metric (and labels beside the queue) takes the folded ones' place.
    total += sum(
        series_of(h.sample, counting, every)
        for h in {(h.metric, _beside(h)): h for h in histograms}.values()
    )
    jobs = {queue: sum(h.sample.buckets[-1][1] for h in found) for queue, found in by_queue.items()}
    order = sorted(by_queue, key=lambda queue: (queue != OTHER_QUEUE, jobs[queue], queue))
    gone: set[str] = set()
    for queue in order:  # "other" first, if a queue is named so
        if total <= limit and queue != OTHER_QUEUE:
            break
        gone.add(queue)
        total -= sum(series_of(h.sample, counting, every) for h in by_queue[queue])
    return frozenset(gone)


def _queue_at(spec: MetricSpec) -> int | None:
    """Where a per-queue histogram's samples hold the queue (after the database, which
    samples leave out); None for any other metric."""
    if spec.type is not MetricType.HISTOGRAM or "queue" not in spec.labels:
        return None
    return spec.labels.index("queue") - (spec.labels[0] == "database")


def _beside(histogram: _Histogram) -> tuple[str, ...]:
    return _without(histogram.sample.labels, histogram.queue_at)


def _without(labels: tuple[str, ...], at: int) -> tuple[str, ...]:
    """The labels but the one at ``at``: a histogram's labels beside its queue."""
    return (*labels[:at], *labels[at + 1 :])


def _remade(
    specs: dict[str, MetricSpec],
    parts: list[Part],
    histograms: list[_Histogram],
    every: int,
    gone: frozenset[str],
) -> list[Part]:
    """The parts with their queue histograms merged and folded."""
    touched = {h.part for h in histograms}
    return [
        _remade_part(specs, part, every, gone) if index in touched else part
        for index, part in enumerate(parts)
    ]


def _remade_part(
    specs: dict[str, MetricSpec], part: Part, every: int, gone: frozenset[str]
) -> Part:
    """The part with its queue histograms merged and folded: a chunk that neither
    touches is served as it was (what was made of it, its entries, kept)."""
    made: list[ChunkMade] = []
    # By metric, the queue label's place, and the labels beside it.
    into_other: dict[tuple[str, int, tuple[str, ...]], list[HistogramSample]] = {}
    for chunk in part.made:
        remade: dict[str, list[AnySample]] = {}
        changed = False
        for name, found in chunk.grouped().items():
            queue_at = _queue_at(specs[name])
            kept = remade.setdefault(name, [])
            for sample in found:
                if queue_at is None or not isinstance(sample, HistogramSample):
                    kept.append(sample)
                    continue
                merged = merged_buckets(sample, every)
                changed = changed or merged is not sample
                if merged.labels[queue_at] in gone:
                    beside = _without(merged.labels, queue_at)
                    into_other.setdefault((name, queue_at, beside), []).append(merged)
                    changed = True
                else:
                    kept.append(merged)
        made.append(ChunkMade(None, _served(remade)) if changed else chunk)
    other: dict[str, list[AnySample]] = {}
    for (name, queue_at, _), group in into_other.items():
        other.setdefault(name, []).append(folded(group, queue_at))
    if other:
        made.append(ChunkMade(None, other))
    return part.remade(made)


def _served(by_metric: dict[str, list[AnySample]]) -> dict[str, list[AnySample]]:
    return {name: samples for name, samples in by_metric.items() if samples}


def _dropping(
    specs: dict[str, MetricSpec], parts: list[Part], limit: int, counting: Counting
) -> tuple[list[Part], int]:
    """Whole metrics left out past the limit, from the last part on; the exporter's own
    metrics of a collector are always kept."""
    left, dropped, kept_parts = limit, 0, []
    for part in parts:
        taken = []
        for name in part.samples:
            series = part.series(name, counting)
            if specs[name].collector == EXPORTER:
                taken.append(name)
            elif series <= left:
                taken.append(name)
                left -= series
            else:
                dropped += series
        kept_parts.append(part.only(taken))
    return kept_parts, dropped
