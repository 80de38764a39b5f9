"""Age of the oldest ready job per queue, the best single backlog signal; and the ready
jobs past each wait threshold, counted only where the oldest is past it.

Late jobs are counted through the pending index up to LOOK. Past it, on the reference
schema with its kept counts and delayed jobs by tick (version 8 on), they are counted
from the other side of the threshold: the kept pending jobs less the delayed and the
recent ones, which stay few while a queue nobody works piles up late jobs (a count of
1M late jobs read 1M index entries a cycle, twice). Elsewhere the first count goes on
up to exact_count_limit.

Where the kept counts hold few pending jobs a queue (at most READ_WHOLE_PER_QUEUE
on average), every queue's ready jobs are read in one pass of the pending index
instead: a thousand tenants' queues of a few jobs each cost one ordered read, not two
probes a queue (10,000 queues of ten jobs: 45.9 ms against 66.6).
"""

from __future__ import annotations

from functools import partial
from itertools import repeat

from pgq_exporter.catalogue import QUEUE_LATENCY
from pgq_exporter.collectors.base import Collector, Conn, Context, fetch, kept_in_run
from pgq_exporter.collectors.chunking import QueueChunks
from pgq_exporter.collectors.counting import FIRST_LOOK as LOOK
from pgq_exporter.collectors.kept import few_a_queue
from pgq_exporter.collectors.rendering import Row
from pgq_exporter.config import SchemaMapping
from pgq_exporter.histograms import seconds_text
from pgq_exporter.samples import AnySample, Chunk, Chunks, Sample, count_value, queue_labels

# Each queue's ready jobs past each wait threshold, in the thresholds' order.
Late = dict[str, list[int]]

# Pending jobs a queue, on average, up to which one pass of the pending index is read
# rather than a probe a queue: a pass reads an entry in about a fifteenth of the time
# a queue's probes take (docs/benchmarks.md, "Queues: from 10 to 10,000 on one exporter").
READ_WHOLE_PER_QUEUE = 16


class QueueLatency(Collector):
    name = QUEUE_LATENCY

    def __init__(self, mapping: SchemaMapping) -> None:
        self.mapping = mapping
        # Apart: a queue's age changes as the clock runs, its late jobs seldom.
        self._ages = QueueChunks()
        self._late_chunks = QueueChunks()
        self._thresholds: tuple[float, ...] = ()  # those of the late chunks

    def collect(self, conn: Conn, ctx: Context) -> Chunks:
        thresholds = ctx.config.histograms.wait_thresholds
        counts, by_tick = kept_in_run(conn, ctx, self.mapping)
        kept = bool(thresholds) and counts and by_tick
        limit = ctx.config.exact_count_limit
        look = min(LOOK, limit) if kept else limit
        queues = ctx.known_queues(conn)
        params = {"queues": queues, "thresholds": list(thresholds), "cap": look,
                  "first": min(thresholds, default=None)}  # fmt: skip
        ages: dict[str, float] = {}
        late: Late = {}
        if few_a_queue(
            conn, ctx, self.mapping, "pending", per_queue=READ_WHOLE_PER_QUEUE, queues=len(queues)
        ):
            ages = dict.fromkeys(queues, 0.0)
            rows = fetch(conn, "ready_in_one_pass", ctx, params, self.mapping)
            _take(rows, ages, late, known_only=True)
            return self._chunks(ages, late, thresholds)
        rows = fetch(conn, "oldest_ready_late", ctx, params, self.mapping)
        _take(rows, ages, late)
        many = [queue for queue, found in late.items() if found and max(found) >= look]
        if kept and many:
            self._from_the_other_side(conn, ctx, many, thresholds, late)
        return self._chunks(ages, late, thresholds)

    def _chunks(self, ages: dict[str, float], late: Late, thresholds: tuple[float, ...]) -> Chunks:
        # One chunk for all: a queue's age changes whenever it has a ready job.
        chunks = self._ages.of([""], [ages], _ages)
        return Chunks(chunks + self._late(ages, late, thresholds) if thresholds else chunks)

    def _late(
        self, ages: dict[str, float], late: Late, thresholds: tuple[float, ...]
    ) -> list[Chunk]:
        if thresholds != self._thresholds:  # a queue's input is its counts alone
            self._late_chunks, self._thresholds = QueueChunks(), thresholds
        # Each queue's counts as read (0 past every threshold where it has no ready job),
        # looked up in C: 10,000 queues in 0.27 ms, where a tuple made for each with its
        # thresholds took 0.70 and twice as long to compare.
        counts = list(map(late.get, ages, repeat([0] * len(thresholds))))
        return self._late_chunks.of(list(ages), counts, partial(_late_samples, thresholds))

    def _from_the_other_side(self, conn: Conn, ctx: Context, queues: list[str],
                             thresholds: tuple[float, ...], late: Late) -> None:  # fmt: skip
        """Each threshold's late jobs of ``queues``, counted from the recent side."""
        params = {"queues": queues, "thresholds": list(thresholds),
                  "cap": ctx.config.exact_count_limit}  # fmt: skip
        place = {seconds: i for i, seconds in enumerate(thresholds)}
        for queue, seconds, pending, later, recent in fetch(
            conn, "not_late_kept", ctx, params, self.mapping
        ):
            late[queue][place[seconds]] = max(int(pending) - int(later) - int(recent), 0)


def _take(rows: list[Row], ages: dict[str, float], late: Late, *, known_only: bool = False) -> None:
    """Each queue's age and late counts from oldest_ready_late's rows, or from
    ready_in_one_pass's (``known_only``: the queues ``ages`` holds already, as every
    queue's are read)."""
    for queue, age, counts in rows:  # a float8 and a bigint[]: as they come
        if known_only and queue not in ages:
            continue
        ages[queue] = age
        late[queue] = counts


def _ages(_: str, ages: dict[str, float]) -> list[AnySample]:
    return [
        Sample("pgq_queue_oldest_ready_age_seconds", queue_labels(queue), age)
        for queue, age in ages.items()
    ]


def _late_samples(thresholds: tuple[float, ...], queue: str, counts: list[int]) -> list[AnySample]:
    return [
        Sample("pgq_queue_late_ready_jobs", (queue, seconds_text(t)), count_value(n))
        for t, n in zip(thresholds, counts, strict=True)
    ]
