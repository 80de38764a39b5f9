"""Processing jobs past their lease: stuck (attempts left) and exhausted (none left)."""

from __future__ import annotations

from pgq_exporter.catalogue import QUEUE_LEASES
from pgq_exporter.collectors.base import AnySample, Collector, Conn, Context, Sample, fetch


class QueueLeases(Collector):
    name = QUEUE_LEASES

    def collect(self, conn: Conn, ctx: Context) -> list[AnySample]:
        queues = ctx.queues.discover(conn, ctx.mapping)
        samples: list[AnySample] = []
        for queue, stuck, exhausted in fetch(conn, "expired_leases", ctx, {"queues": queues}):
            samples.append(Sample("pgq_queue_stuck_jobs", (queue,), float(stuck)))
            samples.append(Sample("pgq_queue_exhausted_jobs", (queue,), float(exhausted)))
        return samples
