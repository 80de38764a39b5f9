"""Caps on the work one exporter process does at once, shared by every database it
collects, so that a fleet of targets never opens targets x collectors connections.

Three caps bound a collector run: the process's runs at once (``limits.collections``),
the connections held open to one PostgreSQL server across its databases
(``limits.server_connections``) and the database's own pool (``pool_size``). A run
that finds a cap full waits, up to its collector's interval: it is *delayed*. A run
still without its turn then is *dropped*: the collector's last samples stay served and
its last-success time ages. Both are counted per database and cap, and logged.
"""

from __future__ import annotations

import logging
import threading
import time
import weakref
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Protocol

import psycopg
from psycopg.conninfo import conninfo_to_dict

from pgq_exporter.collectors.base import Sample
from pgq_exporter.config import LimitSettings
from pgq_exporter.redaction import scrub

log = logging.getLogger("pgq_exporter.limits")

COLLECTIONS = "collections"
SERVER_CONNECTIONS = "server_connections"
POOL = "pool"
DELAYED, DROPPED = "delayed", "dropped"
LOG_EVERY = 60.0


class CapReachedError(Exception):
    """A cap stayed full for the whole wait: the run is dropped, not failed."""

    def __init__(self, limit: str) -> None:
        super().__init__(f"the {limit} cap stayed full")
        self.limit = limit


class IdleHolder(Protocol):
    def pop_idle(self) -> psycopg.Connection[Any] | None:
        """An idle connection taken out of its pool, for the caller to close."""


class ServerConnections:
    """The connections held open to one server, across its databases, up to a cap. When
    the cap is full, an idle connection of another database is closed to make room."""

    def __init__(self, server: str, cap: int) -> None:
        self.server = server
        self.cap = cap
        self.open = 0
        self._cond = threading.Condition()
        self._holders: weakref.WeakSet[IdleHolder] = weakref.WeakSet()

    def register(self, holder: IdleHolder) -> None:
        with self._cond:
            self._holders.add(holder)

    def take(self, holder: IdleHolder, wait: float) -> bool:
        """Room for one more connection, waiting up to ``wait``; whether it waited.
        Raises CapReachedError when none came."""
        deadline = time.monotonic() + wait
        waited = False
        with self._cond:
            while self.open >= self.cap:
                idle = self._idle_elsewhere(holder)
                if idle is not None:
                    idle.close()  # its slot is reused at once
                    self.open -= 1
                    continue
                waited = True
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise CapReachedError(SERVER_CONNECTIONS)
                self._cond.wait(remaining)
            self.open += 1
        return waited

    def give_back(self) -> None:
        with self._cond:
            self.open -= 1
            self._cond.notify()

    def went_idle(self) -> None:
        """A connection went back to its pool: a run waiting for a place may close it."""
        with self._cond:
            self._cond.notify()

    def _idle_elsewhere(self, holder: IdleHolder) -> psycopg.Connection[Any] | None:
        for other in list(self._holders):
            if other is not holder:
                idle = other.pop_idle()
                if idle is not None:
                    return idle
        return None


def server_of(dsn: str) -> str:
    """host:port of a DSN, as libpq would pick them (the socket directory for a socket)."""
    try:
        params = conninfo_to_dict(dsn)
    except psycopg.ProgrammingError:
        return "unknown"
    host = str(params.get("host") or params.get("hostaddr") or "localhost").split(",")[0]
    port = str(params.get("port") or "5432").split(",")[0]
    # A label of /metrics: a password that libpq took for part of the host stays out.
    return scrub(f"{host}:{port}")


class Limits:
    """The caps of one exporter process, and what they delayed and dropped."""

    def __init__(self, settings: LimitSettings) -> None:
        self.settings = settings
        self._collections = threading.BoundedSemaphore(settings.collections)
        self._servers: dict[str, ServerConnections] = {}
        self._lock = threading.Lock()
        self._counts: Counter[tuple[str, str, str]] = Counter()
        self._since_log: Counter[tuple[str, str]] = Counter()
        self._logged: dict[tuple[str, str], float] = {}

    @contextmanager
    def collection(self, database: str, wait: float) -> Iterator[None]:
        """A turn among the process's runs at once, waiting up to ``wait`` for one."""
        if not self._collections.acquire(blocking=False):
            self.note(database, COLLECTIONS, DELAYED)
            if not self._collections.acquire(timeout=wait):
                raise CapReachedError(COLLECTIONS)
        try:
            yield
        finally:
            self._collections.release()

    def server(self, dsn: str) -> ServerConnections:
        key = server_of(dsn)
        with self._lock:
            if key not in self._servers:
                self._servers[key] = ServerConnections(key, self.settings.server_connections)
            return self._servers[key]

    def note(self, database: str, limit: str, outcome: str) -> None:
        """Count a run a cap delayed or dropped; log it, at most once a minute per cap
        and outcome, with how many there were since the last line."""
        now = time.monotonic()
        with self._lock:
            self._counts[(database, limit, outcome)] += 1
            self._since_log[(limit, outcome)] += 1
            if now - self._logged.get((limit, outcome), -LOG_EVERY) < LOG_EVERY:
                return
            self._logged[(limit, outcome)] = now
            runs = self._since_log.pop((limit, outcome))
        # A delay is the caps doing their work (the default pool of one connection
        # delays a run now and then); only a dropped run is news.
        level = logging.WARNING if outcome == DROPPED else logging.DEBUG
        log.log(level, f"collector runs {outcome} by a cap",
                extra={"limit": limit, "runs": runs, "database": database})  # fmt: skip

    def samples(self, database: str) -> Iterator[Sample]:
        """The database's runs delayed and dropped by each cap (0 until there are some)."""
        with self._lock:
            counts = dict(self._counts)
        for limit in (COLLECTIONS, SERVER_CONNECTIONS, POOL):
            delayed = counts.get((database, limit, DELAYED), 0)
            dropped = counts.get((database, limit, DROPPED), 0)
            yield Sample("pgq_limit_delayed_total", (limit,), float(delayed))
            yield Sample("pgq_limit_dropped_total", (limit,), float(dropped))

    def server_samples(self) -> Iterator[Sample]:
        with self._lock:
            servers = list(self._servers.values())
        for server in servers:
            yield Sample("pgq_server_connections", (server.server,), float(server.open))
