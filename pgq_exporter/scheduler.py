"""Running each collector on its own interval, in the background, against a tiny pool.

A scrape never waits for SQL: collectors store their samples here, and the
exporter renders them. A broken connection is thrown away and the next run
opens a new one, so an outage heals by itself.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from typing import Any

import psycopg

from pgq_exporter.catalogue import QUEUE_WINDOW, columns_left_out, window_from_updates
from pgq_exporter.collectors import BUILTIN, LIBRARY
from pgq_exporter.collectors.base import AnySample, Collector, Context, KnownQueues
from pgq_exporter.collectors.custom import CustomSQL
from pgq_exporter.collectors.finished_feed import FinishedFeed
from pgq_exporter.collectors.queue_window import UpdatedWindow
from pgq_exporter.config import (
    CollectorSettings,
    Config,
    DatabaseConfig,
    SchemaMapping,
    builtin_runs,
)
from pgq_exporter.db import DEFAULT_APPLICATION_NAME, close_failed_attempts
from pgq_exporter.dsn import describe_connect_error
from pgq_exporter.errors import first_line
from pgq_exporter.limits import (
    DELAYED,
    DROPPED,
    POOL,
    SERVER_CONNECTIONS,
    CapReachedError,
    Limits,
    ServerConnections,
)
from pgq_exporter.presets.detect import collectable, detect
from pgq_exporter.presets.library import LibraryLayout, LibraryPreset
from pgq_exporter.sqlfiles import query

log = logging.getLogger("pgq_exporter.scheduler")


class ConnectionUnavailableError(Exception):
    """No connection could be opened: the database is down or refuses this one. (A pool or
    server cap that stays full is a CapReachedError: it says nothing of the database.)"""


@dataclass
class CollectorState:
    samples: list[AnySample] = field(default_factory=list)
    success: bool = False
    duration: float = 0.0  # the run's own work, after it had a connection
    connection_wait: float = 0.0
    last_success: float = 0.0  # 0: never succeeded
    error: str = "not run yet"
    ran: bool = False  # until the first run ends, nothing is known, not even failure


@dataclass(frozen=True, slots=True)
class SourceCaps:
    """The process's caps a database's pools answer to, and where they count."""

    limits: Limits
    database: str
    server: ServerConnections


class ConnectionSource:
    """Up to ``size`` connections to one database, opened on demand, dropped when broken;
    with ``caps``, each one also takes a place among the connections to its server."""

    def __init__(self, dsn: str, size: int, caps: SourceCaps | None = None) -> None:
        self._dsn = dsn
        self._slots = threading.BoundedSemaphore(size)
        self._idle: list[psycopg.Connection[Any]] = []
        self._lock = threading.Lock()
        self._closed = False
        self._caps = caps
        if caps:
            caps.server.register(self)

    @contextmanager
    def connection(self, wait: float, connect_timeout: float) -> Iterator[psycopg.Connection[Any]]:
        """A connection, waiting up to ``wait`` seconds for a free one."""
        if not self._slots.acquire(blocking=False):
            self._note(POOL)
            if not self._slots.acquire(timeout=wait):
                raise CapReachedError(POOL)
        try:
            conn = self._take() or self._open(wait, connect_timeout)
            try:
                yield conn
            except BaseException:
                self._recycle(conn)
                raise
            else:
                self._recycle(conn)
        finally:
            self._slots.release()

    def close(self) -> None:
        """Close the idle connections now, and each busy one when it comes back."""
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
        for conn in idle:
            self._discard(conn)

    def pop_idle(self) -> psycopg.Connection[Any] | None:
        """The longest idle connection, for its server's cap to close and reuse the place."""
        with self._lock:
            return self._idle.pop(0) if self._idle else None

    def _take(self) -> psycopg.Connection[Any] | None:
        while True:
            with self._lock:
                if not self._idle:
                    return None
                conn = self._idle.pop()
            if not conn.closed and not conn.broken:
                return conn
            self._discard(conn)  # outside the lock: the server's cap takes its own

    def _open(self, wait: float, connect_timeout: float) -> psycopg.Connection[Any]:
        if self._caps and self._caps.server.take(self, wait):
            self._note(SERVER_CONNECTIONS)
        try:
            return psycopg.connect(
                self._dsn,
                autocommit=True,
                application_name=DEFAULT_APPLICATION_NAME,
                connect_timeout=max(2, round(connect_timeout)),
            )
        except (psycopg.Error, UnicodeError) as exc:
            # UnicodeError: a host name that IDNA cannot encode, found only at lookup.
            if self._caps:
                self._caps.server.give_back()
            message = describe_connect_error(self._dsn, exc)
        close_failed_attempts()
        raise ConnectionUnavailableError(message)

    def _recycle(self, conn: psycopg.Connection[Any]) -> None:
        if conn.closed or conn.broken or conn.info.transaction_status != 0:
            self._discard(conn)
            return
        with self._lock:
            kept = not self._closed
            if kept:
                self._idle.append(conn)
        if not kept:
            self._discard(conn)
        elif self._caps:
            self._caps.server.went_idle()

    def _discard(self, conn: psycopg.Connection[Any]) -> None:
        conn.close()
        if self._caps:
            self._caps.server.give_back()

    def _note(self, limit: str) -> None:
        if self._caps:
            self._caps.limits.note(self._caps.database, limit, DELAYED)


class DatabaseRuntime:
    """One database: its connections, its known queues, its collectors and their states."""

    def __init__(
        self,
        config: Config,
        database: DatabaseConfig,
        reuse: DatabaseRuntime | None,
        limits: Limits,
    ) -> None:
        self.database = database
        self.limits = limits
        caps = SourceCaps(limits, database.name, limits.server(database.dsn))
        # Queue collectors share pool_size connections; the collectors that read
        # only catalogs and statistics have one of their own, so that a lock on a
        # queue table (the incident they report) never starves them.
        self.sources = {
            True: ConnectionSource(database.dsn, database.pool_size, caps),
            False: ConnectionSource(database.dsn, 1, caps),
        }
        self.queues: KnownQueues = reuse.queues if reuse else KnownQueues()
        self.queues.configured = database.queues
        self.queues.memory = config.queue_memory
        self.queues.limit = config.max_queues
        # Finished jobs already observed stay observed across a reload.
        self.feed: FinishedFeed = reuse.feed if reuse else FinishedFeed()
        found = detected_layout(database) if database.auto else None
        self.context = Context(
            config=config,
            database=database,
            queues=self.queues,
            feed=self.feed,
            layout=found if isinstance(found, SchemaMapping) else None,
            found_library=found if isinstance(found, LibraryLayout) else None,
        )
        # None until the first connection attempt: unknown, which is not down.
        self.up: bool | None = reuse.up if reuse else None
        # Collectors whose run outlived the previous scheduler's stop are not reused:
        # one collector object is never run by two threads at once.
        self.still_running: set[str] = set()
        self.collectors: dict[str, tuple[Collector, CollectorSettings]] = {}
        mapping, library = self.context.mapping, self.context.library
        preset = library.preset if library else None
        for name, builtin in BUILTIN.items():
            settings = config.collector(name)
            runs = builtin_runs(name, settings, mapping, preset)
            if settings.enabled and not runs:
                _log_not_scheduled(database.name, name, mapping, preset)
            factory = LIBRARY.get(name, builtin) if preset else builtin
            if name == QUEUE_WINDOW and not preset and window_from_updates(mapping.columns):
                factory = UpdatedWindow
            if runs:
                kept = reuse.collectors.get(name) if reuse else None
                if kept and reuse and name in reuse.still_running:
                    kept = None
                self.collectors[name] = (kept[0] if kept else factory(), settings)
        for custom in config.custom:
            if not custom.databases or database.name in custom.databases:
                self.collectors[custom.name] = (CustomSQL(custom), custom.settings)
        # The last samples keep being served until each collector has run again.
        previous = reuse.states if reuse else {}
        self.states: dict[str, CollectorState] = {
            name: replace(previous[name]) if name in previous else CollectorState()
            for name in self.collectors
        }

    @property
    def ready(self) -> bool:
        return any(state.last_success > 0 for state in self.states.values())

    def run(self, name: str) -> None:
        collector, settings = self.collectors[name]
        state = self.states[name]
        clock = _RunClock()
        try:
            with self.limits.collection(self.database.name, settings.interval):
                samples = self._collect(collector, settings, clock)
        except CapReachedError as exc:  # the last samples stay, and the last success ages
            self.limits.note(self.database.name, exc.limit, DROPPED)
            return
        except Exception as exc:  # a failing collector never stops the others
            state.samples, state.success, state.error = [], False, _describe(exc)
            log.warning(
                "collector failed",
                extra={"database": self.database.name, "collector": name, "err": state.error},
            )
        else:
            state.samples, state.success, state.error = samples, True, ""
            state.last_success = time.time()
        state.connection_wait, state.duration = clock.split()
        state.ran = True

    def _collect(
        self, collector: Collector, settings: CollectorSettings, clock: _RunClock
    ) -> list[AnySample]:
        """One run; a connection found dead (killed while idle, a restart) is replaced
        and the run tried once more before it counts as a failure."""
        try:
            return self._collect_once(collector, settings, clock)
        except psycopg.OperationalError as exc:
            if not _lost_connection(exc):
                raise
            log.info(
                "connection lost; retrying once on a new one",
                extra={"database": self.database.name, "collector": collector.name,
                       "err": first_line(exc)},
            )  # fmt: skip
        return self._collect_once(collector, settings, clock)

    def _collect_once(
        self, collector: Collector, settings: CollectorSettings, clock: _RunClock
    ) -> list[AnySample]:
        try:
            # A collector may wait for the pool up to its own interval: a slow
            # neighbour delays it, but does not make it fail.
            source = self.sources[collector.reads_queue_tables]
            with source.connection(settings.interval, settings.timeout) as conn:
                clock.connected()
                self.up = True
                with conn.transaction():
                    conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
                    set_transaction_settings(conn, settings.timeout)
                    return collector.collect(conn, self.context)
        except ConnectionUnavailableError:
            self.up = False
            raise
        except psycopg.OperationalError as exc:
            # A timeout, a lock not granted or a query error leave the database up.
            if _lost_connection(exc):
                self.up = False
            raise


# Server states that end a session: admin, crash or startup shutdown.
_SESSION_ENDED = frozenset({"57P01", "57P02", "57P03"})


def _lost_connection(exc: psycopg.OperationalError) -> bool:
    """The connection is gone (no SQLSTATE: the socket closed), not the query."""
    state = exc.sqlstate
    return state is None or state.startswith("08") or state in _SESSION_ENDED


class _RunClock:
    """A run's time, split at the moment it had a connection."""

    def __init__(self) -> None:
        self._started = time.monotonic()
        self._connected: float | None = None

    def connected(self) -> None:
        self._connected = time.monotonic()

    def split(self) -> tuple[float, float]:
        """(waiting for a connection, working); a run that never had one only waited."""
        ended = time.monotonic()
        connected = ended if self._connected is None else self._connected
        return connected - self._started, ended - connected


def set_transaction_settings(conn: psycopg.Connection[Any], seconds: float) -> None:
    """Bound every statement and lock wait of the current transaction; no JIT in it."""
    conn.execute(query("session.sql", "transaction_settings"), {"ms": str(int(seconds * 1000))})


class Scheduler:
    """One thread per (database, collector), each keeping its own interval."""

    def __init__(
        self,
        config: Config,
        on_change: Callable[[], None],
        previous: Scheduler | None = None,
        limits: Limits | None = None,
    ) -> None:
        self.config = config
        self.limits = limits or Limits(config.limits)
        self._on_change = on_change
        self._stop = threading.Event()
        self._threads: list[tuple[DatabaseRuntime, str, threading.Thread]] = []
        old = previous.databases if previous else {}
        self.databases: dict[str, DatabaseRuntime] = {
            db.name: DatabaseRuntime(
                config, db, _reusable(old.get(db.name), db, config), self.limits
            )
            for db in config.databases
        }

    def start(self) -> None:
        for runtime in self.databases.values():
            for name, (_, settings) in runtime.collectors.items():
                thread = threading.Thread(
                    target=self._loop,
                    args=(runtime, name, settings.interval),
                    name=f"collect-{runtime.database.name}-{name}",
                    daemon=True,
                )
                thread.start()
                self._threads.append((runtime, name, thread))

    def stop(self, wait: float = 5.0) -> None:
        """Stop every collector thread, waiting up to ``wait`` seconds for the runs in
        progress; then close the connections (a busy one when its run ends)."""
        self._stop.set()
        deadline = time.monotonic() + wait
        for runtime, name, thread in self._threads:
            thread.join(max(0.0, deadline - time.monotonic()))
            if thread.is_alive():
                runtime.still_running.add(name)
        for runtime in self.databases.values():
            for source in runtime.sources.values():
                source.close()

    @property
    def longest_run(self) -> float:
        """The longest a run in progress can take: its SQL timeout, a connect, a margin."""
        timeouts = [
            settings.timeout
            for runtime in self.databases.values()
            for _, settings in runtime.collectors.values()
        ]
        return max(timeouts, default=0.0) * 2 + 2.0

    def run_all_once(self) -> None:
        """Every collector once, in the calling thread."""
        for runtime in self.databases.values():
            for name in runtime.collectors:
                runtime.run(name)

    def _loop(self, runtime: DatabaseRuntime, name: str, interval: float) -> None:
        next_run = time.monotonic()
        while not self._stop.wait(max(0.0, next_run - time.monotonic())):
            runtime.run(name)
            if self._stop.is_set():
                return
            self._on_change()
            next_run += interval
            if next_run < time.monotonic():  # a slow run skips, never bunches up
                next_run = time.monotonic() + interval


def _log_not_scheduled(
    database: str, collector: str, mapping: SchemaMapping, preset: LibraryPreset | None
) -> None:
    if preset:
        log.info(
            "collector not scheduled: the preset cannot measure what it reads",
            extra={"database": database, "collector": collector, "preset": preset.name},
        )
        return
    log.info(
        "collector not scheduled: the mapping leaves out a column it reads",
        extra={"database": database, "collector": collector,
               "columns": ", ".join(columns_left_out(collector, mapping.columns))},
    )  # fmt: skip


def detected_layout(
    database: DatabaseConfig, wait: float = 5.0
) -> SchemaMapping | LibraryLayout | None:
    """For `preset: auto`: the layout of the first queue the catalog shows that the
    exporter can collect from (the reference queue first); None, with a warning, when
    there is none or the database cannot be read yet (the reference layout is used)."""
    source = ConnectionSource(database.dsn, 1)
    try:
        with source.connection(wait, wait) as conn:
            found = detect(conn)
    except (ConnectionUnavailableError, psycopg.Error) as exc:
        log.warning(
            "preset auto: cannot read the catalog; using the reference layout",
            extra={"database": database.name, "err": first_line(exc)},
        )
        return None
    finally:
        source.close()
    chosen = collectable(found)
    if chosen:
        library, layout = chosen
        log.info(
            "preset auto: found",
            extra={"database": database.name, "preset": library.preset, "schema": library.schema},
        )
        return layout
    log.warning(
        "preset auto: no queue this exporter can collect from; using the reference layout",
        extra={"database": database.name, "found": ", ".join(f.preset for f in found) or "none"},
    )
    return None


def _reusable(
    old: DatabaseRuntime | None, db: DatabaseConfig, config: Config
) -> DatabaseRuntime | None:
    """Keep collector state (histogram counters) across a reload when the target is unchanged."""
    mapping = db.mapping or config.mapping
    if old is None or old.database.dsn != db.dsn or old.context.mapping != mapping:
        return None
    if old.database.library != db.library:
        return None
    return old


def _describe(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {first_line(exc)}"
