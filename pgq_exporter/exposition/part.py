"""One source's samples (a collector's, a target's own) of one database, ready to serve
in every format, and the merge of several sources into one body.

A part is made of its source's chunks (see samples.Chunks). What it makes of a chunk,
its samples by metric, their series, their text lines and their protobuf entries, is
kept in the chunk's ChunkMade; a collector's PartMemo hands the next part the ChunkMade
of each chunk the collector handed over again, so that only new chunks are grouped,
counted and serialized."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from typing import TypeVar

from pgq_exporter.catalogue import MetricSpec, MetricType
from pgq_exporter.exposition.fitting import Counting, series_of
from pgq_exporter.exposition.protobuf import (
    family_header,
    length_prefix,
    metric_entries,
    split_entries,
)
from pgq_exporter.exposition.text import Family, headers, metric_lines, warn_duplicate
from pgq_exporter.samples import AnySample, Chunk, chunks_of

T = TypeVar("T", str, bytes)


class ChunkMade:
    """A chunk's samples by metric (a second sample of one label set left out, with a
    warning: Prometheus would keep one of them, silently), and what was made of them,
    each when first asked for."""

    __slots__ = ("by_metric", "chunk", "entries", "lines", "series")

    def __init__(self, chunk: Chunk | None, by_metric: dict[str, list[AnySample]]) -> None:
        self.chunk = chunk  # None for samples that came in no chunk
        self.by_metric = by_metric
        self.series: dict[Counting, int] = {}
        self.lines: dict[str, str] | None = None
        self.entries: dict[bool, dict[str, bytes]] = {}  # by classic, then metric

    @classmethod
    def of(cls, chunk: Chunk) -> ChunkMade:
        # By metric, then label set: one dict operation a sample keeps the first of each.
        by_labels: dict[str, dict[tuple[str, ...], AnySample]] = {}
        metric, found = "", {}
        for sample in chunk:
            if sample.metric != metric:
                metric = sample.metric
                found = by_labels.setdefault(metric, {})
            if found.setdefault(sample.labels, sample) is not sample:
                warn_duplicate(metric)
        return cls(chunk, {name: list(found.values()) for name, found in by_labels.items()})

    def count(self, specs: dict[str, MetricSpec], counting: Counting) -> int:
        counted = self.series.get(counting)
        if counted is None:
            counted = self.series[counting] = sum(
                len(samples)
                if specs[name].type is not MetricType.HISTOGRAM
                else sum(series_of(sample, counting) for sample in samples)
                for name, samples in self.by_metric.items()
            )
        return counted


class PartMemo:
    """What a source's last part made of its chunks, for its next part."""

    __slots__ = ("_made", "_specs")

    def __init__(self) -> None:
        self._made: dict[int, ChunkMade] = {}
        self._specs: dict[str, MetricSpec] = {}

    def made(self, specs: dict[str, MetricSpec], chunks: list[Chunk]) -> list[ChunkMade]:
        """Each chunk's ChunkMade: the last part's for a chunk it had, the same object,
        while the metrics are declared as they were."""
        if specs != self._specs:
            self._made, self._specs = {}, specs  # a reload: every chunk is made anew
        last, now = self._made, {}
        made = []
        for chunk in chunks:
            found = last.get(id(chunk))
            if found is None or found.chunk is not chunk:
                found = ChunkMade.of(chunk)
            now[id(chunk)] = found
            made.append(found)
        self._made = now
        return made


class Part:
    """One source's samples of one database, ready to serve: by metric, their text lines
    and their protobuf entries, each made when a scraper first asks for that format."""

    __slots__ = ("_lines", "_made", "_messages", "_samples", "_specs", "database")

    def __init__(self, specs: dict[str, MetricSpec], database: str, made: list[ChunkMade]) -> None:
        self._specs = specs
        self.database = database
        self._made = made
        self._samples: dict[str, list[AnySample]] | None = None
        self._lines: dict[str, str] | None = None
        self._messages: dict[bool, dict[str, bytes]] = {}

    @property
    def made(self) -> list[ChunkMade]:
        """What was made of each of its chunks."""
        return self._made

    @property
    def samples(self) -> dict[str, list[AnySample]]:
        """The samples by metric, as served."""
        if self._samples is None:
            if len(self._made) == 1:
                self._samples = self._made[0].by_metric
            else:
                merged: dict[str, list[AnySample]] = {}
                for made in self._made:
                    for name, samples in made.by_metric.items():
                        merged.setdefault(name, []).extend(samples)
                self._samples = merged
        return self._samples

    def total(self, counting: Counting) -> int:
        """All its series as a scraper that counts them so gets them."""
        specs = self._specs
        return sum(
            [made.series.get(counting) or made.count(specs, counting) for made in self._made]
        )

    def series(self, name: str, counting: Counting) -> int:
        """The series of ``name`` as a scraper that counts them so gets them."""
        samples = self.samples[name]
        if self._specs[name].type is not MetricType.HISTOGRAM:
            return len(samples)  # one series each, in every format
        return sum(series_of(sample, counting) for sample in samples)

    def only(self, names: Iterable[str]) -> Part:
        """The part with only the metrics ``names``."""
        served = [name for name in names if name in self.samples]
        if len(served) == len(self.samples):
            return self
        by_metric = {name: self.samples[name] for name in served}
        return Part(self._specs, self.database, [ChunkMade(None, by_metric)])

    def lines(self) -> dict[str, str]:
        """The text-format lines by metric (the same in OpenMetrics)."""
        if self._lines is None:
            for made in self._made:
                if made.lines is None:
                    made.lines = {
                        name: "".join(metric_lines(self._specs[name], self.database, samples))
                        for name, samples in made.by_metric.items()
                    }
            self._lines = _joined([made.lines for made in self._made if made.lines], "")
        return self._lines

    def messages(self, classic: bool) -> dict[str, bytes]:
        """The protobuf ``metric`` entries by metric; ``classic``: histograms with their
        classic buckets beside the native ones."""
        found = self._messages.get(classic)
        if found is None:
            new = [made for made in self._made if classic not in made.entries]
            if new:
                self._serialize(new, classic)
            found = _joined([made.entries[classic] for made in self._made], b"")
            self._messages[classic] = found
        return found

    def _serialize(self, new: list[ChunkMade], classic: bool) -> None:
        """The entries of the new chunks: one serialization a metric for all of them,
        split back into each chunk's."""
        samples: dict[str, list[AnySample]] = {}
        owners: dict[str, list[tuple[dict[str, bytes], int]]] = {}
        for made in new:
            entries = made.entries[classic] = {}
            for name, found in made.by_metric.items():
                samples.setdefault(name, []).extend(found)
                owners.setdefault(name, []).append((entries, len(found)))
        for name, found in samples.items():
            serialized = metric_entries(self._specs[name], self.database, found, classic=classic)
            if len(owners[name]) == 1:
                owners[name][0][0][name] = serialized
                continue
            split, at = split_entries(serialized), 0
            for entries, count in owners[name]:
                entries[name] = b"".join(split[at : at + count])
                at += count


def _joined(by_chunk: list[dict[str, T]], empty: T) -> dict[str, T]:
    """Each metric's text or entries, the chunks' one after another."""
    if len(by_chunk) == 1:
        return by_chunk[0]
    pieces: defaultdict[str, list[T]] = defaultdict(list)
    for found in by_chunk:
        for name, piece in found.items():
            pieces[name].append(piece)
    return {name: empty.join(found) for name, found in pieces.items()}


def sample_part(
    specs: dict[str, MetricSpec],
    database: str,
    samples: Iterable[AnySample],
    memo: PartMemo | None = None,
) -> Part:
    """``samples`` of ``database`` as a part, by metric in the order the samples come.
    ``memo``: what the source's last part made of its chunks."""
    chunks = chunks_of(samples)
    made = memo.made(specs, chunks) if memo is not None else [ChunkMade.of(c) for c in chunks]
    return Part(specs, database, made)


def merge(specs: dict[str, MetricSpec], parts: Iterable[Part]) -> list[Family]:
    """The families of several sources' lines, in name order, each source's lines of a
    metric after the previous one's."""
    pieces: dict[str, list[str]] = {}
    for part in parts:
        for name, text in part.lines().items():
            pieces.setdefault(name, []).append(text)
    return [Family(*headers(specs[name]), "".join(pieces[name])) for name in sorted(pieces)]


def merge_messages(specs: dict[str, MetricSpec], parts: Iterable[Part], classic: bool) -> bytes:
    """The protobuf body of several sources: one length-delimited family per metric, in
    name order, each source's entries after the previous one's."""
    pieces: dict[str, list[bytes]] = {}
    for part in parts:
        for name, entries in part.messages(classic).items():
            pieces.setdefault(name, []).append(entries)
    # One copy of the entries, into the body: each family's length is summed, not joined.
    body: list[bytes] = []
    for name in sorted(pieces):
        header = family_header(specs[name])
        body += (length_prefix(len(header) + sum(map(len, pieces[name]))), header, *pieces[name])
    return b"".join(body)
