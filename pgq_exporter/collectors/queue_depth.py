"""Jobs by queue and status, zero-filled for every known queue.

Every count is exact up to exact_count_limit, read from the partial indexes;
above it, the planner's estimate (never below limit + 1, so an alert threshold
at or below the limit stays exact), refreshed at most once a minute. So the cost of a
cycle is bounded whatever the size of the table.
"""

from __future__ import annotations

import json
import time

from psycopg import sql

from pgq_exporter.catalogue import QUEUE_DEPTH
from pgq_exporter.collectors.base import AnySample, Collector, Conn, Context, Sample, fetch, render

COUNTED = ("pending", "ready", "processing", "done", "failed")


ESTIMATE_TTL = 60.0


class QueueDepth(Collector):
    name = QUEUE_DEPTH

    def __init__(self) -> None:
        # Planner estimates change only after ANALYZE: reuse them for a minute.
        self._estimates: dict[tuple[str, str], tuple[float, float]] = {}

    def collect(self, conn: Conn, ctx: Context) -> list[AnySample]:
        queues = ctx.queues.discover(conn, ctx.mapping)
        limit = ctx.config.exact_count_limit
        rows = fetch(conn, "capped_counts", ctx, {"cap": limit + 1, "queues": queues})
        samples: list[AnySample] = []
        for queue, *counts in rows:
            # Above the limit the count is known to be at least limit + 1.
            values = {
                what: float(n)
                if n <= limit
                else max(limit + 1.0, self._estimate(conn, ctx, queue, what))
                for what, n in zip(COUNTED, counts, strict=True)
            }
            for status in ("pending", "processing", "done", "failed"):
                samples.append(Sample("pgq_queue_jobs", (queue, status), values[status]))
            ready = min(values["ready"], values["pending"])
            samples.append(Sample("pgq_queue_ready_jobs", (queue,), ready))
            samples.append(Sample("pgq_queue_delayed_jobs", (queue,), values["pending"] - ready))
        return samples

    def _estimate(self, conn: Conn, ctx: Context, queue: str, what: str) -> float:
        now = time.monotonic()
        cached = self._estimates.get((queue, what))
        if cached is None or now - cached[1] > ESTIMATE_TTL:
            cached = (_planner_estimate(conn, ctx, queue, what), now)
            self._estimates[(queue, what)] = cached
        return cached[0]


def _planner_estimate(conn: Conn, ctx: Context, queue: str, what: str) -> float:
    status = "pending" if what == "ready" else what
    ready = sql.SQL("AND {} <= now()").format(sql.Identifier(ctx.mapping.columns["scheduled_at"]))
    statement = render(
        "estimate_rows",
        ctx.mapping,
        queue=sql.Literal(queue),
        status=sql.Literal(ctx.mapping.statuses[status]),
        and_ready=ready if what == "ready" else sql.SQL(""),
    )
    row = conn.execute(statement).fetchone()
    plan = row[0] if row else None
    if isinstance(plan, str):
        plan = json.loads(plan)
    return float(plan[0]["Plan"]["Plan Rows"]) if plan else 0.0
