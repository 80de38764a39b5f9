"""Finished counts, failure ratio and processing-time percentiles over a trailing window.

From the feed of finished jobs (finished_feed.py for the reference queue,
library_feed.py for a library preset), kept per queue in memory for the window's
length: a run reads only the jobs finished since the last read, never the whole
window again. What the feed cannot know is not served: a library that deletes its
done jobs has no ratio, one that records no start no percentiles.
"""

from __future__ import annotations

from pgq_exporter.catalogue import QUEUE_WINDOW
from pgq_exporter.collectors.base import Collector, Conn, Context, fetch
from pgq_exporter.collectors.chunking import QueueChunks
from pgq_exporter.collectors.finished import Outcomes, WindowFigures
from pgq_exporter.config import SchemaMapping
from pgq_exporter.histograms import seconds_text
from pgq_exporter.samples import AnySample, Chunks, Sample, count_value

PERCENTILES = (("50", 0.5), ("95", 0.95), ("99", 0.99))
QUANTILES = tuple(q for _, q in PERCENTILES)
FINISHED = "pgq_queue_window_finished_jobs"


class QueueWindow(Collector):
    name = QUEUE_WINDOW

    reads_feed = True

    def __init__(self) -> None:
        self._chunks = QueueChunks()
        self._made_for: tuple[float, Outcomes] | None = None  # the chunks' window, outcomes

    def collect(self, conn: Conn, ctx: Context) -> Chunks:
        window = ctx.config.window
        queues = ctx.known_queues(conn)
        ctx.read_feed(conn)
        jobs, outcomes = ctx.feed.jobs, ctx.outcomes
        if self._made_for != (window, outcomes):  # a queue's input is its count alone
            self._chunks, self._made_for = QueueChunks(), (window, outcomes)
        changes = jobs.window_changes(queues)

        def made(queue: str, _changes: object) -> list[AnySample]:
            figures = jobs.window(queue, QUANTILES)
            return window_samples(queue, window, figures, outcomes)

        return Chunks(self._chunks.of(queues, changes, made))


class UpdatedWindow(Collector):
    """The window on a table that records no start or end (the seed article's): the
    jobs whose updated_at falls in it, read again on every run, with updated_at -
    created_at as their time, as the article computes its p95."""

    name = QUEUE_WINDOW

    def __init__(self, mapping: SchemaMapping) -> None:
        self.mapping = mapping

    def collect(self, conn: Conn, ctx: Context) -> list[AnySample]:
        window = ctx.config.window
        params = {"queues": ctx.known_queues(conn), "window": window}
        samples: list[AnySample] = []
        found = fetch(conn, "updated_window", ctx, params, self.mapping)
        for queue, done, failed, percentiles in found:
            values = tuple(float(p) for p in percentiles) if percentiles else (0.0,) * 3
            figures = WindowFigures(done, failed, values)
            samples += window_samples(queue, window, figures, Outcomes())
        return samples


def window_samples(
    queue: str, window: float, figures: WindowFigures, outcomes: Outcomes
) -> list[AnySample]:
    """The window's figures of what the feed knows."""
    label = seconds_text(window)
    finishes = outcomes.finishes
    samples: list[AnySample] = []
    if "done" in finishes:
        samples.append(Sample(FINISHED, (queue, "done", label), count_value(figures.done)))
    if "failed" in finishes:
        samples.append(Sample(FINISHED, (queue, "failed", label), count_value(figures.failed)))
    if "done" in finishes and "failed" in finishes:
        finished = figures.done + figures.failed
        ratio = figures.failed / finished if finished else 0.0
        samples.append(Sample("pgq_queue_window_failure_ratio", (queue, label), ratio))
    if outcomes.processing:
        samples += [
            Sample("pgq_queue_window_processing_seconds", (queue, name, label), value)
            for (name, _), value in zip(PERCENTILES, figures.percentiles, strict=True)
        ]
    return samples
