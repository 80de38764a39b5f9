"""What a worker holds: the jobs it claimed, each until its lease runs out (as last
renewed), which of them run, where each queue's next claim starts, and the hand-off
of claimed jobs to the handler threads."""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta

from pgq_exporter.queue.contract import Job

# How often a claim scans a queue from the front rather than from its mark.
RESCAN_EVERY = 1.0


@dataclass(slots=True)
class Held:
    job: Job
    expires: float  # monotonic time at which the lease runs out, as last renewed
    started: bool = False
    began: float = 0.0  # monotonic time its handler started


class Leases:
    """The jobs a worker holds and runs; every method takes the lock it needs."""

    def __init__(self, lease: timedelta) -> None:
        self.lease = lease.total_seconds()
        self._lock = threading.Lock()
        self._held: dict[int, Held] = {}
        self._running: dict[int, Job] = {}

    def __len__(self) -> int:
        return len(self._held)

    @property
    def running(self) -> bool:
        return bool(self._running)

    def hold(self, jobs: list[Job]) -> None:
        expires = time.monotonic() + self.lease
        with self._lock:
            for job in jobs:
                self._held[job.id] = Held(job, expires)

    def start(self, job: Job) -> bool | None:
        """Mark ``job`` running: True; False when its lease ran out meanwhile (it is let
        go), None when it was released."""
        with self._lock:
            held = self._held.get(job.id)
            if held is None:  # released during shutdown
                return None
            if time.monotonic() < held.expires:
                held.started = True
                held.began = time.monotonic()
                self._running[job.id] = job
                return True
            del self._held[job.id]
        return False

    def finished(self, job: Job) -> None:
        with self._lock:
            self._running.pop(job.id, None)

    def ran(self, jobs: list[Job]) -> list[float | None]:
        """Seconds since each job's handler started, by this process's clock: the
        database stamps the start as its now() less that, so no two clocks meet."""
        now = time.monotonic()
        with self._lock:
            held = [self._held.get(job.id) for job in jobs]
        return [now - h.began if h and h.started else None for h in held]

    def let_go(self, jobs: Iterable[Job]) -> list[Job]:
        """Stop holding ``jobs``: those that were still held."""
        with self._lock:
            return [job for job in jobs if self._held.pop(job.id, None) is not None]

    def alive(self, jobs: Iterable[Job]) -> set[int]:
        """The ids of ``jobs`` whose lease still runs."""
        now = time.monotonic()
        with self._lock:
            return {j.id for j in jobs if (h := self._held.get(j.id)) and h.expires > now}

    def held(self) -> list[Job]:
        with self._lock:
            return [h.job for h in self._held.values()]

    def renewed(self, jobs: list[Job], refused: set[int], at: float) -> list[Job]:
        """Heartbeat's answer for ``jobs``: each lease not ``refused`` runs on from
        ``at``; the refused jobs no handler started are let go, and returned (a started
        job's loss is counted when its outcome is refused)."""
        lost = []
        with self._lock:
            for job in jobs:
                entry = self._held.get(job.id)
                if entry is None:
                    continue
                if job.id not in refused:
                    entry.expires = at
                elif not entry.started:  # never run a job whose lease is gone
                    del self._held[job.id]
                    lost.append(job)
        return lost

    def unfinished(self) -> list[Job]:
        """The running jobs, let go (at shutdown, after the grace period)."""
        with self._lock:
            jobs = list(self._running.values())
            for job in jobs:
                self._held.pop(job.id, None)
        return jobs


class ClaimMarks:
    """Where each queue's next claim starts.

    After a full claim, at the newest scheduled_at it took (claim's ``after``),
    so that a long drain does not step over its own dead index entries again;
    from the front after a short claim, and at least every ``rescan_every``
    seconds, so that nothing below a mark waits long.
    """

    def __init__(self, rescan_every: float = RESCAN_EVERY) -> None:
        self._rescan_every = rescan_every
        self._marks: dict[str, datetime] = {}
        self._rescan_at = 0.0

    def start(self, queue: str) -> datetime | None:
        now = time.monotonic()
        if now >= self._rescan_at:
            self._rescan_at = now + self._rescan_every
            return None
        return self._marks.get(queue)

    def claimed(self, queue: str, jobs: list[Job], wanted: int) -> None:
        stamps = [job.scheduled_at for job in jobs if job.scheduled_at is not None]
        if len(jobs) == wanted and stamps:
            self._marks[queue] = max(stamps)
        else:
            self._marks.pop(queue, None)


class Handoff:
    """Claimed jobs on their way to the handler threads.

    A claim's jobs go in under one lock with one wake-up for as many threads as
    jobs; a queue.Queue would take its lock and notify once per job.
    """

    def __init__(self) -> None:
        self._jobs: deque[Job] = deque()
        self._added = threading.Condition(threading.Lock())

    def put_all(self, jobs: list[Job]) -> None:
        with self._added:
            self._jobs.extend(jobs)
            self._added.notify(len(jobs))

    def get(self, timeout: float) -> Job | None:
        """The next job, or None after ``timeout`` seconds without one."""
        with self._added:
            if not self._jobs:
                self._added.wait(timeout)
            return self._jobs.popleft() if self._jobs else None

    def take_all(self) -> list[Job]:
        with self._added:
            jobs = list(self._jobs)
            self._jobs.clear()
            return jobs
