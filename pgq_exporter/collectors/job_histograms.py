"""True histograms of processing and wait time, and completed/failed counters.

Exactly once per finished job, from the feed of finished jobs (see
finished_feed.py), which this collector reads on every run.
"""

from __future__ import annotations

from pgq_exporter.catalogue import JOB_HISTOGRAMS
from pgq_exporter.collectors.base import Collector, Conn, Context
from pgq_exporter.collectors.finished_feed import QueueStats, stats_samples
from pgq_exporter.samples import AnySample


class JobHistograms(Collector):
    name = JOB_HISTOGRAMS

    def collect(self, conn: Conn, ctx: Context) -> list[AnySample]:
        ctx.read_feed(conn)
        queues = sorted(set(ctx.queues.known()) | set(ctx.feed.stats))
        return [
            sample
            for queue in queues
            for sample in stats_samples(queue, ctx.feed.stats.get(queue, QueueStats()))
        ]
