"""A collector's samples one chunk a queue, the same object again while what a queue's
samples are made of has not changed (see samples.Chunks): at 10,000 queues a run then
makes the samples of the few hundred queues whose rows moved, not 350,000."""

from __future__ import annotations

import operator
from collections.abc import Callable, Iterable, Sequence
from itertools import compress, count
from typing import Any

from pgq_exporter.samples import AnySample, Chunk

Make = Callable[[str, Any], Iterable[AnySample]]


class QueueChunks:
    """Each queue's chunk at the collector's last run, and what it was made from."""

    __slots__ = ("_chunks", "_inputs", "_queues")

    def __init__(self) -> None:
        self._queues: list[str] = []
        self._inputs: Sequence[object] = []
        self._chunks: list[Chunk] = []

    def of(self, queues: list[str], inputs: Sequence[object], make: Make) -> list[Chunk]:
        """Each queue's chunk, ``make(queue, inputs[i])`` for queue i: the last run's
        while its inputs (compared by value) are the same. Where the queues are those of
        the last run, in its order (most runs), they are compared place by place, a
        comparison each: 10,000 queues' inputs in about a millisecond."""
        last = self._inputs
        if queues == self._queues:
            chunks = self._chunks.copy()
            if len(inputs) != len(last):
                raise ValueError("an input for each queue")
            changed = list(compress(count(), map(operator.ne, inputs, last)))
            for i in changed:
                chunks[i] = tuple(make(queues[i], inputs[i]))
        else:
            before = dict(zip(self._queues, zip(last, self._chunks, strict=True), strict=True))
            chunks = []
            for queue, found in zip(queues, inputs, strict=True):
                kept = before.get(queue)
                if kept is not None and kept[0] == found:
                    chunks.append(kept[1])
                else:
                    chunks.append(tuple(make(queue, found)))
        self._queues, self._inputs, self._chunks = list(queues), inputs, chunks
        return chunks
