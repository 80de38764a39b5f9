"""True histograms of processing and wait time, and completed/failed counters.

Exactly once per finished job, from the feed of finished jobs (finished_feed.py for
the reference queue, library_feed.py for a library preset), which this collector
reads on every run. What the feed cannot know (a library that records no start, or
deletes its done jobs) is not served. On the reference schema (version 7 on) the
completed and failed totals are the database's own (queue_counts), which count the
jobs that finished while no exporter ran; elsewhere they count what this process saw.
There (version 12 on) the jobs that arrived are the database's count too; for a library
that numbers each queue's jobs from a sequence of its own (pgmq), the sequence's.
"""

from __future__ import annotations

from pgq_exporter.catalogue import JOB_HISTOGRAMS
from pgq_exporter.collectors.base import Collector, Conn, Context
from pgq_exporter.collectors.chunking import QueueChunks
from pgq_exporter.collectors.finished import Outcomes, QueueStats, stats_samples
from pgq_exporter.collectors.kept import (
    COMPLETED_TOTAL,
    ENQUEUED_TOTAL,
    FAILED_TOTAL,
    kept_by_queue,
)
from pgq_exporter.config import SchemaMapping
from pgq_exporter.pg.queue_names import QueueNames
from pgq_exporter.samples import AnySample, Chunks, Sample, queue_labels


class JobHistograms(Collector):
    name = JOB_HISTOGRAMS
    reads_feed = True

    def __init__(self, kept_in: SchemaMapping | None = None) -> None:
        # The reference schema whose totals the database keeps; None: this process's own.
        self.kept_in = kept_in
        self._chunks = QueueChunks()

    def collect(self, conn: Conn, ctx: Context) -> Chunks:
        known = ctx.known_queues(conn)
        ctx.read_feed(conn)
        stats = ctx.feed.jobs.stats
        kept, arrived = _kept_totals(conn, ctx, self.kept_in) if self.kept_in else (None, None)
        if arrived is None:
            arrived = ctx.source.arrivals(conn, known)
        queues = _queues(known, stats, kept)
        every_queue = bool(self.kept_in)  # its arrivals count every queue, 0 where none
        blank, outcomes = ctx.feed.jobs.blank, ctx.outcomes
        # Every job a queue's stats count changes its completed or failed count; the
        # stats are compared by identity first (the same object: no field compared).
        # Plain tuples (see _samples), made in one comprehension: 10,000 queues' took
        # 12 ms a run as a loop of named tuples.
        seen = [
            (
                found := stats.get(queue, blank),
                found.completed,
                found.failed,
                None if kept is None else kept.get(queue, _NONE_FINISHED),
                outcomes,
                float(arrived.get(queue, 0))
                if arrived is not None and (every_queue or queue in arrived)
                else None,
            )
            for queue in queues
        ]
        return Chunks(self._chunks.of(queues, seen, _samples))


_NONE_FINISHED = (0, 0)
# A queue's inputs: its stats, their completed and failed counts, its kept totals, what
# the feed knows of each job, and the jobs that arrived.
_Seen = tuple[QueueStats, int, int, tuple[int, int] | None, Outcomes, float | None]


def _queues(known: QueueNames, stats: dict[str, QueueStats], kept: Totals | None) -> list[str]:
    """The queues known, and those of the feed's stats and the kept totals (which are
    nearly always known): sorted again only when there are others."""
    others = (stats.keys() - known.as_set) | ((kept or {}).keys() - known.as_set)
    return sorted({*known, *others}) if others else known


def _samples(queue: str, seen: _Seen) -> list[AnySample]:
    stats, _, _, totals, outcomes, enqueued = seen
    samples = stats_samples(queue, stats, outcomes, totals)
    if enqueued is not None:
        samples.append(Sample("pgq_jobs_enqueued_total", queue_labels(queue), enqueued))
    return samples


Totals = dict[str, tuple[int, int]]


def _kept_totals(
    conn: Conn, ctx: Context, mapping: SchemaMapping
) -> tuple[Totals | None, dict[str, int] | None]:
    """Per queue, the jobs that entered done and failed, and those inserted, as the
    reference schema keeps them (read once a run: see kept.py); None for what it keeps
    not (the finished totals before version 7, the inserted before version 12)."""
    kept = kept_by_queue(conn, ctx, mapping)
    if kept is None or not kept.totals:
        return None, None
    rows = kept.rows
    totals = {queue: (row[COMPLETED_TOTAL], row[FAILED_TOTAL]) for queue, row in rows.items()}
    if not kept.arrived:
        return totals, None
    return totals, {queue: row[ENQUEUED_TOTAL] for queue, row in rows.items()}
