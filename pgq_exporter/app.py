"""The running exporter: its config, its scheduler, reloads, and the rendered snapshot."""

from __future__ import annotations

import logging
import platform
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg

from pgq_exporter import __version__
from pgq_exporter.catalogue import CATALOGUE, MetricSpec, columns_read
from pgq_exporter.collectors.base import AnySample, Sample, render
from pgq_exporter.collectors.custom import CustomSQL
from pgq_exporter.collectors.library_queues import COLLECTED_BLOCKS, plan_block
from pgq_exporter.config import Config, DatabaseConfig, load_config
from pgq_exporter.discovery import Discovery, list_targets
from pgq_exporter.errors import PgqError, first_line
from pgq_exporter.exposition import Snapshot, families
from pgq_exporter.limits import Limits
from pgq_exporter.presets.library import LibraryLayout
from pgq_exporter.probe import Probes
from pgq_exporter.scheduler import (
    CollectorState,
    ConnectionSource,
    ConnectionUnavailableError,
    DatabaseRuntime,
    Scheduler,
    set_transaction_settings,
)
from pgq_exporter.sqlfiles import named_queries
from pgq_exporter.yamlpos import ConfigError

log = logging.getLogger("pgq_exporter")

RENDER_GAP = 1.0


@dataclass(frozen=True, slots=True)
class CollectorStatus:
    database: str
    collector: str
    success: bool
    last_success: float
    error: str


def metric_specs(config: Config) -> dict[str, MetricSpec]:
    specs = {spec.name: spec for spec in CATALOGUE}
    for custom in config.custom:
        for metric in custom.metrics:
            if metric.catalogue:
                continue  # served as the catalogue declares it
            specs[metric.name] = MetricSpec(
                metric.name, metric.type, metric.help, ("database", *metric.labels), custom.name
            )
    return specs


@contextmanager
def _checking(dsn: str, wait: float) -> Iterator[psycopg.Connection[Any]]:
    """One read-only transaction on a connection of its own, every wait bounded by ``wait``."""
    source = ConnectionSource(dsn, 1)
    try:
        with source.connection(wait, wait) as conn, conn.transaction():
            conn.execute("SET TRANSACTION READ ONLY")
            set_transaction_settings(conn, wait)
            yield conn
    finally:
        source.close()


def check_custom_sql(config: Config, wait: float = 5.0) -> None:
    """Each custom query, described on each reachable database: its columns must exist.

    An unreachable database is not an error here, nor a lock or a slow server
    that outlasts ``wait``: the collector reports them.
    """
    for custom in config.custom:
        collector = CustomSQL(custom)
        for db in config.databases:
            if custom.databases and db.name not in custom.databases:
                continue
            try:
                with _checking(db.dsn, wait) as conn:
                    description = collector.description(conn)
                    missing = collector.missing_columns([col.name for col in description])
                    non_numeric = collector.non_numeric(conn, description)
            except ConnectionUnavailableError:
                continue
            except (psycopg.errors.LockNotAvailable, psycopg.errors.QueryCanceled) as exc:
                log.warning(
                    "custom query not checked at start",
                    extra={"collector": custom.name, "database": db.name, "err": first_line(exc)},
                )
                continue
            except psycopg.Error as exc:
                raise ConfigError(
                    f"{config.source}:{custom.line}: custom_collectors.{custom.name}.sql: "
                    f"fails on database {db.name!r}: {first_line(exc)}"
                ) from None
            if missing:
                raise ConfigError(
                    f"{config.source}:{custom.line}: custom_collectors.{custom.name}: "
                    f"the query returns no column {', '.join(missing)} on database {db.name!r}"
                )
            for where, problem in non_numeric:
                raise ConfigError(f"{where}: {problem} on database {db.name!r}, not a number")


def check_connections(config: Config) -> None:
    """Connect to every database and run every collector once, as ``serve`` would, in
    a read-only transaction; the first failure is a ConfigError naming it."""
    check_custom_sql(config)
    scheduler = Scheduler(config, lambda: None)
    quiet = logging.getLogger("pgq_exporter.scheduler")
    level = quiet.level
    quiet.setLevel(logging.ERROR)  # a failure is reported once, below, not logged too
    try:
        for name, runtime in scheduler.databases.items():
            _check_layout(name, runtime, config)
            for collector in runtime.collectors:
                runtime.run(collector)
                state = runtime.states[collector]
                if not runtime.up:
                    raise ConfigError(f"{config.source}: database {name!r}: {state.error}")
                if not state.success:
                    raise ConfigError(
                        f"{config.source}: database {name!r}: collector {collector} fails: "
                        f"{state.error}"
                    )
    finally:
        quiet.setLevel(level)
        scheduler.stop(wait=0)


def check_discovery(config: Config) -> list[DatabaseConfig]:
    """List every discover: source's databases once; a source that cannot be listed is a
    ConfigError naming its entry."""
    targets: list[DatabaseConfig] = []
    for i, source in enumerate(config.discover):
        try:
            targets.extend(list_targets(source))
        except (PgqError, psycopg.Error) as exc:
            raise ConfigError(
                f"{config.source}: discover[{i}] ({source.name}): cannot list the databases: "
                f"{first_line(exc)}"
            ) from None
    return targets


def _check_layout(name: str, runtime: DatabaseRuntime, config: Config, wait: float = 5.0) -> None:
    """The mapped table, and each column the scheduled collectors read, must exist;
    the error names where the config sets them. An unreachable database is left to
    the collectors' run, which reports it."""
    library = runtime.context.library
    if library:
        _check_library(name, runtime, library, wait)
        return
    mapping = runtime.context.mapping
    wanted = sorted({key for c in runtime.collectors for key in columns_read(c, mapping.columns)})
    if not wanted:
        return
    try:
        with _checking(runtime.database.dsn, wait) as conn:
            have = {row[0] for row in conn.execute(render("mapped_table_columns", mapping))}
    except ConnectionUnavailableError:
        return
    table = f"{mapping.schema}.{mapping.table}"
    fallback = f"{config.source}: database {name!r}"
    if not have:
        where = mapping.place("table") or fallback
        raise ConfigError(f"{where}: table {table} does not exist on database {name!r}")
    for key in wanted:
        column = mapping.columns.get(key)
        if column is not None and column not in have:
            where = mapping.place(f"columns.{key}") or fallback
            raise ConfigError(
                f"{where}: column {column!r} does not exist in {table} on database {name!r}"
            )


def _check_library(
    name: str, runtime: DatabaseRuntime, library: LibraryLayout, wait: float
) -> None:
    """Plan every block of the library preset: a table, column or type that the
    database lacks fails with the line of `preset:`."""
    try:
        with _checking(runtime.database.dsn, wait) as conn:
            blocks = named_queries(library.preset.sql_file)
            for block in (b for b in COLLECTED_BLOCKS if b in blocks):
                try:
                    with conn.transaction():  # a savepoint: the next block still runs
                        plan_block(conn, library, block)
                except psycopg.Error as exc:
                    raise ConfigError(
                        f"{library.where}: preset {library.preset.name} does not match database "
                        f"{name!r} (schema {library.schema}): {block}: {first_line(exc)}"
                    ) from None
    except ConnectionUnavailableError:
        return


class Exporter:
    """``limits``: the caps of the process this exporter shares (a probed target's are its
    parent's); without, it has its own and serves their process-wide samples."""

    def __init__(
        self, config: Config, config_path: str | None = None, limits: Limits | None = None
    ) -> None:
        self.config = config
        self.config_path = config_path
        self._lock = threading.Lock()
        self._reloading = threading.Lock()
        self._snapshot = Snapshot([])
        self.reload_ok = True
        self.reload_time = time.time()
        self._changed = threading.Event()
        self._stopping = threading.Event()
        self._renderer: threading.Thread | None = None
        self._serves_limits = limits is None
        self.limits = limits or Limits(config.limits)
        self.scheduler = Scheduler(config, self._changed.set, limits=self.limits)
        self.probes = Probes(config, self.limits)
        self.discovery = self._discovery(config)
        self.refresh()

    def _discovery(self, config: Config) -> Discovery:
        probes = self.probes

        def found(targets: tuple[DatabaseConfig, ...]) -> None:
            probes.set_discovered(targets)
            self._changed.set()

        return Discovery(config.discover, found)

    def start(self) -> None:
        self.discovery.start()
        self.scheduler.start()
        self._renderer = threading.Thread(target=self._render_loop, name="render", daemon=True)
        self._renderer.start()

    def stop(self) -> None:
        self._stopping.set()
        self._changed.set()
        self.discovery.stop()
        self.scheduler.stop()
        self.probes.stop()
        if self._renderer is not None:
            self._renderer.join(timeout=5)

    def collect_once(self) -> bytes:
        """Every collector once, in this thread, then the snapshot (check-config, tests)."""
        self.scheduler.run_all_once()
        self.refresh()
        return self._snapshot.text

    def _render_loop(self) -> None:
        # Collectors finish in bursts; rendering once per burst, at most every
        # RENDER_GAP seconds, keeps the CPU cost independent of their number.
        while not self._stopping.is_set():
            self._changed.wait()
            self._changed.clear()
            if self._stopping.is_set():
                return
            self.refresh()
            self._stopping.wait(RENDER_GAP)

    @property
    def metrics_text(self) -> bytes:
        return self._snapshot.text

    @property
    def snapshot(self) -> Snapshot:
        return self._snapshot

    @property
    def ready(self) -> bool:
        return all(rt.ready for rt in self.scheduler.databases.values())

    def statuses(self) -> Iterator[CollectorStatus]:
        for name, runtime in self.scheduler.databases.items():
            for collector, state in runtime.states.items():
                yield CollectorStatus(
                    name, collector, state.success, state.last_success, state.error
                )

    def database_up(self) -> dict[str, bool | None]:
        return {name: rt.up for name, rt in self.scheduler.databases.items()}

    def reload(self) -> tuple[bool, str]:
        """Load the config file again; a bad one is rejected and the running one kept.
        One reload at a time: a second caller waits for the first."""
        with self._reloading:
            return self._reload()

    def _reload(self) -> tuple[bool, str]:
        if self.config_path is None:
            return False, "no config file to reload"
        try:
            config = load_config(Path(self.config_path))
            check_custom_sql(config)
        except PgqError as exc:
            self.reload_ok = False
            self.refresh()
            log.error("config reload rejected", extra={"err": str(exc)})
            return False, str(exc)
        # The old scheduler's threads end, and its connections close, before the
        # new one starts; the snapshot served meanwhile is the old one, and the new
        # scheduler starts from the same samples.
        old = self.scheduler
        old.stop(wait=old.longest_run)
        limits = Limits(config.limits) if self._serves_limits else self.limits
        new = Scheduler(config, self._changed.set, previous=old, limits=limits)
        self.discovery.stop()
        with self._lock:
            self.config, self.scheduler, self.limits = config, new, limits
            probes, self.probes = self.probes, Probes(config, limits)
            self.discovery = self._discovery(config)
        probes.stop()  # the next probe starts its target again, on the new config
        self.discovery.start()
        self.reload_ok, self.reload_time = True, time.time()
        new.start()
        self.refresh()
        log.info("config reloaded", extra={"file": self.config_path})
        return True, "reloaded"

    def refresh(self) -> None:
        """Render the snapshot served on /metrics from every collector's last samples."""
        with self._lock:
            specs = metric_specs(self.config)
            self._snapshot = Snapshot(families(specs, self._samples()), self._snapshot.forms)

    def _samples(self) -> Iterator[tuple[str, AnySample]]:
        for name, runtime in self.scheduler.databases.items():
            if runtime.up is not None:
                yield name, Sample("pgq_up", (), 1.0 if runtime.up else 0.0)
            yield name, Sample("pgq_queues_dropped", (), float(runtime.queues.dropped))
            for custom_name, (custom, _) in runtime.collectors.items():
                if isinstance(custom, CustomSQL):
                    dropped = float(custom.dropped)
                    yield name, Sample("pgq_collector_rows_dropped", (custom_name,), dropped)
            for collector, state in runtime.states.items():
                yield from ((name, sample) for sample in state.samples)
                yield from ((name, sample) for sample in _run_samples(collector, state))
            yield from ((name, sample) for sample in self.limits.samples(name))
        if self._serves_limits:
            yield from (("", sample) for sample in self.limits.server_samples())
        for source, listing in self.discovery.listings().items():
            yield "", Sample("pgq_discovery_success", (source,), float(listing.success))
            yield "", Sample("pgq_discovery_targets", (source,), float(len(listing.targets)))
        yield "", Sample("pgq_config_last_reload_successful", (), float(self.reload_ok))
        yield "", Sample("pgq_config_last_reload_success_timestamp_seconds", (), self.reload_time)
        yield "", Sample("pgq_build_info", (__version__, platform.python_version()), 1.0)


def _run_samples(collector: str, state: CollectorState) -> Iterator[Sample]:
    """How the collector's runs went; nothing before its first run has ended, so that
    a starting exporter reads as not yet known rather than as failing."""
    if not state.ran:
        return
    labels = (collector,)
    yield Sample("pgq_collector_duration_seconds", labels, state.duration)
    yield Sample("pgq_collector_connection_wait_seconds", labels, state.connection_wait)
    yield Sample("pgq_collector_success", labels, float(state.success))
    if state.last_success:
        yield Sample("pgq_collector_last_success_timestamp_seconds", labels, state.last_success)
