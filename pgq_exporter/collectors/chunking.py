"""A collector's samples one chunk a queue, the same object again while what a queue's
samples are made of has not changed (see samples.Chunks): at 10,000 queues a run then
makes the samples of the few hundred queues whose rows moved, not 350,000."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from pgq_exporter.samples import AnySample, Chunk, Chunks


class QueueChunks:
    """Each queue's chunk at the collector's last run, and what it was made from."""

    __slots__ = ("_last",)

    def __init__(self) -> None:
        self._last: dict[str, tuple[object, Chunk]] = {}

    def run(self) -> ChunkRun:
        """A new run; what it hands over becomes the last run's."""
        return ChunkRun(self)


class ChunkRun:
    __slots__ = ("_made", "_owner")

    def __init__(self, owner: QueueChunks) -> None:
        self._owner = owner
        self._made: dict[str, tuple[object, Chunk]] = {}

    def add(
        self, queue: str, inputs: object, make: Callable[..., Iterable[AnySample]], *args: Any
    ) -> None:
        """``queue``'s chunk: the last run's while ``inputs`` (what ``make(*args)`` makes
        it from, compared by value) are the same, else made."""
        last = self._owner._last.get(queue)
        if last is None or last[0] != inputs:
            last = (inputs, tuple(make(*args)))
        self._made[queue] = last

    def keys(self) -> Iterable[str]:
        """The queues added so far."""
        return self._made.keys()

    def handed(self) -> Chunks:
        """The chunks of this run, in the order added."""
        self._owner._last = self._made
        return Chunks([chunk for _, chunk in self._made.values()])
