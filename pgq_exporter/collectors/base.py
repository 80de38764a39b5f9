"""What every collector shares: its context (the source of its queue, its feed), its
interface, and the catalog queries it runs against the target's tables."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple, Protocol, TypeVar, cast

from pgq_exporter.collectors.finished import FinishedJobs, Outcomes
from pgq_exporter.collectors.queues import KnownQueues
from pgq_exporter.collectors.rendering import (
    NO_TABLE,
    Conn,
    Row,
    Unfinished,
    kept_tables,
    kept_unfinished,
    render,
    table_list,
)
from pgq_exporter.config import Config, DatabaseConfig, SchemaMapping
from pgq_exporter.errors import PgqError
from pgq_exporter.pg.queue_names import QueueNames
from pgq_exporter.samples import AnySample

__all__ = ["Conn", "Context", "Row"]  # Conn and Row: every collector's types

T = TypeVar("T")


class Feed(Protocol):
    """A source's feed of finished jobs (finished_feed.py, library_feed.py): each job
    read once, into the store the histograms, totals and the window read."""

    jobs: FinishedJobs
    # Whether it reads something before the snapshot of its read (see prepare).
    reads_before_snapshot: bool

    def prepare(self, conn: Conn) -> None: ...

    def read(self, conn: Conn, queues: KnownQueues, window: float) -> None: ...


class PeriodicTask(NamedTuple):
    """A periodic task as a library records it: when it last ran and is next due (epoch
    seconds; None where it does not record it); its schedule (None: not recorded), the
    time its next run follows where that is not its last run (its scheduler's last
    look), and the zone the schedule is read in (None: UTC)."""

    scheduler: str
    task: str
    last_run: float | None
    next_run: float | None
    schedule: str | None
    after: float | None = None
    zone: str | None = None


class LiveWorkers(NamedTuple):
    """The live workers that serve a queue ("*": every queue), and the jobs they can run
    at once (None where not recorded)."""

    queue: str
    workers: int
    slots: int | None


class Source(Protocol):
    """What a collector asks of the source of its database's queue (sources/): never
    which kind of source it is."""

    @property
    def outcomes(self) -> Outcomes:
        """What its feed knows of each finished job."""

    def find_queues(self, conn: Conn, ctx: Context) -> QueueNames:
        """The queues known now, after a look for new ones (at most every few seconds)."""

    def tables(self, queues: KnownQueues) -> tuple[str, ...]:
        """Its tables (qualified and quoted), for table health and lock waits."""

    def table_labels(self, conn: Conn) -> dict[str, str]:
        """Table name -> the label it is served under, where a table is not its own."""

    def failure_hint(self, error: BaseException) -> str:
        """What to add to a collector's failure, where the source knows why ("" if not)."""

    def periodic_tasks(self, conn: Conn) -> list[PeriodicTask]:
        """The periodic tasks its library records (none where it records none)."""

    def arrivals(self, conn: Conn, known: list[str]) -> dict[str, int] | None:
        """The jobs ever enqueued in each of ``known``, where a library's layout counts
        them (else None; the reference schema's come with its kept totals)."""

    def workers(self, conn: Conn, known: list[str]) -> list[LiveWorkers] | None:
        """The live workers by queue, where its database records them (else None);
        ``known``: the queues tracked, for a worker that serves all but some."""

    @property
    def records_worker_slots(self) -> bool:
        """Whether its workers' rows give their capacity (pgq_worker_slots)."""


@dataclass
class Context:
    """What a collector run reads besides its connection: the target's config, the
    source of its queue, its known queues and the source's feed of finished jobs."""

    config: Config
    database: DatabaseConfig
    source: Source
    queues: KnownQueues
    feed: Feed
    server: str = ""  # the server, as its connections count it (host or address:port)
    # What the run's collectors read alike, read by the first to ask (see once).
    _read: dict[str, object] = field(default_factory=dict)

    @property
    def tables(self) -> tuple[str, ...]:
        return self.source.tables(self.queues)

    @property
    def outcomes(self) -> Outcomes:
        return self.source.outcomes

    def known_queues(self, conn: Conn) -> QueueNames:
        return self.source.find_queues(conn, self)

    @property
    def feed_prepares(self) -> bool:
        """Whether the feed reads something before the snapshot of its read."""
        return self.feed.reads_before_snapshot

    def prepare_feed(self, conn: Conn) -> None:
        """What the feed reads before the snapshot of the transaction it reads in."""
        self.feed.prepare(conn)

    def read_feed(self, conn: Conn) -> None:
        """Observe the jobs finished since the feed's last read."""
        self.feed.read(conn, self.queues, self.config.window)

    def once(self, key: str, read: Callable[[], T]) -> T:
        """What several collectors of the run read alike (whether the schema keeps its
        counts, their sums), read by the first to ask: a statement a collector was three
        more statements a run for each of a thousand probe targets."""
        if key not in self._read:
            self._read[key] = read()
        return cast(T, self._read[key])


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
    def collect(self, conn: Conn, ctx: Context) -> Sequence[AnySample]: ...

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


def fetch(
    conn: Conn,
    name: str,
    ctx: Context,
    params: dict[str, Any] | None = None,
    mapping: SchemaMapping = NO_TABLE,
) -> list[Row]:
    """A named query of collectors.sql, run with the target's tables, and the table
    mapping a reference collector reads (a catalog query reads no mapped column)."""
    statement = render(name, mapping, tables=table_list(ctx.tables))
    return conn.execute(statement, params).fetchall()


def kept_in_run(conn: Conn, ctx: Context, mapping: SchemaMapping) -> tuple[bool, bool]:
    """rendering.kept_tables, read once a run."""
    return ctx.once("kept_tables", lambda: kept_tables(conn, mapping))


def unfinished_in_run(conn: Conn, ctx: Context, mapping: SchemaMapping) -> Unfinished:
    """rendering.kept_unfinished (a schema that keeps its counts), read once a run."""
    return ctx.once("kept_unfinished", lambda: kept_unfinished(conn, mapping))


def require_all_stats(conn: Conn, ctx: Context) -> None:
    """Fail, rather than read zeros, when other sessions' transactions are hidden."""
    [(allowed,)] = fetch(conn, "reads_all_stats", ctx)
    if not allowed:
        raise PgqError(
            "the role cannot see other sessions' transactions: grant it pg_monitor "
            "(pgq-exporter schema grant-monitor)"
        )
