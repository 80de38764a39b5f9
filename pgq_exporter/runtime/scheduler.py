"""One scheduler for the whole process: a timer heap of jobs and a bounded pool of workers.

Every piece of background work is a job with a due time: a target's run of a group of
collectors, a target's first job (finding its layout), a discovery listing, the
sweep that stops targets nobody probes, and the render of /metrics. The workers
(at most ``limits.collections`` of them) take the job due first, run it, and put it
back at the time it asks for. So the threads are as many as the runs at once, whatever
the number of targets, and a scrape never waits for SQL: jobs store samples, and HTTP
serves what they rendered last.

The pool grows only when it must: one worker to start, and one more (up to the caps)
whenever a job is late while every worker is busy; a watch looks for that every
GROW_AFTER, so that workers held by a server that never answers cannot leave the due
jobs waiting. A worker with nothing to do for a while ends. Fewer workers at once
take turns at the interpreter with the HTTP threads less often, which keeps a probe's
tail latency down (docs/benchmarks.md, "Figures behind the design").

Budgets: each job is scheduled in a lane, the budgets it counts against (a listed
database's jobs in none; a probe target's in "probes" and its origin's, and its first
job in "first" too). The jobs of no budget run on up to ``workers`` workers, and the
budgeted ones on up to ``beside`` more of their own, each budget at most its cap of
jobs at once (``set_caps``); a worker takes the job due first among the lanes that
have room. So a flood of probe targets, however long it holds its workers, waits for
its own share, and the listed databases, the sweep and the renders keep all of theirs.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import threading
import time
from collections.abc import Callable
from typing import Protocol

log = logging.getLogger("pgq_exporter.scheduler")

# A job this late, with every worker busy, starts one more worker (up to the cap).
GROW_AFTER = 0.05
# A worker with nothing to do this long ends, down to one.
IDLE_END = 30.0


class Job(Protocol):
    """Work the scheduler runs when it is due."""

    @property
    def cancelled(self) -> bool:
        """A cancelled job is dropped when it comes due."""

    def run(self, now: float, late: float) -> float | None:
        """Do the work, ``late`` seconds after it was due; when to run again
        (time.monotonic()), or None for never."""


# The budgets a job counts against; the lane of the exporter's own jobs and of the
# listed databases counts against none.
Lane = tuple[str, ...]
UNBUDGETED: Lane = ()
_Entry = tuple[float, int, Job]


class Scheduler:
    def __init__(self, workers: int, after_job: Callable[[], None] = lambda: None) -> None:
        self._size = workers  # for the jobs of no budget
        self._after_job = after_job  # in the worker, once the job is done
        self._beside = 0  # for the budgeted jobs, beside those (set_caps)
        self._lanes: dict[Lane, list[_Entry]] = {}  # a heap of jobs per lane
        self._caps: dict[str, int] = {}  # budget -> jobs it may run at once
        self._running: dict[str, int] = {}  # budget -> jobs running now
        self._running_budgeted = 0  # of the _busy workers, those running a budgeted job
        self._order = itertools.count()  # ties run in the order they were scheduled
        self._lock = threading.Lock()
        # One idle worker (the leader) sleeps until the first job is due; the others
        # sleep until the leader takes it. So a due job wakes one thread, not all.
        self._leader_wakes = threading.Condition(self._lock)
        self._followers_wake = threading.Condition(self._lock)
        self._has_leader = False
        self._stopping = False
        self._threads: list[threading.Thread] = []
        self._busy = 0
        self._stopped = threading.Event()

    def start(self) -> None:
        self._spawn()
        threading.Thread(target=self._watch, name="scheduler-watch", daemon=True).start()

    @property
    def workers(self) -> int:
        """Workers running now (busy or waiting for a job)."""
        with self._lock:
            return len(self._threads)

    def resize(self, workers: int) -> None:
        """Run up to ``workers`` jobs of no budget at once from now on (a reload of
        limits.collections): the workers too many end once their job is done; more start
        when jobs are late."""
        with self._lock:
            self._size = workers
            self._followers_wake.notify_all()
            self._leader_wakes.notify_all()

    def _spawn(self) -> None:
        with self._lock:
            self._spawn_locked()

    def _spawn_locked(self) -> None:
        thread = threading.Thread(target=self._work, name="worker", daemon=True)
        self._threads.append(thread)
        thread.start()

    def set_caps(self, caps: dict[str, int], *, beside: int) -> None:
        """How many jobs each budget may run at once (a budget not named has no cap
        but ``beside``), on up to ``beside`` workers of their own together."""
        with self._lock:
            self._caps = dict(caps)
            self._beside = beside
            self._followers_wake.notify_all()
            self._leader_wakes.notify_all()

    def at(self, due: float, job: Job, lane: Lane = UNBUDGETED) -> None:
        """Run ``job`` at ``due`` (time.monotonic()), or as soon after as a worker is free
        and its lane's budgets have room."""
        with self._lock:
            if self._stopping:
                return
            entry = (due, next(self._order), job)
            first = self._first_eligible()
            heapq.heappush(self._lanes.setdefault(lane, []), entry)
            if first is None or entry[:2] < first[:2]:  # before what the leader sleeps for
                (self._leader_wakes if self._has_leader else self._followers_wake).notify()

    def now(self, job: Job, lane: Lane = UNBUDGETED) -> None:
        self.at(time.monotonic(), job, lane)

    @property
    def busy(self) -> int:
        """Workers running a job now."""
        with self._lock:
            return self._busy

    def late(self) -> float:
        """How long the first due job outside any budget (a listed database's, the
        exporter's own) has waited for a worker; 0 when none waits. A budgeted job may
        wait for its budget by design."""
        with self._lock:
            heap = self._lanes.get(UNBUDGETED)
            if not heap:
                return 0.0
            return max(0.0, time.monotonic() - heap[0][0])

    @property
    def queued(self) -> int:
        with self._lock:
            return sum(len(heap) for heap in self._lanes.values())

    def stop(self, wait: float) -> list[threading.Thread]:
        """Take no more jobs; wait up to ``wait`` seconds for those running to end, and
        return the workers still running one."""
        self._stopped.set()
        with self._lock:
            self._stopping = True
            self._lanes.clear()
            self._leader_wakes.notify_all()
            self._followers_wake.notify_all()
        deadline = time.monotonic() + wait
        for thread in self._threads:
            thread.join(max(0.0, deadline - time.monotonic()))
        return [thread for thread in self._threads if thread.is_alive()]

    def _work(self) -> None:
        while True:
            with self._lock:
                job, due, lane = self._next()
                if job is None:
                    return
                self._busy += 1
                self._running_budgeted += bool(lane)
                for budget in lane:
                    self._running[budget] = self._running.get(budget, 0) + 1
            try:
                self._run(job, due, lane)
            finally:
                with self._lock:
                    self._busy -= 1
                    self._running_budgeted -= bool(lane)
                    for budget in lane:
                        self._running[budget] -= 1
                    if lane:  # room in its budgets: a job waiting on them may be due
                        (self._leader_wakes if self._has_leader else self._followers_wake).notify()

    def _next(self) -> tuple[Job | None, float, Lane]:
        """The next due job whose budgets have room, waiting for it (lock held); None
        once stopping, or for a worker too many after a resize."""
        while not self._stopping:
            if len(self._threads) > self._most:  # one too many: this one retires
                self._threads.remove(threading.current_thread())
                self._followers_wake.notify_all()
                self._leader_wakes.notify_all()
                return None, 0.0, UNBUDGETED
            now = time.monotonic()
            first = self._first_eligible()
            if first is not None and first[0] <= now:
                due, _, job, lane = first
                heapq.heappop(self._lanes[lane])
                if not self._has_leader:
                    self._followers_wake.notify()  # one of them sleeps for the next job
                self._grow(now - due)
                return job, due, lane
            if self._has_leader or first is None:
                if not self._followers_wake.wait(IDLE_END) and len(self._threads) > 1:
                    self._threads.remove(threading.current_thread())
                    return None, 0.0, UNBUDGETED
                continue
            self._has_leader = True
            try:
                self._leader_wakes.wait(first[0] - time.monotonic())
            finally:
                self._has_leader = False
        return None, 0.0, UNBUDGETED

    def _first_eligible(self) -> tuple[float, int, Job, Lane] | None:
        """The job due first among the lanes whose budgets have room (lock held)."""
        best: tuple[float, int, Job, Lane] | None = None
        for lane, heap in self._lanes.items():
            if heap and (best is None or heap[0][:2] < best[:2]) and self._room(lane):
                best = (*heap[0], lane)
        return best

    @property
    def _most(self) -> int:
        """Workers the pool may hold (lock held)."""
        return self._size + self._beside

    def _room(self, lane: Lane) -> bool:
        if not lane:
            return self._busy - self._running_budgeted < self._size
        return self._running_budgeted < self._beside and all(
            self._running.get(b, 0) < self._caps.get(b, self._beside) for b in lane
        )

    def _grow(self, late: float, taking: int = 1) -> None:
        """One more worker, when a job is ``late`` with every worker busy (lock held;
        ``taking``: the caller is a worker about to take it)."""
        running = len(self._threads)
        if late > GROW_AFTER and self._busy + taking >= running and running < self._most:
            self._spawn_locked()

    def _watch(self) -> None:
        """Grow the pool when every worker is held and a job that may run waits past due."""
        while not self._stopped.wait(GROW_AFTER):
            with self._lock:
                first = self._first_eligible()
                if first is not None:
                    self._grow(time.monotonic() - first[0], taking=0)

    def _run(self, job: Job, due: float, lane: Lane) -> None:
        if job.cancelled:
            return
        now = time.monotonic()
        try:
            again = job.run(now, now - due)
        except Exception:  # a job's bug must not take its worker with it
            log.exception("scheduled job failed", extra={"job": type(job).__name__})
            return
        finally:
            self._after_job()
        if again is not None and not job.cancelled:
            self.at(again, job, lane)
