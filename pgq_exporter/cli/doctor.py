"""`pgq-exporter doctor`: what each queue collector's queries cost on this database.

Each built-in queue collector runs once, as the exporter would, in a
read-only transaction, timed, while its statements are recorded; then each
distinct statement is planned with EXPLAIN (the same parameters, nothing run
again). A collector that took `--slow` (50 ms) or longer is looked at, and
flagged only with a remedy, or with the words that none is known: the reads of
a table or partition of at least LARGE rows sequentially, with the index that
would make them cheap, and, for a library preset, the indexes it knows for that
collector that the library does not create, on a table of at least LARGE rows (a
smaller one is read fast without). A fast collector is not looked at, whatever
its plan. A collector whose transaction holds more than a quarter of the server's
lock table (a statement that reads a partitioned table for each queue locks every
partition and its indexes: pg-boss keeps a partition a queue) is flagged, fast or
not, with the max_locks_per_transaction that makes room for it.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field
from typing import Any, cast

import psycopg
from psycopg import sql

from pgq_exporter.catalogue import QUEUE_COLLECTORS
from pgq_exporter.collectors.base import Conn, Context
from pgq_exporter.collectors.queues import KnownQueues
from pgq_exporter.config import Config, DatabaseConfig
from pgq_exporter.pg.connect import read_only
from pgq_exporter.sources import LARGE, QueueSource, Scan, large_table
from pgq_exporter.sql import query

_ALREADY_EXPLAIN = re.compile(r"\s*(?:--[^\n]*\n\s*)*EXPLAIN\b", re.IGNORECASE)


@dataclass
class Diagnosis:
    collector: str
    statements: int = 0
    cost: float = 0.0  # the sum of the statements' planned total costs
    seconds: float = 0.0  # the run's time, measured
    scans: list[Scan] = field(default_factory=list)  # large tables read sequentially
    locks: int = 0  # held by its transaction at its end
    error: str = ""


class _Recording:
    """A connection that remembers every statement executed through it."""

    def __init__(self, conn: Conn) -> None:
        self.conn = conn
        self.statements: list[tuple[Any, Any]] = []

    def execute(self, statement: Any, params: Any = None, **kwargs: Any) -> Any:
        self.statements.append((statement, params))
        return self.conn.execute(statement, params, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.conn, name)


def diagnose(conn: Conn, dsn: str, source: QueueSource, large: int = LARGE) -> list[Diagnosis]:
    database = DatabaseConfig("doctor", dsn, layout=source.layout)
    config = Config(databases=(database,))
    results = []
    # Each collector's transaction begins as the exporter's do: one snapshot, no writes.
    conn.isolation_level, conn.read_only = psycopg.IsolationLevel.REPEATABLE_READ, True
    for plan in source.plan(config, database.name):
        if plan.name not in QUEUE_COLLECTORS:
            continue
        collector = plan.make()
        ctx = Context(
            config, database, source, KnownQueues(), source.make_feed(config.histograms.feed_layout)
        )
        recording = _Recording(conn)
        diagnosis = Diagnosis(plan.name)
        try:
            with read_only(conn, 30.0):
                began = time.perf_counter()
                collector.collect(cast(Conn, recording), ctx)
                diagnosis.seconds = time.perf_counter() - began
                [(diagnosis.locks,)] = conn.execute(query("doctor.sql", "locks_held")).fetchall()
                _plan(conn, recording.statements, diagnosis, large)
        except psycopg.Error as exc:
            diagnosis.error = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        results.append(diagnosis)
    return results


@dataclass(frozen=True)
class LockTable:
    """The server's lock table: ``per_session`` (max_locks_per_transaction) for each of
    ``sessions`` (connections and prepared transactions)."""

    per_session: int
    sessions: int

    @property
    def size(self) -> int:
        return self.per_session * self.sessions

    def crowded_by(self, locks: int) -> bool:
        """Whether a few transactions holding ``locks`` each would fill it: the
        exporter runs several at once, and the applications take their own."""
        return locks * CROWDING > self.size

    def needed_for(self, locks: int) -> int:
        """The max_locks_per_transaction at which ``locks`` no longer crowd it."""
        return -(-locks * CROWDING // self.sessions)

    def advice(self, locks: int) -> str:
        """doctor's line on a collector whose transaction holds ``locks`` and crowds it."""
        return (
            f"  locks: its transaction holds {locks:,} until it ends, of {self.size:,} in "
            f"the server's lock table ({self.per_session} a connection); a few such at once "
            "can fill it, and then any session's next lock fails with 'out of shared "
            "memory'. A statement that reads a partitioned table for each queue locks each "
            f"partition and its indexes. Raise max_locks_per_transaction to "
            f"{self.needed_for(locks)} or more (a restart)."
        )


# A transaction holding more than this share of the lock table crowds it.
CROWDING = 4


def lock_table(conn: Conn) -> LockTable:
    [(per_session, sessions)] = conn.execute(query("doctor.sql", "lock_table")).fetchall()
    return LockTable(int(per_session), int(sessions))


def _plan(conn: Conn, statements: list[tuple[Any, Any]], diagnosis: Diagnosis, large: int) -> None:
    seen: set[str] = set()
    for statement, params in statements:
        text = statement.as_string(conn) if isinstance(statement, sql.Composable) else statement
        if text in seen or _ALREADY_EXPLAIN.match(text):
            continue  # planned once; the planner's own estimates cost a plan, not a scan
        seen.add(text)
        explain = sql.SQL("EXPLAIN (FORMAT JSON, VERBOSE) {}").format(sql.SQL(text))
        [(plan,)] = conn.execute(explain, params).fetchall()
        root = plan[0]["Plan"]
        diagnosis.statements += 1
        diagnosis.cost += float(root["Total Cost"])
        for node in _nodes(root):
            if node.get("Node Type") == "Seq Scan":
                scan = large_table(conn, node["Schema"], node["Relation Name"], large)
                if scan and scan not in diagnosis.scans:
                    diagnosis.scans.append(scan)


def _nodes(node: dict[str, Any]) -> list[dict[str, Any]]:
    found = [node]
    for child in node.get("Plans", []):
        found += _nodes(child)
    return found
