"""`check-config --connect`, and the checks `serve` and a reload make before they run a
config: each custom query, layout and discovery source against the real databases.
The first problem is a ConfigError naming where the config sets what is wrong."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import psycopg

from pgq_exporter.collectors.custom import CustomSQL
from pgq_exporter.config import Config, DatabaseConfig, metric_specs
from pgq_exporter.config.yamlpos import ConfigError
from pgq_exporter.errors import PgqError, first_line
from pgq_exporter.pg.connect import Conn, read_only
from pgq_exporter.runtime.connections import Connections, ConnectionUnavailableError
from pgq_exporter.runtime.discovery import list_targets
from pgq_exporter.runtime.spec import Origin, TargetSpec
from pgq_exporter.runtime.target import Target
from pgq_exporter.sources import QueueSource, explained, fixed, resolve

log = logging.getLogger("pgq_exporter")


@contextmanager
def _checking(dsn: str, wait: float) -> Iterator[Conn]:
    """One read-only transaction on a connection of its own, every wait bounded by ``wait``."""
    connections = Connections(cap=1)
    connections.attach(dsn)
    try:
        with connections.checkout(dsn, wait, wait) as (conn, _), read_only(conn, wait):
            yield conn
    finally:
        connections.detach(dsn)
        connections.close()


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


@dataclass(frozen=True, slots=True)
class Checked:
    """A database as check-config --connect found it: its layout in words, the
    collectors that will run, and what it warns of."""

    name: str
    layout: str
    collectors: tuple[str, ...]
    warnings: tuple[str, ...] = ()

    def lines(self) -> list[str]:
        found = [f"  {self.name}: {self.layout}; collectors: {', '.join(self.collectors)}"]
        return found + [f"  {self.name}: warning: {warning}" for warning in self.warnings]


def check_connections(config: Config) -> list[Checked]:
    """Connect to every database and run every collector once, as ``serve`` would, in
    a read-only transaction; the first failure is a ConfigError naming it."""
    check_custom_sql(config)
    # A failure is reported once, below, not logged too.
    quiet = [logging.getLogger(f"pgq_exporter.{name}") for name in ("collection", "targets")]
    levels = [logger.level for logger in quiet]
    for logger in quiet:
        logger.setLevel(logging.ERROR)
    connections = Connections(config.limits.server_connections)
    specs = metric_specs(config)
    targets = [
        Target(TargetSpec(database, Origin.STATIC), config, lambda: specs, connections)
        for database in config.databases
    ]
    try:
        return [_check_target(target, config) for target in targets]
    finally:
        for logger, level in zip(quiet, levels, strict=True):
            logger.setLevel(level)
        for target in targets:
            target.stop()
        connections.close()


def _check_target(target: Target, config: Config) -> Checked:
    name = target.name
    target.collect_now()
    where = target.spec.database.layout.preset_line or config.source
    if target.source is None:
        raise ConfigError(f"{where}: database {name!r}: {explained(target.error)}")
    source = target.source
    _check_source(target, source, config, where)
    for collector, slot in target.slots.items():
        state = slot.state
        if target.up is False:
            raise ConfigError(f"{config.source}: database {name!r}: {state.error}")
        if not state.success:
            raise ConfigError(
                f"{where}: database {name!r}: collector {collector} fails: {explained(state.error)}"
            )
    warnings = _layout_warnings(target.spec.database)
    warnings += _source_warnings(target.spec.database, source)
    return Checked(name, source.describe(), tuple(target.slots), tuple(warnings))


def _source_warnings(database: DatabaseConfig, source: QueueSource, wait: float = 5.0) -> list[str]:
    """What the source says of the database beside its collectors (a library's status
    values its preset does not know)."""
    try:
        with _checking(database.dsn, wait) as conn:
            return source.warnings(conn)
    except (ConnectionUnavailableError, psycopg.Error):
        return []


def _layout_warnings(database: DatabaseConfig, wait: float = 5.0) -> list[str]:
    """What `auto` found beside what it takes: several libraries, of which one is read."""
    if not database.layout.needs_catalog:
        return []
    try:
        with _checking(database.dsn, wait) as conn:
            resolution = resolve(database.layout, conn, database.name)
    except (ConnectionUnavailableError, psycopg.Error):
        return []
    usable = [f for f in resolution.found if fixed(f) is not None]
    if len(usable) < 2 or resolution.chosen is None:
        return []
    chosen = resolution.chosen
    others = ", ".join(f"{f.preset} in {f.schema}" for f in usable if f != chosen)
    return [
        f"several queue libraries found: collecting {chosen.preset} in {chosen.schema}, "
        f"not {others} (name each in an entry of its own, with preset: and schema:)"
    ]


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


def _check_source(target: Target, source: QueueSource, config: Config, where: str) -> None:
    """The tables, columns and types the scheduled collectors read must exist; the error
    names where the config sets them. An unreachable database is left to the collectors'
    run, which reports it."""
    try:
        with _checking(target.spec.database.dsn, 5.0) as conn:
            source.check(conn, config, target.name, where)
    except ConnectionUnavailableError:
        return
