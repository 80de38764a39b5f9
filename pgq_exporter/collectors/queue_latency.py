"""Age of the oldest ready job per queue, the best single backlog signal; and the ready
jobs past each wait threshold, counted only where the oldest is past it."""

from __future__ import annotations

from pgq_exporter.catalogue import QUEUE_LATENCY
from pgq_exporter.collectors.base import Collector, Conn, Context, fetch
from pgq_exporter.config import SchemaMapping
from pgq_exporter.histograms import threshold_text
from pgq_exporter.samples import AnySample, Sample


class QueueLatency(Collector):
    name = QUEUE_LATENCY

    def __init__(self, mapping: SchemaMapping) -> None:
        self.mapping = mapping

    def collect(self, conn: Conn, ctx: Context) -> list[AnySample]:
        params = {"queues": ctx.known_queues(conn)}
        ages = {
            queue: max(float(age), 0.0)
            for queue, age in fetch(conn, "oldest_ready", ctx, params, self.mapping)
        }
        samples: list[AnySample] = [
            Sample("pgq_queue_oldest_ready_age_seconds", (queue,), age)
            for queue, age in ages.items()
        ]
        return samples + self._late(conn, ctx, ages)

    def _late(self, conn: Conn, ctx: Context, ages: dict[str, float]) -> list[AnySample]:
        thresholds = ctx.config.histograms.wait_thresholds
        if not thresholds:
            return []
        late = {(queue, t): 0 for queue in ages for t in thresholds}
        past = [queue for queue, age in ages.items() if age > thresholds[0]]
        if past:
            params = {"queues": past, "thresholds": list(thresholds),
                      "cap": ctx.config.exact_count_limit}  # fmt: skip
            for queue, seconds, count in fetch(conn, "late_ready", ctx, params, self.mapping):
                late[(queue, float(seconds))] = int(count)
        return [
            Sample("pgq_queue_late_ready_jobs", (queue, threshold_text(t)), float(n))
            for (queue, t), n in late.items()
        ]
