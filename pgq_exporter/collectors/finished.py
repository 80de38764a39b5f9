"""Finished jobs, each observed once by a feed: per queue, the histograms of processing
and wait time and the completed and failed totals, and the trailing window of the
jobs finished within it. The reference queue's feed (finished_feed.py) and a library
preset's (library_feed.py) fill it; job_histograms and queue_window read it.
"""

from __future__ import annotations

import functools
import heapq
import itertools
import threading
from collections.abc import Sequence
from dataclasses import dataclass

from sortedcontainers import SortedList

from pgq_exporter.histograms import DEFAULT_CLASSIC, ClassicLayout, Histogram, seconds_text
from pgq_exporter.samples import AnySample, HistogramSample, Sample, count_value, queue_labels


# Slots: one a queue, with its two histograms and window; their dicts held 9 MB at
# 10,000 queues.
@dataclass(slots=True)
class QueueStats:
    processing: Histogram
    wait: Histogram
    completed: int = 0
    failed: int = 0
    # The waits observed, and of them those at or under each of the layout's thresholds
    # (zeros shared by every queue until its first wait).
    thresholds: tuple[float, ...] = ()
    waits: int = 0
    within: Sequence[int] = ()

    @classmethod
    def empty(cls, layout: ClassicLayout) -> QueueStats:
        thresholds = layout.wait_thresholds
        return cls(Histogram(layout.processing), Histogram(layout.wait),
                   thresholds=thresholds, within=_zeros(len(thresholds)))  # fmt: skip

    def count(self, done: bool, processing: float | None, wait: float | None) -> None:
        if done:
            self.completed += 1
        else:
            self.failed += 1
        if processing is not None:
            self.processing.observe(max(processing, 0.0))
        if wait is not None:
            self.wait.observe(max(wait, 0.0))
            self.waits += 1
            within = self.within
            if not isinstance(within, list):
                within = self.within = list(within)
            for i, threshold in enumerate(self.thresholds):
                if wait <= threshold:
                    within[i] += 1


@functools.cache
def _zeros(n: int) -> tuple[int, ...]:
    return (0,) * n


@dataclass(frozen=True, slots=True)
class Outcomes:
    """What a layout's feed of finished jobs knows of each job."""

    finishes: tuple[str, ...] = ("done", "failed")  # the outcomes it sees
    processing: bool = True  # when each started
    wait: bool = True  # when each became due


@functools.lru_cache(maxsize=64)
def outcomes_of(
    finishes: tuple[str, ...] = ("done", "failed"), processing: bool = True, wait: bool = True
) -> Outcomes:
    """One Outcomes for each kind: every queue's inputs at every run hold it, and are
    compared with the last run's, by identity first (a new one each run made that
    10,000 calls of its __eq__ a collector)."""
    return Outcomes(finishes, processing, wait)


def stats_samples(
    queue: str, stats: QueueStats, outcomes: Outcomes, totals: tuple[int, int] | None = None
) -> list[AnySample]:
    """A queue's histograms and totals, of what its feed knows; ``totals``, where given,
    the completed and failed totals in place of the feed's own."""
    labels = queue_labels(queue)
    samples: list[AnySample] = []
    for name, histogram, known in (
        ("pgq_job_processing_seconds", stats.processing, outcomes.processing),
        ("pgq_job_wait_seconds", stats.wait, outcomes.wait),
    ):
        if known:
            buckets, native = histogram.forms()
            samples.append(HistogramSample(name, labels, buckets, histogram.total, native))
    if outcomes.wait:
        samples.append(Sample("pgq_job_waits_total", labels, count_value(stats.waits)))
        samples += [
            Sample("pgq_job_waits_within_total", (queue, seconds_text(t)), count_value(n))
            for t, n in zip(stats.thresholds, stats.within, strict=True)
        ]
    completed, failed = totals or (stats.completed, stats.failed)
    if "done" in outcomes.finishes:
        samples.append(Sample("pgq_jobs_completed_total", labels, count_value(completed)))
    if "failed" in outcomes.finishes:
        samples.append(Sample("pgq_jobs_failed_total", labels, count_value(failed)))
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

    __slots__ = ("_arrivals", "_by_time", "_durations", "changes", "done", "failed", "listed")

    def __init__(self) -> None:
        # (finished at, arrival, done, processing), by finishing time: a late commit
        # arrives after jobs that finished later.
        self._by_time: list[tuple[float, int, bool, float | None]] = []
        self._arrivals = itertools.count()
        self._durations = SortedList()
        self.done = 0
        self.failed = 0
        self.changes = 0  # jobs that came and went: its figures change only with it
        self.listed: float | None = None  # its entry in FinishedJobs._due (see there)

    @property
    def oldest(self) -> float | None:
        """When its oldest job finished (None: it holds none)."""
        return self._by_time[0][0] if self._by_time else None

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
        self.changes += 1
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


class FinishedJobs:
    """Every job a feed observed: counted in its queue's histograms and totals (unless
    it came with the window's first fill), and kept in its queue's window until it
    leaves it. Shared by the collectors of one database; each change is serialised."""

    def __init__(self, layout: ClassicLayout = DEFAULT_CLASSIC) -> None:
        self.layout = layout  # the classic buckets of its histograms
        self.stats: dict[str, QueueStats] = {}
        self.now = 0.0  # the database's now() at the last read
        self._windows: dict[str, _Window] = {}
        # When each window's oldest job leaves it, as a heap of (finished at, queue): a
        # window is listed at its oldest job, or before it (``listed``), so that a read
        # looks only at the windows a job leaves, not at every queue's. An entry that is
        # not its window's ``listed`` is one left behind when an older job came in.
        self._due: list[tuple[float, str]] = []
        self.lock = threading.Lock()

    def take(
        self,
        queue: str,
        done: bool,
        times: tuple[float | None, float | None, float | None],
        *,
        count: bool,
    ) -> None:
        """One job's finishing (lock held): ``times`` are its processing and wait time and
        when it finished, each None where unknown; ``count``: into the histograms and
        totals too, else only into the window."""
        processing, wait, finished = times
        stats = self.stats.get(queue)
        if stats is None:
            stats = self.stats[queue] = self.empty_stats()
        if count:
            stats.count(done, processing, wait)
        if finished is not None:
            window = self._windows.get(queue)
            if window is None:
                window = self._windows[queue] = _Window()
            oldest = window.oldest
            window.add(Finished(finished, done, processing))
            if oldest is None or finished < oldest:
                window.listed = finished
                heapq.heappush(self._due, (finished, queue))

    def empty_stats(self) -> QueueStats:
        return QueueStats.empty(self.layout)

    @functools.cached_property
    def blank(self) -> QueueStats:
        """The stats of a queue with no finished job yet, to read, never to count into:
        one for every such queue, its histograms' forms made once."""
        return self.empty_stats()

    def advance(self, now: float, window: float) -> None:
        """The database's clock at a read (lock held): the jobs that finished more than
        ``window`` seconds before it leave the window."""
        self.now = max(self.now, now)
        cutoff = self.now - window
        due, windows = self._due, self._windows
        while due and due[0][0] <= cutoff:
            at, queue = heapq.heappop(due)
            queue_window = windows[queue]
            queue_window.forget_up_to(cutoff)
            if at != queue_window.listed:
                continue  # left behind: the window's own entry is older still
            oldest = queue_window.listed = queue_window.oldest
            if oldest is not None:
                heapq.heappush(due, (oldest, queue))

    def window_changes(self, queues: list[str]) -> list[int]:
        """Per queue, how many times a job came into its window or left it: its figures
        are the same while this is (-1: no job ever did)."""
        windows = self._windows
        with self.lock:
            return [found.changes if (found := windows.get(q)) else -1 for q in queues]

    def window(self, queue: str, quantiles: tuple[float, ...]) -> WindowFigures:
        """The jobs of ``queue`` finished in the window before the last read."""
        with self.lock:
            found = self._windows.get(queue)
            if found is None:
                return WindowFigures(0, 0, (0.0,) * len(quantiles))
            return found.figures(quantiles)


def _percentile(ordered: Sequence[float], fraction: float) -> float:
    """Linear interpolation between the closest ranks, as percentile_cont does; 0 if empty."""
    if not ordered:
        return 0.0
    position = fraction * (len(ordered) - 1)
    below = int(position)
    above = min(below + 1, len(ordered) - 1)
    return ordered[below] + (ordered[above] - ordered[below]) * (position - below)
