"""Finished counts, failure ratio and processing-time percentiles over a trailing window."""

from __future__ import annotations

from pgq_exporter.catalogue import QUEUE_WINDOW
from pgq_exporter.collectors.base import AnySample, Collector, Conn, Context, Sample, fetch

PERCENTILES = ("50", "95", "99")


class QueueWindow(Collector):
    name = QUEUE_WINDOW

    def collect(self, conn: Conn, ctx: Context) -> list[AnySample]:
        window = ctx.config.window
        label = f"{window:g}"
        queues = ctx.queues.discover(conn, ctx.mapping)
        rows = fetch(conn, "finished_window", ctx, {"queues": queues, "window": window})
        samples: list[AnySample] = []
        for queue, done, failed, *percentiles in rows:
            finished = done + failed
            samples += [
                Sample("pgq_queue_window_finished_jobs", (queue, "done", label), float(done)),
                Sample("pgq_queue_window_finished_jobs", (queue, "failed", label), float(failed)),
                Sample(
                    "pgq_queue_window_failure_ratio",
                    (queue, label),
                    failed / finished if finished else 0.0,
                ),
            ]
            samples += [
                Sample("pgq_queue_window_processing_seconds", (queue, p, label), float(v))
                for p, v in zip(PERCENTILES, percentiles, strict=True)
            ]
        return samples
