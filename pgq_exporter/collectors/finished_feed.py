"""The feed of finished jobs: each one read once, whatever order transactions commit in.

complete() and fail() stamp each finished job with its transaction id
(finished_xid). Every read takes, in the collector's REPEATABLE READ
snapshot, the snapshot's xmin (the horizon: all transactions below it have
ended) and the jobs whose finished_xid is at or above the previous horizon.
Those not yet observed are observed; then the horizon advances and
observations below it are forgotten. A job finished by a transaction that
commits late sits above the horizon until it commits, so it is still read,
once. The horizon never moves back, so a collector whose snapshot is older
than the last read's cannot make the next read count a job twice.

What a job's finishing feeds: its queue's histograms and totals (read by the
job_histograms collector) and the trailing window of finished jobs (read by
queue_window), kept in memory for the window's length. So the cost of a read
follows the jobs finished since the last one, not the jobs in the table.

Bound: per read, the rows read and the ids remembered are the jobs finished
since the oldest transaction still open when the previous read started. A
job whose row leaves the table (archived, or sent back by retry_failed)
before a read sees it is not observed. The first read fills the window with
the jobs finished within it, so the window gauges start from the recent
past; the histograms and totals count none of them: they start from nothing,
like any counter, so a restart does not show the past window as a burst.
"""

from __future__ import annotations

import heapq
import itertools
import threading
from bisect import bisect_left
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from sortedcontainers import SortedList

from pgq_exporter.catalogue import DURATION_BUCKETS
from pgq_exporter.collectors.queues import KnownQueues
from pgq_exporter.collectors.rendering import Conn, Row, render, table_list
from pgq_exporter.config import SchemaMapping
from pgq_exporter.samples import AnySample, HistogramSample, Sample


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

    def count(self, done: bool, processing: float | None, wait: float | None) -> None:
        if done:
            self.completed += 1
        else:
            self.failed += 1
        if processing is not None:
            self.processing.observe(max(processing, 0.0))
        if wait is not None:
            self.wait.observe(max(wait, 0.0))


def stats_samples(
    queue: str, stats: QueueStats, *, wait: bool = True, failed: bool = True
) -> list[AnySample]:
    """A queue's histograms and totals; ``wait`` and ``failed`` say whether the feed
    knows when its jobs became due and whether they can fail."""
    samples: list[AnySample] = [
        HistogramSample("pgq_job_processing_seconds", (queue,),
                        stats.processing.cumulative(), stats.processing.total),
        Sample("pgq_jobs_completed_total", (queue,), float(stats.completed)),
    ]  # fmt: skip
    if wait:
        samples.append(HistogramSample("pgq_job_wait_seconds", (queue,),
                                       stats.wait.cumulative(), stats.wait.total))  # fmt: skip
    if failed:
        samples.append(Sample("pgq_jobs_failed_total", (queue,), float(stats.failed)))
    return samples


@dataclass(frozen=True, slots=True)
class Finished:
    """One job's finishing, as the window keeps it."""

    at: float  # finished_at, seconds since the epoch
    done: bool
    processing: float | None


@dataclass(frozen=True, slots=True)
class WindowFigures:
    done: int
    failed: int
    percentiles: tuple[float, ...]


class _Window:
    """The jobs of one queue finished within the window: their counts, and their
    processing times kept in order as they come and go, so that a percentile is a
    lookup. Sorting the whole window on every read held the interpreter for one long
    call, and every scrape waited behind it. The entries hold
    only numbers, so that the garbage collector stops tracking them: a full collection
    that walked every job of a busy window was another such pause."""

    def __init__(self) -> None:
        # (finished at, arrival, done, processing), by finishing time: a late commit
        # arrives after jobs that finished later.
        self._by_time: list[tuple[float, int, bool, float | None]] = []
        self._arrivals = itertools.count()
        self._durations = SortedList()
        self.done = 0
        self.failed = 0

    def add(self, finished: Finished) -> None:
        entry = (finished.at, next(self._arrivals), finished.done, finished.processing)
        heapq.heappush(self._by_time, entry)
        self._tally(finished.done, finished.processing, 1)

    def forget_up_to(self, cutoff: float) -> None:
        while self._by_time and self._by_time[0][0] <= cutoff:
            _, _, done, processing = heapq.heappop(self._by_time)
            self._tally(done, processing, -1)

    def figures(self, quantiles: tuple[float, ...]) -> WindowFigures:
        return WindowFigures(
            self.done, self.failed, tuple(_percentile(self._durations, q) for q in quantiles)
        )

    def _tally(self, done: bool, processing: float | None, step: int) -> None:
        if done:
            self.done += step
        else:
            self.failed += step
        if processing is None:
            return
        if step > 0:
            self._durations.add(processing)
        else:
            self._durations.remove(processing)


class FinishedFeed:
    """Shared by the collectors of one database; each read is serialised."""

    def __init__(self) -> None:
        self.horizon: int | None = None
        self.observed: dict[tuple[int, int], None] = {}
        self.stats: dict[str, QueueStats] = {}
        self.now = 0.0  # the database's now() at the last read
        self._windows: dict[str, _Window] = {}
        self._lock = threading.Lock()

    def read(
        self,
        conn: Conn,
        mapping: SchemaMapping,
        tables: tuple[str, ...],
        queues: KnownQueues,
        window: float,
    ) -> None:
        """Observe the jobs finished since the last read, in ``mapping``'s table."""

        def rows(name: str, params: dict[str, Any] | None = None) -> list[Row]:
            statement = render(name, mapping, tables=table_list(tables))
            return conn.execute(statement, params).fetchall()

        with self._lock:
            horizon_text, now = rows("snapshot_horizon")[0]
            horizon = int(horizon_text)
            first = self.horizon is None
            since = horizon if self.horizon is None else self.horizon
            found = rows("finished_since", {"since": str(since)})
            if first:
                known = queues.discover(conn, mapping)
                found += rows("finished_in_window",
                              {"since": str(since), "window": window, "queues": known})  # fmt: skip
            for row in found:
                self._take(row, horizon, count=not first)
            self.horizon = max(horizon, since)
            self.observed = {key: None for key in self.observed if key[1] >= self.horizon}
            self.now = max(self.now, float(now))
            self._forget_before(self.now - window)
        queues.saw({row[1] for row in found})

    def _take(self, row: tuple[Any, ...], horizon: int, *, count: bool) -> None:
        job_id, queue, done, xid, processing, wait, finished = row
        key = (int(job_id), int(xid) if xid is not None else -1)
        if key in self.observed:
            return
        if key[1] >= horizon:
            self.observed[key] = None
        stats = self.stats.setdefault(queue, QueueStats())
        if count:
            stats.count(bool(done), processing, wait)
        if finished is not None:
            window = self._windows.setdefault(queue, _Window())
            window.add(Finished(float(finished), bool(done), processing))

    def _forget_before(self, cutoff: float) -> None:
        for window in self._windows.values():
            window.forget_up_to(cutoff)

    def window(self, queue: str, quantiles: tuple[float, ...]) -> WindowFigures:
        """The jobs of ``queue`` finished in the window before the last read."""
        with self._lock:
            window = self._windows.get(queue)
            return (
                window.figures(quantiles)
                if window
                else WindowFigures(0, 0, (0.0,) * len(quantiles))
            )


def _percentile(ordered: Sequence[float], fraction: float) -> float:
    """Linear interpolation between the closest ranks, as percentile_cont does; 0 if empty."""
    if not ordered:
        return 0.0
    position = fraction * (len(ordered) - 1)
    below = int(position)
    above = min(below + 1, len(ordered) - 1)
    return ordered[below] + (ordered[above] - ordered[below]) * (position - below)


def _le(bound: float) -> str:
    return f"{bound:g}" if bound != int(bound) else f"{bound:.1f}"
