"""Age of the oldest ready job per queue: the best single backlog signal."""

from __future__ import annotations

from pgq_exporter.catalogue import QUEUE_LATENCY
from pgq_exporter.collectors.base import Collector, Conn, Context, fetch
from pgq_exporter.config import SchemaMapping
from pgq_exporter.samples import AnySample, Sample


class QueueLatency(Collector):
    name = QUEUE_LATENCY

    def __init__(self, mapping: SchemaMapping) -> None:
        self.mapping = mapping

    def collect(self, conn: Conn, ctx: Context) -> list[AnySample]:
        params = {"queues": ctx.known_queues(conn)}
        return [
            Sample("pgq_queue_oldest_ready_age_seconds", (queue,), max(float(age), 0.0))
            for queue, age in fetch(conn, "oldest_ready", ctx, params, self.mapping)
        ]
