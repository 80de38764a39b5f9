"""One scheduler for the whole process: a timer heap of jobs and a bounded pool of workers.

Every piece of background work is a job with a due time: a target's run of a group of
collectors, a target's first job (finding its layout), a discovery listing, the
sweep that stops targets nobody probes, and the render of /metrics. The workers
(at most ``limits.collections`` of them) take the job due first, run it, and put it
back at the time it asks for. So the threads are as many as the runs at once, whatever
the number of targets, and a scrape never waits for SQL: jobs store samples, and HTTP
serves what they rendered last.

The pool grows only when it must: one worker to start, and one more (up to the cap)
whenever a job is late while every worker is busy; a watch looks for that every
GROW_AFTER, so that workers held by a server that never answers cannot leave the due
jobs waiting. A worker with nothing to do for a while ends. Fewer workers at once
take turns at the interpreter with the HTTP threads less often, which keeps a probe's
tail latency down (docs/benchmarks.md, "Figures behind the design").
"""

from __future__ import annotations

import heapq
import itertools
import logging
import threading
import time
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


class Scheduler:
    def __init__(self, workers: int) -> None:
        self._size = workers
        self._heap: list[tuple[float, int, Job]] = []
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
        """Run up to ``workers`` jobs at once from now on (a reload of limits.collections):
        the ones too many end once their job is done; more start when jobs are late."""
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

    def at(self, due: float, job: Job) -> None:
        """Run ``job`` at ``due`` (time.monotonic()), or as soon after as a worker is free."""
        with self._lock:
            if self._stopping:
                return
            entry = (due, next(self._order), job)
            heapq.heappush(self._heap, entry)
            if self._heap[0] is entry:  # due before the one the leader sleeps for
                (self._leader_wakes if self._has_leader else self._followers_wake).notify()

    def now(self, job: Job) -> None:
        self.at(time.monotonic(), job)

    @property
    def busy(self) -> int:
        """Workers running a job now."""
        with self._lock:
            return self._busy

    def late(self) -> float:
        """How long the first due job has waited for a worker; 0 when none waits."""
        with self._lock:
            if not self._heap:
                return 0.0
            return max(0.0, time.monotonic() - self._heap[0][0])

    @property
    def queued(self) -> int:
        with self._lock:
            return len(self._heap)

    def stop(self, wait: float) -> list[threading.Thread]:
        """Take no more jobs; wait up to ``wait`` seconds for those running to end, and
        return the workers still running one."""
        self._stopped.set()
        with self._lock:
            self._stopping = True
            self._heap.clear()
            self._leader_wakes.notify_all()
            self._followers_wake.notify_all()
        deadline = time.monotonic() + wait
        for thread in self._threads:
            thread.join(max(0.0, deadline - time.monotonic()))
        return [thread for thread in self._threads if thread.is_alive()]

    def _work(self) -> None:
        while True:
            with self._lock:
                job, due = self._next()
                if job is None:
                    return
                self._busy += 1
            try:
                self._run(job, due)
            finally:
                with self._lock:
                    self._busy -= 1

    def _next(self) -> tuple[Job | None, float]:
        """The next due job, waiting for it (lock held); (None, 0) once stopping, or for
        a worker too many after a resize."""
        while not self._stopping:
            if len(self._threads) > self._size:  # one too many: this one retires
                self._threads.remove(threading.current_thread())
                self._followers_wake.notify_all()
                self._leader_wakes.notify_all()
                return None, 0.0
            now = time.monotonic()
            if self._heap and self._heap[0][0] <= now:
                due, _, job = heapq.heappop(self._heap)
                if not self._has_leader:
                    self._followers_wake.notify()  # one of them sleeps for the next job
                self._grow(now - due)
                return job, due
            if self._has_leader or not self._heap:
                if not self._followers_wake.wait(IDLE_END) and len(self._threads) > 1:
                    self._threads.remove(threading.current_thread())
                    return None, 0.0
                continue
            self._has_leader = True
            try:
                self._leader_wakes.wait(self._heap[0][0] - time.monotonic())
            finally:
                self._has_leader = False
        return None, 0.0

    def _grow(self, late: float, taking: int = 1) -> None:
        """One more worker, when a job is ``late`` with every worker busy (lock held;
        ``taking``: the caller is a worker about to take it)."""
        running = len(self._threads)
        if late > GROW_AFTER and self._busy + taking >= running and running < self._size:
            self._spawn_locked()

    def _watch(self) -> None:
        """Grow the pool when every worker is held and the first job waits past due."""
        while not self._stopped.wait(GROW_AFTER):
            with self._lock:
                if self._heap:
                    self._grow(time.monotonic() - self._heap[0][0], taking=0)

    def _run(self, job: Job, due: float) -> None:
        if job.cancelled:
            return
        now = time.monotonic()
        try:
            again = job.run(now, now - due)
        except Exception:  # a job's bug must not take its worker with it
            log.exception("scheduled job failed", extra={"job": type(job).__name__})
            return
        if again is not None and not job.cancelled:
            self.at(again, job)
