"""The reference worker: N handler threads on one or several queues.

It claims in batches, wakes on LISTEN/NOTIFY with a polling fallback that
backs off while idle, heartbeats every job it holds, and records a handler's
exception with fail(). On stop (SIGTERM, SIGINT) it claims no more, lets the
running handlers finish within the grace period, and releases every job it
could not finish so that another worker can claim it at once. A completion
refused because the lease was lost is logged and dropped: the newer owner's
state is never overwritten.
"""

from __future__ import annotations

import logging
import os
import queue as queue_module
import signal
import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import timedelta
from types import FrameType

import psycopg
from psycopg import sql

from pgq_exporter import DEFAULT_SCHEMA
from pgq_exporter.db import connect
from pgq_exporter.errors import DatabaseUnavailableError, first_line
from pgq_exporter.queue.contract import Conn, Contract, Job
from pgq_exporter.queue.names import check_queue_name, notify_channel

log = logging.getLogger("pgq_exporter.worker")

Handler = Callable[[Job], None]
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
    name: str = field(default_factory=lambda: f"{socket.gethostname()}-{os.getpid()}")

    @property
    def heartbeat_every(self) -> float:
        return max(self.lease.total_seconds() / 3, 0.05)


@dataclass
class WorkerStats:
    claimed: int = 0
    completed: int = 0
    failed: int = 0
    retried: int = 0
    lost: int = 0
    released: int = 0


class Worker:
    def __init__(
        self, dsn: str, handler: Handler, settings: WorkerSettings, schema: str = DEFAULT_SCHEMA
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
        self._handoff: queue_module.Queue[Job] = queue_module.Queue()
        self._held: dict[int, Job] = {}
        self._running: dict[int, Job] = {}
        self._lock = threading.Lock()
        self._slot_freed = threading.Event()

    # -- control --------------------------------------------------------------
    def stop(self) -> None:
        self._stopping.set()
        self._slot_freed.set()

    def install_signal_handlers(self) -> None:
        def on_signal(signum: int, frame: FrameType | None) -> None:
            log.info("stopping", extra={"signal": signal.Signals(signum).name})
            self.stop()

        signal.signal(signal.SIGTERM, on_signal)
        signal.signal(signal.SIGINT, on_signal)

    def run(self) -> WorkerStats:
        """Work until stop() is called; then shut down gracefully and return the counts."""
        threads = [
            threading.Thread(target=self._handle_loop, name=f"handler-{i}", daemon=True)
            for i in range(self.settings.concurrency)
        ]
        threads.append(threading.Thread(target=self._heartbeat_loop, name="heartbeat", daemon=True))
        for thread in threads:
            thread.start()
        try:
            self._claim_loop()
        finally:
            self._shut_down()
        return self.stats

    # -- claiming ---------------------------------------------------------------
    def _claim_loop(self) -> None:
        idle = self.settings.poll_min
        while not self._stopping.is_set():
            try:
                with self._listening_connection() as conn:
                    while not self._stopping.is_set():
                        if self._claim_some(conn):
                            idle = self.settings.poll_min
                        else:
                            self._wait(conn, idle)
                            idle = min(idle * 2, self.settings.poll_max)
            except DB_ERRORS as exc:
                log.warning("database unavailable; retrying", extra={"err": first_line(exc)})
                self._stopping.wait(idle)
                idle = min(idle * 2, self.settings.poll_max)

    @contextmanager
    def _listening_connection(self) -> Iterator[Conn]:
        conn = connect(self.dsn, application_name=f"pgq-worker {self.settings.name}")
        try:
            for name in self.settings.queues:
                channel = notify_channel(self.schema, name)
                conn.execute(sql.SQL("LISTEN {}").format(sql.Identifier(channel)))
            yield conn
        finally:
            conn.close()

    def _claim_some(self, conn: Conn) -> bool:
        claimed_any = False
        for name in self.settings.queues:
            free = self.settings.concurrency - len(self._held)
            if free <= 0 or self._stopping.is_set():
                break
            jobs = self.contract.claim(
                conn, name, min(free, self.settings.batch), self.settings.lease, self.settings.name
            )
            with self._lock:
                for job in jobs:
                    self._held[job.id] = job
            for job in jobs:
                self._handoff.put(job)
            self._count("claimed", len(jobs))
            claimed_any = claimed_any or bool(jobs)
        return claimed_any

    def _wait(self, conn: Conn, idle: float) -> None:
        """Until a notification, a free slot when full, stop, or ``idle`` seconds."""
        if len(self._held) >= self.settings.concurrency:
            self._slot_freed.wait(idle)
            self._slot_freed.clear()
            return
        deadline = time.monotonic() + idle
        while not self._stopping.is_set():
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return
            for _ in conn.notifies(timeout=min(remaining, 0.25), stop_after=1):
                return

    # -- handling -----------------------------------------------------------------
    def _handle_loop(self) -> None:
        conn: Conn | None = None
        while True:
            try:
                job = self._handoff.get(timeout=0.2)
            except queue_module.Empty:
                if self._stopping.is_set():
                    break
                continue
            with self._lock:
                if job.id not in self._held:  # released during shutdown
                    continue
                self._running[job.id] = job
            try:
                conn = self._finish(conn, job, self._execute(job))
            finally:
                with self._lock:
                    self._running.pop(job.id, None)
                    self._held.pop(job.id, None)
                self._slot_freed.set()
        if conn is not None:
            conn.close()

    def _execute(self, job: Job) -> str | None:
        try:
            self.handler(job)
        except Exception as exc:  # the handler's failure is the job's failure
            return f"{type(exc).__name__}: {exc}"[:2000]
        return None

    def _finish(self, conn: Conn | None, job: Job, error: str | None) -> Conn | None:
        try:
            if conn is None or conn.closed or conn.broken:
                conn = connect(self.dsn, application_name=f"pgq-worker {self.settings.name}")
            if error is None:
                if self.contract.complete(conn, job):
                    self._count("completed")
                else:
                    self._lost(job)
                return conn
            outcome = self.contract.fail(conn, job, error, self.settings.retry_backoff)
            if outcome == "refused":
                self._lost(job)
            elif outcome == "failed":
                self._count("failed")
            else:
                self._count("retried")
        except DB_ERRORS as exc:
            # The lease will run out and the reaper will hand the job on.
            log.error(
                "could not record a job's outcome", extra={"job": job.id, "err": first_line(exc)}
            )
        return conn

    def _count(self, what: str, n: int = 1) -> None:
        with self._lock:
            setattr(self.stats, what, getattr(self.stats, what) + n)

    def _lost(self, job: Job) -> None:
        self._count("lost")
        log.warning("lease lost; the outcome is dropped", extra={"job": job.id, "queue": job.queue})

    # -- leases -------------------------------------------------------------------
    def _heartbeat_loop(self) -> None:
        conn: Conn | None = None
        while not self._stopping.wait(self.settings.heartbeat_every):
            with self._lock:
                held = list(self._held.values())
            if not held:
                continue
            try:
                if conn is None or conn.closed or conn.broken:
                    conn = connect(self.dsn, application_name=f"pgq-worker {self.settings.name}")
                for job in held:
                    self.contract.heartbeat(conn, job, self.settings.lease)
            except DB_ERRORS as exc:
                log.warning("heartbeat failed", extra={"err": first_line(exc)})
        if conn is not None:
            conn.close()

    # -- shutdown -------------------------------------------------------------------
    def _shut_down(self) -> None:
        deadline = time.monotonic() + self.settings.grace
        self._release(self._not_started())
        while self._running and time.monotonic() < deadline:
            time.sleep(0.02)
        with self._lock:
            unfinished = list(self._running.values())
            for job in unfinished:
                self._held.pop(job.id, None)
        self._release(unfinished)

    def _not_started(self) -> list[Job]:
        jobs = []
        while True:
            try:
                job = self._handoff.get_nowait()
            except queue_module.Empty:
                break
            with self._lock:
                if self._held.pop(job.id, None) is not None:
                    jobs.append(job)
        return jobs

    def _release(self, jobs: list[Job]) -> None:
        if not jobs:
            return
        try:
            with connect(self.dsn, application_name=f"pgq-worker {self.settings.name}") as conn:
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
