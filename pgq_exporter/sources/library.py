"""A queue library's preset (presets/libraries/<name>.py and its SQL): its named blocks
run for the queue collectors, its finished block as its feed."""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import partial

import psycopg

from pgq_exporter.catalogue import (
    JOB_HISTOGRAMS,
    QUEUE_COLLECTORS,
    QUEUE_DEPTH,
    QUEUE_LATENCY,
    QUEUE_LEASES,
    QUEUE_WINDOW,
)
from pgq_exporter.collectors.base import Conn, Context, Feed, LiveWorkers, PeriodicTask
from pgq_exporter.collectors.finished import Outcomes, outcomes_of
from pgq_exporter.collectors.job_histograms import JobHistograms
from pgq_exporter.collectors.library_feed import LibraryFeed
from pgq_exporter.collectors.library_queues import (
    COLLECTED_BLOCKS,
    LibraryDepth,
    LibraryLatency,
    LibraryStuck,
    table_labels,
)
from pgq_exporter.collectors.library_sql import plan_block, queue_names, render_block, run_block
from pgq_exporter.collectors.queue_window import QueueWindow
from pgq_exporter.collectors.queues import KnownQueues
from pgq_exporter.collectors.unknown_statuses import unknown_values
from pgq_exporter.config import Config
from pgq_exporter.config.yamlpos import ConfigError
from pgq_exporter.errors import first_line
from pgq_exporter.histograms import ClassicLayout
from pgq_exporter.pg.queue_names import QueueNames
from pgq_exporter.presets.library import LibraryLayout
from pgq_exporter.sources.base import NO_REMEDY, Factory, QueueSource, Scan, large_table, one_line
from pgq_exporter.sql import query

_TABLE = re.compile(r"\{schema\}\.(\w+)")
# The table a CREATE INDEX statement indexes (its last name, after the schema).
_INDEXED_TABLE = re.compile(r"\bON\s+(?:ONLY\s+)?(?:\"?[\w$]+\"?\.)?(\"?[\w$]+\"?)", re.IGNORECASE)


@dataclass(frozen=True, slots=True)
class LibrarySource(QueueSource):
    library: LibraryLayout

    @property
    def layout(self) -> LibraryLayout:
        return self.library

    @property
    def name(self) -> str:
        return self.library.preset.name

    def describe(self) -> str:
        if self.library.find_schema:
            return f"preset {self.name} (its schema not found yet)"
        return f"preset {self.name}, schema {self.library.schema}"

    @property
    def statuses(self) -> tuple[str, ...]:
        return self.library.preset.statuses

    @property
    def outcomes(self) -> Outcomes:
        preset = self.library.preset
        return outcomes_of(preset.finishes, preset.knows_processing, preset.knows_wait)

    @property
    def knows_exhausted(self) -> bool:
        return self.library.preset.knows_exhausted

    def find_queues(self, conn: Conn, ctx: Context) -> QueueNames:
        return ctx.queues.refresh(lambda: queue_names(conn, self.library))

    def tables(self, queues: KnownQueues) -> tuple[str, ...]:
        return self.library.qualified_tables(queues.known())

    def table_labels(self, conn: Conn) -> dict[str, str]:
        return table_labels(conn, self.library)

    def make_feed(self, layout: ClassicLayout) -> Feed:
        return LibraryFeed(self.library, layout)

    @property
    def records_workers(self) -> bool:
        return "workers" in self.library.preset.blocks

    @property
    def records_worker_slots(self) -> bool:
        return self.records_workers and self.library.preset.worker_slots

    @property
    def counts_arrivals(self) -> bool:
        return "arrivals" in self.library.preset.blocks

    def arrivals(self, conn: Conn, known: list[str]) -> dict[str, int] | None:
        if not self.counts_arrivals:
            return None
        rows = run_block(conn, self.library, "arrivals", known)
        return {str(queue): int(n) for queue, n in rows if n is not None}

    def workers(self, conn: Conn, known: list[str]) -> list[LiveWorkers] | None:
        if not self.records_workers:
            return None
        statement = render_block(self.library, "workers")
        rows = conn.execute(statement, {"queues": known}).fetchall()
        return [LiveWorkers(str(queue), int(n), None if slots is None else int(slots))
                for queue, n, slots in rows]  # fmt: skip

    def periodic_tasks(self, conn: Conn) -> list[PeriodicTask]:
        if "periodic" not in self.library.preset.blocks:
            return []
        rows = conn.execute(render_block(self.library, "periodic")).fetchall()
        return [PeriodicTask(self.name, str(task), *rest) for task, *rest in rows]

    def queue_collectors(self) -> dict[str, Factory]:
        """Its blocks' collectors; with a finished block, the window and histograms of
        its feed."""
        library = self.library
        made: dict[str, Factory] = {
            QUEUE_DEPTH: partial(LibraryDepth, library),
            QUEUE_LATENCY: partial(LibraryLatency, library),
            QUEUE_LEASES: partial(LibraryStuck, library),
            QUEUE_WINDOW: QueueWindow,
            JOB_HISTOGRAMS: JobHistograms,
        }
        fed = library.preset.collectors
        return {name: made[name] for name in QUEUE_COLLECTORS if name in fed}

    def not_scheduled(self, collector: str) -> dict[str, str]:
        return {"why": "the preset cannot measure what it reads", "preset": self.name}

    def tables_read(self, conn: Conn) -> list[str]:
        library = self.library
        names = {
            name
            for block, text in library.preset.blocks.items()
            if not block.startswith("index_")
            for name in _TABLE.findall(text)
        }  # enum types among them, which existing_tables drops
        prefixes = library.preset.per_queue.values()
        if prefixes:
            names |= {prefix + queue.lower() for queue in queue_names(conn, library)
                      for prefix in prefixes}  # fmt: skip
        params = {"schema": library.schema, "names": sorted(names)}
        rows = conn.execute(query("detect.sql", "existing_tables"), params).fetchall()
        if self.counts_arrivals:  # its arrivals are its tables' sequences' last values
            rows += conn.execute(query("detect.sql", "owned_sequences"), params).fetchall()
        return sorted(str(name) for (name,) in rows)

    def check(self, conn: Conn, config: Config, database: str, where: str) -> None:
        """Plan every block of the preset: a table, column or type that the database
        lacks fails with the line of `preset:`."""
        library = self.library
        where = library.where or where
        for block in (b for b in COLLECTED_BLOCKS if b in library.preset.blocks):
            try:
                with conn.transaction():  # a savepoint: the next block still runs
                    plan_block(conn, library, block)
            except psycopg.errors.InsufficientPrivilege as exc:
                raise ConfigError(
                    f"{where}: database {database!r}: preset {self.name} (schema "
                    f"{library.schema}): {block}: {explained(first_line(exc))}"
                ) from None
            except psycopg.Error as exc:
                raise ConfigError(
                    f"{where}: preset {self.name} does not match database "
                    f"{database!r} (schema {library.schema}): {block}: {first_line(exc)}"
                ) from None

    def warnings(self, conn: Conn) -> list[str]:
        """The library's status values its preset does not know (an upgrade added them)."""
        if not self.library.preset.status_enum:
            return []
        values = unknown_values(conn, self.library)
        if not values:
            return []
        return [f"status values the preset {self.name} does not know: "
                f"{', '.join(values)} (their jobs are counted as status=\"unknown\")"]  # fmt: skip

    def slow_advice(self, conn: Conn, collector: str, scans: list[Scan], large: int) -> list[str]:
        """The indexes the library does not create that would make the collector's reads
        cheap, or the words that none is known."""
        missing = self.missing_indexes(conn, collector, large)
        if not missing:
            read = ", ".join(f"{s.schema}.{s.table} ({s.rows:,} rows)" for s in scans)
            return [f"  slow: {NO_REMEDY}" + (f"; it reads {read} sequentially" if read else "")]
        return ["  slow: an index the library does not create would make its reads cheap:",
                *(f"    {statement}" for statement in missing)]  # fmt: skip

    def missing_indexes(self, conn: Conn, collector: str, large: int) -> list[str]:
        """The indexes the preset knows would make ``collector``'s reads cheap and that the
        library's schema does not have yet, as CREATE INDEX statements (with a table per
        queue, one per queue), on tables of ``large`` rows or more."""
        library = self.library
        blocks = library.preset.indexes_for(collector)
        per_queue = blocks and library.preset.per_queue
        queues = queue_names(conn, library) if per_queue else []
        missing = []
        for block in blocks:
            for name, statement in library.index_statements(block, queues):
                params = {"schema": library.schema, "name": name}
                exists = conn.execute(query("doctor.sql", "index_exists"), params).fetchone()
                if exists and exists[0]:
                    continue
                line = one_line(conn, statement)
                table = _INDEXED_TABLE.search(line)
                small = table and large_table(conn, library.schema, table.group(1).strip('"'),
                                              large) is None  # fmt: skip
                if small:
                    continue  # a table this small is read fast without it
                if "CONCURRENTLY" not in line.upper():  # a partitioned table: see the block
                    line += "  -- blocks writes while it builds: run it when the queues are quiet"
                missing.append(line)
        return missing


def explained(error: str) -> str:
    """An error as check-config says it: a missing grant says so."""
    if "InsufficientPrivilege" in error or "permission denied" in error:
        return (f"permission denied: {error.split(': ', 1)[-1]} (the role needs the grants "
                "of `pgq-exporter schema grant-monitor`)")  # fmt: skip
    return error
