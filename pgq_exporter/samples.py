"""What a collection yields: one value (a gauge or counter sample) or one histogram,
for a metric of the catalogue or of a custom collector."""

from __future__ import annotations

from typing import NamedTuple

from pgq_exporter.histograms import EMPTY_NATIVE, NativeBuckets


# Samples are NamedTuples: a tuple of strings and numbers is untracked by the garbage
# collector, and a fleet of targets holds a great many of them; as objects,
# they made every full collection walk them all.
class Sample(NamedTuple):
    """One gauge or counter value. ``labels`` are the values after ``database``, in spec order."""

    metric: str
    labels: tuple[str, ...]
    value: float


class HistogramSample(NamedTuple):
    """One histogram: its classic buckets, and the same observations in native buckets."""

    metric: str
    labels: tuple[str, ...]
    buckets: tuple[tuple[str, float], ...]  # cumulative, ending with "+Inf"
    sum: float
    native: NativeBuckets = EMPTY_NATIVE


AnySample = Sample | HistogramSample
