"""The reference queue, and any table mapped like it (the seed article's, one of the
config's `mapping:`): the reference collectors' SQL (sql/collectors.sql) rendered from
its table, columns and statuses."""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import partial

import psycopg
from psycopg import sql

from pgq_exporter.catalogue import (
    JOB_HISTOGRAMS,
    QUEUE_COLLECTORS,
    QUEUE_DEPTH,
    QUEUE_LATENCY,
    QUEUE_LEASES,
    QUEUE_WINDOW,
    columns_left_out,
    columns_read,
    window_from_updates,
)
from pgq_exporter.collectors.base import Conn, Context, Feed, LiveWorkers
from pgq_exporter.collectors.finished import Outcomes, outcomes_of
from pgq_exporter.collectors.finished_feed import FinishedFeed
from pgq_exporter.collectors.job_histograms import JobHistograms
from pgq_exporter.collectors.kept import kept_by_queue
from pgq_exporter.collectors.queue_depth import QueueDepth
from pgq_exporter.collectors.queue_latency import QueueLatency
from pgq_exporter.collectors.queue_leases import QueueLeases
from pgq_exporter.collectors.queue_window import QueueWindow, UpdatedWindow
from pgq_exporter.collectors.queues import KnownQueues
from pgq_exporter.collectors.rendering import (
    COUNTS_TABLE,
    DELAYED_TABLE,
    WORKERS_TABLE,
    mapping_parts,
    render,
)
from pgq_exporter.config import PRESET_LAYOUTS, Config, SchemaMapping
from pgq_exporter.config.yamlpos import ConfigError
from pgq_exporter.histograms import ClassicLayout
from pgq_exporter.pg.queue_names import QueueNames
from pgq_exporter.sources.base import NO_REMEDY, Factory, QueueSource, Scan, one_line
from pgq_exporter.sql import query

# What a database without the reference queue's tables is told, where it uses it.
NO_REFERENCE_QUEUE = (
    "pgq-exporter's reference queue is not installed there: for the queue library "
    "the database runs, set `preset:` (`preset: auto` finds it)"
)
# The reference queue's version table, read to find and check its layout.
VERSION_TABLE = "schema_version"
# doctor's index for each reference collector's reads (sql/doctor.sql).
INDEX_FOR: dict[str, str] = {
    QUEUE_DEPTH: "index_counts",
    QUEUE_LATENCY: "index_ready",
    QUEUE_LEASES: "index_leases",
    QUEUE_WINDOW: "index_finished",
    JOB_HISTOGRAMS: "index_finished",
}


@dataclass(frozen=True, slots=True)
class MappedSource(QueueSource):
    mapping: SchemaMapping

    @property
    def layout(self) -> SchemaMapping:
        return self.mapping

    @property
    def name(self) -> str:
        for name, preset in PRESET_LAYOUTS.items():
            if _same_table(self.mapping, preset):
                return name
        return "mapping"

    def describe(self) -> str:
        mapping = self.mapping
        named = (n for n, m in PRESET_LAYOUTS.items()
                 if replace(m, schema=mapping.schema) == mapping)  # fmt: skip
        name = next(named, None)
        what = f"preset {name}" if name else "mapping"
        return f"{what}, table {mapping.schema}.{mapping.table}"

    @property
    def statuses(self) -> tuple[str, ...]:
        return ("pending", "processing", "done", "failed")

    @property
    def outcomes(self) -> Outcomes:
        return outcomes_of()

    @property
    def counts_late_jobs(self) -> bool:
        return True

    # The reference schema's own tables (version 12 on): its arrivals and its workers.
    @property
    def counts_arrivals(self) -> bool:
        return self.mapping.is_reference

    @property
    def records_workers(self) -> bool:
        return self.mapping.is_reference

    @property
    def records_worker_slots(self) -> bool:
        return self.mapping.is_reference

    def workers(self, conn: Conn, known: list[str]) -> list[LiveWorkers] | None:
        if not self.mapping.is_reference:
            return None
        [(present,)] = conn.execute(render("has_workers", self.mapping)).fetchall()
        if not present:
            return None
        rows = conn.execute(render("live_workers", self.mapping)).fetchall()
        return [LiveWorkers(str(queue), int(n), int(slots)) for queue, n, slots in rows]

    def find_queues(self, conn: Conn, ctx: Context) -> QueueNames:
        mapping = self.mapping

        def with_jobs() -> set[str] | None:
            kept = kept_by_queue(conn, ctx, mapping)
            return None if kept is None else kept.with_jobs()

        return ctx.queues.discover(conn, mapping, with_jobs)

    def tables(self, queues: KnownQueues) -> tuple[str, ...]:
        return (sql.Identifier(self.mapping.schema, self.mapping.table).as_string(),)

    def failure_hint(self, error: BaseException) -> str:
        missing = isinstance(error, psycopg.errors.UndefinedTable)
        return NO_REFERENCE_QUEUE if missing and self.mapping.is_reference else ""

    def make_feed(self, layout: ClassicLayout) -> Feed:
        return FinishedFeed(self.mapping, layout)

    def queue_collectors(self) -> dict[str, Factory]:
        mapping = self.mapping
        # A table that records no start or end (the seed article's) still gets the
        # window, from updated_at - created_at.
        window: Factory = (
            partial(UpdatedWindow, mapping) if window_from_updates(mapping.columns) else QueueWindow
        )
        made: dict[str, Factory] = {
            QUEUE_DEPTH: partial(QueueDepth, mapping),
            QUEUE_LATENCY: partial(QueueLatency, mapping),
            QUEUE_LEASES: partial(QueueLeases, mapping),
            QUEUE_WINDOW: window,
            JOB_HISTOGRAMS: partial(JobHistograms, mapping if mapping.is_reference else None),
        }
        return {name: made[name] for name in QUEUE_COLLECTORS if mapping.runs(name)}

    def not_scheduled(self, collector: str) -> dict[str, str]:
        left_out = columns_left_out(collector, self.mapping.columns)
        return {"why": "the mapping leaves out a column it reads", "columns": ", ".join(left_out)}

    def tables_read(self, conn: Conn) -> list[str]:
        mapping = self.mapping
        own = (COUNTS_TABLE, DELAYED_TABLE, VERSION_TABLE, WORKERS_TABLE)
        extras = own if mapping.is_reference else ()
        names = sorted({mapping.table, *extras})
        params = {"schema": mapping.schema, "names": names}
        rows = conn.execute(query("detect.sql", "existing_tables"), params).fetchall()
        return sorted(str(name) for (name,) in rows)

    def check(self, conn: Conn, config: Config, database: str, where: str) -> None:
        """The mapped table, and each column the scheduled collectors read, must exist;
        the error names where the config sets them."""
        mapping = self.mapping
        runs = [name for name in self.queue_collectors() if config.collector(name).enabled]
        wanted = sorted({key for c in runs for key in columns_read(c, mapping.columns)})
        if not wanted:
            return
        have = {row[0] for row in conn.execute(render("mapped_table_columns", mapping))}
        table = f"{mapping.schema}.{mapping.table}"
        fallback = f"{config.source}: database {database!r}"
        if not have:
            place = mapping.place("table") or fallback
            hint = f"; {NO_REFERENCE_QUEUE}" if mapping.is_reference else ""
            raise ConfigError(
                f"{place}: table {table} does not exist on database {database!r}{hint}"
            )
        for key in wanted:
            column = mapping.columns.get(key)
            if column is not None and column not in have:
                place = mapping.place(f"columns.{key}") or fallback
                raise ConfigError(
                    f"{place}: column {column!r} does not exist in {table} on database {database!r}"
                )

    def slow_advice(self, conn: Conn, collector: str, scans: list[Scan], large: int) -> list[str]:
        """For each large table the collector read sequentially, the index that would
        make its reads cheap."""
        if not scans:
            return [f"  slow: {NO_REMEDY}"]
        index = INDEX_FOR[collector]
        if collector == QUEUE_WINDOW and window_from_updates(self.mapping.columns):
            index = "index_updated"
        lines = []
        for scan in scans:
            table = sql.Identifier(scan.schema, scan.table)
            statement = sql.SQL(query("doctor.sql", index)).format(
                **mapping_parts(self.mapping), table=table
            )
            lines += [f"  slow: a sequential scan of {scan.schema}.{scan.table} "
                      f"({scan.rows:,} rows); an index that may avoid it:",
                      f"    {one_line(conn, statement)}"]  # fmt: skip
        return lines


def _same_table(layout: SchemaMapping, preset: SchemaMapping) -> bool:
    return (
        layout.columns == preset.columns
        and layout.statuses == preset.statuses
        and (layout.table == preset.table)
    )
