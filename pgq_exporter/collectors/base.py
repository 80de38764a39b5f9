"""What every collector shares: its context, its interface, and the catalog queries it
runs against the target's tables."""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any

from psycopg import sql

from pgq_exporter.collectors.capabilities import outcomes
from pgq_exporter.collectors.finished import Outcomes
from pgq_exporter.collectors.finished_feed import FinishedFeed
from pgq_exporter.collectors.library_feed import LibraryFeed
from pgq_exporter.collectors.library_sql import queue_names
from pgq_exporter.collectors.queues import KnownQueues
from pgq_exporter.collectors.rendering import NO_TABLE, Conn, Row, render, table_list
from pgq_exporter.config import Config, DatabaseConfig, Layout, SchemaMapping
from pgq_exporter.errors import PgqError
from pgq_exporter.presets.library import LibraryLayout
from pgq_exporter.samples import AnySample

__all__ = ["Conn", "Context", "Row"]  # Conn and Row: every collector's types


Feed = FinishedFeed | LibraryFeed


def feed_for(layout: Layout) -> Feed:
    """The feed of finished jobs a layout's collectors read."""
    return LibraryFeed() if isinstance(layout, LibraryLayout) else FinishedFeed()


@dataclass
class Context:
    """What a collector run reads besides its connection: the target's config, its
    queue's layout (resolved: see layout.py), its known queues and its feed of
    finished jobs (``feed_for`` the layout)."""

    config: Config
    database: DatabaseConfig
    layout: Layout
    queues: KnownQueues
    feed: Feed
    server: str = ""  # the server, as its connections count it (host or address:port)

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

    @property
    def outcomes(self) -> Outcomes:
        return outcomes(self.layout)

    def known_queues(self, conn: Conn) -> list[str]:
        """The queues known now, after a look for new ones (at most every few seconds)."""
        if isinstance(self.layout, LibraryLayout):
            layout = self.layout
            return self.queues.refresh(lambda: queue_names(conn, layout))
        return self.queues.discover(conn, self.layout)

    @property
    def feed_prepares(self) -> bool:
        """Whether the feed reads something before the snapshot of its read."""
        return self.feed.reads_before_snapshot

    def prepare_feed(self, conn: Conn) -> None:
        """What the feed reads before the snapshot of the transaction it reads in."""
        self.feed.prepare(conn)

    def read_feed(self, conn: Conn) -> None:
        """Observe the jobs finished since the feed's last read (finished_feed.py,
        library_feed.py)."""
        window = self.config.window
        if isinstance(self.feed, LibraryFeed):
            self.feed.read(conn, self._library(), self.queues, window)
        else:
            self.feed.read(conn, self.mapping, self.tables, self.queues, window)

    def _library(self) -> LibraryLayout:
        if not isinstance(self.layout, LibraryLayout):
            raise TypeError("a library's feed reads a library preset")
        return self.layout


class PartialCollectionError(Exception):
    """A collector that served part of its samples and failed the rest: a role that may
    read one table of the library's but not another. Its samples are served, and it
    counts as failed, with the cause's words."""

    def __init__(self, samples: list[AnySample], cause: BaseException) -> None:
        super().__init__(str(cause))
        self.samples = samples
        self.cause = cause


class Collector(ABC):
    """Runs its SQL on an interval (the scheduler calls ``collect``) and returns fresh samples."""

    name: str
    # Collectors that read only the catalogs and statistics views run on a
    # connection of their own, so a lock on a queue table never holds them up.
    reads_queue_tables: bool = True

    # Collectors that read the feed of finished jobs: it reads a bound before their
    # transaction's snapshot (see prepare).
    reads_feed: bool = False

    # Collectors that run SQL from the config, which may leave a session's advisory
    # lock behind.
    runs_users_sql: bool = False

    @abstractmethod
    def collect(self, conn: Conn, ctx: Context) -> list[AnySample]: ...

    def reads_feed_of(self, ctx: Context) -> bool:
        """Whether this run reads the feed (``reads_feed``, unless the layout decides)."""
        return self.reads_feed

    def prepares(self, ctx: Context) -> bool:
        """Whether ``prepare`` reads anything (a transaction is spent on it only then)."""
        return self.reads_feed_of(ctx) and ctx.feed_prepares

    def prepare(self, conn: Conn, ctx: Context) -> None:
        """Before the transaction ``collect`` runs in, in one of its own."""
        if self.reads_feed_of(ctx):
            ctx.prepare_feed(conn)


def fetch(conn: Conn, name: str, ctx: Context, params: dict[str, Any] | None = None) -> list[Row]:
    """A named query of collectors.sql, run with the target's tables. On a library
    preset only the queries that read catalogs and statistics are run this way: their
    table placeholders are the library's tables, and no mapped column is read."""
    mapping = ctx.layout if isinstance(ctx.layout, SchemaMapping) else NO_TABLE
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
