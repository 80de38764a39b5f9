"""Connections to PostgreSQL, shared by every target of the process, capped per server.

Connections are pooled by connection string: targets that reach one database with the
same credentials share them. Each server (its host and port, normalised, and the
address the name resolves to) holds at most ``limits.server_connections`` open, across
its databases. When that is full, the connection idle longest on that server is
closed to make room; with none idle, a checkout waits, up to its caller's bound.

Why not psycopg_pool: a ``ConnectionPool`` runs worker threads and a scheduler thread
of its own for every pool opened, so a pool per target would bring back the threads
per target this process does without.
Here a connection is opened by the job that needs it, on one of the scheduler's
workers, and kept idle for the next one.
"""

from __future__ import annotations

import contextlib
import logging
import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

import psycopg
from psycopg.conninfo import conninfo_to_dict

from pgq_exporter.config.addresses import TargetSyntaxError, normalise_host
from pgq_exporter.pg.connect import (
    DEFAULT_APPLICATION_NAME,
    Conn,
    readable,
    release_failed_attempt,
    session_options,
)
from pgq_exporter.pg.dsn import describe_connect_error
from pgq_exporter.pg.statements import forget_statements, keep_statements
from pgq_exporter.redaction import scrub

log = logging.getLogger("pgq_exporter.connections")

# How long a server's address, as resolved, is kept before it is looked up again.
RESOLVED_FOR = 300.0
# An idle connection unused this long is closed by the next sweep.
IDLE_CLOSE = 300.0


class ConnectionUnavailableError(Exception):
    """No connection could be opened: the database is down or refuses this one. (A server
    cap that stays full is a CapReachedError: it says nothing of the database.)"""


class CapReachedError(Exception):
    """A cap stayed full for the whole wait: the run is dropped, not failed."""

    def __init__(self, limit: str) -> None:
        super().__init__(f"the {limit} cap stayed full")
        self.limit = limit


SERVER_CONNECTIONS = "server_connections"


@dataclass(eq=False)
class _Idle:
    conn: Conn
    dsn: str
    since: float


@dataclass(eq=False)
class _Server:
    """The connections open to one server: how many, and which are idle (oldest first)."""

    key: str
    open: int = 0
    idle: list[_Idle] = field(default_factory=list)


def server_key(dsn: str) -> str:
    """The server a connection string reaches, as its cap counts it: the first host
    libpq would try, normalised (lower case, no trailing dot, IDNA), with its port
    as a number, and the address the name resolves to when it does."""
    try:
        params = conninfo_to_dict(dsn)
    except psycopg.ProgrammingError:
        return "unknown"
    host = str(params.get("hostaddr") or params.get("host") or "").split(",")[0]
    port_text = str(params.get("port") or "5432").split(",")[0]
    port = int(port_text) if port_text.isdigit() else 5432
    if not host or host.startswith("/"):
        return scrub(f"{host or 'local socket'}:{port}")
    try:
        host = normalise_host(host)
    except TargetSyntaxError:
        return "unknown"
    return scrub(f"{_address(host, port)}:{port}")


def _address(host: str, port: int) -> str:
    """The first address ``host`` resolves to, as libpq would connect; ``host`` itself
    when it does not resolve (the connection will fail, and say why)."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError):
        return host
    address = str(infos[0][4][0]) if infos else host
    return f"[{address}]" if ":" in address else address


class Connections:
    """Every connection of the process: idle ones by connection string, open ones
    counted per server against ``cap``; those in use can be cancelled at shutdown."""

    def __init__(self, cap: int) -> None:
        self.cap = cap
        self._cond = threading.Condition()
        self._servers: dict[str, _Server] = {}
        self._keys: dict[str, tuple[str, float]] = {}  # dsn -> (server key, resolved at)
        self._in_use: set[Conn] = set()
        self._users: dict[str, int] = {}  # dsn -> targets using it
        self._unkept: set[str] = set()  # dsns whose server loses prepared statements
        self._closed = False

    # -- who uses which connection string -----------------------------------------
    def attach(self, dsn: str) -> None:
        """A target starts using ``dsn``."""
        with self._cond:
            self._users[dsn] = self._users.get(dsn, 0) + 1

    def detach(self, dsn: str) -> None:
        """A target stops using ``dsn``; with no user left, its idle connections close
        now, and one in use when it comes back."""
        with self._cond:
            left = self._users.get(dsn, 0) - 1
            if left > 0:
                self._users[dsn] = left
                return
            self._users.pop(dsn, None)
            closing = self._take_idle(lambda idle: idle.dsn == dsn)
        self._close_and_release(closing)

    # -- checkout -------------------------------------------------------------
    @contextmanager
    def checkout(
        self, dsn: str, wait: float, connect_timeout: float, *, fresh: bool = False
    ) -> Iterator[tuple[Conn, bool]]:
        """A connection to ``dsn``, and whether it had to wait for its server's cap: an
        idle one, else a new one when its server has room (waiting up to ``wait`` for it,
        else CapReachedError). The server may be full of connections to its other
        databases: the one idle longest is closed to make room. ``fresh``: after one was
        found dead, the idle ones of ``dsn`` likely are too (a restart ends them all):
        they are closed, and a new one opened."""
        key = self._server_key(dsn)
        if fresh:
            with self._cond:
                stale = self._take_idle(lambda idle: idle.dsn == dsn)
            self._close_and_release(stale)
        conn, waited = self._take(dsn, key, wait)
        if conn is None:
            conn = self._open(dsn, key, connect_timeout)
        with self._cond:
            self._in_use.add(conn)
        try:
            yield conn, waited
        finally:
            with self._cond:
                self._in_use.discard(conn)
            self._give_back(conn, dsn, key)

    def _take(self, dsn: str, key: str, wait: float) -> tuple[Conn | None, bool]:
        """An idle connection to ``dsn``, or None once a place for a new one is held;
        and whether it waited."""
        deadline = time.monotonic() + wait
        closing: list[Conn] = []
        waited = False
        try:
            with self._cond:
                while True:
                    # Looked up again after each wait: one left empty meanwhile is gone.
                    server = self._servers.setdefault(key, _Server(key))
                    for i in range(len(server.idle) - 1, -1, -1):  # the most recent first
                        if server.idle[i].dsn == dsn:
                            return server.idle.pop(i).conn, waited
                    if server.open < self.cap:
                        server.open += 1
                        return None, waited
                    if server.idle:  # another database's: closed, its place reused
                        closing.append(server.idle.pop(0).conn)
                        server.open -= 1
                        continue
                    remaining = deadline - time.monotonic()
                    if remaining <= 0:
                        raise CapReachedError(SERVER_CONNECTIONS)
                    waited = True
                    self._cond.wait(remaining)
        finally:
            self._close_all(closing)

    def _open(self, dsn: str, key: str, connect_timeout: float) -> Conn:
        try:
            conn = psycopg.connect(
                dsn,
                options=session_options(dsn),
                autocommit=True,
                application_name=DEFAULT_APPLICATION_NAME,
                connect_timeout=max(2, round(connect_timeout)),
            )
        except (psycopg.Error, UnicodeError) as exc:
            # UnicodeError: a host name that IDNA cannot encode, found only at lookup.
            message = describe_connect_error(dsn, exc)
            release_failed_attempt(exc)
        else:
            # Every transaction on it (BEGIN, with these) reads one snapshot and writes nothing.
            conn.isolation_level = psycopg.IsolationLevel.REPEATABLE_READ
            conn.read_only = True
            if dsn not in self._unkept:
                keep_statements(conn)
            return readable(conn)
        self._release(key)
        raise ConnectionUnavailableError(message)

    def _give_back(self, conn: Conn, dsn: str, key: str) -> None:
        healthy = not (conn.closed or conn.broken) and conn.info.transaction_status == 0
        with self._cond:
            if healthy and not self._closed and dsn in self._users:
                self._servers[key].idle.append(_Idle(conn, dsn, time.monotonic()))
                self._cond.notify()
                return
        conn.close()
        self._release(key)

    def _release(self, key: str) -> None:
        with self._cond:
            server = self._servers.get(key)
            if server is not None:
                server.open -= 1
                if not server.open and not server.idle:
                    del self._servers[key]  # its series goes with it
            self._cond.notify()

    def stop_keeping_statements(self, conn: Conn, dsn: str) -> None:
        """``dsn``'s server loses a session's prepared statements between transactions
        (a pooler in transaction mode): none is kept on its connections from now on."""
        forget_statements(conn, for_good=True)
        with self._cond:
            self._unkept.add(dsn)
            closing = self._take_idle(lambda idle: idle.dsn == dsn)  # they keep theirs
        self._close_and_release(closing)

    def server_of(self, dsn: str) -> str:
        """The server ``dsn`` reaches, as its cap counts it (see server_key)."""
        return self._server_key(dsn)

    def _server_key(self, dsn: str) -> str:
        now = time.monotonic()
        with self._cond:
            cached = self._keys.get(dsn)
        if cached and now - cached[1] < RESOLVED_FOR:
            return cached[0]
        key = server_key(dsn)  # a lookup, outside the lock
        with self._cond:
            self._keys[dsn] = (key, now)
        return key

    # -- housekeeping -----------------------------------------------------------
    def close_idle(self, older_than: float = IDLE_CLOSE) -> None:
        """Close the connections idle longer than ``older_than``, and forget the
        addresses of connection strings no target uses."""
        cutoff = time.monotonic() - older_than
        with self._cond:
            closing = self._take_idle(lambda idle: idle.since < cutoff)
            for dsn in [d for d in self._keys if d not in self._users]:
                del self._keys[dsn]
        self._close_and_release(closing)

    def open_per_server(self) -> dict[str, int]:
        with self._cond:
            return {key: server.open for key, server in self._servers.items()}

    def cancel_all(self) -> None:
        """Cancel the query of every connection in use (at shutdown)."""
        with self._cond:
            busy = list(self._in_use)
        for conn in busy:
            with contextlib.suppress(psycopg.Error, OSError):
                conn.cancel_safe(timeout=1.0)

    def close(self) -> None:
        """Close every idle connection now, and each one in use when it comes back."""
        with self._cond:
            self._closed = True
            closing = self._take_idle(lambda idle: True)
        self._close_and_release(closing)

    def _take_idle(self, which: Callable[[_Idle], bool]) -> list[tuple[Conn, str]]:
        """Take out of their servers the idle connections ``which`` selects (lock held),
        with their servers' keys. Each keeps its place under the cap until
        _close_and_release has closed it, so no other opens while it is still open."""
        taken: list[tuple[Conn, str]] = []
        for key, server in self._servers.items():
            keep = []
            for idle in server.idle:
                if which(idle):
                    taken.append((idle.conn, key))
                else:
                    keep.append(idle)
            server.idle = keep
        return taken

    def _close_and_release(self, taken: list[tuple[Conn, str]]) -> None:
        for conn, key in taken:
            with contextlib.suppress(psycopg.Error, OSError):
                conn.close()
            self._release(key)

    @staticmethod
    def _close_all(conns: list[Conn]) -> None:
        for conn in conns:
            with contextlib.suppress(psycopg.Error, OSError):
                conn.close()
