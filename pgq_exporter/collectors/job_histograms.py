"""True histograms of processing and wait time, and completed/failed counters.

Exactly once per finished job, from the feed of finished jobs (finished_feed.py for
the reference queue, library_feed.py for a library preset), which this collector
reads on every run. What the feed cannot know (a library that records no start, or
deletes its done jobs) is not served.
"""

from __future__ import annotations

from pgq_exporter.catalogue import JOB_HISTOGRAMS
from pgq_exporter.collectors.base import Collector, Conn, Context
from pgq_exporter.collectors.finished import QueueStats, stats_samples
from pgq_exporter.samples import AnySample


class JobHistograms(Collector):
    name = JOB_HISTOGRAMS
    reads_feed = True

    def collect(self, conn: Conn, ctx: Context) -> list[AnySample]:
        known = ctx.known_queues(conn)
        ctx.read_feed(conn)
        stats = ctx.feed.jobs.stats
        outcomes = ctx.outcomes
        return [
            sample
            for queue in sorted(set(known) | set(stats))
            for sample in stats_samples(queue, stats.get(queue, QueueStats()), outcomes)
        ]
