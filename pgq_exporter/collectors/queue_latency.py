"""Age of the oldest ready job per queue, the best single backlog signal; and the ready
jobs past each wait threshold, counted only where the oldest is past it.

Late jobs are counted through the pending index up to LOOK. Past it, on the reference
schema with its kept counts and delayed jobs by tick (version 8 on), they are counted
from the other side of the threshold: the kept pending jobs less the delayed and the
recent ones, which stay few while a queue nobody works piles up late jobs (a count of
1M late jobs read 1M index entries a cycle, twice). Elsewhere the first count goes on
up to exact_count_limit.
"""

from __future__ import annotations

from pgq_exporter.catalogue import QUEUE_LATENCY
from pgq_exporter.collectors.base import Collector, Conn, Context, fetch
from pgq_exporter.collectors.chunking import QueueChunks
from pgq_exporter.collectors.counting import FIRST_LOOK as LOOK
from pgq_exporter.collectors.rendering import kept_tables
from pgq_exporter.config import SchemaMapping
from pgq_exporter.histograms import threshold_text
from pgq_exporter.samples import AnySample, Chunk, Chunks, Sample

Key = tuple[str, float]


class QueueLatency(Collector):
    name = QUEUE_LATENCY

    def __init__(self, mapping: SchemaMapping) -> None:
        self.mapping = mapping
        # Apart: a queue's age changes as the clock runs, its late jobs seldom.
        self._ages = QueueChunks()
        self._late_chunks = QueueChunks()

    def collect(self, conn: Conn, ctx: Context) -> Chunks:
        params = {"queues": ctx.known_queues(conn)}
        ages = {
            queue: max(float(age), 0.0)
            for queue, age in fetch(conn, "oldest_ready", ctx, params, self.mapping)
        }
        # One chunk for all: a queue's age changes whenever it has a ready job.
        found = tuple(ages.items())
        return Chunks(self._ages.of([""], [found], _ages) + self._late(conn, ctx, ages))

    def _late(self, conn: Conn, ctx: Context, ages: dict[str, float]) -> list[Chunk]:
        thresholds = ctx.config.histograms.wait_thresholds
        if not thresholds:
            return []
        late: dict[Key, int] = {(queue, t): 0 for queue in ages for t in thresholds}
        past = [queue for queue, age in ages.items() if age > thresholds[0]]
        if past:
            kept = all(kept_tables(conn, self.mapping))
            limit = ctx.config.exact_count_limit
            look = min(LOOK, limit) if kept else limit
            first = self._count(conn, ctx, past, thresholds, look)
            late.update(first)
            many = sorted({queue for (queue, _), n in first.items() if n >= look})
            if kept and many:
                late.update(self._from_the_other_side(conn, ctx, many, thresholds))
        queues = list(ages)
        counts = [(thresholds, tuple(late[(queue, t)] for t in thresholds)) for queue in queues]
        return self._late_chunks.of(queues, counts, _late_samples)

    def _count(self, conn: Conn, ctx: Context, queues: list[str], thresholds: tuple[float, ...],
               cap: int) -> dict[Key, int]:  # fmt: skip
        params = {"queues": queues, "thresholds": list(thresholds), "cap": cap}
        rows = fetch(conn, "late_ready", ctx, params, self.mapping)
        return {(queue, float(seconds)): int(n) for queue, seconds, n in rows}

    def _from_the_other_side(self, conn: Conn, ctx: Context, queues: list[str],
                             thresholds: tuple[float, ...]) -> dict[Key, int]:  # fmt: skip
        params = {"queues": queues, "thresholds": list(thresholds),
                  "cap": ctx.config.exact_count_limit}  # fmt: skip
        rows = fetch(conn, "not_late_kept", ctx, params, self.mapping)
        return {
            (queue, float(seconds)): max(int(pending) - int(later) - int(recent), 0)
            for queue, seconds, pending, later, recent in rows
        }


def _ages(_: str, ages: tuple[tuple[str, float], ...]) -> list[AnySample]:
    return [Sample("pgq_queue_oldest_ready_age_seconds", (queue,), age) for queue, age in ages]


def _late_samples(queue: str, found: tuple[tuple[float, ...], tuple[int, ...]]) -> list[AnySample]:
    thresholds, counts = found
    return [
        Sample("pgq_queue_late_ready_jobs", (queue, threshold_text(t)), float(n))
        for t, n in zip(thresholds, counts, strict=True)
    ]
