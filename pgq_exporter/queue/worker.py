"""The reference worker: N handler threads on one or several queues.

It claims ahead: up to ``batch`` jobs (at least ``concurrency``) are held
while the handlers run, so a handler never waits on a claim. One dispatcher
thread records outcomes in batches and claims more, both in one transaction
(one commit): the handlers hand it their outcomes, and it writes them with
complete_and_claim when all succeeded (one statement), else with
complete_many and fail_many beside the claim in a pipeline, lingering up to
``flush_every`` seconds (or until ``flush_size`` outcomes) while handlers are
still running. With ``concurrency`` 1 there are no handler threads: the
dispatcher runs the jobs itself, with no hand-off per job. One
heartbeat_many call every third of the lease extends every lease the worker
holds, queued and running alike; a queued job whose lease ran out before it
could start is dropped, never run.

It wakes on LISTEN/NOTIFY with a polling fallback that backs off while idle,
and records a handler's exception with fail(). On stop (SIGTERM, SIGINT) it
claims no more, lets the running handlers finish within the grace period,
records their outcomes, and releases every job it could not finish so that
another worker can claim it at once. An outcome refused because the lease
was lost is logged and dropped: the newer owner's state is never overwritten.
"""

from __future__ import annotations

import logging
import os
import signal
import socket
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from types import FrameType
from typing import Any

import psycopg
from psycopg import sql

from pgq_exporter import DEFAULT_SCHEMA
from pgq_exporter.errors import DatabaseUnavailableError, first_line
from pgq_exporter.pg.connect import connect
from pgq_exporter.queue.contract import Call, Conn, Contract, Job, decode_payloads_as_text
from pgq_exporter.queue.leases import ClaimMarks, Handoff, Leases
from pgq_exporter.queue.names import check_queue_name, notify_channel
from pgq_exporter.queue.outbox import Outbox, Outcome
from pgq_exporter.queue.registry import Registration

log = logging.getLogger("pgq_exporter.worker")

JobHandler = Callable[[Job], None]
DB_ERRORS = (psycopg.Error, DatabaseUnavailableError)


@dataclass(frozen=True, slots=True)
class WorkerSettings:
    queues: tuple[str, ...]
    concurrency: int = 4
    batch: int = 10
    lease: timedelta = timedelta(seconds=30)
    grace: float = 10.0
    poll_min: float = 0.05
    poll_max: float = 5.0
    retry_backoff: timedelta = timedelta(seconds=1)
    flush_every: float = 0.005
    flush_size: int = 100
    name: str = field(default_factory=lambda: f"{socket.gethostname()}-{os.getpid()}")
    # Whether it keeps a row in the workers' registry (schema version 12), which the
    # exporter reads for pgq_workers.
    register: bool = True

    @property
    def heartbeat_every(self) -> float:
        return max(self.lease.total_seconds() / 3, 0.05)

    @property
    def capacity(self) -> int:
        """Jobs held at most: claimed ahead, running, or waiting to be recorded."""
        return max(self.batch, self.concurrency)

    @property
    def refill_at(self) -> int:
        """Free places that make a claim worth its round trip: half a batch."""
        return max(1, min(self.batch, self.capacity) // 2)


@dataclass
class WorkerStats:
    claimed: int = 0
    completed: int = 0
    failed: int = 0
    retried: int = 0
    lost: int = 0
    released: int = 0


@dataclass(frozen=True, slots=True)
class _Recorded:
    """What one round wrote, to be counted once its transaction committed."""

    done: int
    refused: set[int]
    outcomes: dict[int, str]


@dataclass(frozen=True, slots=True)
class _Recording:
    """The statements that record one round's outcomes, sent and not yet read."""

    done: int
    completing: Call[set[int]] | None
    failing: Call[dict[int, str]] | None

    def result(self) -> _Recorded:
        refused = self.completing.result() if self.completing else set()
        return _Recorded(self.done, refused, self.failing.result() if self.failing else {})


class Worker:
    def __init__(
        self, dsn: str, handler: JobHandler, settings: WorkerSettings, schema: str = DEFAULT_SCHEMA
    ) -> None:
        for name in settings.queues:
            check_queue_name(name)
        self.dsn = dsn
        self.handler = handler
        self.settings = settings
        self.schema = schema
        self.contract = Contract(schema)
        self.stats = WorkerStats()
        self._stopping = threading.Event()
        self._handoff = Handoff()
        self._claimed_here: deque[Job] = deque()  # the inline worker's claimed jobs
        self._leases = Leases(settings.lease)
        self._lock = threading.Lock()  # the stats'
        self._outbox = Outbox(settings.flush_size, settings.flush_every)
        self._next_queue = 0
        self._marks = ClaimMarks()
        self._registration = Registration(
            self.contract, settings.name, settings.queues, settings.concurrency,
            settings.heartbeat_every,
        )  # fmt: skip
        self._registering = settings.register  # until the schema is found to lack it

    # -- control --------------------------------------------------------------
    def stop(self) -> None:
        self._stopping.set()
        self._wake_dispatcher()

    def install_signal_handlers(self) -> None:
        def on_signal(signum: int, frame: FrameType | None) -> None:
            log.info("stopping", extra={"signal": signal.Signals(signum).name})
            self.stop()

        signal.signal(signal.SIGTERM, on_signal)
        signal.signal(signal.SIGINT, on_signal)

    def run(self) -> WorkerStats:
        """Work until stop() is called; then shut down gracefully and return the counts."""
        handlers = [
            threading.Thread(target=self._handle_loop, name=f"handler-{i}", daemon=True)
            for i in range(0 if self._inline else self.settings.concurrency)
        ]
        heartbeat = threading.Thread(target=self._heartbeat_loop, name="heartbeat", daemon=True)
        for thread in (*handlers, heartbeat):
            thread.start()
        try:
            self._dispatch_loop()
        finally:
            self._shut_down(handlers)
            heartbeat.join(self.settings.heartbeat_every + 5)
            self._leave()
        return self.stats

    @property
    def _inline(self) -> bool:
        """With one handler, the dispatcher runs the jobs itself: no hand-off per job."""
        return self.settings.concurrency == 1

    def _connect(self) -> Conn:
        conn = connect(self.dsn, application_name=f"pgq-worker {self.settings.name}")
        decode_payloads_as_text(conn)
        return conn

    # -- dispatching: record outcomes and claim more, in one transaction ---------
    def _dispatch_loop(self) -> None:
        idle = self.settings.poll_min
        while not self._stopping.is_set():
            try:
                with self._listening_connection() as conn, conn.cursor() as cursor:
                    while not self._stopping.is_set():
                        idle = self._dispatch(conn, cursor, idle)
                        if self._inline:
                            self._run_claimed()
            except DB_ERRORS as exc:
                log.warning("database unavailable; retrying", extra={"err": first_line(exc)})
                self._stopping.wait(idle)
                idle = min(idle * 2, self.settings.poll_max)

    @contextmanager
    def _listening_connection(self) -> Iterator[Conn]:
        conn = self._connect()
        try:
            for name in self.settings.queues:
                channel = notify_channel(self.schema, name)
                conn.execute(sql.SQL("LISTEN {}").format(sql.Identifier(channel)))
            yield conn
        finally:
            conn.close()

    def _dispatch(self, conn: Conn, cursor: psycopg.Cursor[Any], idle: float) -> float:
        """One round: record what finished and claim into the free places, or wait.

        Returns the next idle wait: the shortest while there is work, doubling
        while every queue is empty.
        """
        outcomes = self._take_outcomes()
        free = self.settings.capacity - len(self._leases) + len(outcomes)
        want = min(free, self.settings.batch) if free >= self.settings.refill_at else 0
        if not outcomes and not want:
            self._wait_for_outcomes(idle)
            return idle
        queue = self.settings.queues[self._next_queue]
        after = self._marks.start(queue)
        try:
            recorded, jobs = self._record_and_claim(conn, cursor, outcomes, queue, want, after)
        except DB_ERRORS as exc:
            self._keep_for_retry(outcomes, exc)
            raise
        self._settle(outcomes, recorded)
        self._hold(jobs)
        if want:
            self._marks.claimed(queue, jobs, want)
        if len(jobs) == want:
            return self.settings.poll_min
        if after is not None:
            return self.settings.poll_min  # short from the mark: look from the front now
        self._next_queue = (self._next_queue + 1) % len(self.settings.queues)
        if jobs or self._next_queue != 0 or self._claimed_here:
            return self.settings.poll_min  # the other queues may have some
        self._wait_for_jobs(conn, idle)
        return min(idle * 2, self.settings.poll_max)

    def _record_and_claim(  # noqa: PLR0917
        self,
        conn: Conn,
        cursor: psycopg.Cursor[Any],
        outcomes: list[Outcome],
        queue: str,
        want: int,
        after: datetime | None,
    ) -> tuple[_Recorded, list[Job]]:
        """Record ``outcomes`` and claim up to ``want`` jobs: one round trip, one commit.

        The steady round reuses ``cursor``; pipelined statements each need their own."""
        lease, name = self.settings.lease, self.settings.name
        if not want:
            with conn.pipeline():
                sent = self._send_record(conn, outcomes)
            return sent.result(), []
        if all(error is None for _, error in outcomes):
            # The steady round: only successes to record, in the one statement that claims.
            done = [job for job, _ in outcomes]
            claimed = self.contract.complete_and_claim(
                cursor, done, queue, want, lease, name, after, self._leases.ran(done)
            )
            return _Recorded(len(done), claimed.refused, {}), claimed.jobs
        with conn.pipeline():  # both in one implicit transaction
            sent = self._send_record(conn, outcomes)
            claim = self.contract.send_claim(conn, queue, want, lease, name, after)
        return sent.result(), claim.result()

    def _hold(self, jobs: list[Job]) -> None:
        self._leases.hold(jobs)
        self._count("claimed", len(jobs))
        if self._inline:
            self._claimed_here.extend(jobs)
            return
        self._handoff.put_all(jobs)

    def _wait_for_outcomes(self, timeout: float) -> None:
        self._outbox.wait(timeout, self._stopping)

    def _wait_for_jobs(self, conn: Conn, idle: float) -> None:
        """Until a notification, an outcome to record, stop, or ``idle`` seconds."""
        deadline = time.monotonic() + idle
        # While jobs are held, their outcomes must not wait for the whole poll.
        step = 0.01 if len(self._leases) else 0.25
        while not self._stopping.is_set() and not self._outbox:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return
            for _ in conn.notifies(timeout=min(remaining, step), stop_after=1):
                return

    # -- handling -----------------------------------------------------------------
    def _handle_loop(self) -> None:
        while True:
            job = self._handoff.get(timeout=0.2)
            if job is not None:
                self._run(job)
            elif self._stopping.is_set():
                return

    def _run_claimed(self) -> None:
        """Run claimed jobs on the dispatching thread, for up to flush_every
        (at least one job), so that their outcomes go with the next claim."""
        until = time.monotonic() + self.settings.flush_every
        while self._claimed_here and not self._stopping.is_set():
            self._run(self._claimed_here.popleft())
            if time.monotonic() >= until:
                return

    def _run(self, job: Job) -> None:
        if not self._start(job):
            return
        error = self._execute(job)
        self._leases.finished(job)
        self._outbox.post((job, error), self._leases.running)

    def _start(self, job: Job) -> bool:
        """Mark ``job`` running, unless it was released or its lease ran out meanwhile."""
        started = self._leases.start(job)
        if started is False:
            self._lost(job)
            self._wake_dispatcher()  # a place came free
        return bool(started)

    def _execute(self, job: Job) -> str | None:
        try:
            self.handler(job)
        except Exception as exc:  # the handler's failure is the job's failure
            return f"{type(exc).__name__}: {exc}"[:2000]
        return None

    # -- recording outcomes -------------------------------------------------------
    def _wake_dispatcher(self) -> None:
        self._outbox.wake()

    def _take_outcomes(self) -> list[Outcome]:
        return self._outbox.take(lambda: self._leases.running, self._stopping)

    def _send_record(self, conn: Conn, batch: list[Outcome]) -> _Recording:
        """Send the outcomes' statements; read them back with .result()."""
        done = [job for job, error in batch if error is None]
        failures = [(job, error) for job, error in batch if error is not None]
        backoff = self.settings.retry_backoff
        ran = self._leases.ran([job for job, _ in failures])
        return _Recording(
            len(done),
            self.contract.send_complete_many(conn, done, self._leases.ran(done)) if done else None,
            self.contract.send_fail_many(conn, failures, backoff, ran) if failures else None,
        )

    def _settle(self, batch: list[Outcome], recorded: _Recorded) -> None:
        """Once committed: count the outcomes, report lost leases, free the places."""
        if not batch:
            return
        refused, outcomes = recorded.refused, recorded.outcomes
        with self._lock:
            self.stats.completed += recorded.done - len(refused)
            if outcomes:
                self.stats.failed += sum(1 for o in outcomes.values() if o == "failed")
                self.stats.retried += sum(1 for o in outcomes.values() if o == "retry")
        self._leases.let_go(job for job, _ in batch)
        if refused or outcomes:
            for job, _ in batch:
                if job.id in refused or outcomes.get(job.id) == "refused":
                    self._lost(job)

    def _keep_for_retry(self, batch: list[Outcome], exc: BaseException) -> None:
        """Put back the outcomes whose lease still runs; the rest go to the reaper."""
        alive = self._leases.alive(job for job, _ in batch)
        keep = [outcome for outcome in batch if outcome[0].id in alive]
        dropped = [job for job, _ in batch if job.id not in alive]
        if batch:
            log.error(
                "could not record job outcomes; retrying those whose lease still runs",
                extra={"jobs": len(batch), "dropped": len(dropped), "err": first_line(exc)},
            )
        self._leases.let_go(dropped)
        self._outbox.put_back(keep)

    def _count(self, what: str, n: int = 1) -> None:
        with self._lock:
            setattr(self.stats, what, getattr(self.stats, what) + n)

    def _lost(self, job: Job) -> None:
        self._count("lost")
        log.warning("lease lost; the outcome is dropped", extra={"job": job.id, "queue": job.queue})

    # -- leases -------------------------------------------------------------------
    def _heartbeat_loop(self) -> None:
        """The worker's registration at once, then every heartbeat: its leases' beat and
        its own. The leases keep their cadence: extended at once, as the thread starts
        (late, on a loaded machine), a lease could outlive a stop it was meant to end."""
        conn: Conn | None = None
        starting = True
        while starting or not self._stopping.wait(self.settings.heartbeat_every):
            try:
                if conn is None or conn.closed or conn.broken:
                    conn = self._connect()
                if not starting:
                    self._beat(conn)
                self._register(conn)
            except DB_ERRORS as exc:
                log.warning("heartbeat failed", extra={"err": first_line(exc)})
            starting = False
        if conn is not None:
            conn.close()

    def _register(self, conn: Conn) -> None:
        """Its own beat in the workers' registry, where the schema has one (version 12);
        its leases are extended first, whatever becomes of it."""
        if not self._registering:
            return
        try:
            self._registration.beat(conn)
        except psycopg.errors.UndefinedFunction as exc:
            self._registering = False
            log.warning("not registered: the schema has no workers' registry (version 12); "
                        "`schema apply` adds it", extra={"err": first_line(exc)})  # fmt: skip

    def _leave(self) -> None:
        """Its row deleted: a worker that stopped is not counted live until its beats
        age out."""
        if self._registration.id is None:
            return
        try:
            with self._connect() as conn:
                self._registration.leave(conn)
        except DB_ERRORS as exc:
            log.warning("could not unregister; its row ages out", extra={"err": first_line(exc)})

    def _beat(self, conn: Conn) -> None:
        held = self._leases.held()
        if not held:
            return
        renewed = time.monotonic() + self.settings.lease.total_seconds()
        refused = self.contract.heartbeat_many(conn, held, self.settings.lease)
        for job in self._leases.renewed(held, refused, renewed):
            self._lost(job)

    # -- shutdown -------------------------------------------------------------------
    def _shut_down(self, handlers: list[threading.Thread]) -> None:
        """Release what never started, let the running finish within the grace period,
        record their outcomes, and release the rest."""
        deadline = time.monotonic() + self.settings.grace
        self._release(self._not_started())
        for thread in handlers:
            thread.join(max(deadline - time.monotonic(), 0))
        self._record_remaining()
        self._release(self._leases.unfinished())
        # A handler that finished between the two steps above posted its outcome late.
        self._record_remaining()

    def _record_remaining(self) -> None:
        batch = self._take_outcomes()
        if not batch:
            return
        try:
            with self._connect() as conn:
                with conn.pipeline():
                    sent = self._send_record(conn, batch)
                recorded = sent.result()
        except DB_ERRORS as exc:
            log.error(
                "could not record job outcomes at shutdown; their leases will expire",
                extra={"jobs": len(batch), "err": first_line(exc)},
            )
            return
        self._settle(batch, recorded)

    def _not_started(self) -> list[Job]:
        """The claimed jobs no handler took, each still held (not lost meanwhile)."""
        queued = [*self._claimed_here, *self._handoff.take_all()]
        self._claimed_here.clear()
        return self._leases.let_go(queued)

    def _release(self, jobs: list[Job]) -> None:
        if not jobs:
            return
        try:
            with self._connect() as conn:
                for job in jobs:
                    if self.contract.release(conn, job):
                        self._count("released")
        except DB_ERRORS as exc:
            log.error(
                "could not release jobs; their leases will expire",
                extra={"jobs": len(jobs), "err": first_line(exc)},
            )
        else:
            log.info("released unfinished jobs", extra={"jobs": len(jobs)})
