"""Finished counts, failure ratio and processing-time percentiles over a trailing window.

From the feed of finished jobs (see finished_feed.py), kept per queue in
memory for the window's length: a run reads only the jobs finished since the
last read, never the whole window again.
"""

from __future__ import annotations

from pgq_exporter.catalogue import QUEUE_WINDOW
from pgq_exporter.collectors.base import (
    AnySample,
    Collector,
    Conn,
    Context,
    Sample,
)

PERCENTILES = (("50", 0.5), ("95", 0.95), ("99", 0.99))


class QueueWindow(Collector):
    name = QUEUE_WINDOW

    def collect(self, conn: Conn, ctx: Context) -> list[AnySample]:
        window = ctx.config.window
        label = f"{window:g}"
        queues = ctx.queues.discover(conn, ctx.mapping)
        ctx.feed.read(conn, ctx)
        samples: list[AnySample] = []
        for queue in queues:
            figures = ctx.feed.window(queue, window, tuple(q for _, q in PERCENTILES))
            finished = figures.done + figures.failed
            samples += [
                Sample("pgq_queue_window_finished_jobs", (queue, "done", label),
                       float(figures.done)),
                Sample("pgq_queue_window_finished_jobs", (queue, "failed", label),
                       float(figures.failed)),
                Sample("pgq_queue_window_failure_ratio", (queue, label),
                       figures.failed / finished if finished else 0.0),
            ]  # fmt: skip
            samples += [
                Sample("pgq_queue_window_processing_seconds", (queue, name, label), value)
                for (name, _), value in zip(PERCENTILES, figures.percentiles, strict=True)
            ]
        return samples
