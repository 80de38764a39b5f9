"""Processing jobs past their lease: stuck (attempts left) and exhausted (none left)."""

from __future__ import annotations

from pgq_exporter.catalogue import QUEUE_LEASES
from pgq_exporter.collectors.base import AnySample, Collector, Conn, Context, Sample, fetch


class QueueLeases(Collector):
    name = QUEUE_LEASES

    def collect(self, conn: Conn, ctx: Context) -> list[AnySample]:
        rows = {
            queue: (stuck, exhausted)
            for queue, stuck, exhausted in fetch(conn, "expired_leases", ctx)
        }
        ctx.queues.saw(set(rows))
        samples: list[AnySample] = []
        for queue in ctx.queues.known():
            stuck, exhausted = rows.get(queue, (0, 0))
            samples.append(Sample("pgq_queue_stuck_jobs", (queue,), float(stuck)))
            samples.append(Sample("pgq_queue_exhausted_jobs", (queue,), float(exhausted)))
        return samples
