"""The window of finished jobs: counts and percentiles kept as jobs come and go, equal to
counting and sorting the jobs in the window from scratch."""

from __future__ import annotations

import random

from pgq_exporter.collectors.finished import Finished, _percentile, _Window

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
