"""What a collector's samples become before they are served: each label value bounded
(labels.py), and a counter's or histogram's series that appears after the collector's
first run served at zero that once. Done a chunk at a time (see samples.Chunks): a
chunk the collector hands over again becomes what it became at the last run."""

from __future__ import annotations

from collections.abc import Sequence

from pgq_exporter.catalogue import BUILTIN_COLLECTORS, CATALOGUE, MetricType, metric_type
from pgq_exporter.histograms import EMPTY_NATIVE
from pgq_exporter.labels import NOTHING_CUT, bound_labels
from pgq_exporter.samples import (
    AnySample,
    Chunk,
    Chunks,
    HistogramSample,
    chunks_of,
    matched,
    same_objects,
)


class Settling:
    """One collector's chunks at its last run, and what each became. A chunk with a
    series served at zero is not kept: handed over again, it is settled again, and
    served as it is."""

    __slots__ = ("_cut", "_kept", "_other")

    def __init__(self) -> None:
        # The last run's chunks in its order, None where one was not kept. A chunk is
        # its own record: a record a chunk held 4.3 MB at 10,000 queues.
        self._kept: list[Chunk | None] = []
        # By the id of a kept chunk (held, so that the id is its own): what it became
        # and the values cut in it, where it is not itself as it came (rare: a long
        # label value).
        self._other: dict[int, _Made] = {}
        self._cut: frozenset[str] = NOTHING_CUT  # the values cut in them

    def settle(
        self, samples: Sequence[AnySample], served: Served | None, *, first: bool
    ) -> tuple[Chunks, frozenset[str]]:
        """The samples settled, and the cut forms of the label values that were cut.
        ``served``: the counter and histogram series served so far, or None for a
        collector that serves none."""
        chunks = chunks_of(samples)
        kept, changed = matched(chunks, self._kept, None, None)
        # By the chunk's id: those settled now that are not served as they came.
        now: dict[int, _Made] = {}
        for i in changed:
            if kept[i] is None:
                made = _settled(chunks[i], served, first=first)
                kept[i] = made[0]
                if made[1] is not chunks[i] or made[2]:
                    now[id(chunks[i])] = made
        self._kept = kept
        other = self._other
        if not other and not now:  # nearly always: every chunk is served as it came
            self._cut = NOTHING_CUT
            return Chunks(chunks.copy()), NOTHING_CUT
        self._other = {
            id(chunk): found
            for chunk in kept
            if chunk is not None and (found := other.get(id(chunk))) is not None
        }
        self._other.update({key: made for key, made in now.items() if made[0] is not None})
        apart = self._other | now
        settled = [apart[id(chunk)][1] if id(chunk) in apart else chunk for chunk in chunks]
        cuts = [made[2] for made in apart.values() if made[2]]
        self._cut = frozenset().union(*cuts) if cuts else NOTHING_CUT
        return Chunks(settled), self._cut


# A chunk (None: not to be kept), what it became, and the label values cut in it.
_Made = tuple[Chunk | None, Chunk, frozenset[str]]


def _settled(chunk: Chunk, served: Served | None, *, first: bool) -> _Made:
    """What ``chunk`` becomes (itself, where nothing changed); the first item None when
    it is not to be kept."""
    bounded, cut = bound_labels(chunk)
    out = zero_new_series(bounded, served, first=first) if served is not None else bounded
    zeroed = served is not None and not same_objects(bounded, out)
    settled = chunk if not zeroed and same_objects(chunk, bounded) else tuple(out)
    return (None if zeroed else chunk), settled, cut


# Series remembered at most, per collector; past it, a new one is served as it is.
MAX_KEPT_SERIES = 1_000_000


class Served:
    """The counter and histogram series a collector served so far: by label set (the
    samples' own tuples: a key made for each series held 5 MB at 10,000 queues), the
    metrics served with it, a bit each. A set of label sets a metric held 4 MB more at
    10,000 queues, where most of a queue's metrics share one tuple."""

    __slots__ = ("_bits", "metrics", "size")

    def __init__(self) -> None:
        self.metrics: dict[tuple[str, ...], int] = {}
        self._bits: dict[str, int] = {}
        self.size = 0

    def bit(self, metric: str) -> int:
        """The bit of ``metric`` in the label sets' values."""
        found = self._bits.get(metric)
        if found is None:
            found = self._bits[metric] = 1 << len(self._bits)
        return found


def zero_new_series(samples: list[AnySample], served: Served, *, first: bool) -> list[AnySample]:
    """The samples, where a counter's or histogram's series first appears after the
    collector's first run (a queue that appeared since) served at zero this once: the
    jobs it had then finished in between two runs, and increase() counts them only from
    a sample before them. At the first run, every series is served as it is: a series
    Prometheus already has from before a restart would read as a reset."""
    if served.size > MAX_KEPT_SERIES:
        first = True
    out: list[AnySample] = []
    bits: dict[str, int] = {}  # 0: not cumulative
    metrics = served.metrics
    for sample in samples:
        metric = sample.metric
        bit = bits.get(metric)
        if bit is None:
            cumulative = metric_type(metric) in _CUMULATIVE
            bit = bits[metric] = served.bit(metric) if cumulative else 0
        if not bit:
            out.append(sample)
            continue
        had = metrics.get(sample.labels, 0)
        if had & bit:
            out.append(sample)
            continue
        out.append(sample if first else _zero(sample))
        if served.size <= MAX_KEPT_SERIES:
            metrics[sample.labels] = had | bit
            served.size += 1
    return out


_CUMULATIVE = frozenset({MetricType.COUNTER, MetricType.HISTOGRAM})
# The built-in collectors that serve only gauges: nothing of theirs is zeroed.
_GAUGES_ONLY = frozenset(BUILTIN_COLLECTORS) - {
    spec.collector for spec in CATALOGUE if spec.type in _CUMULATIVE
}


def serves_cumulative(collector: str) -> bool:
    """Whether ``collector`` may serve a counter or a histogram (a custom one may)."""
    return collector not in _GAUGES_ONLY


def _zero(sample: AnySample) -> AnySample:
    if isinstance(sample, HistogramSample):
        zeros = tuple((le, 0.0) for le, _ in sample.buckets)
        return sample._replace(buckets=zeros, sum=0.0, native=EMPTY_NATIVE)
    return sample._replace(value=0.0)
