"""The window of finished jobs: counts and percentiles kept as jobs come and go, equal to
counting and sorting the jobs in the window from scratch."""

from __future__ import annotations

import random

from pgq_exporter.collectors.finished import Finished, FinishedJobs, _percentile, _Window

QUANTILES = (0.5, 0.95, 0.99)


def _from_scratch(kept: list[Finished], cutoff: float) -> tuple[int, int, tuple[float, ...]]:
    inside = [f for f in kept if f.at > cutoff]
    done = sum(f.done for f in inside)
    durations = sorted(f.processing for f in inside if f.processing is not None)
    return done, len(inside) - done, tuple(_percentile(durations, q) for q in QUANTILES)


def test_the_window_equals_sorting_it_from_scratch_whatever_the_commit_order() -> None:
    rng = random.Random(7)
    window, every = _Window(), []
    now = 1000.0
    for _ in range(200):  # reads: each brings jobs, some finished before the last read
        for _ in range(rng.randint(0, 40)):
            late = rng.random() < 0.1  # committed late: finished well before it arrives
            at = now - (rng.uniform(5, 60) if late else rng.uniform(0, 1))
            processing = None if rng.random() < 0.05 else round(rng.uniform(0, 3), 1)
            finished = Finished(at, rng.random() < 0.9, processing)  # equal values repeat
            window.add(finished)
            every.append(finished)
        cutoff = now - 30
        window.forget_up_to(cutoff)
        figures = window.figures(QUANTILES)
        assert (figures.done, figures.failed, figures.percentiles) == _from_scratch(every, cutoff)
        now += rng.uniform(0.5, 2)


def test_an_empty_window_reads_zero() -> None:
    window = _Window()
    window.add(Finished(10.0, True, 1.5))
    window.forget_up_to(10.0)  # finished exactly at the cutoff: out, as in the SQL (> cutoff)
    figures = window.figures(QUANTILES)
    assert (figures.done, figures.failed, figures.percentiles) == (0, 0, (0.0, 0.0, 0.0))


def test_every_queues_window_loses_its_jobs_on_time_though_a_read_looks_at_few() -> None:
    """FinishedJobs.advance looks only at the windows a job leaves: each queue's figures
    equal its jobs counted from scratch, with late commits that become a window's oldest
    and windows that empty and fill again."""
    rng = random.Random(11)
    jobs = FinishedJobs()
    every: dict[str, list[Finished]] = {q: [] for q in ("a", "b", "c", "d")}
    now = 1000.0
    for _ in range(300):
        for _ in range(rng.randint(0, 6)):
            queue = rng.choice("abcd" if rng.random() < 0.7 else "a")
            at = now - (rng.uniform(20, 45) if rng.random() < 0.15 else rng.uniform(0, 1))
            finished = Finished(at, rng.random() < 0.8, round(rng.uniform(0, 3), 1))
            with jobs.lock:
                jobs.take(queue, finished.done, (finished.processing, None, at), count=False)
            every[queue].append(finished)
        with jobs.lock:
            jobs.advance(now, 30.0)
        for queue, kept in every.items():
            figures = jobs.window(queue, QUANTILES)
            found = (figures.done, figures.failed, figures.percentiles)
            assert found == _from_scratch(kept, now - 30.0), (queue, now)
        now += rng.uniform(0.5, 3) if rng.random() < 0.9 else 40.0  # some reads find all gone


def test_a_wait_counted_into_one_queue_leaves_the_others_at_zero() -> None:
    """Queues with no wait yet share their zeros; counting one gives it its own."""
    jobs = FinishedJobs()
    jobs.take("mail", True, (0.5, 10.0, 100.0), count=True)
    jobs.take("reports", True, (None, None, None), count=True)
    jobs.take("idle", True, (None, None, None), count=True)
    assert jobs.stats["mail"].within == [1] * len(jobs.stats["mail"].thresholds)
    assert list(jobs.stats["reports"].within) == [0] * len(jobs.stats["reports"].thresholds)
    assert jobs.stats["mail"].processing.forms()[0][-1] == ("+Inf", 1.0)
    assert jobs.stats["reports"].processing.forms()[0][-1] == ("+Inf", 0.0)
    assert jobs.stats["reports"].within is jobs.stats["idle"].within
