"""Exact ways to serve a histogram in fewer series: classic buckets merged (every k-th
bound kept: a cumulative count at a bound is the same whichever bounds are beside it),
and the histograms of several queues folded into one of ``queue="other"`` (their
buckets, counts and sums added)."""

from __future__ import annotations

from collections.abc import Iterable
from itertools import chain
from operator import itemgetter
from typing import NamedTuple

from pgq_exporter.histograms import NATIVE_SCHEMA, NativeBuckets
from pgq_exporter.samples import AnySample, HistogramSample

# The queue label of the histograms folded together. A queue really named so is folded
# with them, so that the two never make one label set twice.
OTHER_QUEUE = "other"


class Counting(NamedTuple):
    """How a scraper counts a histogram's series: its classic buckets (each bound,
    +Inf, _sum and _count), its native histogram (one series), or both."""

    classic: bool
    native: bool


TEXT_COUNTING = Counting(classic=True, native=False)


def series_of(sample: AnySample, counting: Counting, every: int = 1) -> int:
    """The series ``sample`` is, counted so, with ``every`` classic buckets merged."""
    if not isinstance(sample, HistogramSample):
        return 1
    classic = classic_series(sample, every) if counting.classic else 0
    return classic + int(counting.native)


def merged_buckets(sample: HistogramSample, every: int) -> HistogramSample:
    """``sample`` with every ``every``-th finite bound kept, and +Inf."""
    if every <= 1:
        return sample
    finite = sample.buckets[:-1]
    return sample._replace(buckets=(*finite[every - 1 :: every], sample.buckets[-1]))


def classic_series(sample: HistogramSample, every: int) -> int:
    """The series of ``sample``'s classic form with ``every`` buckets merged into one:
    its kept bounds, +Inf, _sum and _count."""
    return (len(sample.buckets) - 1) // every + 3


def folded(samples: Iterable[HistogramSample], queue_at: int) -> HistogramSample:
    """One histogram of all of ``samples`` (of one metric, the same bounds), labelled
    ``queue="other"`` at ``queue_at`` of its labels."""
    items = list(samples)
    first = items[0]
    if any(sample.native.schema != NATIVE_SCHEMA for sample in items):
        raise ValueError(f"native buckets not at schema {NATIVE_SCHEMA}")
    # Summed a column (a bound) at a time: for 10,000 queues, 7 ms where a step a count
    # took 15.
    columns = zip(*[sample.buckets for sample in items], strict=True)
    counts = [sum(map(_COUNT, column)) for column in columns]
    native: dict[int, int] = {}
    for index, count in chain.from_iterable([sample.native.buckets for sample in items]):
        native[index] = native.get(index, 0) + count
    zero_count = sum(sample.native.zero_count for sample in items)
    labels = (*first.labels[:queue_at], OTHER_QUEUE, *first.labels[queue_at + 1 :])
    buckets = tuple((le, count) for (le, _), count in zip(first.buckets, counts, strict=True))
    merged = NativeBuckets(NATIVE_SCHEMA, zero_count, tuple(sorted(native.items())))
    return HistogramSample(first.metric, labels, buckets, sum(s.sum for s in items), merged)


_COUNT = itemgetter(1)
