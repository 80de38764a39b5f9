"""One target's collectors: their states, and a run of those due together.

The collectors of a target are split into groups that run apart: those that read the
queue's rows, in ``pool_size`` groups, and those that read only catalogs and
statistics, in one group of their own, so that a lock on a queue table (the incident
they report) never holds them up. A run of a group takes one connection and runs its
due collectors in one read-only REPEATABLE READ transaction, each timed on its own; a
collector whose SQL fails ends that transaction, and the others go on in a new one.
A connection found dead (killed while idle, a restart) is replaced and the rest of
the run tried once more.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field

import psycopg

from pgq_exporter.collectors import Planned
from pgq_exporter.collectors.base import Collector, Context, PartialCollectionError
from pgq_exporter.errors import first_line
from pgq_exporter.exposition import Part, PartMemo
from pgq_exporter.labels import bound_labels
from pgq_exporter.pg.connect import Conn, read_only, set_transaction_settings
from pgq_exporter.pg.statements import Stale, forget_statements, keeps_statements, went_stale
from pgq_exporter.runtime.connections import (
    CapReachedError,
    Connections,
    ConnectionUnavailableError,
)
from pgq_exporter.runtime.memory import FREEZER
from pgq_exporter.runtime.settling import Served, Settling, serves_cumulative
from pgq_exporter.samples import AnySample
from pgq_exporter.sql import query

log = logging.getLogger("pgq_exporter.collection")

# Collectors due within this much of each other run together.
TOGETHER = 0.5


@dataclass
class Said:
    """A failure as the log has said it: once as it starts, again at most every
    REPEAT_EVERY while it lasts, and once as it ends; never at every run."""

    REPEAT_EVERY = 600.0
    NOT_DUE = -1

    error: str = ""  # "" while nothing fails
    at: float = 0.0  # time.monotonic() of the last line
    since: int = 0  # failed runs since that line

    def due(self, error: str, now: float) -> int:
        """Whether a failure with ``error`` is to be said now: NOT_DUE, 0 for a new one,
        or the failed runs since it was last said."""
        if error != self.error:
            self.error, self.at, self.since = error, now, 0
            return 0
        self.since += 1
        if now - self.at < self.REPEAT_EVERY:
            return self.NOT_DUE
        runs, self.at, self.since = self.since, now, 0
        return runs

    def ended(self) -> bool:
        """Whether a failure had been said, and is over now."""
        ended = bool(self.error)
        self.error, self.since = "", 0
        return ended


@dataclass
class CollectorState:
    samples: Sequence[AnySample] = field(default_factory=list)
    success: bool = False
    duration: float = 0.0  # the run's own work, after it had a connection
    connection_wait: float = 0.0
    last_success: float = 0.0  # 0: never succeeded
    last_run: float = 0.0  # unix time the last run ended; 0: never
    error: str = "not run yet"
    ran: bool = False  # until the first run ends, nothing is known, not even failure
    labels_cut: frozenset[str] = frozenset()  # label values of its samples cut to a bound
    sqlstate: str | None = None  # of its last failure, when the database gave one
    # Its counter and histogram series served so far (see zero_new_series).
    series: Served = field(default_factory=Served)
    said: Said = field(default_factory=Said)  # its failure, as the log has it


@dataclass(eq=False)
class Slot:
    """A collector of the target, its settings, its state and when it is next due."""

    plan: Planned
    collector: Collector
    state: CollectorState
    due: float = 0.0  # time.monotonic()
    first: bool = True  # its first run is still to come
    part: Part | None = None  # its samples ready to serve, made after each run
    # What its last run's chunks became, and what its last part made of them.
    settling: Settling = field(default_factory=Settling)
    made: PartMemo = field(default_factory=PartMemo)

    @property
    def name(self) -> str:
        return self.plan.name


class RunOutcome:
    """How a group's run went, for the target to count and report."""

    RAN = "ran"
    DROPPED = "dropped"  # a cap stayed full: the collectors keep their last samples


def groups(slots: list[Slot], pool_size: int) -> list[tuple[Slot, ...]]:
    """The catalog collectors in one group; the queue collectors in up to ``pool_size``."""
    catalog = tuple(s for s in slots if not s.plan.reads_queue_tables)
    queue = [s for s in slots if s.plan.reads_queue_tables]
    parts = [tuple(queue[i::pool_size]) for i in range(min(pool_size, len(queue)))]
    # The queue groups first: run in order (collect_now), they find the queues whose
    # tables a catalog collector reads when a library keeps a table per queue.
    return [group for group in (*parts, catalog) if group]


def due_in(group: tuple[Slot, ...], now: float) -> list[Slot]:
    return [slot for slot in group if slot.due <= now + TOGETHER]


class GroupRun:
    """One run of a group's due collectors on one connection of ``connections``."""

    def __init__(self, ctx: Context, connections: Connections, slots: list[Slot]) -> None:
        self.ctx = ctx
        self.connections = connections
        self.slots = slots
        self.up: bool | None = None  # None: no connection was tried (a cap was full)
        self.waited_for_server = False
        self.started = time.monotonic()
        self._prepared: dict[str, float] = {}  # each slot's time in prepare, by name
        self._retried: set[str] = set()  # slots run again after a kept statement failed

    @property
    def _wait(self) -> float:
        # A run may wait for a place on its server up to its shortest interval: a busy
        # server delays it, but does not make it fail.
        return min(slot.plan.settings.interval for slot in self.slots)

    @property
    def _timeout(self) -> float:
        return max(slot.plan.settings.timeout for slot in self.slots)

    def run(self) -> str:
        pending = list(self.slots)
        for attempt in (1, 2):
            try:
                with self._connection(fresh=attempt == 2) as (conn, waited):
                    self.up = True
                    self._in_transactions(conn, pending, waited)
                    if any(slot.collector.runs_users_sql for slot in self.slots):
                        # What no rollback undoes: a session's advisory locks.
                        conn.execute(query("session.sql", "release_session_locks"), prepare=False)
                return RunOutcome.RAN
            except CapReachedError:
                return RunOutcome.DROPPED
            except ConnectionUnavailableError as exc:
                self.up = False
                self._fail(pending, _describe(exc), self.started)
                return RunOutcome.RAN
            except psycopg.OperationalError as exc:
                if not lost_connection(exc):
                    raise  # _in_transactions records every other failure itself
                if attempt == 2:
                    self.up = False
                    self._fail(pending, _describe(exc), self.started)
                    return RunOutcome.RAN
                log.info(
                    "connection lost; retrying once on a new one",
                    extra={"database": self.ctx.database.name, "err": first_line(exc)},
                )
        return RunOutcome.RAN

    @contextmanager
    def _connection(self, *, fresh: bool) -> Iterator[tuple[Conn, float]]:
        asked = time.monotonic()
        dsn = self.ctx.database.dsn
        checkout = self.connections.checkout(dsn, self._wait, self._timeout, fresh=fresh)
        with checkout as (conn, waited):
            self.waited_for_server = self.waited_for_server or waited
            yield conn, time.monotonic() - asked

    def _in_transactions(self, conn: Conn, pending: list[Slot], waited: float) -> None:
        """Run ``pending`` in as few transactions as their failures allow; each slot
        leaves ``pending`` once its outcome is recorded. What a collector reads before
        the snapshot is read first, in a transaction of its own."""
        self._prepare(conn, pending, waited)
        while pending:
            try:
                timeout = pending[0].plan.settings.timeout
                with read_only(conn, timeout):
                    while pending:
                        slot = pending[0]
                        if slot.plan.settings.timeout != timeout:
                            timeout = slot.plan.settings.timeout
                            set_transaction_settings(conn, timeout)
                        try:
                            self._run_one(conn, slot, waited)
                        except _SlotFailedError:
                            pending.pop(0)
                            raise
                        except _RunAgainError:
                            raise _SlotFailedError from None  # it stays pending
                        finally:
                            FREEZER.after_job()  # what the collector keeps: see memory.py
                        pending.pop(0)
            except _SlotFailedError:
                continue

    def _prepare(self, conn: Conn, pending: list[Slot], waited: float) -> None:
        """Each slot's reads before its transaction, where it has any (their time counts
        in its duration); a slot whose read fails is failed."""
        self._prepared.clear()
        for slot in list(pending):
            if slot.collector.prepares(self.ctx):
                self._prepare_one(conn, slot, pending, waited)

    def _prepare_one(self, conn: Conn, slot: Slot, pending: list[Slot], waited: float) -> None:
        began = time.monotonic()
        try:
            # A transaction of its own, whose snapshot ends before the collector's.
            with read_only(conn, slot.plan.settings.timeout):
                slot.collector.prepare(conn, self.ctx)
            self._prepared[slot.name] = time.monotonic() - began
        except psycopg.OperationalError as exc:
            if lost_connection(exc):
                raise  # the run retries on a new connection
            self._record_failure(slot, exc, began, waited)
            pending.remove(slot)
        except psycopg.Error as exc:
            if self._runs_again(conn, slot, exc):
                self._prepare_one(conn, slot, pending, waited)
            else:
                self._record_failure(slot, exc, began, waited)
                pending.remove(slot)

    def _runs_again(self, conn: Conn, slot: Slot, exc: psycopg.Error) -> bool:
        """Whether ``slot`` runs again, once, because a kept statement failed: the
        statements are forgotten, for good where the server lost them."""
        stale = went_stale(exc) if keeps_statements(conn) else None
        if stale is None or slot.name in self._retried:
            return False
        if stale is Stale.CHANGED and slot.state.sqlstate == exc.sqlstate:
            return False  # its last run failed so, unprepared too: not a kept statement's
        self._retried.add(slot.name)
        where = {"database": self.ctx.database.name, "collector": slot.name}
        if stale is Stale.LOST:
            self.connections.stop_keeping_statements(conn, self.ctx.database.dsn)
            log.warning(f"{stale.value}: statements are prepared no more", extra=where)
        else:
            forget_statements(conn)
            log.info(f"{stale.value}: its statements are prepared anew", extra=where)
        return True

    def _run_one(self, conn: Conn, slot: Slot, waited: float) -> None:
        began = time.monotonic() - self._prepared.pop(slot.name, 0.0)
        try:
            samples = slot.collector.collect(conn, self.ctx)
        except PartialCollectionError as exc:  # its transaction is whole: go on in it
            self._record_failure(slot, exc.cause, began, waited)
            slot.state.samples, slot.state.labels_cut = bound_labels(exc.samples)
            return
        except psycopg.OperationalError as exc:
            if lost_connection(exc):
                raise  # the run retries on a new connection
            self._record_failure(slot, exc, began, waited)
            raise _SlotFailedError from None
        except psycopg.Error as exc:
            if self._runs_again(conn, slot, exc):
                raise _RunAgainError from None
            self._record_failure(slot, exc, began, waited)
            raise _SlotFailedError from None
        except Exception as exc:  # a failing collector never stops the others
            self._record_failure(slot, exc, began, waited)
            if conn.info.transaction_status == psycopg.pq.TransactionStatus.INERROR:
                raise _SlotFailedError from None
            return
        state = slot.state
        served = state.series if serves_cumulative(slot.name) else None
        state.samples, state.labels_cut = slot.settling.settle(
            samples, served, first=not state.last_success
        )
        state.success, state.error, state.sqlstate = True, "", None
        state.last_success = state.last_run = time.time()
        if state.said.ended():
            where = {"database": self.ctx.database.name, "collector": slot.name}
            log.info("collector recovered", extra=where)
        state.connection_wait, state.duration = waited, time.monotonic() - began
        state.ran = True

    def _record_failure(self, slot: Slot, exc: BaseException, began: float, waited: float) -> None:
        state = slot.state
        state.samples, state.success, state.error = [], False, _describe(exc)
        state.labels_cut = frozenset()
        state.sqlstate = getattr(exc, "sqlstate", None)
        hint = self.ctx.source.failure_hint(exc)
        if hint:
            state.error += f"; {hint}"
        state.last_run = time.time()
        state.connection_wait, state.duration = waited, time.monotonic() - began
        state.ran = True
        self._say_failure([slot], state.error)

    def _fail(self, slots: list[Slot], error: str, began: float) -> None:
        """Every slot of a run that found no connection: failed, its samples gone."""
        for slot in slots:
            state = slot.state
            state.samples, state.success, state.error = [], False, error
            state.labels_cut, state.sqlstate = frozenset(), None
            state.last_run = time.time()
            state.connection_wait, state.duration = time.monotonic() - began, 0.0
            state.ran = True
        self._say_failure(slots, error)

    def _say_failure(self, slots: list[Slot], error: str) -> None:
        """One line for the slots whose failure is new, or has lasted REPEAT_EVERY since
        it was last said (with the failed runs since)."""
        now = time.monotonic()
        said = {slot.name: slot.state.said.due(error, now) for slot in slots}
        due = [name for name, runs in said.items() if runs != Said.NOT_DUE]
        if not due:
            return
        again = max(said[name] for name in due)
        extra = {"database": self.ctx.database.name, "collector": ", ".join(due), "err": error}
        if again:
            extra["failed_runs_since"] = str(again)
        log.warning("collector still failing" if again else "collector failed", extra=extra)


class _SlotFailedError(Exception):
    """A collector's SQL failed and ended the transaction: the rest go on in a new one."""


class _RunAgainError(Exception):
    """A collector's kept statement failed: it runs again in a new transaction."""


# Server states that end a session: admin, crash or startup shutdown.
_SESSION_ENDED = frozenset({"57P01", "57P02", "57P03"})


def lost_connection(exc: psycopg.OperationalError) -> bool:
    """The connection is gone (no SQLSTATE: the socket closed), not the query."""
    state = exc.sqlstate
    return state is None or state.startswith("08") or state in _SESSION_ENDED


def _describe(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {first_line(exc)}"
