"""True histograms of processing and wait time, and completed/failed counters.

Exactly once per finished job, from the feed of finished jobs (see
finished_feed.py), which this collector reads on every run.
"""

from __future__ import annotations

from pgq_exporter.catalogue import JOB_HISTOGRAMS
from pgq_exporter.collectors.base import (
    AnySample,
    Collector,
    Conn,
    Context,
    HistogramSample,
    Sample,
)
from pgq_exporter.collectors.finished_feed import QueueStats


class JobHistograms(Collector):
    name = JOB_HISTOGRAMS

    def collect(self, conn: Conn, ctx: Context) -> list[AnySample]:
        ctx.feed.read(conn, ctx)
        samples: list[AnySample] = []
        for queue in sorted(set(ctx.queues.known()) | set(ctx.feed.stats)):
            stats = ctx.feed.stats.get(queue, QueueStats())
            samples += [
                HistogramSample("pgq_job_processing_seconds", (queue,),
                                stats.processing.cumulative(), stats.processing.total),
                HistogramSample("pgq_job_wait_seconds", (queue,),
                                stats.wait.cumulative(), stats.wait.total),
                Sample("pgq_jobs_completed_total", (queue,), float(stats.completed)),
                Sample("pgq_jobs_failed_total", (queue,), float(stats.failed)),
            ]  # fmt: skip
        return samples
