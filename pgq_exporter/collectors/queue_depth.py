"""Jobs by queue and status, zero-filled for every known queue."""

from __future__ import annotations

import json

from psycopg import sql

from pgq_exporter.catalogue import QUEUE_DEPTH
from pgq_exporter.collectors.base import AnySample, Collector, Conn, Context, Sample, fetch, render

STATUSES = ("pending", "processing", "done", "failed")


class QueueDepth(Collector):
    name = QUEUE_DEPTH

    def collect(self, conn: Conn, ctx: Context) -> list[AnySample]:
        partitions = [row[0] for row in fetch(conn, "queue_partitions", ctx) if row[0]]
        finished = [row[0] for row in fetch(conn, "finished_queues", ctx)]
        unfinished = fetch(conn, "unfinished_by_queue", ctx)
        ctx.queues.saw(set(partitions) | set(finished) | {row[0] for row in unfinished})
        queues = ctx.queues.known()
        counts = {(q, s): 0.0 for q in queues for s in STATUSES}
        ready = dict.fromkeys(queues, 0.0)
        for queue, status, jobs, ready_jobs in unfinished:
            counts[(queue, status)] = float(jobs)
            if status == "pending":
                ready[queue] = float(ready_jobs)
        counts.update(self._finished(conn, ctx, queues))
        samples: list[AnySample] = [
            Sample("pgq_queue_jobs", (queue, status), value)
            for (queue, status), value in sorted(counts.items())
        ]
        for queue in queues:
            samples.append(Sample("pgq_queue_ready_jobs", (queue,), ready[queue]))
            delayed = counts[(queue, "pending")] - ready[queue]
            samples.append(Sample("pgq_queue_delayed_jobs", (queue,), delayed))
        return samples

    def _finished(
        self, conn: Conn, ctx: Context, queues: list[str]
    ) -> dict[tuple[str, str], float]:
        """Exact up to the cap; above it, the planner's estimate (never below the cap)."""
        cap = ctx.config.exact_count_limit
        rows = fetch(conn, "finished_capped", ctx, {"cap": cap + 1, "queues": queues})
        result: dict[tuple[str, str], float] = {}
        for queue, status, jobs in rows:
            value = float(jobs)
            if jobs > cap:
                value = max(float(cap), self._estimate(conn, ctx, queue, status))
            result[(queue, status)] = value
        return result

    @staticmethod
    def _estimate(conn: Conn, ctx: Context, queue: str, status: str) -> float:
        statement = render(
            "finished_estimate",
            ctx.mapping,
            queue=sql.Literal(queue),
            status=sql.Literal(ctx.mapping.statuses[status]),
        )
        row = conn.execute(statement).fetchone()
        plan = row[0] if row else None
        if isinstance(plan, str):
            plan = json.loads(plan)
        return float(plan[0]["Plan"]["Plan Rows"]) if plan else 0.0
