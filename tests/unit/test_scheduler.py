"""The scheduler's own logic: jobs run when due, on a pool that grows when jobs are late
and shrinks when idle, and stop."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field

import pytest

from pgq_exporter.runtime import scheduler as scheduler_module
from pgq_exporter.runtime.scheduler import Scheduler
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


def test_the_pool_grows_to_its_cap_under_load_and_no_further() -> None:
    scheduler = Scheduler(3)
    scheduler.start()
    assert scheduler.workers == 1  # one worker to start
    holds = [threading.Event() for _ in range(6)]
    jobs = [_Job(hold=hold) for hold in holds]  # each holds its worker until released
    for job in jobs:
        scheduler.at(time.monotonic() - 1, job)  # late already
    wait_for(lambda: scheduler.busy == 3, "three workers busy")
    assert scheduler.workers == 3
    assert sum(thread.name == "worker" for thread in threading.enumerate()) >= 3
    for hold in holds:
        hold.set()
    wait_for(lambda: all(job.runs for job in jobs), "every job run")
    scheduler.stop(1)


def test_an_idle_worker_ends_and_one_is_always_left(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(scheduler_module, "IDLE_END", 0.2)
    scheduler = Scheduler(3)
    scheduler.start()
    holds = [threading.Event() for _ in range(3)]
    for hold in holds:
        scheduler.at(time.monotonic() - 1, _Job(hold=hold))
    wait_for(lambda: scheduler.workers == 3, "three workers")
    for hold in holds:
        hold.set()
    wait_for(lambda: scheduler.workers == 1, "the idle ones to end", timeout=10)
    late = _Job()
    scheduler.now(late)
    wait_for(lambda: late.runs, "the one left to run a new job")
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


def test_a_smaller_cap_ends_the_workers_too_many() -> None:
    scheduler = Scheduler(3)
    scheduler.start()
    holds = [threading.Event() for _ in range(3)]
    for hold in holds:
        scheduler.at(time.monotonic() - 1, _Job(hold=hold))
    wait_for(lambda: scheduler.workers == 3, "three workers")
    scheduler.resize(1)
    for hold in holds:
        hold.set()
    wait_for(lambda: scheduler.workers == 1, "two workers to end")
    scheduler.stop(1)


def test_a_budget_runs_at_most_its_cap_and_leaves_the_other_workers_to_the_rest() -> None:
    """Jobs of a full budget wait however overdue they are; a job outside it, due later,
    runs at once; once the budget has room, its next job runs."""
    scheduler = Scheduler(1)
    scheduler.set_caps({"probes": 2}, beside=2)
    scheduler.start()
    holds = [threading.Event() for _ in range(4)]
    flood = [_Job(hold=hold) for hold in holds]
    for job in flood:
        scheduler.at(time.monotonic() - 10, job, ("probes", "module:a"))
    wait_for(lambda: scheduler.busy == 2, "the budget's two jobs running")
    listed = _Job(every=0.05)
    scheduler.now(listed)
    wait_for(lambda: len(listed.runs) >= 5, "the listed job on its interval")
    assert sum(bool(job.runs) for job in flood) == 2 and scheduler.busy == 2
    holds[0].set()
    wait_for(lambda: sum(bool(job.runs) for job in flood) == 3, "the next in the budget")
    for hold in holds:
        hold.set()
    wait_for(lambda: all(job.runs for job in flood), "every flood job")
    scheduler.stop(1)


def test_nested_budgets_each_hold_their_cap() -> None:
    scheduler = Scheduler(1)
    scheduler.set_caps({"probes": 3, "first": 1}, beside=3)
    scheduler.start()
    holds = [threading.Event() for _ in range(6)]
    firsts = [_Job(hold=holds[i]) for i in range(3)]
    others = [_Job(hold=holds[3 + i]) for i in range(3)]
    for job in firsts:
        scheduler.now(job, ("probes", "module:a", "first"))
    for job in others:
        scheduler.now(job, ("probes", "module:a"))
    wait_for(lambda: scheduler.busy == 3, "the probes budget full")
    assert sum(bool(j.runs) for j in firsts) == 1 and sum(bool(j.runs) for j in others) == 2
    for hold in holds:
        hold.set()
    wait_for(lambda: all(j.runs for j in firsts + others), "every job")
    scheduler.stop(1)


def test_budgeted_jobs_holding_all_their_workers_leave_every_listed_worker() -> None:
    """A flood that holds every worker of the budgets (each job waiting out a connect)
    takes none of the listed databases': as many listed jobs as there are workers for
    them run at once beside it."""
    scheduler = Scheduler(2)
    scheduler.set_caps({"probes": 2, "module:a": 2}, beside=2)
    scheduler.start()
    release = threading.Event()
    flood = [_Job(hold=release) for _ in range(10)]
    for job in flood:
        scheduler.at(time.monotonic() - 10, job, ("probes", "module:a"))
    wait_for(lambda: scheduler.busy == 2, "the flood holding its two workers")
    listed = [_Job(hold=release) for _ in range(3)]
    for job in listed:
        scheduler.now(job)
    wait_for(lambda: scheduler.busy == 4, "both listed workers busy beside the flood")
    assert sum(bool(job.runs) for job in listed) == 2  # the third waits for a listed one
    assert sum(bool(job.runs) for job in flood) == 2
    assert scheduler.workers == 4
    release.set()
    wait_for(lambda: all(job.runs for job in flood + listed), "every job")
    scheduler.stop(1)


class _FailingJob(_Job):
    def run(self, now: float, late: float) -> float | None:
        super().run(now, late)
        raise RuntimeError("a job's bug")


def test_the_hook_after_a_job_runs_after_each_one_even_a_failed_one() -> None:
    after: list[int] = []
    jobs = [_Job(), _FailingJob(), _Job()]
    scheduler = Scheduler(1, lambda: after.append(sum(len(job.runs) for job in jobs)))
    scheduler.start()
    for job in jobs:
        scheduler.now(job)
    wait_for(lambda: len(after) == 3, "the hook after each of the three jobs")
    assert after == [1, 2, 3]  # each time once its job had run
    scheduler.stop(1)
