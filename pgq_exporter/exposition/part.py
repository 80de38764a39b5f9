"""One source's samples (a collector's, a target's own) of one database, ready to serve
in every format, and the merge of several sources into one body.

A part is made of its source's chunks (see samples.Chunks). What it makes of a chunk,
its series, its text lines and its protobuf entries, is kept in the chunk's ChunkMade;
a collector's PartMemo hands the next part the ChunkMade of each chunk the collector
handed over again, so that only new chunks are counted and serialized."""

from __future__ import annotations

from collections import defaultdict, deque
from collections.abc import Iterable
from itertools import compress, repeat
from operator import attrgetter, is_, itemgetter
from typing import NamedTuple, TypeVar

from pgq_exporter.catalogue import MetricSpec, MetricType
from pgq_exporter.exposition.fitting import Counting, series_of
from pgq_exporter.exposition.protobuf import (
    metric_entries,
    split_entries,
)
from pgq_exporter.exposition.text import Family, headers, metric_lines, warn_duplicate
from pgq_exporter.samples import AnySample, Chunk, chunks_of, matched

T = TypeVar("T", str, bytes)
# A chunk's text or protobuf entries: its metrics' names, and a piece for each. The
# names are one tuple for every chunk of the same metrics (_named): a pair for each
# piece held 10 MB at 10,000 queues.
Pieces = tuple[tuple[str, ...], tuple[T, ...]]
_NAMES: dict[tuple[str, ...], tuple[str, ...]] = {}


def _named(names: tuple[str, ...]) -> tuple[str, ...]:
    return _NAMES.setdefault(names, names)


# Groupings of a part's chunks, by the id of their ChunkMade: made once for counting
# them and for serializing them or their lines (twice, 10-20 ms a render at 10,000
# queues), kept by the part (not by the chunk) until then.
Groupings = dict[int, dict[str, list[AnySample]]]


class ChunkMade:
    """What was made of a chunk, each when first asked for: its series, its protobuf
    entries and its text lines, by metric. Its samples are grouped by metric (a second
    sample of one label set left out, with a warning: Prometheus would keep one of
    them, silently) whenever one of those is made, and not kept: at 10,000 queues a
    grouping kept for each chunk held 32 MB."""

    __slots__ = ("_classic_entries", "_entries", "_given", "_lines", "_series", "chunk")

    def __init__(
        self, chunk: Chunk | None, given: dict[str, list[AnySample]] | None = None
    ) -> None:
        self.chunk = chunk
        self._given = given  # the samples by metric, for a part made of no chunk
        # Its series: one number where it has no histogram, else by counting.
        self._series: int | dict[Counting, int] | None = None
        # Apart for histograms with classic buckets and without: a dict per chunk held
        # 10 MB more at 10,000 queues.
        self._entries: Pieces[bytes] | None = None
        self._classic_entries: Pieces[bytes] | None = None
        self._lines: Pieces[str] | None = None

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
            series = self._series = {}
        found = series.get(counting)
        if found is None:
            found = series[counting] = sum(
                metric_series(specs[name], samples, counting)
                for name, samples in self.grouped(kept).items()
            )
        return found

    def entries(self, classic: bool) -> Pieces[bytes] | None:
        return self._classic_entries if classic else self._entries

    @staticmethod
    def without_entries(made: list[ChunkMade], classic: bool) -> list[ChunkMade]:
        """Those of ``made`` whose entries are not made yet, picked in C: a call of
        entries() for each chunk took 4 ms a render at 10,000 queues."""
        entries = attrgetter("_classic_entries" if classic else "_entries")
        return list(compress(made, map(is_, map(entries, made), repeat(None))))

    def keep_entries(self, classic: bool, entries: Pieces[bytes]) -> None:
        if classic:
            self._classic_entries = entries
        else:
            self._entries = entries

    def lines(
        self, specs: dict[str, MetricSpec], database: str, kept: Groupings | None = None
    ) -> Pieces[str]:
        if self._lines is None:
            grouped = self.taken(kept)
            self._lines = (
                _named(tuple(grouped)),
                tuple("".join(metric_lines(specs[n], database, s)) for n, s in grouped.items()),
            )
        return self._lines


_NO_CHUNK = ChunkMade(None, {})
_NO_PIECES: Pieces[bytes] = ((), ())


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


class PartMemo:
    """What a source's last part made of its chunks, for its next part."""

    __slots__ = ("_last", "_specs")

    def __init__(self) -> None:
        self._specs: dict[str, MetricSpec] = {}
        self._last: Part | None = None

    def part(self, specs: dict[str, MetricSpec], database: str, chunks: list[Chunk]) -> Part:
        """A part of ``chunks``: each chunk's ChunkMade the last part's for a chunk it
        had, the same object (samples.matched), while the metrics are declared as they
        were; its totals of series and its protobuf entries the last part's, less the
        chunks gone and with the new ones."""
        if specs != self._specs:  # a reload: every chunk is made anew
            self._specs, self._last = specs, None
        before = self._last
        last = before.made if before else []
        made, changed = matched(chunks, last, attrgetter("chunk"), _NO_CHUNK)
        new: list[ChunkMade] = []
        for i in changed:
            if made[i] is _NO_CHUNK:
                made[i] = ChunkMade(chunks[i])
                new.append(made[i])
        if len(made) == len(last):  # a chunk in a changed place was there, or is gone
            placed = {id(made[i]) for i in changed}
            gone = [last[i] for i in changed if id(last[i]) not in placed]
        else:
            placed = {id(found) for found in made}
            gone = [found for found in last if id(found) not in placed]
        since = _Since(
            before.totals if before else {},
            new,
            gone,
            before.messages_made if before else {},
            changed if len(made) == len(last) else None,
        )
        self._last = Part(specs, database, made, since)
        return self._last


class _Since(NamedTuple):
    """A part's chunks against the part before: that part's totals and protobuf entries
    (each filled as it made them), the chunks new and gone since, and the places that
    changed (None: the chunks are not as many)."""

    totals: dict[Counting, int]
    new: list[ChunkMade]
    gone: list[ChunkMade]
    messages: dict[bool, dict[str, Entries]]
    changed: list[int] | None


# New chunks are serialized this many at a time: all at once, the first render of
# 10,000 queues held every sample's entry three times over (serialized, split and
# joined), and the process kept that high-water mark.
SERIALIZED_AT_ONCE = 1000

# A part of at most this many chunks makes its text lines and protobuf entries whole,
# each time: kept a chunk at a time, they held more than they saved at a few queues
# (a probe target held 575 KB where it held 483).
FEW_CHUNKS = 64


class Part:
    """One source's samples of one database, ready to serve: by metric, their text lines
    and their protobuf entries, each made when a scraper first asks for that format.
    Both are kept as each chunk's pieces, which the body is joined from: joined here
    too, they were another copy of the body."""

    __slots__ = (
        "_groupings",
        "_lines",
        "_made",
        "_messages",
        "_samples",
        "_since",
        "_specs",
        "database",
        "totals",
    )

    def __init__(
        self,
        specs: dict[str, MetricSpec],
        database: str,
        made: list[ChunkMade],
        since: _Since | None = None,
    ) -> None:
        self._specs = specs
        self.database = database
        self._made = made
        self._since = since
        self._samples: dict[str, list[AnySample]] | None = None
        self._lines: dict[str, list[str]] | None = None
        self._messages: dict[bool, dict[str, Entries]] = {}
        self.totals: dict[Counting, int] = {}  # by counting, as asked for
        self._groupings: Groupings = {}

    @property
    def made(self) -> list[ChunkMade]:
        """What was made of each of its chunks."""
        return self._made

    @property
    def samples(self) -> dict[str, list[AnySample]]:
        """The samples by metric, as served: grouped when first asked for (fitting past
        the series budget asks), and kept, a list a metric."""
        if self._samples is None:
            self._samples = self._grouped()
        return self._samples

    def _grouped(self) -> dict[str, list[AnySample]]:
        if len(self._made) == 1:
            return self._made[0].grouped()
        merged: dict[str, list[AnySample]] = {}
        for made in self._made:
            for name, samples in made.grouped().items():
                merged.setdefault(name, []).extend(samples)
        return merged

    @property
    def _few(self) -> bool:
        return len(self._made) <= FEW_CHUNKS

    def total(self, counting: Counting) -> int:
        """All its series as a scraper that counts them so gets them: the part before's,
        where it counted them so, with the chunks new and gone since (at 10,000 queues,
        counting every chunk's again took 20 ms a render)."""
        found = self.totals.get(counting)
        if found is not None:
            return found
        specs, since = self._specs, self._since
        if since is not None and counting in since.totals:
            found = since.totals[counting]
            found += sum([m.count(specs, counting, self._groupings) for m in since.new])
            found -= sum([m.count(specs, counting) for m in since.gone])
        else:
            found = sum([m.count(specs, counting, self._groupings) for m in self._made])
        self.totals[counting] = found
        return found

    def series(self, name: str, counting: Counting) -> int:
        """The series of ``name`` as a scraper that counts them so gets them."""
        return metric_series(self._specs[name], self.samples[name], counting)

    def only(self, names: Iterable[str]) -> Part:
        """The part with only the metrics ``names``."""
        samples = self.samples
        served = [name for name in names if name in samples]
        if len(served) == len(samples):
            return self
        by_metric = {name: samples[name] for name in served}
        return Part(self._specs, self.database, [ChunkMade(None, by_metric)])

    def lines(self) -> dict[str, list[str]]:
        """The text-format lines by metric (the same in OpenMetrics), in pieces."""
        if self._lines is None:
            specs, database = self._specs, self.database
            if self._few:
                self._lines = {
                    name: ["".join(metric_lines(specs[name], database, samples))]
                    for name, samples in self._grouped().items()
                }
            else:
                kept = self._groupings
                self._lines = _by_metric([m.lines(specs, database, kept) for m in self._made])
        return self._lines

    def messages(self, classic: bool) -> dict[str, Entries]:
        """The protobuf ``metric`` entries by metric, in pieces; ``classic``: histograms
        with their classic buckets beside the native ones."""
        found = self._messages.get(classic)
        if found is None:
            found = self._whole_entries(classic) if self._few else self._chunks_entries(classic)
            self._messages[classic] = found
        return found

    def _whole_entries(self, classic: bool) -> dict[str, Entries]:
        found = {}
        for name, samples in self._grouped().items():
            entries = metric_entries(self._specs[name], self.database, samples, classic=classic)
            found[name] = Entries(len(entries), [entries])
        return found

    @property
    def messages_made(self) -> dict[bool, dict[str, Entries]]:
        """Its protobuf entries made so far, by ``classic``."""
        return self._messages

    def _chunks_entries(self, classic: bool) -> dict[str, Entries]:
        """Each chunk's entries, those of the new chunks serialized now: by metric, one
        piece a chunk (empty where it has none of the metric), the part before's lists
        with the changed places replaced where the chunks are as many (at 10,000 queues,
        a pass over every chunk's pieces took 15-25 ms a render). Where the part before
        had as many chunks and made its entries a chunk at a time (it was not made
        whole), every chunk it had has them: only the new ones are looked for."""
        since = self._since
        found = None
        if since is None:
            self._serialize(ChunkMade.without_entries(self._made, classic), classic)
        else:
            self._since = since._replace(messages={})  # the part before's: not held past this
            before = since.messages.get(classic)
            if before is None or since.changed is None:
                self._serialize(ChunkMade.without_entries(self._made, classic), classic)
            else:
                self._serialize(since.new, classic)
                found = _replaced(before, self._made, since.changed, classic)
        return found if found is not None else _served(_columns(self._made, classic))

    def _serialize(self, new: list[ChunkMade], classic: bool) -> None:
        """The entries of new chunks, SERIALIZED_AT_ONCE at a time."""
        for at in range(0, len(new), SERIALIZED_AT_ONCE):
            self._serialize_some(new[at : at + SERIALIZED_AT_ONCE], classic)

    def _serialize_some(self, new: list[ChunkMade], classic: bool) -> None:
        """The entries of new chunks: one serialization a metric for all of them, split
        back into each chunk's. Their groupings are not kept past it."""
        samples: dict[str, list[AnySample]] = {}
        owners: dict[str, list[tuple[int, int]]] = {}  # by metric: each chunk's, and count
        grouped = [made.taken(self._groupings) for made in new]
        for index, by_metric in enumerate(grouped):
            for name, found in by_metric.items():
                samples.setdefault(name, []).extend(found)
                owners.setdefault(name, []).append((index, len(found)))
        names: list[list[str]] = [[] for _ in new]
        entries: list[list[bytes]] = [[] for _ in new]
        for name, found in samples.items():
            serialized = metric_entries(self._specs[name], self.database, found, classic=classic)
            if len(owners[name]) == 1:
                names[owners[name][0][0]].append(name)
                entries[owners[name][0][0]].append(serialized)
                continue
            split, at = split_entries(serialized), 0
            for index, count in owners[name]:
                names[index].append(name)
                entries[index].append(split[at] if count == 1 else b"".join(split[at : at + count]))
                at += count
        for made, its_names, its_entries in zip(new, names, entries, strict=True):
            made.keep_entries(classic, (_named(tuple(its_names)), tuple(its_entries)))


class Entries(NamedTuple):
    """A part's protobuf entries of one metric, in pieces, and their length."""

    length: int
    pieces: list[bytes]


def _by_metric(by_chunk: list[Pieces[T]]) -> dict[str, list[T]]:
    """Each metric's pieces, the chunks' one after another."""
    pieces: defaultdict[str, list[T]] = defaultdict(list)
    for names, found in by_chunk:
        for name, piece in zip(names, found, strict=True):
            pieces[name].append(piece)
    return pieces


def _columns(made: list[ChunkMade], classic: bool) -> dict[str, list[bytes]]:
    """Each metric's entries, a piece a chunk, empty where the chunk has none of it."""
    columns: dict[str, list[bytes]] = {}
    empty = [b""] * len(made)
    for i, found in enumerate(made):
        names, pieces = found.entries(classic) or _NO_PIECES
        for name, piece in zip(names, pieces, strict=True):
            column = columns.get(name)
            if column is None:
                column = columns[name] = empty.copy()
            column[i] = piece
    return columns


def _replaced(
    before: dict[str, Entries], made: list[ChunkMade], changed: list[int], classic: bool
) -> dict[str, Entries] | None:
    """The part before's entries (one piece a chunk, as many chunks) with the pieces in
    the ``changed`` places replaced, a metric's Entries the part before's object where
    none of its pieces changed; None where a changed chunk has a metric the part before
    had none of. The changed chunks are taken by their metrics' names (most chunks of a
    part have the same), and each metric's pieces set a shape at a time, in C: a piece
    at a time took 10 ms a render at 10,000 queues."""
    if any(len(entries.pieces) != len(made) for entries in before.values()):
        return None
    shapes: dict[tuple[str, ...], tuple[list[int], list[tuple[bytes, ...]]]] = {}
    for i in changed:
        names, pieces = made[i].entries(classic) or _NO_PIECES
        places, found = shapes.setdefault(names, ([], []))
        places.append(i)
        found.append(pieces)
    if any(name not in before for names in shapes for name in names):
        return None
    served: dict[str, Entries] = {}
    for name, entries in before.items():
        column = entries.pieces
        for names, (places, found) in shapes.items():
            if name in names:
                new = list(map(itemgetter(names.index(name)), found))
            else:
                new = [b""] * len(places)
            if all(map(is_, map(column.__getitem__, places), new)):
                continue
            if column is entries.pieces:
                column = column.copy()
            deque(map(column.__setitem__, places, new), maxlen=0)  # each set, in C
        if column is entries.pieces:
            served[name] = entries
        elif length := sum(map(len, column)):
            served[name] = Entries(length, column)
    return served


def _served(columns: dict[str, list[bytes]]) -> dict[str, Entries]:
    """Each metric's pieces as its Entries, those of no length left out: no family is
    served empty."""
    return {
        name: Entries(length, column)
        for name, column in columns.items()
        if (length := sum(map(len, column)))
    }


def sample_part(
    specs: dict[str, MetricSpec],
    database: str,
    samples: Iterable[AnySample],
    memo: PartMemo | None = None,
) -> Part:
    """``samples`` of ``database`` as a part, by metric in the order the samples come.
    ``memo``: what the source's last part made of its chunks."""
    chunks = chunks_of(samples)
    if memo is not None:
        return memo.part(specs, database, chunks)
    return Part(specs, database, [ChunkMade(c) for c in chunks])


def merge(specs: dict[str, MetricSpec], parts: Iterable[Part]) -> list[Family]:
    """The families of several sources' lines, in name order, each source's lines of a
    metric after the previous one's."""
    pieces: dict[str, list[str]] = {}
    for part in parts:
        for name, found in part.lines().items():
            pieces.setdefault(name, []).extend(found)
    return [Family(*headers(specs[name]), "".join(pieces[name])) for name in sorted(pieces)]
