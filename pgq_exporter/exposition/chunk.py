"""What a part made of one chunk: its samples by metric, its series as each format
counts them, its histograms and its text lines, each made when first asked for."""

from __future__ import annotations

from pgq_exporter.catalogue import MetricSpec, MetricType
from pgq_exporter.exposition.fitting import Counting, series_of
from pgq_exporter.exposition.text import metric_lines, warn_duplicate
from pgq_exporter.samples import AnySample, Chunk, HistogramSample

# A chunk's text lines: its metrics' names, and a piece for each. The names are one
# tuple for every chunk of the same metrics (_named): a pair for each piece held 10 MB
# at 10,000 queues.
Lines = tuple[tuple[str, ...], tuple[str, ...]]
_NAMES: dict[tuple[str, ...], tuple[str, ...]] = {}


def _named(names: tuple[str, ...]) -> tuple[str, ...]:
    return _NAMES.setdefault(names, names)


# Groupings of a part's chunks, by the id of their ChunkMade: made once for counting
# them and for serializing them or their lines (twice, 10-20 ms a render at 10,000
# queues), kept by the part (not by the chunk) until then.
Groupings = dict[int, dict[str, list[AnySample]]]


class ChunkMade:
    """What was made of a chunk, each when first asked for: its series and its text
    lines, by metric (its protobuf entries are its part's, see columns.py). Its
    samples are grouped by metric (a second sample of one label set left out, with a
    warning: Prometheus would keep one of them, silently) whenever one of those is
    made, and not kept: at 10,000 queues a grouping kept for each chunk held 32 MB."""

    __slots__ = ("_given", "_histograms", "_lines", "_series", "chunk")

    def __init__(
        self, chunk: Chunk | None, given: dict[str, list[AnySample]] | None = None
    ) -> None:
        self.chunk = chunk
        self._given = given  # the samples by metric, for a part made of no chunk
        # Its series: one number where it has no histogram, else by counting: the
        # counting and its number where one was asked for (a dict each held 2.3 MB at
        # 10,000 queues), a dict past it.
        self._series: int | tuple[Counting, int] | dict[Counting, int] | None = None
        self._lines: Lines | None = None
        self._histograms: tuple[HistogramSample, ...] | None = None

    def grouped(self, kept: Groupings | None = None) -> dict[str, list[AnySample]]:
        """Its samples by metric; ``kept``: where a grouping made for it before is,
        and where one made now is put."""
        if self._given is not None:
            return self._given
        if kept is None:
            return _grouped(self.chunk or ())
        found = kept.get(id(self))
        if found is None:
            found = kept[id(self)] = _grouped(self.chunk or ())
        return found

    def taken(self, kept: Groupings | None) -> dict[str, list[AnySample]]:
        """Its grouping, taken out of ``kept`` where counting left it (it is not kept past
        this use), else made now."""
        return (kept.pop(id(self), None) if kept else None) or self.grouped()

    def count(
        self, specs: dict[str, MetricSpec], counting: Counting, kept: Groupings | None = None
    ) -> int:
        """Its series as a scraper that counts them so gets them."""
        series = self._series
        if isinstance(series, int):
            return series
        if series is None:
            grouped = self.grouped(kept)
            if all(specs[name].type is not MetricType.HISTOGRAM for name in grouped):
                self._series = sum(map(len, grouped.values()))
                return self._series
        elif isinstance(series, tuple):
            if series[0] == counting:
                return series[1]
            series = self._series = dict((series,))
        found = series.get(counting) if series is not None else None
        if found is None:
            found = sum(
                metric_series(specs[name], samples, counting)
                for name, samples in self.grouped(kept).items()
            )
            if series is None:
                self._series = (counting, found)
            else:
                series[counting] = found
        return found

    def histograms(self, specs: dict[str, MetricSpec]) -> tuple[HistogramSample, ...]:
        """Its histograms as served (fitting past the series budget walks them at every
        render: grouping every chunk again took 400 ms at 10,000 queues)."""
        found = self._histograms
        if found is None:
            if isinstance(self._series, int):  # counted: it has none
                found = ()
            else:
                found = tuple(
                    sample
                    for name, samples in self.grouped().items()
                    if specs[name].type is MetricType.HISTOGRAM
                    for sample in samples
                    if isinstance(sample, HistogramSample)
                )
            self._histograms = found
        return found

    def lines(
        self, specs: dict[str, MetricSpec], database: str, kept: Groupings | None = None
    ) -> Lines:
        if self._lines is None:
            grouped = self.taken(kept)
            self._lines = (
                _named(tuple(grouped)),
                tuple("".join(metric_lines(specs[n], database, s)) for n, s in grouped.items()),
            )
        return self._lines


NO_CHUNK = ChunkMade(None, {})


def metric_series(spec: MetricSpec, samples: list[AnySample], counting: Counting) -> int:
    """The series of one metric's samples as a scraper that counts them so gets them."""
    if spec.type is not MetricType.HISTOGRAM:
        return len(samples)  # one series each, in every format
    return sum(series_of(sample, counting) for sample in samples)


def _grouped(chunk: Chunk) -> dict[str, list[AnySample]]:
    # By metric, then label set: one dict operation a sample keeps the first of each.
    by_labels: dict[str, dict[tuple[str, ...], AnySample]] = {}
    metric, found = "", {}
    for sample in chunk:
        if sample.metric != metric:
            metric = sample.metric
            found = by_labels.setdefault(metric, {})
        if found.setdefault(sample.labels, sample) is not sample:
            warn_duplicate(metric)
    return {name: list(found.values()) for name, found in by_labels.items()}
