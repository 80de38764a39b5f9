"""A target's series within limits.series, as each format counts them: its own series
(``reserved``) and its collectors' own always served, the rest fitted into what they
leave. Past the limit, in this order, each step only as far as needed: the per-queue
histograms' classic buckets are merged (two into one, then four, ...), then the
histograms of the queues that finished the fewest jobs are folded into one
``queue="other"``, then whole metrics are left out from the last collector on. Each
step is exact for what it serves, and what it left out is counted.

Fitting runs at every render while a target is past its limit, so it works from what
the parts keep: each chunk's histograms, each part's series by metric (kept from one
part to the next), and, in a ``Remade``, what it made of each chunk at the last render
(a chunk that did not change is served as the same object, its protobuf entries
kept)."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field, replace

from pgq_exporter.catalogue import EXPORTER, MetricSpec, MetricType
from pgq_exporter.exposition import Part
from pgq_exporter.exposition.chunk import ChunkMade
from pgq_exporter.exposition.fitting import (
    OTHER_QUEUE,
    Counting,
    folded,
    merged_buckets,
    series_of,
)
from pgq_exporter.samples import AnySample, HistogramSample, same_objects

# Classic buckets are merged no further than this many bounds left.
MIN_CLASSIC_BOUNDS = 4

# Where a histogram folded into queue="other" goes: its metric, the queue label's
# place, and the labels beside it.
OtherKey = tuple[str, int, tuple[str, ...]]


@dataclass(frozen=True, slots=True)
class Fitted:
    """The parts as served, and what fitting them took."""

    parts: list[Part]
    merged: int = 1  # classic buckets merged into one
    folded: int = 0  # queues whose histograms are in queue="other"
    dropped: int = 0  # series left out


@dataclass(frozen=True, slots=True)
class _Plan:
    """How a fit serves the queue histograms: where each metric holds the queue, as
    which format counts series, ``every`` classic buckets merged into one, and the
    queues folded into queue="other"."""

    places: dict[str, int]
    counting: Counting
    every: int = 1
    gone: frozenset[str] = frozenset()


@dataclass(frozen=True, slots=True)
class _ChunkRemade:
    """What fitting made of a chunk: the chunk as served, and its histograms that go
    into queue="other"; for ``every`` and the queues ``gone`` it was made for."""

    source: ChunkMade
    every: int
    gone: tuple[bool, ...]  # for each of its queues
    made: ChunkMade
    out: tuple[tuple[OtherKey, HistogramSample], ...]
    series: tuple[tuple[str, int], ...]  # its queue histograms' as served, by metric

    def made_of(self, source: ChunkMade, every: int, gone: tuple[bool, ...]) -> bool:
        return self.source is source and self.every == every and self.gone == gone


@dataclass(frozen=True, slots=True)
class _Found:
    """A part's per-queue histograms, by chunk (those of its chunks that have some,
    with their queues), and how many of them have each number of finite bounds."""

    chunks: list[tuple[ChunkMade, tuple[HistogramSample, ...], tuple[str, ...]]]
    bounds: Counter[int]


@dataclass(frozen=True, slots=True)
class _Order:
    """The order queues are folded in (those that finished the fewest jobs first), and
    with ``every`` buckets merged: each queue's histogram series, all of theirs, and
    those of the histograms of queue="other" (one per metric and labels beside)."""

    queues: list[str]
    series: dict[str, int]
    total: int
    others: int


@dataclass(frozen=True, slots=True)
class _PartRemade:
    """A part as a fit served it (``made``), and its series by metric; for ``every``
    and the queues ``gone`` it was made for, what it made of each chunk and its
    queue="other"."""

    source: Part
    every: int
    gone: frozenset[str]
    made: Part
    series: dict[str, int]
    chunks: dict[int, _ChunkRemade]
    other: tuple[tuple[_ChunkRemade, ...], ChunkMade] | None


@dataclass(slots=True)
class Remade:
    """What the last fit (of one counting) found and made, for the next: a part's
    histograms, the folding order, each part as served and each of its chunks, all
    kept while their sources are the same objects. Past the budget, a render after a
    collector with no histograms (most of them) fits in time of the parts, not of the
    queues."""

    counting: Counting | None = None
    found: dict[int, tuple[Part, _Found]] = field(default_factory=dict)  # by place
    order: tuple[tuple[Part, ...], int, _Order] | None = None
    parts: dict[int, _PartRemade] = field(default_factory=dict)


def fit(
    specs: dict[str, MetricSpec],
    parts: list[Part],
    limit: int,
    counting: Counting,
    *,
    reserved: int = 0,
    remade: Remade | None = None,
) -> Fitted:
    """``parts`` within ``limit`` series beside ``reserved`` others."""
    memo = remade if remade is not None else Remade()
    if memo.counting != counting:  # what it keeps was counted so
        memo.counting, memo.found, memo.order, memo.parts = counting, {}, None, {}
    total = reserved + sum(part.total(counting) for part in parts)
    if total <= limit:
        memo.found, memo.order, memo.parts = {}, None, {}
        return Fitted(parts)
    plan = _Plan(_queue_places(specs), counting)
    series = [part.series(counting) for part in parts]
    found = _found(specs, parts, series, plan.places, memo)
    bounds = sum((each.bounds for each in found), Counter[int]())
    rest = total - _histogram_series(bounds, counting, 1)
    plan = replace(plan, every=_merging(bounds, rest, limit, counting))
    order = _order(parts, found, plan, memo)
    plan = replace(plan, gone=_folding(order, rest, limit))
    if plan.every > 1 or plan.gone:
        parts, series = _remade(parts, series, found, plan, memo)
    else:
        memo.parts = {}
    kept, dropped = _dropping(specs, parts, series, limit - reserved)
    return Fitted(kept, plan.every, len(plan.gone), dropped)


def _found(
    specs: dict[str, MetricSpec],
    parts: list[Part],
    series: list[dict[str, int]],
    places: dict[str, int],
    memo: Remade,
) -> list[_Found]:
    """Each part's per-queue histograms: none where it has no such metric, the last
    fit's for a part it had, and for a part in the place of one it had, what it found
    of each chunk the two share."""
    kept: dict[int, tuple[Part, _Found]] = {}
    found = []
    for index, (part, by_metric) in enumerate(zip(parts, series, strict=True)):
        last = memo.found.get(index)
        if not places.keys() & by_metric.keys():
            last = (part, _NONE_FOUND)
        elif last is None or last[0] is not part:
            before = last[1] if last is not None else _NONE_FOUND
            last = (part, _part_histograms(specs, part, places, before))
        kept[index] = last
        found.append(last[1])
    memo.found = kept
    return found


def _queue_places(specs: dict[str, MetricSpec]) -> dict[str, int]:
    """Where each per-queue histogram's samples hold the queue (after the database,
    which samples leave out)."""
    return {
        name: spec.labels.index("queue") - (spec.labels[0] == "database")
        for name, spec in specs.items()
        if spec.type is MetricType.HISTOGRAM and "queue" in spec.labels
    }


def _part_histograms(
    specs: dict[str, MetricSpec], part: Part, places: dict[str, int], before: _Found
) -> _Found:
    """The part's chunks that hold per-queue histograms, with those histograms and
    their queues: as ``before`` found them for a chunk it had."""
    had = {id(entry[0]): entry for entry in before.chunks}
    chunks = []
    for made in part.made:
        entry = had.get(id(made))
        if entry is not None and entry[0] is made:
            chunks.append(entry)
            continue
        histograms = made.histograms(specs)
        if histograms:
            queue_ones = tuple(h for h in histograms if h.metric in places)
            if queue_ones:
                queues = tuple(dict.fromkeys(h.labels[places[h.metric]] for h in queue_ones))
                chunks.append((made, queue_ones, queues))
    return _Found(chunks, Counter(len(h.buckets) - 1 for _, its, _ in chunks for h in its))


_NONE_FOUND = _Found([], Counter())


def _merging(bounds: Counter[int], rest: int, limit: int, counting: Counting) -> int:
    """How many classic buckets to merge into one: the fewest that fit, as far as
    MIN_CLASSIC_BOUNDS allows. ``bounds``: how many histograms have each number of
    finite bounds."""
    every = 1
    if not counting.classic or not bounds:
        return every
    fewest = min(bounds)
    while (
        rest + _histogram_series(bounds, counting, every) > limit
        and fewest // (every * 2) >= MIN_CLASSIC_BOUNDS
    ):
        every *= 2
    return every


def _histogram_series(bounds: Counter[int], counting: Counting, every: int) -> int:
    """The series of histograms of ``bounds`` counted so, ``every`` buckets merged into
    one (as fitting.series_of counts each)."""
    native = sum(bounds.values()) * int(counting.native)
    if not counting.classic:
        return native
    return native + sum(n * (length // every + 3) for length, n in bounds.items())


def _order(parts: list[Part], found: list[_Found], plan: _Plan, memo: Remade) -> _Order:
    """The folding order: the last fit's while the parts with histograms are the same
    and merged alike."""
    holding = tuple(part for part, each in zip(parts, found, strict=True) if each.chunks)
    last = memo.order
    if last is not None and last[1] == plan.every and same_objects(last[0], holding):
        return last[2]
    jobs: dict[str, float] = {}
    series: dict[str, int] = {}
    others: dict[OtherKey, int] = {}
    total = 0
    for histogram in (h for each in found for _, its, _ in each.chunks for h in its):
        at = plan.places[histogram.metric]
        queue = histogram.labels[at]
        n = series_of(histogram, plan.counting, plan.every)
        total += n
        jobs[queue] = jobs.get(queue, 0.0) + histogram.buckets[-1][1]
        series[queue] = series.get(queue, 0) + n
        others.setdefault((histogram.metric, at, _without(histogram.labels, at)), n)
    queues = sorted(jobs, key=lambda queue: (queue != OTHER_QUEUE, jobs[queue], queue))
    order = _Order(queues, series, total, sum(others.values()))
    memo.order = (holding, plan.every, order)
    return order


def _folding(order: _Order, rest: int, limit: int) -> frozenset[str]:
    """The queues whose histograms go into queue="other": those that finished the
    fewest jobs, as many as it takes to fit (a queue named "other" among them)."""
    total = rest + order.total
    if total <= limit:
        return frozenset()
    total += order.others  # one "other" per metric and labels beside the queue
    gone: set[str] = set()
    for queue in order.queues:  # "other" first, if a queue is named so
        if total <= limit and queue != OTHER_QUEUE:
            break
        gone.add(queue)
        total -= order.series[queue]
    return frozenset(gone)


def _without(labels: tuple[str, ...], at: int) -> tuple[str, ...]:
    """The labels but the one at ``at``: a histogram's labels beside its queue."""
    return (*labels[:at], *labels[at + 1 :])


def _remade(
    parts: list[Part],
    series: list[dict[str, int]],
    found: list[_Found],
    plan: _Plan,
    memo: Remade,
) -> tuple[list[Part], list[dict[str, int]]]:
    """The parts with their queue histograms merged and folded, and their series by
    metric: a part as the last fit served it while it and the fit are the same; a
    chunk that neither touches as it was (what was made of it, its entries, kept), and
    one that did not change since the last fit as it was remade then."""
    kept: dict[int, _PartRemade] = {}
    served_parts, served_series = [], []
    for index, (part, by_metric, each) in enumerate(zip(parts, series, found, strict=True)):
        if not each.chunks:
            served_parts.append(part)
            served_series.append(by_metric)
            continue
        last = memo.parts.get(index)
        if (
            last is None
            or last.source is not part
            or last.every != plan.every
            or last.gone != plan.gone
        ):
            last = _part_remade(part, by_metric, each, plan, last)
        kept[index] = last
        served_parts.append(last.made)
        served_series.append(last.series)
    memo.parts = kept
    return served_parts, served_series


def _part_remade(
    part: Part, by_metric: dict[str, int], found: _Found, plan: _Plan, last: _PartRemade | None
) -> _PartRemade:
    """The part served with its queue histograms merged and folded; ``last``: what the
    last fit made of its part at this place."""
    places = plan.places
    chunks: dict[int, _ChunkRemade] = {}
    instead: dict[int, ChunkMade] = {}
    sources: list[_ChunkRemade] = []  # those with histograms going into queue="other"
    counted: dict[str, int] = {}
    for made, _, queues in found.chunks:
        flags = tuple(map(plan.gone.__contains__, queues))
        done = last.chunks.get(id(made)) if last is not None else None
        if done is None or not done.made_of(made, plan.every, flags):
            done = _chunk_remade(made, plan, flags)
        chunks[id(made)] = done
        instead[id(made)] = done.made
        if done.out:
            sources.append(done)
        for name, n in done.series:
            counted[name] = counted.get(name, 0) + n
    made_list = [instead.get(id(made), made) for made in part.made]
    other = None
    if sources:
        other = (tuple(sources), _other(last.other if last else None, sources))
        made_list.append(other[1])
        for name, group in other[1].grouped().items():
            counted[name] = counted.get(name, 0) + sum(series_of(h, plan.counting) for h in group)
    served = {name: counted.get(name, 0) if name in places else n
              for name, n in by_metric.items()}  # fmt: skip
    return _PartRemade(part, plan.every, plan.gone, part.remade(made_list), served, chunks, other)


def _chunk_remade(made: ChunkMade, plan: _Plan, flags: tuple[bool, ...]) -> _ChunkRemade:
    remade: dict[str, list[AnySample]] = {}
    out: list[tuple[OtherKey, HistogramSample]] = []
    series: dict[str, int] = {}
    changed = False
    for name, found in made.grouped().items():
        at = plan.places.get(name)
        kept = remade.setdefault(name, [])
        for sample in found:
            if at is None or not isinstance(sample, HistogramSample):
                kept.append(sample)
                continue
            merged = merged_buckets(sample, plan.every)
            changed = changed or merged is not sample
            if merged.labels[at] in plan.gone:
                out.append(((name, at, _without(merged.labels, at)), merged))
                changed = True
            else:
                kept.append(merged)
                series[name] = series.get(name, 0) + series_of(merged, plan.counting)
    served = ChunkMade(None, _served(remade)) if changed else made
    return _ChunkRemade(made, plan.every, flags, served, tuple(out), tuple(series.items()))


def _other(
    last: tuple[tuple[_ChunkRemade, ...], ChunkMade] | None, sources: list[_ChunkRemade]
) -> ChunkMade:
    """The part's queue="other" histograms, of those ``sources`` send there: the last
    fit's while what was made of the chunks folded into them is the same."""
    if last is not None and same_objects(last[0], sources):
        return last[1]
    into_other: dict[OtherKey, list[HistogramSample]] = {}
    for source in sources:
        for key, sample in source.out:
            into_other.setdefault(key, []).append(sample)
    other: dict[str, list[AnySample]] = {}
    for (name, at, _), group in into_other.items():
        other.setdefault(name, []).append(folded(group, at))
    return ChunkMade(None, other)


def _served(by_metric: dict[str, list[AnySample]]) -> dict[str, list[AnySample]]:
    return {name: samples for name, samples in by_metric.items() if samples}


def _dropping(
    specs: dict[str, MetricSpec], parts: list[Part], series: list[dict[str, int]], limit: int
) -> tuple[list[Part], int]:
    """Whole metrics left out past the limit, from the last part on; the exporter's own
    metrics of a collector are always kept, and counted first."""
    own = sum(n for found in series for name, n in found.items()
              if specs[name].collector == EXPORTER)  # fmt: skip
    left, dropped, kept_parts = limit - own, 0, []
    for part, found in zip(parts, series, strict=True):
        taken = []
        for name, n in found.items():
            if specs[name].collector == EXPORTER:
                taken.append(name)
            elif n <= left:
                taken.append(name)
                left -= n
            else:
                dropped += n
        kept_parts.append(part if len(taken) == len(found) else part.only(frozenset(taken)))
    return kept_parts, dropped
