"""Jobs by queue and status, zero-filled for every known queue.

On the reference schema (version 3 on), pending, processing, done and failed
come from its queue_counts table, which the schema's triggers keep exact in
every snapshot: the cost does not depend on the number of jobs; delayed, which it
does not keep, is exact up to exact_count_limit, read from the pending index, and
estimated from a sample of the table above it. Elsewhere each count is exact up to
10,000 (or exact_count_limit, if lower), read from the partial indexes, and above it
served from the last exact recount (see counting.py).
``pgq_queue_count_approximate`` says which values are estimates.
"""

from __future__ import annotations

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
from pgq_exporter.samples import AnySample, Sample

# The columns of capped_counts and kept_counts, after the queue.
COUNTED = ("pending", "delayed", "processing", "done", "failed")
UNFINISHED = ("pending", "delayed", "processing")
STATUSES = ("pending", "processing", "done", "failed")


class QueueDepth(Collector):
    name = QUEUE_DEPTH

    def __init__(self) -> None:
        self._counts = CappedCounts(UNFINISHED)

    def collect(self, conn: Conn, ctx: Context) -> list[AnySample]:
        queues = ctx.queues.discover(conn, ctx.mapping)
        if ctx.mapping.is_reference and bool(fetch(conn, "has_counts", ctx)[0][0]):
            counts = _kept(conn, ctx, queues)
        else:

            def count(caps: Mapping[str, int | None]) -> dict[Key, int]:
                params = {"queues": queues, **{f"{s}_cap": caps[s] for s in COUNTED}}
                return by_key(fetch(conn, "capped_counts", ctx, params), COUNTED)

            changes = table_changes(conn, ctx)
            counts = self._counts.collect(conn, queues, COUNTED, cap=count_cap(ctx),
                                          changes=changes, count=count)  # fmt: skip
        samples: list[AnySample] = []
        for queue in queues:
            samples += _samples(queue, {s: counts[(queue, s)] for s in COUNTED})
        return samples


def _kept(conn: Conn, ctx: Context, queues: list[str]) -> dict[Key, Count]:
    """The reference schema's kept counts, exact; delayed, which it does not keep, exact
    up to exact_count_limit and estimated from a sample of the table above it."""
    params = {"cap": ctx.config.exact_count_limit + 1, "queues": queues}
    sampled = SampledCounts(conn, ctx)
    return {
        (queue, status): sampled.bounded(queue, status, n) if status == "delayed" else exact(n)
        for (queue, status), n in by_key(fetch(conn, "kept_counts", ctx, params), COUNTED).items()
    }


def _samples(queue: str, counts: dict[str, Count]) -> list[AnySample]:
    pending, delayed = counts["pending"], counts["delayed"]
    delayed = Count(min(delayed.value, pending.value), delayed.approximate)
    ready = Count(pending.value - delayed.value, pending.approximate or delayed.approximate)
    samples: list[AnySample] = [
        Sample("pgq_queue_jobs", (queue, status), counts[status].value) for status in STATUSES
    ]
    samples += [
        Sample("pgq_queue_ready_jobs", (queue,), ready.value),
        Sample("pgq_queue_delayed_jobs", (queue,), delayed.value),
    ]
    marked = {**counts, "ready": ready, "delayed": delayed}
    samples += [
        Sample("pgq_queue_count_approximate", (queue, status), float(marked[status].approximate))
        for status in ("pending", "ready", "delayed", "processing", "done", "failed")
    ]
    return samples
