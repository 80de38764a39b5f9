"""True histograms of processing and wait time, and completed/failed counters.

Exactly once, whatever order transactions commit in. complete() and fail()
stamp each finished job with its transaction id (finished_xid). Every run
reads, in one REPEATABLE READ snapshot, the snapshot's xmin (the horizon: all
transactions below it have ended) and the jobs whose finished_xid is at or
above the previous horizon. Those not yet observed are observed; then the
horizon advances and observations below it are forgotten. A job finished by a
transaction that commits late sits above the horizon until it commits, so it
is still read, once.

Bound: per run, the rows read and the ids remembered are the jobs finished
since the oldest transaction still open when the previous run started. A job
whose row leaves the table (archived, or sent back by retry_failed) before a
run sees it is not observed. On its first run, the collector also observes the
jobs finished within the window, so a new process starts from the recent past.
"""

from __future__ import annotations

from bisect import bisect_left
from dataclasses import dataclass, field

from pgq_exporter.catalogue import DURATION_BUCKETS, JOB_HISTOGRAMS
from pgq_exporter.collectors.base import (
    AnySample,
    Collector,
    Conn,
    Context,
    HistogramSample,
    Sample,
    fetch,
)


@dataclass
class Histogram:
    counts: list[int] = field(default_factory=lambda: [0] * (len(DURATION_BUCKETS) + 1))
    total: float = 0.0

    def observe(self, value: float) -> None:
        self.counts[bisect_left(DURATION_BUCKETS, value)] += 1
        self.total += value

    def cumulative(self) -> tuple[tuple[str, float], ...]:
        running = 0
        result = []
        for bound, count in zip([*map(_le, DURATION_BUCKETS), "+Inf"], self.counts, strict=True):
            running += count
            result.append((bound, float(running)))
        return tuple(result)


@dataclass
class QueueStats:
    processing: Histogram = field(default_factory=Histogram)
    wait: Histogram = field(default_factory=Histogram)
    completed: int = 0
    failed: int = 0


class JobHistograms(Collector):
    name = JOB_HISTOGRAMS

    def __init__(self) -> None:
        self.horizon: int | None = None
        self.observed: dict[tuple[int, int], None] = {}
        self.stats: dict[str, QueueStats] = {}

    def collect(self, conn: Conn, ctx: Context) -> list[AnySample]:
        horizon_row = fetch(conn, "snapshot_horizon", ctx)
        horizon = int(horizon_row[0][0])
        first = self.horizon is None
        since = horizon if self.horizon is None else self.horizon
        rows = fetch(
            conn,
            "finished_since",
            ctx,
            {"since": str(since), "backfill": first, "window": ctx.config.window},
        )
        for job_id, queue, done, xid, processing, wait in rows:
            key = (int(job_id), int(xid) if xid is not None else -1)
            if key in self.observed:
                continue
            if key[1] >= horizon:
                self.observed[key] = None
            self._observe(queue, bool(done), processing, wait)
        self.horizon = horizon
        self.observed = {key: None for key in self.observed if key[1] >= horizon}
        ctx.queues.saw({row[1] for row in rows})
        return self._samples(ctx.queues.known())

    def _observe(
        self, queue: str, done: bool, processing: float | None, wait: float | None
    ) -> None:
        stats = self.stats.setdefault(queue, QueueStats())
        if done:
            stats.completed += 1
        else:
            stats.failed += 1
        if processing is not None:
            stats.processing.observe(max(processing, 0.0))
        if wait is not None:
            stats.wait.observe(max(wait, 0.0))

    def _samples(self, queues: list[str]) -> list[AnySample]:
        samples: list[AnySample] = []
        for queue in sorted(set(queues) | set(self.stats)):
            stats = self.stats.get(queue, QueueStats())
            samples += [
                HistogramSample("pgq_job_processing_seconds", (queue,),
                                stats.processing.cumulative(), stats.processing.total),
                HistogramSample("pgq_job_wait_seconds", (queue,),
                                stats.wait.cumulative(), stats.wait.total),
                Sample("pgq_jobs_completed_total", (queue,), float(stats.completed)),
                Sample("pgq_jobs_failed_total", (queue,), float(stats.failed)),
            ]  # fmt: skip
        return samples


def _le(bound: float) -> str:
    return f"{bound:g}" if bound != int(bound) else f"{bound:.1f}"
