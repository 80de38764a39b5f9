"""Jobs by queue and status, zero-filled for every known queue.

On the reference schema (version 3 on), pending, processing, done and failed
come from its queue_counts table, which the schema's triggers keep exact in
every snapshot: the cost does not depend on the number of jobs. Elsewhere,
and for the delayed jobs everywhere, each count is exact up to
exact_count_limit, read from the partial indexes, and estimated from a sample
of the table above it (see counting.py); done and failed, which may be
estimates, only up to 10,000 and then the planner's estimate.
``pgq_queue_count_approximate`` says which values are estimates.
"""

from __future__ import annotations

from pgq_exporter.catalogue import QUEUE_DEPTH
from pgq_exporter.collectors.base import (
    AnySample,
    Collector,
    Conn,
    Context,
    Row,
    Sample,
    fetch,
)
from pgq_exporter.collectors.counting import (
    FINISHED,
    Count,
    Recounts,
    SampledCounts,
    count_cap,
    exact,
    recount_when_due,
    table_changes,
)

# The columns of capped_counts and kept_counts, after the queue.
COUNTED = ("pending", "delayed", "processing", "done", "failed")
KEPT = frozenset({"pending", "processing", "done", "failed"})
STATUSES = ("pending", "processing", "done", "failed")


class QueueDepth(Collector):
    name = QUEUE_DEPTH

    def __init__(self) -> None:
        self._recounts = Recounts()

    def collect(self, conn: Conn, ctx: Context) -> list[AnySample]:
        queues = ctx.queues.discover(conn, ctx.mapping)
        kept = ctx.mapping.is_reference and bool(fetch(conn, "has_counts", ctx)[0][0])
        cap = count_cap(ctx)
        changes = None if kept else table_changes(conn, ctx)
        limit = self._recounts.limit([(q, s) for q in queues for s in FINISHED], cap, changes)
        params = {"cap": ctx.config.exact_count_limit + 1, "finished_cap": limit,
                  "queues": queues}  # fmt: skip
        rows = fetch(conn, "kept_counts" if kept else "capped_counts", ctx, params)
        if not kept:
            recount_when_due(conn, self._recounts, lambda: _totals(
                fetch(conn, "capped_counts", ctx, {**params, "finished_cap": None})),
                limit=limit, counted=_totals(rows), cap=cap, changes=changes)  # fmt: skip
        sampled = SampledCounts(conn, ctx)
        samples: list[AnySample] = []
        for queue, *numbers in rows:
            counts = {}
            for what, n in zip(COUNTED, numbers, strict=True):
                if kept and what in KEPT:
                    counts[what] = exact(n)
                elif what in FINISHED:
                    counts[what] = self._recounts.served(queue, what, n, cap, limit)
                else:
                    counts[what] = sampled.bounded(queue, what, n)
            samples += _samples(queue, counts)
        return samples


def _totals(rows: list[Row]) -> dict[tuple[str, str], int]:
    return {
        (str(row[0]), what): int(n)
        for row in rows
        for what, n in zip(COUNTED, row[1:], strict=True)
        if what in FINISHED
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
