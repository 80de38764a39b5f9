"""A database's queue as the exporter reads it: one interface, whatever keeps the queue.

A source is made from a queue's layout (sources.source_for): the reference queue or a
table mapped like it (mapped.py), or a library's preset (library.py). Each declares in
one place its tables, how it finds its queues, its feed of finished jobs, the
collectors it runs and so the catalogue metrics it serves, and how a role is granted
what it reads. The collectors (collectors.base.Source), the runtime, the commands and
the bundle ask it; none asks which kind of source it is.
"""

from __future__ import annotations

import logging
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

from psycopg import sql

from pgq_exporter.catalogue import (
    ACTIVITY,
    BUILTIN_COLLECTORS,
    CATALOGUE,
    PERIODIC_TASKS,
    QUEUE_COLLECTORS,
    TABLE_HEALTH,
    WORKERS,
    XMIN_HORIZON,
)
from pgq_exporter.collectors import Planned
from pgq_exporter.collectors.activity import Activity
from pgq_exporter.collectors.base import Collector, Conn, Context, Feed, LiveWorkers, PeriodicTask
from pgq_exporter.collectors.custom import CustomSQL
from pgq_exporter.collectors.finished import Outcomes
from pgq_exporter.collectors.periodic_tasks import PeriodicTasks
from pgq_exporter.collectors.queues import KnownQueues
from pgq_exporter.collectors.table_health import TableHealth
from pgq_exporter.collectors.workers import Workers
from pgq_exporter.collectors.xmin_horizon import XminHorizon
from pgq_exporter.config import CollectorSettings, Config, Layout
from pgq_exporter.histograms import ClassicLayout
from pgq_exporter.pg.queue_names import QueueNames
from pgq_exporter.sql import query

log = logging.getLogger("pgq_exporter.collectors")

# The metrics whose serving depends on the source: those of the queue collectors, and
# of its workers.
LAYOUT_METRICS: tuple[str, ...] = tuple(
    spec.name for spec in CATALOGUE if spec.collector in {*QUEUE_COLLECTORS, WORKERS}
)
# The collectors that read catalogs and statistics: the same on every source.
CATALOG_COLLECTORS: dict[str, type[Collector]] = {
    TABLE_HEALTH: TableHealth, XMIN_HORIZON: XminHorizon, ACTIVITY: Activity,
    PERIODIC_TASKS: PeriodicTasks, WORKERS: Workers,
}  # fmt: skip
# The rows a table must hold (the planner's estimate) for a sequential scan of it to
# matter to doctor: --min-rows.
LARGE = 10_000
NO_REMEDY = "no remedy is known: its reads use the indexes there are"

Factory = Callable[[], Collector]


class QueueSource(ABC):
    """The queue of one database, as one kind of source reads it."""

    @property
    @abstractmethod
    def layout(self) -> Layout:
        """What the config or the catalog says of the queue."""

    @property
    @abstractmethod
    def name(self) -> str:
        """The layout, as pgq_layout_info names it: a preset, or `mapping`."""

    @property
    def schema(self) -> str:
        return self.layout.schema

    @abstractmethod
    def describe(self) -> str:
        """The preset and where it reads, as check-config and the probe's page say it."""

    @property
    @abstractmethod
    def statuses(self) -> tuple[str, ...]:
        """The pgq_queue_jobs statuses it counts."""

    # -- what a collector asks (collectors.base.Source) -------------------------------
    @property
    @abstractmethod
    def outcomes(self) -> Outcomes:
        """What its feed knows of each finished job."""

    @abstractmethod
    def find_queues(self, conn: Conn, ctx: Context) -> QueueNames: ...

    @abstractmethod
    def tables(self, queues: KnownQueues) -> tuple[str, ...]: ...

    def table_labels(self, conn: Conn) -> dict[str, str]:
        return {}

    def failure_hint(self, error: BaseException) -> str:
        return ""

    def periodic_tasks(self, conn: Conn) -> list[PeriodicTask]:
        return []

    # -- what the runtime asks --------------------------------------------------------
    @abstractmethod
    def make_feed(self, layout: ClassicLayout) -> Feed:
        """A new feed of its finished jobs."""

    @abstractmethod
    def queue_collectors(self) -> dict[str, Factory]:
        """How each queue collector it can run is made: by name."""

    def not_scheduled(self, collector: str) -> dict[str, str]:
        """Why a collector does not run on it, for the log line that says so."""
        return {}

    def plan(self, config: Config, database: str) -> list[Planned]:
        """The collectors a target of this source runs: the built-in ones it can feed
        (one log line for each it cannot), then the custom ones meant for ``database``."""
        factories: dict[str, Factory] = {**CATALOG_COLLECTORS, **self.queue_collectors()}
        result = []
        for name in BUILTIN_COLLECTORS:
            settings = config.collector(name)
            factory = factories.get(name)
            if not settings.enabled or factory is None:
                if settings.enabled:
                    why = self.not_scheduled(name)
                    log.info("collector not scheduled: " + why.pop("why"),
                             extra={"database": database, "collector": name, **why})  # fmt: skip
                continue
            reads_queue = name in QUEUE_COLLECTORS
            result.append(Planned(name, factory, settings, reads_queue))
        for custom in config.custom:
            if not custom.databases or database in custom.databases:
                result.append(Planned(custom.name, partial(CustomSQL, custom), custom.settings,
                                      True))  # fmt: skip
        return result

    def serves(self, metric: str, enabled: frozenset[str] | None = None) -> bool:
        """Whether a database of this source has ``metric`` served: its collector runs
        on it (and is in ``enabled``, when given), and its feed knows what it needs."""
        collector = next(spec.collector for spec in CATALOGUE if spec.name == metric)
        if collector not in {*QUEUE_COLLECTORS, WORKERS}:
            return True
        if enabled is not None and collector not in enabled:
            return False
        if collector == WORKERS:
            slots = metric != "pgq_worker_slots" or self.records_worker_slots
            return self.records_workers and slots
        return collector in self.queue_collectors() and self._knows(metric)

    def _knows(self, metric: str) -> bool:
        """Whether what it records gives a queue collector's ``metric``."""
        depends = {
            "pgq_queue_late_ready_jobs": self.counts_late_jobs,
            "pgq_jobs_enqueued_total": self.counts_arrivals,
            "pgq_queue_exhausted_jobs": self.knows_exhausted,
        }
        return depends.get(metric, _by_outcomes(metric, self.outcomes))

    @property
    def knows_exhausted(self) -> bool:
        """Whether it tells stuck jobs with no attempt left (exhausted) from the others."""
        return True

    @property
    def counts_late_jobs(self) -> bool:
        """Whether it counts the ready jobs past each wait threshold."""
        return False

    @property
    def counts_arrivals(self) -> bool:
        """Whether it counts the jobs that arrive, exactly (pgq_jobs_enqueued_total)."""
        return False

    @property
    def records_workers(self) -> bool:
        """Whether its database records the workers that serve it (pgq_workers)."""
        return False

    @property
    def records_worker_slots(self) -> bool:
        """Whether its database records its workers' capacity (pgq_worker_slots)."""
        return False

    def arrivals(self, conn: Conn, known: list[str]) -> dict[str, int] | None:
        """The jobs ever enqueued in each of ``known`` that a library's layout counts
        (a queue it cannot read is left out); None where it counts none."""
        return None

    def workers(self, conn: Conn, known: list[str]) -> list[LiveWorkers] | None:
        """The live workers by queue ("*": every queue), and their slots where recorded;
        None where this database does not record them (a schema before its registry).
        ``known``: the queues tracked, among which a worker that serves every queue but
        some is counted."""
        return None

    def served(self, enabled: frozenset[str] | None = None) -> dict[str, bool]:
        """Every queue metric, and whether it is served (pgq_metric_served, the docs)."""
        return {metric: self.serves(metric, enabled) for metric in LAYOUT_METRICS}

    def runs(self, collector: str, settings: CollectorSettings | None = None) -> bool:
        """Whether a built-in collector is scheduled on it (enabled, when ``settings``)."""
        if settings is not None and not settings.enabled:
            return False
        return collector not in QUEUE_COLLECTORS or collector in self.queue_collectors()

    # -- what the commands ask --------------------------------------------------------
    @abstractmethod
    def tables_read(self, conn: Conn) -> list[str]:
        """The tables its SQL reads, as they exist in its schema, in name order: what a
        monitoring role needs SELECT on."""

    @abstractmethod
    def check(self, conn: Conn, config: Config, database: str, where: str) -> None:
        """check-config --connect: raise a ConfigError, with ``where``, when the database
        does not hold what its collectors read."""

    def warnings(self, conn: Conn) -> list[str]:
        """What check-config --connect says of it beside its collectors."""
        return []

    @abstractmethod
    def slow_advice(self, conn: Conn, collector: str, scans: list[Scan], large: int) -> list[str]:
        """doctor's lines on a slow collector: its remedy (the indexes that would make
        its reads cheap, ``scans`` being the large tables it read sequentially), or the
        words that none is known."""


@dataclass(frozen=True, slots=True)
class Scan:
    """A large table a statement read sequentially (doctor)."""

    schema: str
    table: str
    rows: int


def large_table(conn: Conn, schema: str, table: str, large: int) -> Scan | None:
    """The table as a Scan when the planner reckons it at ``large`` rows or more."""
    params = {"schema": schema, "name": table}
    row = conn.execute(query("doctor.sql", "relation_rows"), params).fetchone()
    rows = int(row[0]) if row else 0
    return Scan(schema, table, rows) if rows >= large else None


def one_line(conn: Conn, statement: sql.Composable) -> str:
    return " ".join(statement.as_string(conn).split())


def _by_outcomes(metric: str, known: Outcomes) -> bool:
    both = {"done", "failed"} <= set(known.finishes)
    return {
        "pgq_queue_window_finished_jobs": bool(known.finishes),
        "pgq_queue_window_failure_ratio": both,
        "pgq_queue_window_processing_seconds": known.processing,
        "pgq_job_processing_seconds": known.processing,
        "pgq_job_wait_seconds": known.wait,
        "pgq_job_waits_total": known.wait,
        "pgq_job_waits_within_total": known.wait,
        "pgq_jobs_completed_total": "done" in known.finishes,
        "pgq_jobs_failed_total": "failed" in known.finishes,
    }.get(metric, True)
