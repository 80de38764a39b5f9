"""`check-config --connect`, and the checks `serve` and a reload make before they run a
config: each custom query, layout and discovery source against the real databases.
The first problem is a ConfigError naming where the config sets what is wrong."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import psycopg

from pgq_exporter.catalogue import columns_read
from pgq_exporter.collectors import planned
from pgq_exporter.collectors.custom import CustomSQL
from pgq_exporter.collectors.library_queues import COLLECTED_BLOCKS
from pgq_exporter.collectors.library_sql import plan_block
from pgq_exporter.collectors.rendering import render
from pgq_exporter.collectors.unknown_statuses import unknown_values
from pgq_exporter.config import (
    AutoLayout,
    Config,
    DatabaseConfig,
    Layout,
    LayoutChoice,
    SchemaMapping,
    metric_specs,
)
from pgq_exporter.config.yamlpos import ConfigError
from pgq_exporter.errors import PgqError, first_line
from pgq_exporter.pg.connect import Conn, read_only
from pgq_exporter.presets.library import LibraryLayout
from pgq_exporter.runtime.collection import set_transaction_settings
from pgq_exporter.runtime.connections import Connections, ConnectionUnavailableError
from pgq_exporter.runtime.discovery import list_targets
from pgq_exporter.runtime.layout import NO_REFERENCE_QUEUE, describe, fixed, resolve
from pgq_exporter.runtime.target import Origin, Target, TargetSpec

log = logging.getLogger("pgq_exporter")


@contextmanager
def _checking(dsn: str, wait: float) -> Iterator[Conn]:
    """One read-only transaction on a connection of its own, every wait bounded by ``wait``."""
    connections = Connections(cap=1)
    connections.attach(dsn)
    try:
        with connections.checkout(dsn, wait, wait) as (conn, _), read_only(conn):
            set_transaction_settings(conn, wait)
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
    where = _choice_place(target.spec.database.layout) or config.source
    if target.layout is None:
        raise ConfigError(f"{where}: database {name!r}: {_explained(target.error)}")
    _check_layout(name, target.spec.database, target.layout, config)
    for collector, slot in target.slots.items():
        state = slot.state
        if target.up is False:
            raise ConfigError(f"{config.source}: database {name!r}: {state.error}")
        if not state.success:
            raise ConfigError(
                f"{where}: database {name!r}: collector {collector} fails: "
                f"{_explained(state.error)}"
            )
    warnings = _layout_warnings(target.spec.database)
    warnings += _status_warnings(target.spec.database, target.layout)
    return Checked(name, describe(target.layout), tuple(target.slots), tuple(warnings))


def _choice_place(choice: LayoutChoice) -> str:
    """Where the config names a database's layout: `preset:` (auto or a library)."""
    if isinstance(choice, AutoLayout | LibraryLayout):
        return choice.where
    return ""


def _explained(error: str) -> str:
    """An error as check-config says it: a missing grant says so."""
    if "InsufficientPrivilege" in error or "permission denied" in error:
        return (f"permission denied: {error.split(': ', 1)[-1]} (the role needs the grants "
                "of `pgq-exporter schema grant-monitor`)")  # fmt: skip
    return error


def _status_warnings(database: DatabaseConfig, layout: Layout, wait: float = 5.0) -> list[str]:
    """A library's status values its preset does not know (an upgrade added them)."""
    if not isinstance(layout, LibraryLayout) or not layout.preset.status_enum:
        return []
    try:
        with _checking(database.dsn, wait) as conn:
            values = unknown_values(conn, layout)
    except (ConnectionUnavailableError, psycopg.Error):
        return []
    if not values:
        return []
    return [f"status values the preset {layout.preset.name} does not know: "
            f"{', '.join(values)} (their jobs are counted as status=\"unknown\")"]  # fmt: skip


def _layout_warnings(database: DatabaseConfig, wait: float = 5.0) -> list[str]:
    """What `auto` found beside what it takes: several libraries, of which one is read."""
    if not isinstance(database.layout, AutoLayout):
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


def _check_layout(
    name: str, database: DatabaseConfig, layout: Layout, config: Config, wait: float = 5.0
) -> None:
    """The mapped table, and each column the scheduled collectors read, must exist;
    the error names where the config sets them. An unreachable database is left to
    the collectors' run, which reports it."""
    if isinstance(layout, LibraryLayout):
        _check_library(name, database, layout, wait)
        return
    runs = [p.name for p in planned(config, name, layout)]
    wanted = sorted({key for c in runs for key in columns_read(c, layout.columns)})
    if not wanted:
        return
    try:
        with _checking(database.dsn, wait) as conn:
            have = {row[0] for row in conn.execute(render("mapped_table_columns", layout))}
    except ConnectionUnavailableError:
        return
    _check_columns(name, layout, wanted, have, config)


def _check_columns(
    name: str, mapping: SchemaMapping, wanted: list[str], have: set[str], config: Config
) -> None:
    table = f"{mapping.schema}.{mapping.table}"
    fallback = f"{config.source}: database {name!r}"
    if not have:
        where = mapping.place("table") or fallback
        hint = f"; {NO_REFERENCE_QUEUE}" if mapping.is_reference else ""
        raise ConfigError(f"{where}: table {table} does not exist on database {name!r}{hint}")
    for key in wanted:
        column = mapping.columns.get(key)
        if column is not None and column not in have:
            where = mapping.place(f"columns.{key}") or fallback
            raise ConfigError(
                f"{where}: column {column!r} does not exist in {table} on database {name!r}"
            )


def _check_library(
    name: str, database: DatabaseConfig, library: LibraryLayout, wait: float
) -> None:
    """Plan every block of the library preset: a table, column or type that the
    database lacks fails with the line of `preset:`."""
    where = library.where or _choice_place(database.layout)
    try:
        with _checking(database.dsn, wait) as conn:
            for block in (b for b in COLLECTED_BLOCKS if b in library.preset.blocks):
                try:
                    with conn.transaction():  # a savepoint: the next block still runs
                        plan_block(conn, library, block)
                except psycopg.errors.InsufficientPrivilege as exc:
                    raise ConfigError(
                        f"{where}: database {name!r}: preset {library.preset.name} (schema "
                        f"{library.schema}): {block}: {_explained(first_line(exc))}"
                    ) from None
                except psycopg.Error as exc:
                    raise ConfigError(
                        f"{where}: preset {library.preset.name} does not match database "
                        f"{name!r} (schema {library.schema}): {block}: {first_line(exc)}"
                    ) from None
    except ConnectionUnavailableError:
        return
