"""What a collection yields: one value (a gauge or counter sample) or one histogram,
for a metric of the catalogue or of a custom collector."""

from __future__ import annotations

import functools
import itertools
import operator
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import NamedTuple, TypeVar, cast, overload

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


# Samples from one collector that change together (most often one queue's), in the order
# served.
Chunk = tuple[AnySample, ...]


class Chunks(Sequence[AnySample]):
    """A collector's samples in chunks, most often one a queue. A chunk handed over
    again, the same object, is known unchanged: what the stages after the collector made
    of it (its label values bounded, its protobuf entries, its text lines) is used again
    rather than made again, which at 10,000 queues is most of a run's work. Two chunks
    never hold a sample of one label set."""

    __slots__ = ("chunks",)

    def __init__(self, chunks: list[Chunk]) -> None:
        self.chunks = chunks

    def __iter__(self) -> Iterator[AnySample]:
        return itertools.chain.from_iterable(self.chunks)

    def __len__(self) -> int:
        return sum(map(len, self.chunks))

    @overload
    def __getitem__(self, index: int) -> AnySample: ...
    @overload
    def __getitem__(self, index: slice) -> list[AnySample]: ...
    def __getitem__(self, index: int | slice) -> AnySample | list[AnySample]:
        return list(self)[index]

    def __repr__(self) -> str:
        return f"Chunks({self.chunks!r})"


def chunks_of(samples: Iterable[AnySample]) -> list[Chunk]:
    """``samples`` in chunks: a collector's own, or all in one, new each time."""
    if isinstance(samples, Chunks):
        return samples.chunks
    whole = tuple(samples)
    return [whole] if whole else []


# Past this many queues the least recently asked for go (a gone queue's name, up to
# 1 KB as tracked, is kept for as long as it stays in the cache).
@functools.lru_cache(maxsize=1 << 15)
def queue_labels(queue: str) -> tuple[str]:
    """The labels of a queue's samples that have no other: one tuple for every
    collector's, where each made its own (10,000 queues held 130,000 of them)."""
    return (queue,)


# Most values are small counts, 0 above all (244,000 of 316,000 at 10,000 queues), and
# float() makes an object for each: the counts below this are one object each.
_SHARED_COUNTS = tuple(map(float, range(1024)))


def count_value(n: int) -> float:
    """A count (or a bool) as a sample's value."""
    return _SHARED_COUNTS[n] if 0 <= n < len(_SHARED_COUNTS) else float(n)


R = TypeVar("R")


def same_objects(before: Sequence[object], now: Sequence[object]) -> bool:
    """Whether ``now`` holds the very objects ``before`` did, in the same order."""
    return len(before) == len(now) and all(map(operator.is_, before, now))


def matched(
    chunks: list[Chunk],
    last: list[R],
    chunk_of: Callable[[R], Chunk | None] | None,
    nothing: R,
) -> tuple[list[R], list[int]]:
    """What a stage made of each chunk at the last run (``last``, each made of the chunk
    ``chunk_of`` gives, or of none; None: each is that chunk), for the chunks handed
    over again; ``nothing`` for the others. Where the chunks are as many as the last
    run's (most runs), each is compared with the one in its place, by identity: 70,000
    in a pass of a list comprehension. Those not in their place are looked up by
    identity (the last run's chunks are alive: ``last`` holds them): among those of
    the changed places where the chunks are as many (a chunk that moved left one of
    them), else among all. Also the places whose record is not the one ``last`` had
    there."""
    of = cast("Callable[[R], Chunk | None]", chunk_of or _itself)
    same_length = len(chunks) == len(last)
    made = last.copy() if same_length else [nothing] * len(chunks)
    # Compared in C, a place at a time (map, compress): a comprehension's bytecode for
    # each place took 1.6 times as long.
    flags = map(operator.is_not, made if chunk_of is None else map(chunk_of, made), chunks)
    changed = list(itertools.compress(itertools.count(), flags))
    if changed:
        moved = [last[i] for i in changed] if same_length else last
        by_identity = {id(of(found)): found for found in moved}
        for i in changed:
            found = by_identity.get(id(chunks[i]), nothing)
            made[i] = found if of(found) is chunks[i] else nothing
    return made, changed


def _itself(found: object) -> object:
    return found
