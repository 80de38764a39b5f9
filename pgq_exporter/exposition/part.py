"""One source's samples (a collector's, a target's own) of one database, ready to serve
in every format, and the merge of several sources into one body.

A part is made of its source's chunks (see samples.Chunks). What it makes of a chunk,
its series and its text lines, is kept in the chunk's ChunkMade (chunk.py), and its
protobuf entries in the part's, joined a metric at a time (columns.py); a collector's
PartMemo hands the next part the ChunkMade of each chunk the collector handed over
again, and the entries made so far, so that only new chunks are counted and
serialized."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Iterator
from operator import attrgetter
from typing import NamedTuple, TypeVar

from pgq_exporter.catalogue import MetricSpec
from pgq_exporter.exposition.chunk import (
    NO_CHUNK,
    ChunkMade,
    Groupings,
    Lines,
    metric_series,
)
from pgq_exporter.exposition.columns import Built, Entries, Pieces, built_anew, spliced
from pgq_exporter.exposition.fitting import Counting
from pgq_exporter.exposition.protobuf import (
    metric_entries,
    metric_entry_list,
)
from pgq_exporter.exposition.text import Family, headers, metric_lines
from pgq_exporter.samples import AnySample, Chunk, chunks_of, matched

T = TypeVar("T")


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
        made, changed = matched(chunks, last, attrgetter("chunk"), NO_CHUNK)
        new: list[ChunkMade] = []
        for i in changed:
            if made[i] is NO_CHUNK:
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
            before.by_metric if before else {},
            new,
            gone,
            before.messages_made if before else {},
            changed if len(made) == len(last) else None,
            last,
        )
        self._last = Part(specs, database, made, since)
        return self._last


class _Since(NamedTuple):
    """A part's chunks against the part before (``last``, its chunks' records): that
    part's totals and its series by metric (each filled as it counted them), the
    protobuf entries it made or was handed, the chunks new and gone since, and the
    places that changed (None: the chunks are not as many)."""

    totals: dict[Counting, int]
    by_metric: dict[Counting, dict[str, int]]
    new: list[ChunkMade]
    gone: list[ChunkMade]
    messages: dict[bool, Built]
    changed: list[int] | None
    last: list[ChunkMade]


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
    The lines are kept as each chunk's pieces, which the body is joined from; the
    entries joined, with each chunk's end (columns.py)."""

    __slots__ = (
        "_adopted",
        "_by_metric",
        "_groupings",
        "_lines",
        "_made",
        "_messages",
        "_origin",
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
        self._lines: dict[str, list[str]] | None = None
        self._messages: dict[bool, dict[str, Entries]] = {}
        self.totals: dict[Counting, int] = {}  # by counting, as asked for
        self._by_metric: dict[Counting, dict[str, int]] = {}
        self._groupings: Groupings = {}
        self._origin: Part | None = None  # the part it was remade of (remade())
        self._adopted: dict[bool, Built] = {}  # the entries its remade parts made

    @property
    def made(self) -> list[ChunkMade]:
        """What was made of each of its chunks."""
        return self._made

    @property
    def samples(self) -> dict[str, list[AnySample]]:
        """The samples by metric, as served, grouped now (the budget's fitting works from
        its series by metric and its chunks' histograms, not from these)."""
        return self._grouped()

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

    @property
    def by_metric(self) -> dict[Counting, dict[str, int]]:
        """Its series by metric, for each counting asked for so far."""
        return self._by_metric

    def series(self, counting: Counting) -> dict[str, int]:
        """Its series by metric as a scraper that counts them so gets them: the part
        before's, where it counted them so, with the chunks new and gone since."""
        found = self._by_metric.get(counting)
        if found is not None:
            return found
        specs, since = self._specs, self._since
        if since is not None and counting in since.by_metric:
            found = dict(since.by_metric[counting])
            for made in since.new:
                _add_series(found, specs, made.grouped(self._groupings), counting, 1)
            for made in since.gone:
                _add_series(found, specs, made.grouped(), counting, -1)
            found = {name: n for name, n in found.items() if n}
        else:
            found = {}
            for made in self._made:
                _add_series(found, specs, made.grouped(), counting, 1)
        self._by_metric[counting] = found
        return found

    def only(self, names: frozenset[str]) -> Part:
        """The part with only the metrics ``names``: what this one makes, the others
        left out (nothing is made again)."""
        return _Only(self, names)

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
        """The protobuf ``metric`` entries by metric, each joined; ``classic``: histograms
        with their classic buckets beside the native ones."""
        found = self._messages.get(classic)
        if found is None:
            found = self._whole_entries(classic) if self._few else self._chunks_entries(classic)
            self._messages[classic] = found
            if self._origin is not None:
                self._origin._adopted[classic] = Built(found, self._made)
        return found

    def _whole_entries(self, classic: bool) -> dict[str, Entries]:
        found = {}
        for name, samples in self._grouped().items():
            entries = metric_entries(self._specs[name], self.database, samples, classic=classic)
            found[name] = Entries(len(entries), [entries])
        return found

    @property
    def messages_made(self) -> dict[bool, Built]:
        """Its protobuf entries made so far, by ``classic``, and those of a part before
        that it was handed and did not make its own of (no render between them)."""
        handed = self._since.messages if self._since is not None else {}
        made = {classic: Built(found, self._made) for classic, found in self._messages.items()}
        return {**handed, **self._adopted, **made}

    def remade(self, made: list[ChunkMade]) -> Part:
        """A part of ``made`` served in this one's place (past the series budget), what
        it has of this one's chunks the same: their entries are taken from what this
        part has, and the entries it makes are this part's to hand to the next."""
        handed = self.messages_made
        since = _Since({}, {}, [], [], handed, None, [])
        remade = Part(self._specs, self.database, made, since)
        remade._origin = self
        return remade

    def _chunks_entries(self, classic: bool) -> dict[str, Entries]:
        """Each metric's entries, joined: the part before's (or what it was handed)
        with those of the chunks new since serialized now and put in their places (see
        columns.py); all serialized where there is none to start from."""
        since = self._since
        built = since.messages.get(classic) if since is not None else None
        if since is not None:  # not held past this
            self._since = since._replace(messages=_without(since.messages, classic))
        if built is None or any(e.ends is None for e in built.entries.values()):
            return built_anew(self._serialized(self._made, classic))
        if since is not None and built.made is since.last:
            new, changed = since.new, since.changed
        else:
            had = {id(found) for found in built.made}
            new, changed = [found for found in self._made if id(found) not in had], None
        pieces: dict[int, Pieces] = {}
        at = 0
        for batch in self._serialized(new, classic):
            pieces.update(zip(map(id, new[at : at + len(batch)]), batch, strict=True))
            at += len(batch)
        return spliced(built, self._made, pieces, changed)

    def _serialized(self, new: list[ChunkMade], classic: bool) -> Iterator[list[Pieces]]:
        """The entries of new chunks, SERIALIZED_AT_ONCE at a time."""
        for at in range(0, len(new), SERIALIZED_AT_ONCE):
            yield self._serialize_some(new[at : at + SERIALIZED_AT_ONCE], classic)

    def _serialize_some(self, new: list[ChunkMade], classic: bool) -> list[Pieces]:
        """The entries of new chunks: one serialization a metric for all of them, split
        back into each chunk's. Their groupings are not kept past it."""
        samples: dict[str, list[AnySample]] = {}
        owners: dict[str, list[tuple[int, int]]] = {}  # by metric: each chunk's, and count
        grouped = [made.taken(self._groupings) for made in new]
        for index, by_metric in enumerate(grouped):
            for name, found in by_metric.items():
                samples.setdefault(name, []).extend(found)
                owners.setdefault(name, []).append((index, len(found)))
        pieces: list[Pieces] = [{} for _ in new]
        for name, found in samples.items():
            spec = self._specs[name]
            if len(owners[name]) == 1:
                serialized = metric_entries(spec, self.database, found, classic=classic)
                pieces[owners[name][0][0]][name] = serialized
                continue
            split, at = metric_entry_list(spec, self.database, found, classic=classic), 0
            for index, count in owners[name]:
                pieces[index][name] = split[at] if count == 1 else b"".join(split[at : at + count])
                at += count
        return pieces


class _Only(Part):
    """A part's metrics ``names`` only, as it makes them."""

    __slots__ = ("_names", "_part")

    def __init__(self, part: Part, names: frozenset[str]) -> None:
        super().__init__(part._specs, part.database, part.made)
        self._part = part
        self._names = names

    @property
    def samples(self) -> dict[str, list[AnySample]]:
        return _only(self._part.samples, self._names)

    def total(self, counting: Counting) -> int:
        return sum(self.series(counting).values())

    def series(self, counting: Counting) -> dict[str, int]:
        return _only(self._part.series(counting), self._names)

    def lines(self) -> dict[str, list[str]]:
        return _only(self._part.lines(), self._names)

    def messages(self, classic: bool) -> dict[str, Entries]:
        return _only(self._part.messages(classic), self._names)

    @property
    def messages_made(self) -> dict[bool, Built]:
        return self._part.messages_made

    def remade(self, made: list[ChunkMade]) -> Part:
        raise TypeError("a part of some metrics only is not remade")


def _only(by_metric: dict[str, T], names: frozenset[str]) -> dict[str, T]:
    return {name: value for name, value in by_metric.items() if name in names}


def _add_series(
    found: dict[str, int],
    specs: dict[str, MetricSpec],
    grouped: dict[str, list[AnySample]],
    counting: Counting,
    sign: int,
) -> None:
    for name, samples in grouped.items():
        found[name] = found.get(name, 0) + sign * metric_series(specs[name], samples, counting)


def _without(messages: dict[bool, Built], classic: bool) -> dict[bool, Built]:
    return {kind: built for kind, built in messages.items() if kind is not classic}


def _by_metric(by_chunk: list[Lines]) -> dict[str, list[str]]:
    """Each metric's lines, the chunks' one after another."""
    pieces: defaultdict[str, list[str]] = defaultdict(list)
    for names, found in by_chunk:
        for name, piece in zip(names, found, strict=True):
            pieces[name].append(piece)
    return pieces


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
