"""The scheduler's own logic: jobs run when due, on a fixed pool of workers, and stop."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field

from pgq_exporter.scheduler import Scheduler
from tests.support import wait_for


@dataclass(eq=False)
class _Job:
    every: float | None = None  # run again this long after each run; None: once
    runs: list[float] = field(default_factory=list)
    lateness: list[float] = field(default_factory=list)
    cancelled: bool = False
    hold: threading.Event | None = None  # a run waits for it

    def run(self, now: float, late: float) -> float | None:
        self.runs.append(now)
        self.lateness.append(late)
        if self.hold is not None:
            self.hold.wait(10)
        return None if self.every is None else now + self.every


def test_a_job_runs_when_due_and_again_on_its_interval() -> None:
    scheduler = Scheduler(2)
    scheduler.start()
    job = _Job(every=0.05)
    start = time.monotonic()
    scheduler.at(start + 0.1, job)
    wait_for(lambda: len(job.runs) >= 3, "three runs")
    scheduler.stop(1)
    assert job.runs[0] >= start + 0.1  # never early
    assert all(b - a >= 0.05 for a, b in zip(job.runs, job.runs[1:], strict=False))


def test_the_workers_are_the_pool_however_many_jobs() -> None:
    before = threading.active_count()
    scheduler = Scheduler(3)
    scheduler.start()
    jobs = [_Job(every=0.01) for _ in range(500)]
    for job in jobs:
        scheduler.now(job)
    wait_for(lambda: all(job.runs for job in jobs), "every job's first run")
    assert threading.active_count() - before == 3
    scheduler.stop(1)


def test_a_job_due_sooner_wakes_the_sleeping_worker() -> None:
    scheduler = Scheduler(1)
    scheduler.start()
    later = _Job()
    scheduler.at(time.monotonic() + 60, later)  # the worker sleeps for this one
    wait_for(lambda: scheduler.queued == 1 and scheduler.busy == 0, "the worker asleep")
    sooner = _Job()
    scheduler.now(sooner)
    wait_for(lambda: sooner.runs, "the sooner job to run without waiting 60 s", timeout=5)
    assert not later.runs
    scheduler.stop(1)


def test_a_busy_pool_makes_a_due_job_late_and_says_how_late() -> None:
    scheduler = Scheduler(1)
    scheduler.start()
    hold = threading.Event()
    blocker, waiting = _Job(hold=hold), _Job()
    scheduler.now(blocker)
    wait_for(lambda: scheduler.busy == 1, "the only worker busy")
    scheduler.now(waiting)
    time_held = 0.2
    threading.Timer(time_held, hold.set).start()
    wait_for(lambda: waiting.runs, "the waiting job")
    assert waiting.lateness[0] >= time_held * 0.9
    scheduler.stop(1)


def test_a_cancelled_job_does_not_run_and_stop_ends_the_workers() -> None:
    scheduler = Scheduler(2)
    scheduler.start()
    cancelled = _Job(cancelled=True)
    scheduler.now(cancelled)
    ran = _Job()
    scheduler.now(ran)
    wait_for(lambda: ran.runs, "the other job")
    assert not cancelled.runs
    assert scheduler.stop(1) == []
    scheduler.now(_Job())  # refused once stopping
    assert scheduler.queued == 0


def test_resize_adds_and_retires_workers() -> None:
    before = threading.active_count()
    scheduler = Scheduler(2)
    scheduler.start()
    scheduler.resize(4)
    assert threading.active_count() - before == 4
    scheduler.resize(1)
    scheduler.now(_Job())  # wakes the idle workers, which find themselves too many
    wait_for(lambda: threading.active_count() - before == 1, "three workers to end")
    scheduler.stop(1)
