"""What every collector shares: its samples, its context, and SQL rendered from the mapping."""

from __future__ import annotations

import logging
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import psycopg
from psycopg import sql

from pgq_exporter.config import Config, DatabaseConfig, Layout, SchemaMapping
from pgq_exporter.errors import PgqError
from pgq_exporter.presets.library import LibraryLayout
from pgq_exporter.samples import AnySample
from pgq_exporter.sql import query

if TYPE_CHECKING:
    from pgq_exporter.collectors.finished_feed import FinishedFeed

log = logging.getLogger("pgq_exporter.collectors")
Row = tuple[Any, ...]
Conn = psycopg.Connection[Any]
DISCOVERY_GAP = 5.0
# The reference schema's table of exact counts (schema version 3 on).
COUNTS_TABLE = "queue_counts"


@dataclass
class KnownQueues:
    """Queues a database is known to have: from partitions, config, and recently seen rows.

    A queue stays known for ``memory`` seconds after it was last seen, so a
    drained queue reads 0 instead of vanishing. Shared by the collector threads
    of one database; discovery runs at most every ``DISCOVERY_GAP`` seconds.
    """

    configured: tuple[str, ...] = ()
    memory: float = 3600.0
    limit: int = 2_000  # queues served at most (max_queues), the first in name order
    dropped: int = 0  # known queues left out by the limit at the last look
    _seen: dict[str, float] = field(default_factory=dict)
    _discovered: float = 0.0
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def saw(self, queues: Iterable[str], now: float | None = None) -> None:
        stamp = time.time() if now is None else now
        with self._lock:
            for queue in queues:
                self._seen[queue] = stamp

    def known(self, now: float | None = None) -> list[str]:
        stamp = time.time() if now is None else now
        with self._lock:
            for queue, seen in list(self._seen.items()):
                if stamp - seen > self.memory:
                    del self._seen[queue]
            known = sorted(set(self.configured) | set(self._seen))
            dropped = max(len(known) - self.limit, 0)
            if dropped and dropped != self.dropped:
                log.warning(
                    "too many queues; the last ones by name are not served",
                    extra={"queues": len(known), "max_queues": self.limit, "dropped": dropped},
                )
            self.dropped = dropped
            return known[: self.limit]

    def discover(self, conn: Conn, mapping: SchemaMapping) -> list[str]:
        """Refresh from the database (partitions, and queues with jobs), then the known list."""

        def find() -> set[str]:
            found = {row[0] for row in conn.execute(render("queue_partitions", mapping)) if row[0]}
            for statuses in (("pending",), ("processing",), ("done", "failed")):
                found |= {row[0] for row in conn.execute(distinct_queues(mapping, statuses))}
            return found

        return self.refresh(find)

    def refresh(self, find: Callable[[], Iterable[str]]) -> list[str]:
        """The known list, after adding what ``find`` returns (at most every DISCOVERY_GAP s)."""
        now = time.monotonic()
        if now - self._discovered >= DISCOVERY_GAP:
            self.saw(find())
            self._discovered = now
        return self.known()


@dataclass
class Context:
    """What a collector run reads besides its connection: the target's config, its
    queue's layout (resolved: see layout.py), its known queues and its feed."""

    config: Config
    database: DatabaseConfig
    layout: Layout
    queues: KnownQueues
    feed: FinishedFeed

    @property
    def mapping(self) -> SchemaMapping:
        """The table layout the reference collectors render their SQL from."""
        if not isinstance(self.layout, SchemaMapping):
            raise TypeError("this collector reads a table layout, not a library preset")
        return self.layout

    @property
    def library(self) -> LibraryLayout | None:
        """The library preset the queue collectors read, if the layout is one."""
        return self.layout if isinstance(self.layout, LibraryLayout) else None

    @property
    def tables(self) -> tuple[str, ...]:
        """The queue's tables (qualified and quoted), for table health and lock waits."""
        if isinstance(self.layout, LibraryLayout):
            return self.layout.qualified_tables(self.queues.known())
        return (sql.Identifier(self.layout.schema, self.layout.table).as_string(),)


class Collector(ABC):
    """Runs its SQL on an interval (the scheduler calls ``collect``) and returns fresh samples."""

    name: str
    # Collectors that read only the catalogs and statistics views run on a
    # connection of their own, so a lock on a queue table never holds them up.
    reads_queue_tables: bool = True

    @abstractmethod
    def collect(self, conn: Conn, ctx: Context) -> list[AnySample]: ...


# The placeholders of a library preset's catalog queries, which name no mapped table.
_NO_TABLE = SchemaMapping()


def mapping_parts(mapping: SchemaMapping) -> dict[str, sql.Composable]:
    """The placeholders every built-in query may use, quoted from the mapping."""
    parts: dict[str, sql.Composable] = {
        "jobs": sql.Identifier(mapping.schema, mapping.table),
        "jobs_name": sql.Literal(sql.Identifier(mapping.schema, mapping.table).as_string()),
        "counts": sql.Identifier(mapping.schema, COUNTS_TABLE),
        "counts_name": sql.Literal(sql.Identifier(mapping.schema, COUNTS_TABLE).as_string()),
        "tables": table_list([sql.Identifier(mapping.schema, mapping.table).as_string()]),
    }
    parts.update(
        {f"c_{key}": sql.Identifier(col) for key, col in mapping.columns.items() if col is not None}
    )
    parts.update({f"s_{key}": sql.Literal(value) for key, value in mapping.statuses.items()})
    return parts


def render(name: str, mapping: SchemaMapping, **extra: sql.Composable) -> sql.Composed:
    """A named query of collectors.sql with the mapping's identifiers and literals quoted in."""
    return sql.SQL(query("collectors.sql", name)).format(**{**mapping_parts(mapping), **extra})


def table_list(tables: Iterable[str]) -> sql.Composable:
    """{tables}: the qualified names of the queue's tables, as a text[] literal."""
    return sql.SQL("ARRAY[{}]::text[]").format(sql.SQL(", ").join(map(sql.Literal, tables)))


def distinct_queues(mapping: SchemaMapping, statuses: tuple[str, ...]) -> sql.Composed:
    values = sql.SQL(", ").join(sql.Literal(mapping.statuses[s]) for s in statuses)
    return render("distinct_queues", mapping, statuses=values)


def fetch(conn: Conn, name: str, ctx: Context, params: dict[str, Any] | None = None) -> list[Row]:
    """A named query of collectors.sql, run with the target's tables. On a library
    preset only the queries that read catalogs and statistics are run this way: their
    table placeholders are the library's tables, and no mapped column is read."""
    mapping = ctx.layout if isinstance(ctx.layout, SchemaMapping) else _NO_TABLE
    statement = render(name, mapping, tables=table_list(ctx.tables))
    return conn.execute(statement, params).fetchall()


def require_all_stats(conn: Conn, ctx: Context) -> None:
    """Fail, rather than read zeros, when other sessions' transactions are hidden."""
    [(allowed,)] = fetch(conn, "reads_all_stats", ctx)
    if not allowed:
        raise PgqError(
            "the role cannot see other sessions' transactions: grant it pg_monitor "
            "(pgq-exporter schema grant-monitor)"
        )
