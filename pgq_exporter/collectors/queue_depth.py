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

from pgq_exporter.catalogue import QUEUE_DEPTH
from pgq_exporter.collectors.base import Collector, Conn, Context, fetch
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
from pgq_exporter.collectors.rendering import kept_tables
from pgq_exporter.config import SchemaMapping
from pgq_exporter.samples import AnySample, Sample

# The columns of capped_counts and kept_counts, after the queue.
COUNTED = ("pending", "delayed", "processing", "done", "failed")
UNFINISHED = ("pending", "delayed", "processing")
STATUSES = ("pending", "processing", "done", "failed")


class QueueDepth(Collector):
    name = QUEUE_DEPTH

    def __init__(self, mapping: SchemaMapping) -> None:
        self.mapping = mapping
        self._counts = CappedCounts(UNFINISHED)

    def collect(self, conn: Conn, ctx: Context) -> list[AnySample]:
        mapping = self.mapping
        queues = ctx.known_queues(conn)
        kept, by_tick = kept_tables(conn, mapping)
        if kept:
            read = _by_tick if by_tick else _kept
            counts = read(conn, ctx, mapping, queues)
        else:

            def count(caps: Mapping[str, int | None]) -> dict[Key, int]:
                params = {"queues": queues, **{f"{s}_cap": caps[s] for s in COUNTED}}
                return by_key(fetch(conn, "capped_counts", ctx, params, mapping), COUNTED)

            changes = table_changes(conn, ctx)
            counts = self._counts.collect(conn, queues, COUNTED, cap=count_cap(ctx),
                                          changes=changes, count=count)  # fmt: skip
        samples: list[AnySample] = []
        for queue in queues:
            samples += _samples(queue, [counts[(queue, s)] for s in COUNTED])
        return samples


def _kept(conn: Conn, ctx: Context, mapping: SchemaMapping, queues: list[str]) -> dict[Key, Count]:
    """The reference schema's kept counts, exact; delayed, which it does not keep, exact
    up to exact_count_limit and estimated from a sample of the table above it."""
    params = {"cap": ctx.config.exact_count_limit + 1, "queues": queues}
    sampled = SampledCounts(conn, ctx, mapping)
    kept = fetch(conn, "kept_counts", ctx, params, mapping)
    return {
        (queue, status): sampled.bounded(queue, status, n) if status == "delayed" else exact(n)
        for (queue, status), n in by_key(kept, COUNTED).items()
    }


# The columns of kept_counts_by_tick, after the queue.
BY_TICK = ("pending", "delayed_later", "delayed_now", "processing", "done", "failed")


def _by_tick(
    conn: Conn, ctx: Context, mapping: SchemaMapping, queues: list[str]
) -> dict[Key, Count]:
    """The kept counts, and the delayed jobs as the ticks after now()'s keep them plus
    the rest of the current tick: exact, unless that rest passes exact_count_limit."""
    limit = ctx.config.exact_count_limit
    params = {"cap": limit + 1, "queues": queues}
    sampled = SampledCounts(conn, ctx, mapping)
    counts: dict[Key, Count] = {}
    for queue, *row in fetch(conn, "kept_counts_by_tick", ctx, params, mapping):
        found = dict(zip(BY_TICK, row, strict=True))
        later, now = int(found.pop("delayed_later")), int(found.pop("delayed_now"))
        counts.update({(queue, status): exact(int(n)) for status, n in found.items()})
        delayed = later + now
        counts[(queue, "delayed")] = (
            exact(delayed) if now <= limit else sampled.bounded(queue, "delayed", delayed)
        )
    return counts


# The order of _labels' tuples: pgq_queue_jobs's statuses, then the approximate marks'.
APPROXIMATE = ("pending", "ready", "delayed", "processing", "done", "failed")


# Past this many queues the oldest go: names an application wrote (up to 1 KB each, as
# tracked) are kept for as long as they stay in the cache, 16 MB at most.
@functools.lru_cache(maxsize=1 << 14)
def _labels(queue: str) -> tuple[tuple[str, ...], ...]:
    """A queue's label tuples, made once: 10,000 queues made 130,000 of them a cycle."""
    return (*((queue, s) for s in STATUSES), (queue,), *((queue, s) for s in APPROXIMATE))


def _samples(queue: str, counts: list[Count]) -> list[AnySample]:
    """``counts`` in the order of COUNTED."""
    pending, delayed, processing, done, failed = counts
    delayed_value = min(delayed.value, pending.value)
    ready_approximate = pending.approximate or delayed.approximate
    (l_pending, l_processing, l_done, l_failed, l_queue, a_pending, a_ready, a_delayed,
     a_processing, a_done, a_failed) = _labels(queue)  # fmt: skip
    return [
        Sample("pgq_queue_jobs", l_pending, pending.value),
        Sample("pgq_queue_jobs", l_processing, processing.value),
        Sample("pgq_queue_jobs", l_done, done.value),
        Sample("pgq_queue_jobs", l_failed, failed.value),
        Sample("pgq_queue_ready_jobs", l_queue, pending.value - delayed_value),
        Sample("pgq_queue_delayed_jobs", l_queue, delayed_value),
        Sample("pgq_queue_count_approximate", a_pending, float(pending.approximate)),
        Sample("pgq_queue_count_approximate", a_ready, float(ready_approximate)),
        Sample("pgq_queue_count_approximate", a_delayed, float(delayed.approximate)),
        Sample("pgq_queue_count_approximate", a_processing, float(processing.approximate)),
        Sample("pgq_queue_count_approximate", a_done, float(done.approximate)),
        Sample("pgq_queue_count_approximate", a_failed, float(failed.approximate)),
    ]
