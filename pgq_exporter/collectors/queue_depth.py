"""Jobs by queue and status, zero-filled for every known queue.

On the reference schema (version 3 on), pending, processing, done and failed
come from its queue_counts table, which the schema's triggers keep exact in
every snapshot: the cost does not depend on the number of jobs. Delayed jobs, which
turn ready as the clock passes, are kept by ten-second tick of scheduled_at (version 8
on): the ticks after now()'s are summed, and the rest of the current tick counted
through the pending index; before version 8 they are counted there whole, exact up to
exact_count_limit and estimated from a sample of the table above it. Elsewhere each
count is exact up to 10,000 (or exact_count_limit, if lower), read from the partial
indexes, and above it served from the last exact recount (see counting.py).
``pgq_queue_count_approximate`` says which values are estimates.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from itertools import repeat
from typing import NamedTuple

from pgq_exporter.catalogue import QUEUE_DEPTH
from pgq_exporter.collectors.base import (
    Collector,
    Conn,
    Context,
    Row,
    fetch,
    kept_in_run,
)
from pgq_exporter.collectors.chunking import QueueChunks
from pgq_exporter.collectors.counting import (
    CappedCounts,
    Count,
    Key,
    SampledCounts,
    by_key,
    count_cap,
    exact,
    table_changes,
)
from pgq_exporter.collectors.kept import (
    DONE,
    FAILED,
    PENDING,
    PROCESSING,
    KeptByQueue,
    few_a_queue,
    kept_by_queue,
)
from pgq_exporter.config import SchemaMapping
from pgq_exporter.samples import AnySample, Chunks, Sample, count_value, queue_labels

# The columns of capped_counts, after the queue.
COUNTED = ("pending", "delayed", "processing", "done", "failed")
UNFINISHED = ("pending", "delayed", "processing")
STATUSES = ("pending", "processing", "done", "failed")

# Pending jobs a queue, on average, up to which the current tick's delayed jobs are
# counted in one pass of the pending index rather than a probe a queue: the pass reads
# an entry in about a hundredth of the time a probe takes (delayed_by_tick).
READ_WHOLE_PER_QUEUE = 50


class QueueDepth(Collector):
    name = QUEUE_DEPTH

    def __init__(self, mapping: SchemaMapping) -> None:
        self.mapping = mapping
        self._counts = CappedCounts(UNFINISHED)
        # Apart: the counts change with every job, their approximate marks seldom.
        self._chunks = QueueChunks()
        self._marks = QueueChunks()

    def collect(self, conn: Conn, ctx: Context) -> Chunks:
        mapping = self.mapping
        queues = ctx.known_queues(conn)
        kept = kept_by_queue(conn, ctx, mapping)
        found: list[Found]
        if kept is not None and kept_in_run(conn, ctx, mapping)[1]:
            found = _by_tick(conn, ctx, mapping, queues, kept)
        else:
            counts = self._counted(conn, ctx, queues, kept)
            found = [Counts(tuple(counts[(queue, s)] for s in COUNTED)) for queue in queues]
        if Counts in map(type, found):
            marks = [_approximate(f.counts) if isinstance(f, Counts) else _EXACT for f in found]
        else:  # all exact, as kept (most runs): no queue's looked at
            marks = [_EXACT] * len(found)
        return Chunks(self._chunks.of(queues, found, _samples)
                      + self._marks.of(queues, marks, _marks))  # fmt: skip

    def _counted(
        self, conn: Conn, ctx: Context, queues: list[str], kept: KeptByQueue | None
    ) -> dict[Key, Count]:
        mapping = self.mapping
        if kept is not None:
            return _kept(conn, ctx, mapping, queues, kept)

        def count(caps: Mapping[str, int | None]) -> dict[Key, int]:
            params = {"queues": queues, **{f"{s}_cap": caps[s] for s in COUNTED}}
            return by_key(fetch(conn, "capped_counts", ctx, params, mapping), COUNTED)

        changes = table_changes(conn, ctx)
        return self._counts.collect(conn, queues, COUNTED, cap=count_cap(ctx),
                                    changes=changes, count=count)  # fmt: skip


class Counts(NamedTuple):
    """A queue's counts in the order of COUNTED, where one may be an estimate."""

    counts: tuple[Count, ...]


class WithDelayed(NamedTuple):
    """A queue's kept counts as read, and its delayed jobs: later ticks', the current's."""

    counts: Row
    later: int
    now: int


# A queue's kept counts as read (it has no delayed job), or with its delayed jobs, all
# exact; or its counts, where one may be an estimate.
Found = Row | WithDelayed | Counts
# The kept counts of a known queue the table holds no row of (see kept.py's columns).
_NO_JOBS: Row = ("", False, 0, 0, 0, 0, 0, 0, 0)


def _kept(
    conn: Conn, ctx: Context, mapping: SchemaMapping, queues: list[str], kept: KeptByQueue
) -> dict[Key, Count]:
    """The reference schema's kept counts, exact; delayed, which it does not keep before
    version 8, exact up to exact_count_limit and estimated from a sample of the table
    above it."""
    params = {"cap": ctx.config.exact_count_limit + 1, "queues": queues}
    sampled = SampledCounts(conn, ctx, mapping)
    delayed: dict[str, int] = dict(fetch(conn, "delayed_probed", ctx, params, mapping))
    rows = [(queue, row[PENDING], delayed[queue], row[PROCESSING], row[DONE], row[FAILED])
            for queue in queues for row in [kept.rows.get(queue, _NO_JOBS)]]  # fmt: skip
    return {
        (queue, status): sampled.bounded(queue, status, n) if status == "delayed" else exact(n)
        for (queue, status), n in by_key(rows, COUNTED).items()
    }


def _by_tick(
    conn: Conn, ctx: Context, mapping: SchemaMapping, queues: list[str], kept: KeptByQueue
) -> list[Found]:
    """The kept counts, and the delayed jobs as the ticks after now()'s keep them plus
    the rest of the current tick: each queue's rows as read, its counts all exact,
    unless that rest passes exact_count_limit."""
    limit = ctx.config.exact_count_limit
    one_pass = few_a_queue(
        conn, ctx, mapping, "pending", per_queue=READ_WHOLE_PER_QUEUE, queues=len(queues)
    )
    params = {"cap": limit + 1, "queues": queues, "one_pass": one_pass}
    # Each queue's kept row, looked up in C; then those of the few with delayed jobs.
    found: list[Found] = list(map(kept.rows.get, queues, repeat(_NO_JOBS)))
    delayed = fetch(conn, "delayed_by_tick", ctx, params, mapping)
    if not delayed:
        return found
    place = dict(zip(queues, range(len(queues)), strict=True))
    sampled = SampledCounts(conn, ctx, mapping)
    for queue, later, now in delayed:
        i, counts = place[queue], kept.rows.get(queue, _NO_JOBS)
        if now <= limit:  # the rest of the current tick, counted whole
            found[i] = WithDelayed(counts, later, now)
        else:
            found[i] = Counts((exact(counts[PENDING]),
                               sampled.bounded(queue, "delayed", later + now),
                               exact(counts[PROCESSING]), exact(counts[DONE]),
                               exact(counts[FAILED])))  # fmt: skip
    return found


# The order of _labels' tuples: pgq_queue_jobs's statuses, then the approximate marks'.
APPROXIMATE = ("pending", "ready", "delayed", "processing", "done", "failed")


# Past this many queues the oldest go: names an application wrote (up to 1 KB each, as
# tracked) are kept for as long as they stay in the cache, 16 MB at most.
@functools.lru_cache(maxsize=1 << 14)
def _labels(queue: str) -> tuple[tuple[str, ...], ...]:
    """A queue's label tuples, made once: 10,000 queues made 130,000 of them a cycle. A
    status's tuple is one object for the jobs and the mark."""
    by_status = {status: (queue, status) for status in (*STATUSES, *APPROXIMATE)}
    return (
        *(by_status[s] for s in STATUSES),
        queue_labels(queue),
        *(by_status[s] for s in APPROXIMATE),
    )


def _samples(queue: str, found: Found) -> list[AnySample]:
    """A queue's kept counts, with its delayed jobs or none, all exact; or its counts."""
    if isinstance(found, Counts):
        pending, delayed, processing, done, failed = (c.value for c in found.counts)
    elif isinstance(found, WithDelayed):
        pending, processing, done, failed = found.counts[PENDING : FAILED + 1]
        delayed = found.later + found.now
    else:
        pending, processing, done, failed = found[PENDING : FAILED + 1]
        delayed = 0
    delayed = min(delayed, pending)
    (l_pending, l_processing, l_done, l_failed, l_queue) = _labels(queue)[:5]
    return [
        Sample("pgq_queue_jobs", l_pending, pending),
        Sample("pgq_queue_jobs", l_processing, processing),
        Sample("pgq_queue_jobs", l_done, done),
        Sample("pgq_queue_jobs", l_failed, failed),
        Sample("pgq_queue_ready_jobs", l_queue, pending - delayed),
        Sample("pgq_queue_delayed_jobs", l_queue, delayed),
    ]


def _approximate(counts: tuple[Count, ...]) -> tuple[bool, ...]:
    """Which of APPROXIMATE are estimates, for ``counts`` in the order of COUNTED."""
    pending, delayed, processing, done, failed = counts
    ready = pending.approximate or delayed.approximate
    return (pending.approximate, ready, delayed.approximate, processing.approximate,
            done.approximate, failed.approximate)  # fmt: skip


_EXACT = (False,) * len(APPROXIMATE)


def _marks(queue: str, approximate: tuple[bool, ...]) -> list[AnySample]:
    return [
        Sample("pgq_queue_count_approximate", labels, count_value(mark))
        for labels, mark in zip(_labels(queue)[5:], approximate, strict=True)
    ]
