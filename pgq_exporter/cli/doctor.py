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
its plan.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field
from typing import Any, cast

import psycopg
from psycopg import sql

from pgq_exporter.catalogue import (
    JOB_HISTOGRAMS,
    QUEUE_COLLECTORS,
    QUEUE_DEPTH,
    QUEUE_LATENCY,
    QUEUE_LEASES,
    QUEUE_WINDOW,
    window_from_updates,
)
from pgq_exporter.collectors import planned
from pgq_exporter.collectors.base import Conn, Context, feed_for
from pgq_exporter.collectors.library_sql import queue_names
from pgq_exporter.collectors.queues import KnownQueues
from pgq_exporter.collectors.rendering import mapping_parts
from pgq_exporter.config import Config, DatabaseConfig, Layout, SchemaMapping
from pgq_exporter.pg.connect import read_only
from pgq_exporter.presets.library import LibraryLayout
from pgq_exporter.runtime.collection import set_transaction_settings
from pgq_exporter.sql import query

_FILE = "doctor.sql"
_ALREADY_EXPLAIN = re.compile(r"\s*(?:--[^\n]*\n\s*)*EXPLAIN\b", re.IGNORECASE)
# The table a CREATE INDEX statement indexes (its last name, after the schema).
_INDEXED_TABLE = re.compile(r"\bON\s+(?:ONLY\s+)?(?:\"?[\w$]+\"?\.)?(\"?[\w$]+\"?)", re.IGNORECASE)
LARGE = 10_000  # rows (the planner's estimate) from which a table matters: --min-rows
INDEX_FOR: dict[str, str] = {
    QUEUE_DEPTH: "index_counts",
    QUEUE_LATENCY: "index_ready",
    QUEUE_LEASES: "index_leases",
    QUEUE_WINDOW: "index_finished",
    JOB_HISTOGRAMS: "index_finished",
}


@dataclass(frozen=True, slots=True)
class Scan:
    schema: str
    table: str
    rows: int


@dataclass
class Diagnosis:
    collector: str
    statements: int = 0
    cost: float = 0.0  # the sum of the statements' planned total costs
    seconds: float = 0.0  # the run's time, measured
    scans: list[Scan] = field(default_factory=list)  # large tables read sequentially
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


def diagnose(conn: Conn, dsn: str, layout: Layout, large: int = LARGE) -> list[Diagnosis]:
    database = DatabaseConfig("doctor", dsn, layout=layout)
    config = Config(databases=(database,))
    results = []
    for plan in planned(config, database.name, layout):
        if plan.name not in QUEUE_COLLECTORS:
            continue
        collector = plan.make()
        ctx = Context(config, database, layout, KnownQueues(), feed_for(layout))
        recording = _Recording(conn)
        diagnosis = Diagnosis(plan.name)
        try:
            with read_only(conn):
                conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
                set_transaction_settings(conn, 30.0)
                began = time.perf_counter()
                collector.collect(cast(Conn, recording), ctx)
                diagnosis.seconds = time.perf_counter() - began
                _plan(conn, recording.statements, diagnosis, large)
        except psycopg.Error as exc:
            diagnosis.error = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        results.append(diagnosis)
    return results


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
                scan = _large(conn, node["Schema"], node["Relation Name"], large)
                if scan and scan not in diagnosis.scans:
                    diagnosis.scans.append(scan)


def _nodes(node: dict[str, Any]) -> list[dict[str, Any]]:
    found = [node]
    for child in node.get("Plans", []):
        found += _nodes(child)
    return found


def _large(conn: Conn, schema: str, table: str, large: int) -> Scan | None:
    row = conn.execute(query(_FILE, "relation_rows"), {"schema": schema, "name": table}).fetchone()
    rows = int(row[0]) if row else 0
    return Scan(schema, table, rows) if rows >= large else None


def suggestion(conn: Conn, diagnosis: Diagnosis, scan: Scan, layout: SchemaMapping) -> str:
    """The index that would make ``diagnosis.collector``'s reads of ``scan`` cheap, for
    a layout of the reference collectors (a library preset's are library_indexes)."""
    table = sql.Identifier(scan.schema, scan.table)
    parts = {**mapping_parts(layout), "table": table}
    index = INDEX_FOR[diagnosis.collector]
    if diagnosis.collector == QUEUE_WINDOW and window_from_updates(layout.columns):
        index = "index_updated"
    statement = sql.SQL(query(_FILE, index)).format(**parts)
    return _one_line(conn, statement)


def library_indexes(
    conn: Conn, collector: str, layout: LibraryLayout, large: int = LARGE
) -> list[str]:
    """The indexes the preset knows would make ``collector``'s reads cheap and that the
    library's schema does not have yet, as CREATE INDEX statements (with a table per
    queue, one per queue)."""
    blocks = layout.preset.indexes_for(collector)
    per_queue = blocks and layout.preset.per_queue
    queues = queue_names(conn, layout) if per_queue else []
    missing = []
    for block in blocks:
        for name, statement in layout.index_statements(block, queues):
            params = {"schema": layout.schema, "name": name}
            exists = conn.execute(query(_FILE, "index_exists"), params).fetchone()
            if exists and exists[0]:
                continue
            line = _one_line(conn, statement)
            table = _INDEXED_TABLE.search(line)
            if table and _large(conn, layout.schema, table.group(1).strip('"'), large) is None:
                continue  # a table this small is read fast without it
            if "CONCURRENTLY" not in line.upper():  # a partitioned table: see the block
                line += "  -- blocks writes while it builds: run it when the queues are quiet"
            missing.append(line)
    return missing


def _one_line(conn: Conn, statement: sql.Composable) -> str:
    return " ".join(statement.as_string(conn).split())
